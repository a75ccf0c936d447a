/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU activity in the trace model: the API calls the CUPTI agent reported
 * (each tagged in BPF with the op open on its thread) and the kernels,
 * copies and sets that completed, joined by CUPTI correlation id.
 *
 * Launches come first (at API exit), activity later (when the agent
 * flushes, about once a second), so a launch waits in `pending` until its
 * records arrive. A launch keeps the stack of the op it ran in (that op
 * has usually closed and been forgotten by the time its kernels end);
 * records are joined and handed on, never kept. A launch the agent marks
 * as making exactly one record (a kernel, a copy, a set) is forgotten as
 * soon as that record is in; a CUDA graph launch has one correlation id
 * and many kernels (a batched copy many copies), so it stays after its
 * first record and leaves only when it is older than GPU_PENDING_NS: then
 * it is evicted, and counted if no record ever came for it. So memory
 * follows what is pending. Synchronize calls launch nothing: they are
 * handed to the sinks as they come and never wait.
 *
 * Kernels are named by their demangled symbol, as Kineto names them
 * (demangle.h), once per distinct name; copies and sets by their kinds.
 */
#ifndef RFBPF_GPU_MODEL_H
#define RFBPF_GPU_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "rfbpf_gpu.h"
#include "gpu_occupancy.h"
#include "names.h"
#include "u64map.h"

/* How long (trace time) a launch waits for its records: well over the
 * agent's 1 s flush period. */
#define GPU_PENDING_NS (30ull * 1000000000ull)

struct gpu_launch {
	uint64_t ts_ns;		/* the call's exit */
	uint64_t enter_ns;	/* its enter, or 0: the agent did not say */
	int64_t op_id;		/* op.id of the op it ran in, -1: none
				 * recorded */
	uint32_t tid, pid;
	uint32_t thread_name;	/* its thread's comm, id in names */
	uint32_t op_name;	/* name id of the op it ran in, or
				 * UINT32_MAX: none known */
	uint32_t *frames;	/* that op's stack, outermost first (owned
				 * while pending) */
	uint32_t *frame_inputs;	/* each frame's input set (--shapes; in
				 * the same allocation), or NULL */
	uint32_t op_inputs;	/* the op's input set, 0: none */
	uint32_t depth;
	uint32_t correlation_id;
	uint32_t driver_correlation_id;	/* of its nested driver call, or 0 */
	uint32_t cbid;		/* CUPTI callback id within its domain */
	uint32_t api_name;	/* id in trace.names */
	uint32_t activities;	/* records joined to it so far */
	uint8_t domain, flags;	/* enum rf_gpu_api_domain, RF_GPU_LAUNCH_F_* */
	bool outside_ops;	/* no op was open on its thread */
	/* Pending launches, oldest first, by slot; UINT32_MAX ends it. A
	 * free slot's `newer` links the free list. */
	uint32_t older, newer;
};

struct gpu_activity {
	uint64_t start_ns, end_ns;
	uint32_t kind;		/* enum rf_gpu_activity_kind */
	uint32_t correlation_id;
	uint32_t device_id, context_id, stream_id;
	uint32_t name;		/* id in trace.names (kernels, else a label) */
	int32_t grid[3], block[3];
	uint32_t registers_per_thread;
	uint32_t static_shared_bytes, dynamic_shared_bytes;
	uint64_t bytes;
	uint8_t copy_kind;	/* copies: CUpti_ActivityMemcpyKind */
	uint8_t src_kind, dst_kind;	/* CUpti_ActivityMemoryKind (sets:
					 * dst_kind, the memory set) */
	bool name_truncated;	/* the name is cut at RF_GPU_NAME_MAX - 1
				 * bytes (the event cut it, and it could
				 * not be read whole from the job) */
	uint32_t mangled_name;	/* kernels: the name as CUPTI gave it when
				 * `name` is its demangled form (id in
				 * names), else UINT32_MAX */
	uint64_t graph_id;
	uint64_t graph_node_id;
	uint32_t sync_type;	/* RF_GPU_ACT_SYNC: enum rf_gpu_sync_type */
	uint32_t cuda_event_id;	/* RF_GPU_ACT_SYNC: or RF_GPU_SYNC_NONE */
	bool occupancy_known;	/* kernels, once their GPU was described */
	struct gpu_occupancy occupancy;
};

struct gpu_counts {
	uint64_t launches;		/* launch events read (not syncs) */
	uint64_t syncs;			/* synchronize calls read */
	uint64_t launches_outside_ops;	/* no op was open on the thread */
	uint64_t launches_op_unknown;	/* its op was not recorded (sampled
					 * out, or opened before attach) */
	uint64_t launches_evicted_unmatched; /* no record came in time */
	uint64_t launches_unmatched_at_end;  /* none came before detach */
	uint64_t activities;		/* activity events read */
	uint64_t activities_unmatched;	/* no launch with its id was seen */
	uint64_t sync_records;		/* of activities: waits CUPTI timed */
	uint64_t syncs_without_record;	/* a sync call whose record did not
					 * come (a CUPTI without that kind) */
	uint64_t names_truncated;	/* kernel names left cut */
	uint64_t names_read_whole;	/* cut in the event, read whole from
					 * the job (rf_gpu_activity.name_addr) */
	uint64_t name_faults;
	/* From the agent's control block, at the end. */
	uint64_t agent_launches, agent_records, agent_dropped;
	uint64_t agent_untraced, agent_unknown, agent_errors;
	uint64_t agent_no_time;		/* records with no start or end */
	uint64_t agent_buffers_cut;	/* walks stopped at a bad record */
	uint64_t agent_buffers_refused;	/* past the agent's buffer cap */
	uint64_t agent_launches_failed;	/* returned an error: no record */
	uint64_t agent_launches_captured; /* into a CUDA graph (stream
					   * capture): ran nothing then */
	uint64_t agent_buffers_left;	/* with CUPTI when another tool
					 * took it: their records are lost */
	uint64_t agent_yields_in_call;	/* left inside another tool's
					 * cuptiSubscribe (it then succeeds) */
	bool agent_seen;		/* the target had the agent loaded */
	/* CUPTI as the agent found it when the lease came: subscribed, or
	 * held by another tool (torch.profiler's Kineto, Nsight), which
	 * then keeps all of it and rfbpf records no GPU activity. */
	bool cupti_known;		/* the agent has answered a lease */
	uint32_t cupti_result;		/* 0, or the subscribe's CUptiResult */
	uint32_t clock_source;		/* enum in bpf/rfbpf_gpu.h's block */
	char cupti_holder[64];		/* the other subscriber, if named */
	uint32_t cupti_version;		/* the job's CUPTI API version, 0 if
					 * the agent found none */
	/* Another tool started using CUPTI in the job while the agent held
	 * it (torch.profiler, Nsight): GPU activity stops there. */
	bool cupti_taken;		/* seen during this run */
	char cupti_taken_by[48];	/* the CUPTI function it called */
	int cupti_taken_tid;		/* by which thread */
	bool cupti_yielded;		/* the agent has left CUPTI to it
					 * (this run or an earlier one) */
	bool final_flush_missed;	/* the agent did not answer in time */
	bool agent_counters_stale;	/* the target exited first: agent_*
					 * are as last read while it ran */
};

/* Pending launches live in slots (a free list keeps the ones released),
 * linked oldest first: arrival order is time order, so eviction takes
 * from the old end and a launch released early unlinks itself. */
struct gpu {
	struct gpu_launch *slots;
	uint32_t cap;		/* slots allocated */
	uint32_t live;		/* slots holding a pending launch */
	uint32_t oldest, newest;	/* UINT32_MAX when none is pending */
	uint32_t free;		/* first free slot, UINT32_MAX: none */
	struct u64map pending;	/* correlation id + 1 -> slot */
	struct u64map demangled; /* kernel name id + 1 -> shown name id */
	/* Kernel names the event had to cut, read whole from the job where
	 * the agent says CUPTI keeps them (rf_gpu_activity.name_addr), by
	 * the session's reader; NULL: they stay cut. */
	bool (*read_name)(void *ctx, uint32_t pid, uint64_t addr, char *buf,
			  size_t len);
	void *read_ctx;
	struct u64map whole_names; /* name_addr -> its name's id */
	/* The agent reports CUPTI's sync records: a sync call then waits
	 * for its record as a launch does. Else it is only handed on. */
	bool sync_records;
	struct u64map context_device; /* context id + 1 -> device id + 1 */
	/* What each GPU is, by ordinal, as the agent said (size 0: not
	 * said); nr_devices past the highest said. */
	struct rf_gpu_device *devices;
	uint32_t nr_devices;
	struct gpu_launch call;	/* the sync call being handed on */
	struct gpu_counts counts;
};

void gpu_init(struct gpu *g);
void gpu_free(struct gpu *g);
/* A call in the op whose stack is frames[0..depth) (depth 0: none
 * known; counted as outside any op when BPF saw none open, else as in an
 * op that was not recorded), that op being op_id (-1: none). A launch
 * waits for its records; a sync is only counted. Returns the call as the
 * sinks see it (valid until the next add, evict or release), or NULL on
 * ENOMEM. */
struct gpu_launch_site {
	uint32_t pid, tid, thread_name;
	const uint32_t *frames;
	const uint32_t *frame_inputs;	/* as gpu_launch's, or NULL */
	uint32_t depth;
	int64_t op_id;
};
const struct gpu_launch *gpu_add_launch(struct gpu *g, struct names *names,
					uint64_t ts_ns,
					const struct gpu_launch_site *site,
					const struct rf_gpu_launch_event *e);
/* A completed record, decoded into *a and joined to its launch if one is
 * pending (*launch, else NULL; valid until the next add, evict or
 * release). Returns false on ENOMEM. */
bool gpu_add_activity(struct gpu *g, struct names *names,
		      const struct rf_gpu_activity_event *e,
		      struct gpu_activity *a, const struct gpu_launch **launch);
/* After its record was handed on: forgets a launch that has all of its
 * records (RF_GPU_LAUNCH_F_ONE_RECORD and one record in). */
void gpu_release_if_complete(struct gpu *g, const struct gpu_launch *l);
/* Evicts launches older than now_ns - GPU_PENDING_NS. */
void gpu_evict(struct gpu *g, uint64_t now_ns);
/* Tracing stopped: launches still waiting for records are counted. */
void gpu_detach(struct gpu *g);

/* One line on CUPTI: who held it and which clock GPU times are in. */
void gpu_format_cupti(const struct gpu_counts *c, char *buf, size_t len);
/* A short word for the state: "subscribed", "held by another tool",
 * "failed" or "unknown". */
const char *gpu_cupti_state(const struct gpu_counts *c);
/* RF_EV_CUPTI_CALL: thread tid called watched CUPTI function `which` (an
 * index into RF_CUPTI_WATCHED, taken from the record: any value). Notes
 * the first such call; returns the function's name then, NULL for every
 * later one. */
const char *gpu_note_cupti_taken(struct gpu_counts *c, unsigned which,
				 int tid);

static inline uint64_t gpu_duration(const struct gpu_activity *a)
{
	return a->end_ns > a->start_ns ? a->end_ns - a->start_ns : 0;
}

/* The time a synchronize call waited on the GPU (its entry to its
 * return); 0 for a launch, or a sync whose entry the agent did not say. */
static inline uint64_t gpu_sync_wait_ns(const struct gpu_launch *call)
{
	return call->flags & RF_GPU_LAUNCH_F_SYNC && call->enter_ns ?
	       call->ts_ns - call->enter_ns : 0;
}
/* "kernel", "gpu_memcpy", "gpu_memset": Chrome categories. */
const char *gpu_kind_name(uint32_t kind);
/* Kineto's words for CUpti_ActivityMemcpyKind ("HtoD"...) and
 * CUpti_ActivityMemoryKind ("Pageable"...), with which copies and sets
 * are named: "Memcpy HtoD (Pageable -> Device)", "Memset (Device)". */
const char *gpu_copy_kind_name(uint8_t copy_kind);
/* The agent described GPU d->device_id (ordinals past 63 are ignored).
 * False on ENOMEM. */
bool gpu_set_device(struct gpu *g, const struct rf_gpu_device *d);
/* GPU `id` as described, or NULL. */
const struct rf_gpu_device *gpu_device(const struct gpu *g, uint32_t id);
/* Kineto's name for a sync record's type ("Stream Sync"...). */
const char *gpu_sync_type_name(uint32_t sync_type);
const char *gpu_memory_kind_name(uint8_t memory_kind);
/* One line with every GPU counter that means something was lost;
 * bad_records is BPF's count of records of an unknown ABI version. */
void gpu_format_losses(const struct gpu_counts *c, uint64_t bad_records,
		       char *buf, size_t len);
/* Launches waiting for records now. */
static inline size_t gpu_pending(const struct gpu *g)
{
	return g->live;
}

#endif
