/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The kernel/user contract of rfbpf: every struct, enum and constant that
 * both the BPF programs (the .bpf.c files in bpf/) and the loader (user/)
 * rely on.
 * Nothing else lives here.
 *
 * Events travel through one BPF ring buffer. Every record starts with the
 * same header so the loader can switch on `kind` before it knows the size.
 * `before` records carry the op name; `end` and `thread exit` records do
 * not, so they are smaller and cost less ring-buffer space.
 */
#ifndef RFBPF_H
#define RFBPF_H

#ifndef __VMLINUX_H__
#include <linux/types.h>	/* __u8 ... __s64, as vmlinux.h has them */
#endif

/* Names longer than this (including the NUL) are cut and flagged. */
#define RF_NAME_MAX 128
/* The RecordFunction scope is read from the object at this offset; it has
 * been the same in every release build from 1.13 to main. */
#define RF_SCOPE_OFFSET 96
/* RecordFunction::fn_, a std::variant<std::string, schema_ref_t>, in every
 * release build: the name (index 0) or the FunctionSchema* (index 1) is at
 * this offset; the index byte and sequence_nr_ follow at offsets that
 * depend on the string ABI (the loader sets them). */
#define RF_FN_OFFSET 160
#define RF_FN_INDEX_OFFSET_CXX11 192
#define RF_SEQ_OFFSET_CXX11 200
#define RF_FN_INDEX_OFFSET_OLD 168
#define RF_SEQ_OFFSET_OLD 176
/* RecordScope::BACKWARD_FUNCTION: the ops that carry fwd_thread_id_. */
#define RF_SCOPE_BACKWARD 1
/* Not a RecordScope: an NVTX range the job pushed (nvtx.bpf.c), sent as
 * an op of this scope whose address is RF_NVTX_ADDR(its depth on its
 * thread), which no RecordFunction can have (user space ends at 2^47). */
#define RF_SCOPE_NVTX 0xfe
#define RF_NVTX_ADDR(depth) (0xfff0000000000000ull | (__u64)(depth))
/* RecordFunction's thread_id_: PyTorch's own small thread number
 * (RecordFunction::currentThreadId()), set when it is built; what
 * fwd_thread_id_ names. */
#define RF_THREAD_ID_OFFSET 88
/* fwd_thread_id_, set on backward ops (the thread_id_ of the forward op
 * whose sequence number they carry) before before() runs. It follows
 * sequence_nr_, inputs_ (16 bytes), kwinputs_ (an unordered_map of 56
 * bytes, 2.4 and later) and outputs_ (24 bytes); the loader sets the
 * offset for the build, or 0 when it cannot tell. */
#define RF_FWD_TID_OFFSET_CXX11 248
#define RF_FWD_TID_OFFSET_OLD 224
#define RF_KWINPUTS_SIZE 56
/* callback_start reads [RF_WINDOW_START, +RF_WINDOW_LEN) of the object at
 * once: thread_id_, scope, fn_, its index and sequence_nr_ in either
 * string ABI. */
#define RF_WINDOW_START RF_THREAD_ID_OFFSET
#define RF_WINDOW_LEN (RF_SEQ_OFFSET_CXX11 + 8 - RF_WINDOW_START)
/* Layout of the pre-C++11 ("old ABI") reference-counted std::string: the
 * object is one pointer to the characters, preceded by {length, capacity,
 * refcount}; the length sits 24 bytes before the characters. */
#define RF_OLD_STRING_LEN_BACK 24

enum rf_event_kind {
	RF_EV_BEFORE = 1,	/* RecordFunction::before(...) entered */
	RF_EV_END = 2,		/* RecordFunction::end() entered */
	RF_EV_THREAD_EXIT = 3,	/* a thread of the target exited */
	RF_EV_GPU_LAUNCH = 4,	/* CUPTI agent: a kernel launch API returned */
	RF_EV_GPU_ACTIVITY = 5,	/* CUPTI agent: a kernel/copy/set completed */
	RF_EV_FORK = 6,		/* --children: a traced process forked one
				 * (header only: the loader finds the child) */
	RF_EV_CUPTI_CALL = 7,	/* a thread other than the CUPTI agent's
				 * called a CUPTI function the agent relies
				 * on (header only: rf_addr is its index in
				 * RF_CUPTI_WATCHED) */
	RF_EV_PY_STACK = 8,	/* --python-stacks: the Python stack of the
				 * op whose before event came just before on
				 * the same thread (struct rf_py_stack_event) */
	RF_EV_INPUTS = 9,	/* --shapes: the inputs of the op whose before
				 * event came last from the same thread
				 * (struct rf_inputs_event) */
	RF_EV_OFF_CPU = 10,	/* --off-cpu: a traced thread ran again after
				 * an interval off CPU (rf_off_cpu_event) */
	RF_EV_WAKE = 11,	/* --off-cpu: a traced thread woke another
				 * traced one (rf_wake_event) */
	RF_EV_GPU_DEVICE = 12,	/* CUPTI agent: what a GPU is
				 * (rf_gpu_device_event) */
	RF_EV_MEMORY = 13,	/* --memory: an allocator made or freed a
				 * block (struct rf_mem_event) */
};

/*
 * Every `before` overload PyTorch has exported, one BPF program each.
 * The order is part of the contract: per-variant counters are indexed by it.
 */
enum rf_variant {
	RF_V_CSTR = 0,		/* before(const char*, int64_t) */
	RF_V_STRING,		/* before(std::string, int64_t), C++11 ABI */
	RF_V_STRING_OLD,	/* before(std::string, int64_t), old COW ABI */
	RF_V_SCHEMA,		/* before(reference_wrapper<const FunctionSchema>, int64_t) */
	RF_V_DESCRIPTOR,	/* before(variant<string_view, schema_ref>, int64_t), 2.9+ */
	RF_V_DESCRIPTOR_DK,	/* same with a trailing c10::DispatchKey */
	RF_V_CALLBACK,		/* rfbpf's start-callback stub (optimized) */
	RF_V_NR_BEFORE,
	RF_V_END = RF_V_NR_BEFORE, /* end() shares the counter array */
	RF_V_NR,
};

/* Slots of the per-CPU `counters` map beyond the per-variant hit counts. */
enum rf_counter {
	RF_CNT_DROPS = RF_V_NR,		/* ring buffer full: event lost */
	RF_CNT_NAME_FAULTS,		/* name could not be read from user memory */
	RF_CNT_TREES_SEEN,		/* --tree-sample: top-level ops seen */
	RF_CNT_TREES_KEPT,		/* --tree-sample: ... and kept */
	RF_CNT_TREE_TOO_DEEP,		/* nesting beyond RF_TREE_MAX_DEPTH */
	RF_CNT_GPU_LAUNCHES,		/* agent launch probe hits */
	RF_CNT_GPU_RECORDS,		/* agent activity probe hits */
	RF_CNT_GPU_BAD_RECORD,		/* unknown ABI version: not decoded */
	RF_CNT_PY_NO_THREAD,		/* --python-stacks: ops on threads
					 * with no Python thread state
					 * (none sent) */
	RF_CNT_PY_FAULTS,		/* stacks cut by an unreadable frame */
	RF_CNT_PY_TRUNCATED,		/* stacks deeper than the cap */
	RF_CNT_INPUTS_CUT,		/* --shapes: input records cut short
					 * (too many inputs, dims, elements) */
	RF_CNT_INPUTS_FAULTS,		/* ... or by unreadable memory */
	RF_CNT_SWITCHES,		/* --off-cpu: context switches of
					 * traced threads seen */
	RF_CNT_CHILD_OPS_MISSED,	/* --children: ops begun in a child
					 * process before it was traced */
	RF_CNT_NVTX_POPS_UNMATCHED,	/* NVTX pops of ranges pushed before
					 * the attach (or on no range) */
	RF_CNT_MEM_ALLOCS,		/* --memory: allocations seen */
	RF_CNT_MEM_FREES,		/* ... and frees */
	RF_CNT_MEM_SAMPLED_FULL,	/* byte sampling: a sampled block not
					 * sent, its address table full */
	RF_CNT_NR,
};

/*
 * --tree-sample: whole top-level op trees are kept or skipped, in BPF, so
 * skipped trees cost no ring-buffer space and kept ones stay complete.
 * Each thread keeps the addresses of its open RecordFunctions (to know
 * when a tree ends) and a geometric skip count: how many trees to skip
 * before the next kept one, drawn from a table the loader fills with the
 * inverse CDF of the geometric distribution for P, indexed by 16 random
 * bits (the same trick as PyTorch's sampler: one draw per kept tree).
 */
#define RF_TREE_MAX_DEPTH 64
#define RF_GEO_TABLE_SIZE 65536

struct rf_thread_state {
	__u32 depth;		/* open RecordFunctions on this thread */
	__u32 skip;		/* trees still to skip */
	__u32 keep;		/* the current tree is kept */
	__u32 ready;		/* skip has been drawn */
	__u64 seen_async_ends;	/* async_ends when the stack was last
				 * cleared of ops ended elsewhere */
	__u64 stack[RF_TREE_MAX_DEPTH];
};

/*
 * The ring buffer wakes the loader as the backlog crosses the loader's
 * threshold (an eighth of the ring), not on every event past it: a forced
 * wakeup costs the traced thread more than the event, and a loader that
 * is already awake drains everything anyway (its poll also times out every
 * 100 ms). Events that find between threshold and threshold + this many
 * bytes waiting force the wakeup; the window is wide enough that some
 * event of every crossing lands in it.
 */
#define RF_WAKEUP_WINDOW (16 * 1024)

/* Flags on an event. */
#define RF_F_NAME_TRUNCATED	(1u << 0)
#define RF_F_NAME_FAULT		(1u << 1)
/* An end from the end callback: PyTorch calls it only for an op whose
 * start callback ran, so an end of this kind with no start seen is an op
 * that began before rfbpf traced its process (a forked child's first
 * milliseconds, before its probes were on), not an unpaired end. */
#define RF_F_BEGAN		(1u << 2)

struct rf_event_hdr {
	__u64 ts_ns;		/* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 rf_addr;		/* the RecordFunction object (`this`) */
	__u32 pid;		/* tgid */
	__u32 tid;		/* kernel thread id */
	__u8 kind;		/* enum rf_event_kind */
	__u8 variant;		/* enum rf_variant */
	__u8 scope;		/* at::RecordScope, before only */
	__u8 flags;		/* RF_F_* */
	__u32 name_len;		/* bytes in name[], without NUL */
};

struct rf_before_event {
	struct rf_event_hdr hdr;
	__s64 seq;		/* sequence number argument */
	__u64 thread_id;	/* RecordFunction thread_id_ (0: unread) */
	__u64 fwd_thread_id;	/* fwd_thread_id_, backward ops (else 0) */
	char name[RF_NAME_MAX];
};

struct rf_end_event {
	struct rf_event_hdr hdr;
};

struct rf_thread_exit_event {
	struct rf_event_hdr hdr;
	char comm[16];
};

/*
 * --python-stacks: at each recorded op's start, the Python stack of its
 * thread, walked in BPF from the thread's PyThreadState. The loader fills
 * rf_py_config once it has found the interpreter (runtime = 0: off) with
 * where the interpreter keeps what the walk reads, for its version.
 *
 * The thread state is found without the GIL (torch releases it inside
 * most ops): each thread caches its own (task storage); on a miss BPF
 * walks the interpreter's thread list for the one whose native_thread_id
 * is the thread's id in its own PID namespace. The list is not walked
 * again for a thread that has none until its head changes (CPython puts
 * new thread states at the head).
 *
 * Per frame, BPF sends the code object's address and the code unit the
 * frame is at; the loader names them (user/python/). A stack the same as
 * the previous one its thread sent (nested ops of one Python call) goes
 * as a header with RF_PY_F_SAME.
 */
#define RF_PY_MAX_FRAMES 128
/* Bytes of a frame read at once: every field the walk needs is in it
 * (3.14's owner byte is at 74). */
#define RF_PY_FRAME_WINDOW 80
/* No such field in this version. */
#define RF_PY_NO_FIELD 0xffffffffu

struct rf_py_config {
	__u64 runtime;			/* &_PyRuntime in the target */
	__u32 depth;			/* frames kept, <= RF_PY_MAX_FRAMES */
	__u32 runtime_interpreters_head;	/* _PyRuntimeState */
	__u32 interp_threads_head;	/* PyInterpreterState */
	__u32 tstate_next, tstate_native_thread_id;	/* PyThreadState */
	__u32 tstate_cframe;		/* 3.11: its _PyCFrame */
	__u32 cframe_current_frame;	/* ... and the frame in it */
	/* _PyInterpreterFrame, each below RF_PY_FRAME_WINDOW */
	__u32 frame_code, frame_previous, frame_prev_instr;
	__u32 frame_owner;		/* RF_PY_NO_FIELD: not checked */
	__u32 owner_cstack;		/* owner value of a C-stack shim
					 * frame (skipped) */
	__u32 owner_interpreter;	/* ... and of 3.14's interpreter
					 * entry frames (skipped) */
	__u32 code_code_adaptive;	/* PyCodeObject: first code unit */
};

#define RF_PY_F_SAME		(1u << 0)	/* as the thread's last one */
#define RF_PY_F_TRUNCATED	(1u << 1)	/* deeper than depth: the
						 * innermost frames kept */
#define RF_PY_F_FAULT		(1u << 2)	/* a frame could not be read:
						 * the stack stops there */

struct rf_py_frame {
	__u64 code;		/* PyCodeObject * in the target (3.14's
				 * tagged f_executable: tag bits cleared) */
	__s32 unit;		/* code unit it is at, -1 before the first */
	__u32 pad;
};

struct rf_py_stack_event {
	struct rf_event_hdr hdr;	/* rf_addr: the op's RecordFunction */
	__u32 nr_frames;		/* innermost first */
	__u32 py_flags;			/* RF_PY_F_* */
	struct rf_py_frame frames[RF_PY_MAX_FRAMES];
};
/* The bytes of a record with n frames. */
#define RF_PY_STACK_SIZE(n) \
	(sizeof(struct rf_py_stack_event) - \
	 (RF_PY_MAX_FRAMES - (n)) * sizeof(struct rf_py_frame))

/*
 * --shapes: at each recorded op's start, what its inputs are: each tensor's
 * dtype, sizes and strides, each scalar's value, each list's elements (one
 * level deep). PyTorch boxes an op's inputs into the RecordFunction
 * (inputs_, an ArrayRef<IValue>) only for ops a callback that asked for
 * inputs (needs_inputs) was sampled for, so rfbpf registers its callback
 * that way. The loader fills rf_inputs_config with the build's layout
 * (user/attach/torch_layouts.c; docs/record-function-inputs.md).
 *
 * The record is a stream of 64-bit words. Each value opens with a header
 * word (RF_IN_HDR), followed by:
 *   tensor  its kept sizes, then as many strides;
 *   scalar  its payload (int64, double bits, or bool);
 *   list    its kept elements, each a value of its own.
 */
#define RF_IN_MAX_WORDS 256
#define RF_IN_MAX_DIMS 16	/* sizes kept per tensor */
#define RF_IN_MAX_VALUES 64	/* inputs and list elements read per op */
/* Room past the last word for one tensor's sizes and strides, so that the
 * verifier sees every write land inside the record. */
#define RF_IN_SLACK (2 * RF_IN_MAX_DIMS + 2)

/* Where a build keeps what the reader needs (offsets in bytes). */
struct rf_inputs_config {
	__u32 enabled;		/* --shapes: every op's inputs */
	__u32 collectives;	/* the inputs of collectives (names starting
				 * "gloo:" or "nccl:", and
				 * "record_param_comms"), shapes or not: their
				 * tensors give the bytes they move */
	__u32 rf_inputs;	/* RecordFunction: inputs_ {data, size} */
	__u32 impl_sizes;	/* TensorImpl: sizes_and_strides_ */
	__u32 impl_dtype;	/* TensorImpl: data_type_ (u16 index) */
	__u32 list_vector;	/* c10::detail::ListImpl: list (a vector) */
	__u32 list_type;	/* ListImpl: elementType (first word: Type *) */
	__u32 tag_tensor, tag_double, tag_int, tag_bool, tag_list, tag_none;
};

/* IValue: payload word @0, tag (u32) @8, 16 bytes, in every build. */
#define RF_IVALUE_SIZE 16
#define RF_IVALUE_TAG 8
/* c10::impl::SizesAndStrides: size_ @0, then either 5 sizes and 5 strides
 * inline or a pointer to 2 * size_ words (sizes, then strides). */
#define RF_SIZES_INLINE 5
/* c10::Type: kind_ (u32) right after the vtable pointer. */
#define RF_TYPE_KIND 8

enum rf_input_kind {
	RF_IN_OTHER = 0,	/* a type no profiler writes (string, device) */
	RF_IN_NONE,
	RF_IN_TENSOR,
	RF_IN_INT,
	RF_IN_DOUBLE,
	RF_IN_BOOL,
	RF_IN_LIST,
};

#define RF_IN_F_CUT	(1u << 0)	/* dims or elements kept < count */
#define RF_IN_F_FAULT	(1u << 1)	/* could not be read */

/*
 * Header word: kind (bits 0-7), RF_IN_F_* (8-15), aux (16-31: a tensor's
 * dtype index, a list's element TypeKind), count (32-47: a tensor's dims,
 * a list's length, saturating), kept (48-63: sizes or elements that
 * follow).
 */
#define RF_IN_HDR(kind, flags, aux, count, kept) \
	((__u64)(kind) | (__u64)(flags) << 8 | (__u64)((aux) & 0xffff) << 16 | \
	 (__u64)((count) > 0xffff ? 0xffff : (count)) << 32 | \
	 (__u64)(kept) << 48)
#define RF_IN_KIND(h)	((unsigned)((h) & 0xff))
#define RF_IN_FLAGS(h)	((unsigned)(((h) >> 8) & 0xff))
#define RF_IN_AUX(h)	((unsigned)(((h) >> 16) & 0xffff))
#define RF_IN_COUNT(h)	((unsigned)(((h) >> 32) & 0xffff))
#define RF_IN_KEPT(h)	((unsigned)((h) >> 48))

#define RF_INPUTS_F_CUT		(1u << 0)	/* inputs left out: words or
						 * values ran out */
#define RF_INPUTS_F_FAULT	(1u << 1)	/* some value unreadable */

struct rf_inputs_event {
	struct rf_event_hdr hdr;	/* rf_addr: the op's RecordFunction */
	__u32 nr_inputs;		/* the op's inputs */
	__u16 nr_words;
	__u16 in_flags;			/* RF_INPUTS_F_* */
	__u64 w[RF_IN_MAX_WORDS + RF_IN_SLACK];
};
/* The bytes of a record of n words. */
#define RF_INPUTS_SIZE(n) \
	(sizeof(struct rf_inputs_event) - \
	 (RF_IN_MAX_WORDS + RF_IN_SLACK - (n)) * sizeof(__u64))

/*
 * --off-cpu: the scheduler's switch tracepoint notes when a traced thread
 * leaves the CPU and why (task storage), and sends one record when it runs
 * again; the waking tracepoint, which runs in the waker's context, notes
 * who woke it. Untraced tasks cost a bit test of their tgid per switch.
 */
enum rf_off_cpu_reason {
	RF_OFF_PREEMPTED = 1,	/* switched out while runnable */
	RF_OFF_SLEEP,		/* interruptible sleep (S): locks, queues,
				 * sleep(), a GIL wait */
	RF_OFF_UNINTERRUPTIBLE,	/* uninterruptible (D), not for I/O */
	RF_OFF_BLOCK_IO,	/* D with in_iowait: waiting on block I/O */
	RF_OFF_GIL,		/* S in a futex wait on the GIL's own
				 * condition variable or mutex */
	RF_OFF_NR,
};

/* CPython's struct _gil_runtime_state (3.11 to 3.14): its condition
 * variable and mutex, the futexes a thread waiting for the GIL sleeps on,
 * are inside it. */
#define RF_GIL_STATE_SIZE 208

struct rf_off_cpu_event {
	struct rf_event_hdr hdr;	/* tid, pid: the thread; ts_ns: when it
					 * ran again */
	__u64 start_ns;			/* when it left the CPU */
	__u64 wake_ns;			/* when it was woken, 0: not seen */
	__u32 reason;			/* enum rf_off_cpu_reason */
	__u32 waker_tid, waker_pid;	/* who woke it (0: not seen, or an
					 * interrupt: see wake_ns) */
	char waker_comm[16];		/* "[interrupt]" for one */
};

struct rf_wake_event {
	struct rf_event_hdr hdr;	/* tid, pid: the waker */
	__u32 woken_tid;
	__u32 pad;
};

/*
 * The scheduler programs are one BPF object per rfbpf process
 * (bpf/off_cpu.bpf.c), however many processes it traces: with one object
 * per traced process, every context switch on the machine ran every
 * object's program (67 ns each). The loader marks a traced tgid with one
 * bit (rf_off_cpu_bits: an array lookup the verifier inlines is all an
 * untraced task costs) and gives by tgid the ring buffer its records go to
 * (the process's own, so they keep their order among its op events), its
 * settings and its counts.
 */
#define RF_OFF_CPU_MAX_JOBS 4096

struct rf_off_cpu_job {
	__u64 gil_addr;		/* its GIL state, 0: none (a child, or not
				 * Python) */
	__u64 wakeup_bytes;	/* its ring's wakeup threshold */
};

struct rf_off_cpu_counts {	/* per CPU, per tgid */
	__u64 switches;		/* as RF_CNT_SWITCHES */
	__u64 drops;		/* as RF_CNT_DROPS */
};

/*
 * Thread exits: one sched_process_exit program per rfbpf process
 * (bpf/thread_exits.bpf.c), however many processes it traces, since every
 * thread that exits on the machine runs it: with one per traced process a
 * fleet daemon's 32 jobs ran 32. A traced process (as rfbpf sees its tgid)
 * has a route: the slot of the session it belongs to, whose ring gets its
 * exits (among its op events, in order) and whose drops they count. The
 * loader routes the target and each child it adopts; a session's own fork
 * program (--children) routes a new child before it runs.
 */
#define RF_EXIT_MAX_JOBS 4096
#define RF_EXIT_MAX_PROCS 16384

struct rf_exit_route {
	__u32 job;		/* the session's slot */
	__u32 pad;
	__u64 wakeup_bytes;	/* its ring's wakeup threshold */
};

/*
 * --memory: PyTorch's allocators, probed where every allocation and free
 * of theirs passes (bpf/memory.bpf.c):
 *   CPU   c10::ProfiledCPUMemoryReporter::New(void *ptr, size_t nbytes)
 *         and ::Delete(void *ptr), which c10's DefaultCPUAllocator calls
 *         for every block whether or not a profiler is on (1.13 to 2.14).
 *         Entry probes see the block and its size together, where
 *         alloc_cpu would need a return probe for the address. A free's
 *         size is the loader's to find (its table of live blocks).
 *   other c10::reportMemoryUsageToProfiler(ptr, bytes, total_allocated,
 *         total_reserved, Device), which the CUDA caching allocator calls
 *         on every malloc and free whether or not a profiler is on. CPU
 *         calls of it (made only under torch.profiler's profile_memory)
 *         are left to the CPU pair, so nothing is counted twice.
 * The record's hdr.rf_addr is the block's address; hdr.variant which
 * probe sent it.
 */
enum rf_mem_source {
	RF_MEM_CPU_ALLOC = 0,	/* bytes > 0 */
	RF_MEM_CPU_FREE,	/* bytes 0: the loader knows the size */
	RF_MEM_DEVICE,		/* bytes < 0 for a free; totals are the
				 * allocator's own */
};

/* c10::DeviceType values rfbpf names (c10/core/DeviceType.h). */
#define RF_DEVICE_CPU 0
#define RF_DEVICE_CUDA 1

/*
 * Byte sampling (mem_sample_bytes > 0, fleet mode): each thread counts
 * down the bytes to its next sample point, points falling as a Poisson
 * process of one per mem_sample_bytes on average, as Go's and tcmalloc's
 * heap profilers sample. An allocation is sent when a point falls in it
 * (probability 1 - exp(-size/mean), so one much larger than the mean is
 * always sent), and the countdown starts again from a fresh exponential
 * gap: memoryless, so the points past the first in one block do not
 * matter. A sampled block's address is kept in BPF, and only its free is
 * sent. The gap is mean * -ln(U), with -ln(U) from a table the loader
 * fills (RF_MEM_EXP_TABLE_SIZE entries, fixed point with
 * RF_MEM_EXP_SHIFT fraction bits) indexed by random bits.
 */
#define RF_MEM_EXP_TABLE_SIZE 65536
#define RF_MEM_EXP_SHIFT 16
/* A gap of table value v at mean bytes: at least 1. */
#define RF_MEM_GAP(v, mean) \
	((__s64)(((__u64)(v) * (__u64)(mean)) >> RF_MEM_EXP_SHIFT) + 1)
/* One block of size bytes against a thread's countdown: true when a
 * point falls in it (the countdown then takes a new gap). */
#define RF_MEM_COUNTDOWN(left, size) (((left) -= (__s64)(size)) <= 0)
/* Sampled blocks BPF keeps the address of, per traced process. */
#define RF_MEM_SAMPLED_MAX 65536
/* On a memory record: one sampled by bytes (weigh it). */
#define RF_F_MEM_SAMPLED	(1u << 3)

struct rf_mem_event {
	struct rf_event_hdr hdr;
	__s64 bytes;
	__u64 total_allocated;	/* RF_MEM_DEVICE: the allocator's */
	__u64 total_reserved;	/* ... (its segments: cudaMalloc'd) */
	__s8 device_type;	/* c10::DeviceType */
	__s8 device_index;	/* -1: none */
	__u8 pad[6];
};

#endif /* RFBPF_H */
