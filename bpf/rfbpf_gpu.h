/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The GPU contract of rfbpf, shared by three parties:
 *   - the CUPTI agent (cupti/, librfbpf_cupti.so, loaded into the job by
 *     CUDA_INJECTION64_PATH), which calls the probe functions below;
 *   - the BPF programs (bpf/gpu.bpf.c), attached as uprobes on those
 *     probe functions, which read the argument structs and emit events;
 *   - the loader (user/), which joins launches with activity records.
 *
 * The probe functions are exported from the agent, `noinline`, and begin
 * with a 5-byte NOP, so a uprobe on them takes the kernel's optimized path.
 * Each takes one pointer to a struct below. The structs start with
 * {abi_version, size}: BPF refuses a version it does not know (counted)
 * and reads at most `size` bytes, so later versions may only append.
 *
 * How the contract grows (still version 1): a field is appended and read
 * only when `size` says the agent wrote it, and a new kind of report gets
 * a probe function of its own. Every rfbpf released so far refuses a
 * launch only for another version or a *smaller* size, so it keeps
 * reading a newer agent's launches and ignores their tail; it never
 * attaches to a probe it does not know, so it never sees reports it would
 * misread. Bumping the version instead would make every deployed rfbpf
 * refuse every launch of a newer agent, and a newer rfbpf would have to
 * carry both layouts anyway.
 */
#ifndef RFBPF_GPU_H
#define RFBPF_GPU_H

#include "rfbpf.h"	/* struct rf_event_hdr, the types */

#define RF_GPU_ABI_VERSION 1

/* Symbols the agent exports (the loader finds them by name). */
#define RF_GPU_SYM_LAUNCH	"rfbpf_probe_gpu_launch"
#define RF_GPU_SYM_ACTIVITY	"rfbpf_probe_gpu_activity"
#define RF_GPU_SYM_SYNC		"rfbpf_probe_gpu_sync"	/* may be absent */
#define RF_GPU_SYM_SYNC_RECORD	"rfbpf_probe_gpu_sync_record" /* may be absent */
#define RF_GPU_SYM_DEVICE	"rfbpf_probe_gpu_device" /* may be absent */
#define RF_GPU_SYM_OP_START	"rfbpf_probe_op_start"
#define RF_GPU_SYM_OP_END	"rfbpf_probe_op_end"
#define RF_GPU_SYM_CONTROL	"rfbpf_gpu_control"

/*
 * Another CUPTI tool starting in the job while the agent holds CUPTI
 * (torch.profiler's Kineto, Nsight): CUPTI's buffers, kinds and clock
 * are the process's, so its calls would take them over under the agent,
 * and the agent's under it. rfbpf puts uprobes on these functions of the
 * job's libcupti while the agent holds it; a call from any thread but the
 * agent's own (named RF_GPU_AGENT_THREAD) is another tool starting, and
 * rfbpf asks the agent to leave CUPTI to it (yield_request). On the first
 * two, the probe also makes the agent leave inside the call (see
 * yield_signal below). The index in this list is the uprobe's cookie.
 * cuptiActivityFlushAll is not here: it changes nothing.
 */
#define RF_GPU_AGENT_THREAD	"rfbpf-cupti"
#define RF_CUPTI_WATCHED {						\
	"cuptiSubscribe", "cuptiSubscribe_v2",				\
	"cuptiActivityRegisterCallbacks",				\
	"cuptiActivityRegisterTimestampCallback",			\
	"cuptiActivityEnable", "cuptiActivityEnableContext",		\
	"cuptiActivityDisable", "cuptiEnableDomain",			\
	"cuptiEnableAllDomains", "cuptiFinalize",			\
}
#define RF_CUPTI_WATCHED_NR 10

/* Kernel names longer than this (with the NUL) are cut and flagged. */
#define RF_GPU_NAME_MAX 256
#define RF_GPU_API_NAME_MAX 48

enum rf_gpu_api_domain {
	RF_GPU_API_RUNTIME = 1,
	RF_GPU_API_DRIVER = 2,
};

/* rf_gpu_launch.flags */
#define RF_GPU_LAUNCH_F_GRAPH	(1u << 0)	/* cudaGraphLaunch & co. */
/* A synchronization call (cudaStreamSynchronize...): it launches nothing
 * and is reported through rfbpf_probe_gpu_sync only. */
#define RF_GPU_LAUNCH_F_SYNC	(1u << 1)
/* The call completes as exactly one activity record (a kernel launch, a
 * copy, a set), so the loader may forget it once that record is in.
 * Without it (graphs, batched copies, agents that predate the flag) the
 * launch waits for more records until it is evicted. */
#define RF_GPU_LAUNCH_F_ONE_RECORD (1u << 2)

/*
 * rfbpf_probe_gpu_launch(const struct rf_gpu_launch *): on the launching
 * thread, at the exit of a launch API call (runtime, or driver when not
 * nested in a runtime call), only while a tracer holds the lease.
 *
 * rfbpf_probe_gpu_sync(const struct rf_gpu_launch *): the same, for a
 * synchronization call (flags has RF_GPU_LAUNCH_F_SYNC), so the time a
 * thread waits for the GPU is visible. Agents before it do not export it.
 */
struct rf_gpu_launch {
	__u32 abi_version;	/* RF_GPU_ABI_VERSION */
	__u32 size;		/* sizeof(struct rf_gpu_launch) as built */
	__u32 correlation_id;	/* CUPTI correlation id of the API call */
	__u32 cbid;		/* CUPTI callback id within its domain */
	__u8 domain;		/* enum rf_gpu_api_domain */
	__u8 flags;		/* RF_GPU_LAUNCH_F_* */
	__u16 pad;
	/* The API's name, copied in (NUL-terminated, cut if longer): a
	 * pointer to CUPTI's string could sit on a page not yet faulted in,
	 * which a uprobe cannot read. */
	char api_name[RF_GPU_API_NAME_MAX];
	/* Runtime calls: the id of the first driver call made inside it, or
	 * 0. Copy and set records carry that id rather than the runtime
	 * call's (CUDA 13's headers); kernels may carry either. */
	__u32 driver_correlation_id;
	__u32 pad3;
	/* End of the first layout (RF_GPU_LAUNCH_SIZE_V1 bytes). Appended
	 * since: read only when size covers them. */
	__u32 pad4;
	__u64 enter_ns;		/* CLOCK_MONOTONIC at the call's ENTER
				 * callback; 0: unknown (the lease began
				 * during the call) */
};

/* The size of struct rf_gpu_launch before enter_ns: agents that send this
 * much are read, with enter_ns taken as unknown. */
#define RF_GPU_LAUNCH_SIZE_V1 76
_Static_assert(__builtin_offsetof(struct rf_gpu_launch, pad4) ==
	       RF_GPU_LAUNCH_SIZE_V1, "the first layout is fixed");

enum rf_gpu_activity_kind {
	RF_GPU_ACT_KERNEL = 1,
	RF_GPU_ACT_MEMCPY = 2,
	RF_GPU_ACT_MEMSET = 3,
	/* CUPTI's synchronization record: how long a sync call waited on
	 * the GPU, seen from the GPU. Reported through
	 * rfbpf_probe_gpu_sync_record only, so a tracer that predates it
	 * (and attaches only rfbpf_probe_gpu_activity) never sees one. */
	RF_GPU_ACT_SYNC = 4,
};

/* rf_gpu_activity.sync_type: CUpti_ActivitySynchronizationType. */
enum rf_gpu_sync_type {
	RF_GPU_SYNC_UNKNOWN = 0,
	RF_GPU_SYNC_EVENT = 1,		/* cudaEventSynchronize */
	RF_GPU_SYNC_STREAM_WAIT_EVENT = 2,	/* cudaStreamWaitEvent */
	RF_GPU_SYNC_STREAM = 3,		/* cudaStreamSynchronize */
	RF_GPU_SYNC_CONTEXT = 4,	/* cudaDeviceSynchronize */
};
/* CUPTI's CUPTI_SYNCHRONIZATION_INVALID_VALUE: a context sync has no
 * stream, and only event syncs have an event. */
#define RF_GPU_SYNC_NONE 0xffffffffu

/*
 * rfbpf_probe_gpu_activity(const struct rf_gpu_activity *): one completed
 * activity record, from the agent's buffer-completed path (any thread).
 * Timestamps are CLOCK_MONOTONIC nanoseconds, the clock of
 * bpf_ktime_get_ns().
 *
 * rfbpf_probe_gpu_sync_record(const struct rf_gpu_activity *): the same,
 * for a synchronization record (kind RF_GPU_ACT_SYNC). Agents before it
 * do not export it.
 */
struct rf_gpu_activity {
	__u32 abi_version;
	__u32 size;
	__u32 kind;		/* enum rf_gpu_activity_kind */
	__u32 correlation_id;	/* joins with rf_gpu_launch (copies: the
				 * runtime correlation id when CUPTI
				 * gives one, else the driver's) */
	__u64 start_ns;
	__u64 end_ns;
	__u32 device_id;
	__u32 context_id;
	__u32 stream_id;
	__u32 registers_per_thread;	/* kernels */
	__s32 grid[3];			/* kernels */
	__s32 block[3];			/* kernels */
	__u32 static_shared_bytes;	/* kernels */
	__u32 dynamic_shared_bytes;	/* kernels */
	__u64 bytes;			/* copies and sets */
	__u8 copy_kind;		/* CUpti_ActivityMemcpyKind, copies */
	__u8 src_kind;		/* CUpti_ActivityMemoryKind, copies */
	__u8 dst_kind;		/* copies; sets: the memory kind set */
	__u8 pad;
	__u32 memset_value;	/* sets */
	__u64 graph_id;		/* 0 unless launched from a CUDA graph */
	__u32 name_len;		/* kernels: strlen of the full name */
	__u32 pad2;
	/* kernels: the (mangled) name, copied in, NUL-terminated, cut to
	 * RF_GPU_NAME_MAX - 1 bytes when name_len says it is longer */
	char name[RF_GPU_NAME_MAX];
	/* End of the first layout (RF_GPU_ACTIVITY_SIZE_V1 bytes). Appended
	 * since: read only when size covers them. */
	/* kernels: the address of CUPTI's own copy of the name in the job.
	 * CUPTI shares one string among every record of a kernel and keeps
	 * it while the kernel's module is loaded, so the loader can read a
	 * cut name whole from it later (process_vm_readv); 0: unknown. */
	__u64 name_addr;
	/* End of the second layout (RF_GPU_ACTIVITY_SIZE_V2 bytes). */
	__u64 graph_node_id;	/* 0 unless launched from a CUDA graph */
	__u32 sync_type;	/* RF_GPU_ACT_SYNC: enum rf_gpu_sync_type */
	__u32 cuda_event_id;	/* RF_GPU_ACT_SYNC: the event, or
				 * RF_GPU_SYNC_NONE (stream_id too, for a
				 * context sync) */
};

/* The size of struct rf_gpu_activity before name_addr: agents that send
 * this much are read, their long names left cut. */
#define RF_GPU_ACTIVITY_SIZE_V1 368
_Static_assert(__builtin_offsetof(struct rf_gpu_activity, name_addr) ==
	       RF_GPU_ACTIVITY_SIZE_V1, "the first layout is fixed");
/* Before graph_node_id: read with name_addr, the tail left 0. */
#define RF_GPU_ACTIVITY_SIZE_V2 376
_Static_assert(__builtin_offsetof(struct rf_gpu_activity, graph_node_id) ==
	       RF_GPU_ACTIVITY_SIZE_V2, "the second layout is fixed");

/*
 * rfbpf_probe_gpu_device(const struct rf_gpu_device *): what one GPU is,
 * as its driver says (cuDeviceGetAttribute), once per device per lease,
 * from the agent's thread, before the first records of that lease that
 * it can: enough for Kineto's estimate of a kernel's occupancy and its
 * "deviceProperties". Agents before it do not export it.
 */
#define RF_GPU_DEVICE_NAME_MAX 64
struct rf_gpu_device {
	__u32 abi_version;
	__u32 size;
	__u32 device_id;		/* CUDA's ordinal, as in records */
	__u32 sm_count;
	__u32 max_threads_per_sm;
	__u32 max_threads_per_block;
	__u32 max_blocks_per_sm;
	__u32 regs_per_sm;		/* 32-bit registers */
	__u32 regs_per_block;
	__u32 shared_per_sm;		/* bytes */
	__u32 shared_per_block;
	__u32 shared_per_block_optin;
	__u32 reserved_shared_per_block;
	__u32 warp_size;
	__u32 cc_major, cc_minor;	/* compute capability */
	__u64 total_memory;		/* bytes */
	char name[RF_GPU_DEVICE_NAME_MAX];	/* NUL-terminated */
};

/*
 * The agent's control block, exported as `rfbpf_gpu_control`. rfbpf writes
 * lease_until_ns through /proc/PID/mem and renews it while it traces; the
 * agent collects activity and calls the probes only while the lease is in
 * the future, so a tracer killed with -9 stops costing the job once its
 * lease runs out. rfbpf also writes flush_request (below); everything else
 * is written by the agent.
 */
#define RF_GPU_CONTROL_MAGIC 0x52464755u	/* "UGFR" */

struct rf_gpu_control {
	__u32 magic;			/* RF_GPU_CONTROL_MAGIC */
	__u32 abi_version;		/* RF_GPU_ABI_VERSION */
	__u64 lease_until_ns;		/* rfbpf: CLOCK_MONOTONIC deadline */
	__u64 flush_period_ns;		/* agent: activity flush period */
	__u64 torch_callback_handle;	/* agent: RFBPF_SAMPLE activation */
	double sample_prob;		/* agent: its probability, or 0 */
	__u32 activity_enabled;		/* agent: activity kinds are on */
	__u32 cupti_ok;			/* agent: CUPTI subscribed */
	/* Agent counters, read by rfbpf at the end and reported. */
	__u64 launches;			/* launch and sync probes called */
	__u64 records;			/* activity probes called */
	__u64 records_dropped;		/* CUPTI's own dropped records */
	__u64 records_unknown;		/* records of kinds not forwarded */
	__u64 records_untraced;		/* completed with no lease: discarded */
	__u64 errors;			/* CUPTI calls that failed */
	/* Appended with the agent (still ABI 1: rfbpf may read less). */
	__u32 clock_source;		/* agent: 1 = timestamp callback,
					 * 2 = calibrated offset, 0 = none */
	__u32 lease_seen;		/* agent: its thread saw a live lease
					 * at its last check (every ~100 ms) */
	__s64 clock_offset_ns;		/* agent: subtracted from CUPTI
					 * timestamps (0 with the callback) */
	__u64 activity_starts;		/* agent: times it turned activity
					 * on (attempts, failed ones too) */
	/* Final flush handshake: before it lets the lease go, rfbpf sets
	 * flush_request to a new value; the agent's thread flushes what
	 * CUPTI holds (forwarding it, the lease still held) and then copies
	 * the value to flush_done. */
	__u64 flush_request;		/* rfbpf */
	__u64 flush_done;		/* agent */
	/* Appended: why the agent has no CUPTI this lease. CUPTI takes one
	 * subscriber per process (torch.profiler's Kineto keeps its own for
	 * the job's life); the agent then changes nothing process-wide. */
	__u32 cupti_result;		/* agent: the last failed subscribe's
					 * CUptiResult, 0 once one succeeds */
	__u32 cupti_pad;
	char cupti_holder[64];		/* agent: the subscriber that holds
					 * CUPTI, as CUPTI names it ("" if
					 * unknown) */
	/* Appended: what the agent lost, by why (never silently). */
	__u64 records_no_time;		/* records with a 0 start or end */
	__u64 buffers_cut;		/* buffers whose walk stopped at a
					 * record CUPTI cannot read: the
					 * records after it are lost */
	__u64 buffers_refused;		/* asked for past the cap: CUPTI
					 * drops (and counts) those records */
	__u64 launches_failed;		/* launch calls that returned an
					 * error: no record will come */
	/* Appended: which CUPTI the job has (cuptiGetVersion; CUDA 12.x
	 * reports 19 to 28, 13.x 130000 and up), 0 if none was found. */
	__u32 cupti_version;		/* agent */
	__u32 cupti_pad2;
	/* Appended: launches and copies made on a stream being captured
	 * into a CUDA graph. They run nothing then (the graph's launch
	 * does, later), so no record will come: counted, not reported. */
	__u64 launches_captured;	/* agent */
	/* Appended: another tool called CUPTI during the lease (see
	 * RF_CUPTI_WATCHED). rfbpf sets yield_request; the agent then
	 * unsubscribes and leaves every kind, buffer and the clock as they
	 * are (the other tool's now), takes CUPTI no more in this process,
	 * and sets yielded. */
	__u32 yield_request;		/* rfbpf */
	__u32 yielded;			/* agent */
	/* Appended: activity buffers the agent had given CUPTI and not got
	 * back when it yielded. CUPTI completes them to the callbacks
	 * registered then, the other tool's: their records never reach
	 * rfbpf (counted, since how many records they held is unknown). */
	__u64 buffers_left;		/* agent */
	/* Appended: leaving CUPTI *inside* another tool's cuptiSubscribe.
	 * Kineto gives up its CUDA activity for good when its subscribe
	 * fails, so asking the agent's thread (yield_request) comes too
	 * late. The agent handles yield_signal (a real-time signal the job
	 * left at its default); rfbpf's probe on cuptiSubscribe sends it to
	 * the calling thread when that thread's handler for it is still
	 * yield_handler and the signal is not blocked, and the handler,
	 * running before the call's second instruction, flushes the
	 * agent's records, disables its kinds and unsubscribes, so the
	 * call then succeeds. 0: no such handler (an older agent, or no
	 * free signal). */
	__u32 yield_signal;		/* agent */
	__u32 yield_pad;
	__u64 yield_handler;		/* agent: the handler's address */
	__u64 yields_in_call;		/* agent: times it left that way */
};

/*
 * Ring-buffer events (BPF -> loader), kinds RF_EV_GPU_LAUNCH and
 * RF_EV_GPU_ACTIVITY. A launch carries, in hdr.rf_addr, the innermost
 * RecordFunction open on the launching thread (0 when none was).
 */
struct rf_gpu_launch_event {
	struct rf_event_hdr hdr;
	__u32 correlation_id;
	__u32 cbid;
	__u8 domain;		/* enum rf_gpu_api_domain */
	__u8 launch_flags;	/* RF_GPU_LAUNCH_F_* */
	__u16 depth;		/* ops open on the thread at the launch */
	__u32 driver_correlation_id;	/* see struct rf_gpu_launch */
	char api_name[RF_GPU_API_NAME_MAX];
	__u64 enter_ns;		/* see struct rf_gpu_launch; hdr.ts_ns is
				 * the exit */
};

/* hdr.flags has RF_F_NAME_TRUNCATED when the kernel name was cut. */
struct rf_gpu_activity_event {
	struct rf_event_hdr hdr;
	struct rf_gpu_activity act;	/* as the agent passed it */
};

/* RF_EV_GPU_DEVICE. */
struct rf_gpu_device_event {
	struct rf_event_hdr hdr;
	struct rf_gpu_device dev;	/* as the agent passed it */
};

#endif /* RFBPF_GPU_H */
