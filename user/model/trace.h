/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The trace model the loader rebuilds from events. It holds only what is
 * open: the ops that have begun and not ended, the threads they run on,
 * GPU launches still waiting for their records. When an op closes it is
 * handed, with its self time and its stack, to every consumer registered
 * with trace_add_sink() (aggregates, stack profiles, the Chrome writer),
 * and forgotten: memory follows how much is open, not how long rfbpf ran.
 * Counters for everything that did not pair up cleanly stay for the run.
 * Nothing in it reaches back into BPF.
 */
#ifndef RFBPF_TRACE_H
#define RFBPF_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "rfbpf.h"
#include "distributed.h"
#include "gpu_activity.h"
#include "loss_counters.h"
#include "memory.h"
#include "names.h"
#include "op_inputs.h"
#include "py_frames.h"
#include "steps.h"
#include "u64map.h"

/* Why an op's interval is not a clean before..end pair. */
enum op_flag {
	OP_OPEN			= 1u << 0, /* no end seen yet */
	OP_ASYNC_END		= 1u << 1, /* ended on another thread */
	OP_CLOSED_BY_PARENT	= 1u << 2, /* an enclosing op ended first */
	OP_THREAD_EXITED	= 1u << 3, /* its thread exited with it open */
	OP_OPEN_AT_DETACH	= 1u << 4, /* still open when tracing stopped */
	OP_REPLACED		= 1u << 5, /* a new before() reused its address */
	OP_NAME_TRUNCATED	= 1u << 6, /* name longer than RF_NAME_MAX-1 */
	OP_NAME_FAULT		= 1u << 7, /* name unreadable in the target */
};
/* Flags that mean "the end time is not the op's own end() call". */
#define OP_TRUNCATED (OP_CLOSED_BY_PARENT | OP_THREAD_EXITED | \
		      OP_OPEN_AT_DETACH | OP_REPLACED)

struct op {
	uint64_t start_ns, end_ns;
	uint64_t rf_addr;	/* key in trace.open (address and process) */
	uint64_t id;		/* which op this is, counting from 0 in the
				 * order they began */
	int64_t seq;
	uint64_t rf_thread;	/* PyTorch's number for its thread (0 if
				 * unread), as fwd_thread names it */
	uint64_t fwd_thread;	/* backward ops: rf_thread of the forward op
				 * with the same seq (0 otherwise) */
	uint64_t child_ns;	/* time of its direct children closed so far
				 * (weighed: trace.child_weight) */
	uint32_t children;	/* direct children closed so far */
	uint32_t descendants;	/* ops closed below it, at any depth */
	uint64_t paused_ns;	/* its thread was held by rfbpf meanwhile */
	uint32_t tid;		/* thread it began on (and is nested in) */
	uint32_t end_tid;	/* OP_ASYNC_END: the thread that ended it */
	uint32_t name;		/* id in trace.names */
	int32_t parent;		/* slot of the enclosing op on the same
				 * thread, -1 at top (it stays open until
				 * this op closes) */
	uint32_t next_free;	/* free-list link while the slot is unused */
	uint16_t depth;
	uint8_t scope;		/* at::RecordScope */
	uint8_t variant;	/* enum rf_variant of its before() */
	uint32_t flags;		/* enum op_flag */
	uint32_t py_stack;	/* --python-stacks: its Python stack (an id
				 * in trace.py), 0 if none */
	uint32_t py_live;	/* ... how many of its frames (outermost
				 * first) are its Python context: see
				 * stacks_py_context */
	uint32_t inputs;	/* --shapes: its inputs (an id in
				 * trace.inputs), 0 if none */
	uint64_t off_cpu_ns;	/* --off-cpu: its thread off CPU while it
				 * was the innermost op open */
	uint64_t child_off_cpu_ns;	/* ... and while its descendants
					 * were (closed so far) */
	/* --memory: bytes allocated less bytes freed while it was the
	 * innermost op on its thread (model/memory.h), and the totals of
	 * its children closed so far. */
	int64_t mem[MEM_WHERE_NR], child_mem[MEM_WHERE_NR];
};

#define RECENT_ENDS 8

struct thread {
	uint32_t tid;
	uint32_t pid;		/* its process: the target, or a child of it
				 * (--children); 0 if unknown (the target) */
	char comm[16];
	uint32_t comm_name;	/* comm as an id in trace.names */
	uint32_t *stack;	/* slots of its open ops, bottom first */
	uint32_t depth, cap;
	uint64_t recent_ends[RECENT_ENDS]; /* to tell a repeated end() */
	uint32_t recent_next;
	bool exited;
	bool started_traced;	/* not alive when tracing began */
	bool ran_ops;		/* opened an op while traced */
	uint32_t py_last;	/* the Python stack it sent last */
	/* --off-cpu: the op of the traced thread that woke it last, while
	 * it was off CPU (op id, -1: none; name id). */
	int64_t waker_op;
	uint32_t waker_op_name, waker_op_tid;
	bool py_named;		/* comm_name is its Python thread name */
	bool seen;		/* a record of its own came (events.c): pid
				 * set, named; one only woken is not */
	uint8_t py_name_tries;	/* lookups of that name so far */
};

struct counts {
	uint64_t events;		/* records read from the ring buffer */
	uint64_t before[RF_V_NR_BEFORE];/* before events, per variant */
	uint64_t ends;			/* end events */
	uint64_t thread_exits;
	/* What was lost or could not pair (model/loss_counters.h); drops
	 * are read from BPF's counters. */
	RF_LOSS_COUNTERS(RF_LOSS_FIELD)
	/* Read from BPF's counters at the end of the run. */
	uint64_t bpf_hits[RF_V_NR];
	uint64_t trees_seen, trees_kept, tree_too_deep;	/* --tree-sample */
	uint64_t gpu_launch_hits, gpu_record_hits, gpu_bad_records;
	uint64_t ops;			/* ops opened */
	uint64_t threads_seen;
	/* Those that opened an op: the rest only ended ops begun before
	 * tracing, or were seen off CPU, or by a GPU launch. */
	uint64_t threads_with_ops;
	/* Threads that started while traced, and the ops recorded on them:
	 * under --sample, PyTorch's sampler starts every new thread from the
	 * same random state (see trace_sampler_bias_note). */
	uint64_t threads_started, ops_on_started_threads;
	uint64_t child_processes_seen;	/* --children */
	/* --python-stacks: stacks read (whole or as the thread's last),
	 * and those that found no op open; from BPF's counters, ops on
	 * threads with no Python thread state, and stacks cut by an
	 * unreadable frame or by the depth cap (frames no code object
	 * could be read for: trace.py.unresolved). */
	uint64_t py_stacks, py_same, py_orphans;
	uint64_t py_no_thread, py_faults, py_truncated;
	/* --shapes: input records read, and those that found no op open;
	 * from BPF's counters, records cut short (inputs, dims or list
	 * elements past the caps) or by unreadable memory. */
	uint64_t inputs_records, inputs_orphans;
	uint64_t inputs_cut, inputs_faults;
	/* --off-cpu: intervals off CPU seen, and those no op was open for
	 * (with their time); from BPF, switches of traced threads seen. */
	uint64_t off_cpu_intervals, off_cpu_outside_ops;
	uint64_t off_cpu_outside_ns, off_cpu_switches;
	uint64_t children_probed_late;	/* --children: probed after their
					 * fork, their first ops unseen and
					 * uncounted (entry probes) */
	uint64_t children_unprobed;	/* --children: never probed (gone
					 * before rfbpf reached them, or past
					 * its table): their ops unseen */
	uint64_t child_ops_missed;	/* --children: ops a child process
					 * began before it was traced */
	uint64_t off_cpu_by_reason_ns[RF_OFF_NR];
	uint64_t ops_outside_steps;	/* --steps, --from-step: ops that
					 * began outside the window of steps,
					 * in no output */
	uint64_t wakes;			/* by a traced thread */
	uint64_t wakes_in_ops;		/* of those, by one in an op */
	uint64_t mem_alloc_hits, mem_free_hits;	/* --memory, from BPF */
	uint64_t mem_sampled_full;	/* ... sampled blocks not sent: BPF's
					 * table of them was full */
};

/* An op that has just closed, as the consumers see it; valid only during
 * the call. frames are its stack as name ids, outermost first, ending
 * with its own name. */
struct closed_op {
	const struct op *op;
	/* Its duration and self time (duration minus its direct children's),
	 * less the probe cost they hold (trace.probe_cost): what the table,
	 * stacks and metrics count. The Chrome trace keeps the raw times,
	 * which nest. */
	uint64_t dur_ns;
	uint64_t self_ns;
	int64_t parent_id;	/* op.id of the enclosing op, -1 at top */
	uint32_t pid;		/* its process */
	const struct thread *thread;
	const uint32_t *frames;
	uint32_t depth;
	/* --off-cpu: its thread off CPU while it was the innermost op, and
	 * while it or any op below it was (0 without --off-cpu). */
	uint64_t self_off_cpu_ns, off_cpu_ns;
	/* --memory: bytes it allocated less those it freed, itself and with
	 * every op below it (torch.profiler's Self CPU Mem and CPU Mem; the
	 * device's for MEM_DEVICE). */
	int64_t self_mem[MEM_WHERE_NR], mem[MEM_WHERE_NR];
};

/* --off-cpu: an interval a traced thread spent off CPU; valid only
 * during the call. */
struct off_cpu_interval {
	uint32_t pid, tid;
	uint64_t start_ns, end_ns;
	uint32_t reason;		/* enum rf_off_cpu_reason */
	int64_t op_id;			/* the innermost op open, -1: none */
	uint32_t op_name;		/* its name id (UINT32_MAX: none) */
	uint32_t waker_tid, waker_pid;	/* 0: no wakeup seen */
	const char *waker_comm;
	int64_t waker_op_id;		/* the traced waker's op, -1: none */
	uint32_t waker_op_name;
	uint64_t wake_ns;
};
/* "preempted", "sleeping", "uninterruptible", "block I/O" */
const char *off_cpu_reason_name(unsigned reason);

/* GPU work that completed, joined to the launch that queued it (NULL if
 * none was seen); valid only during the call. */
struct gpu_done {
	const struct gpu_activity *act;
	const struct gpu_launch *launch;
	uint32_t pid;
};

/* What rfbpf's probes add to the times it records (0: not compensated):
 * per op inside its own interval, and the rest of its cost, outside it
 * but inside its parents'. */
struct probe_cost {
	uint64_t inside_ns, outside_ns;
	/* The calibration's spread: its rounds' range of inside_ns, and of
	 * the whole cost of an op (inside + outside). */
	uint64_t inside_lo_ns, inside_hi_ns, op_lo_ns, op_hi_ns;
};

struct trace;
/* A consumer of closed ops, of GPU activity and of the CUDA API calls the
 * agent reported (launches and syncs, as they come), of ops' Python
 * stacks and of thread exits (any may be NULL), called in the order they
 * were added. */
struct trace_sink {
	void (*op)(void *ctx, struct trace *t, const struct closed_op *c);
	void (*gpu)(void *ctx, struct trace *t, const struct gpu_done *g);
	/* A wait in a sync call as CUPTI timed it (kind RF_GPU_ACT_SYNC):
	 * no GPU work, so never handed to gpu. */
	void (*gpu_sync)(void *ctx, struct trace *t,
			 const struct gpu_done *g);
	void (*gpu_api)(void *ctx, struct trace *t,
			const struct gpu_launch *call);
	/* --python-stacks: the op just opened has its Python stack (its
	 * py_stack), and a thread exited (every op of it closed). */
	void (*py_stack)(void *ctx, struct trace *t, const struct op *o);
	void (*thread_exit)(void *ctx, struct trace *t, uint32_t tid);
	/* --off-cpu: a traced thread was off CPU. */
	void (*off_cpu)(void *ctx, struct trace *t,
			const struct off_cpu_interval *iv);
	/* Steps (trace.steps): a whole step in the window completed;
	 * called before the op that ended it is handed on. */
	void (*step)(void *ctx, struct trace *t, const struct step *s);
	/* --memory: an allocation or a free was charged. */
	void (*memory)(void *ctx, struct trace *t,
		       const struct mem_change *c);
	void *ctx;
};
#define TRACE_MAX_SINKS 8

struct trace {
	uint32_t pid;
	char process_name[64];
	char library[4096];	/* libtorch_cpu that was probed */
	char build[256];		/* what the symbols say about the build */
	char torch_version[64];	/* "2.14.1", "2.6.0+cu124"; "" unknown */
	char probes[64];	/* which probe path was used */
	struct op *ops;		/* slots of open ops (and free ones) */
	size_t cap_ops;
	uint32_t free_slot;	/* head of the free list, UINT32_MAX: none */
	size_t nr_open;		/* ops open now */
	uint64_t nr_ops;	/* ops opened so far (the next op's id) */
	struct names names;
	struct thread *threads;
	size_t nr_threads, cap_threads;
	struct u64map thread_index;	/* tid -> index in threads */
	struct u64map alive_at_start;	/* tids alive when tracing began */
	bool threads_listed;		/* alive_at_start was filled */
	struct u64map open;		/* rf_addr -> slot in ops */
	struct trace_sink sinks[TRACE_MAX_SINKS];
	int nr_sinks;
	uint32_t *frames;		/* scratch for closed_op.frames */
	uint32_t cap_frames;
	struct counts counts;
	uint64_t first_ns, last_ns;	/* span of events seen */
	double sample_prob;		/* 1.0 unless sampled */
	double tree_prob;		/* 1.0 unless --tree-sample */
	bool activated;			/* rfbpf registered the callback */
	bool fwd_threads;		/* backward ops' fwd_thread was read */
	struct probe_cost probe_cost;	/* calibrated on this host */
	char probe_cost_note[320];	/* why not compensated, if not */
	struct gpu gpu;			/* CUPTI agent activity, if any */
	/* How much a closed op's time counts against its parent's self time
	 * (NULL: 1, every op is recorded). Under sampling a recorded child
	 * stands for 1/p children: fleet mode weighs the children a window
	 * op has after its window closed (see fleet/job.c), so the op's self
	 * time is an unbiased estimate rather than one that keeps the
	 * unsampled children's time. */
	double (*child_weight)(void *ctx, const struct op *child);
	void *child_weight_ctx;
	/* --python-stacks: the places and stacks seen, and what names the
	 * frames BPF sends (py_resolver.gen NULL: stacks are off). */
	struct py_frames py;
	struct py_resolver py_resolver;
	bool off_cpu;			/* --off-cpu is on */
	bool children;			/* --children is on */
	/* --shapes: the input sets seen (nr_dtypes 0: shapes are off). */
	struct op_inputs inputs;
	/* --steps, --from-step, --per-step: the job's training steps, and
	 * the window of them the outputs get (NULL: no steps kept). */
	struct steps *steps;
	/* The job's rank and the rest, if it is distributed (model/
	 * distributed.h). */
	struct dist_info dist;
	/* --memory: live blocks, per-device totals (on: it is traced). */
	struct memory mem;
	uint32_t *chain;		/* scratch for trace_frames */
	uint32_t cap_chain;
	uint32_t *frame_inputs;		/* ... and its input sets */
	uint32_t cap_frame_inputs;
};

void trace_init(struct trace *t, uint32_t pid);
/* Registers a consumer; false if there are TRACE_MAX_SINKS already. */
bool trace_add_sink(struct trace *t, const struct trace_sink *sink);
/* The stack of the open op in slot, as name ids outermost first (it is
 * the last); the array is scratch, valid until the next call. With
 * Python stacks, each op's Python frames come before it, those it shares
 * with the op around it once (py_frames_loc tells them apart). */
const uint32_t *trace_frames(struct trace *t, uint32_t slot,
			     uint32_t *depth);
/* After trace_frames, each frame's input set (an id in trace.inputs, 0
 * for Python frames and ops without one), in the same scratch terms. */
static inline const uint32_t *trace_frame_inputs(const struct trace *t)
{
	return t->frame_inputs;
}
/* The process a thread belongs to (the target's pid if unknown). */
uint32_t trace_pid_of(const struct trace *t, uint32_t tid);
void trace_free(struct trace *t);
/* The thread with this tid, created on first sight (NULL on ENOMEM). */
struct thread *trace_thread(struct trace *t, uint32_t tid, bool *created);
/* Index of a thread in trace.threads, or -1 */
long trace_thread_index(const struct trace *t, uint32_t tid);
/* Drops an exited thread whose stack is empty (indexes of others move). */
void trace_forget_thread(struct trace *t, uint32_t tid);
/* The threads alive as tracing begins: a thread first seen later and
 * not among them counts as started while traced. */
void trace_threads_alive(struct trace *t, const uint32_t *tids, size_t n);
/* Under sampling, when enough of the recorded ops come from threads that
 * started while traced that PyTorch's per-thread sampler skews the
 * estimates: a line saying so in buf, and true. */
bool trace_sampler_bias_note(const struct trace *t, char *buf, size_t len);
/* Sets a thread's comm (and its id in names, unless it has a Python
 * name). */
void trace_name_thread(struct trace *t, struct thread *th, const char *comm);
/* Names a thread by its Python name (threading.Thread(name=...)): what
 * every output shows for it from now on. */
void trace_label_thread(struct trace *t, struct thread *th, const char *name);

/* The events, in ring-buffer order. before returns the op's slot, or -1
 * if it could not be opened. */
int32_t stacks_before(struct trace *t, const struct rf_event_hdr *h,
		      const char *name, int64_t seq);
/* A before event as BPF sends it: the op and its PyTorch thread ids. */
void stacks_before_event(struct trace *t, const struct rf_event_hdr *h,
			 const struct rf_before_event *e);
void stacks_end(struct trace *t, const struct rf_event_hdr *h);
void stacks_thread_exit(struct trace *t, uint32_t tid, uint64_t ts_ns);
/* rfbpf held thread tid from from_ns to to_ns (to re-register the
 * callback): the ops open on it that began before are paused that long,
 * so their time is the job's own. */
void stacks_pause(struct trace *t, uint32_t tid, uint64_t from_ns,
		  uint64_t to_ns);
/* The op open at rf_addr on thread tid (its slot in ops), or -1. */
int32_t stacks_open_op(const struct trace *t, uint32_t tid, uint64_t rf_addr);
/* The innermost op open on thread tid, or -1. */
int32_t stacks_innermost_op(const struct trace *t, uint32_t tid);
/* --off-cpu: a thread's interval off CPU, charged to its innermost open
 * op; a traced thread woke another. */
void stacks_off_cpu(struct trace *t, const struct rf_off_cpu_event *e);
void stacks_wake(struct trace *t, const struct rf_wake_event *e);
/* --shapes: an op's inputs, read at its start (size: the record's). */
void stacks_inputs(struct trace *t, const struct rf_inputs_event *e,
		   size_t size);
/* --python-stacks: the Python stack of the op just opened on its
 * thread (size: the record's bytes). It is also news about the ops open
 * below it: see stacks_py_context. */
void stacks_py_stack(struct trace *t, const struct rf_py_stack_event *e,
		     size_t size);
/* An op's Python context is the part of the stack it began in that is
 * still running when it ends: the frames common to its begin stack and
 * the stacks of every op begun on its thread while it is open (each
 * frame as py_frames_same_function tells it). A record_function scope
 * begins inside record_function.__enter__ (and torch/_ops.py), which
 * return long before it ends: the first op begun inside the scope shows
 * they are gone, and the scope's context becomes the frame holding the
 * `with` (or the decorator). Stack stack_id, just begun on thread th,
 * shortens the context (py_live) of each op open below it; an outer
 * op's context is always a prefix of an inner one's, so the walk stops
 * at the first op it leaves as it was. An op ending before any op shows
 * its frames returned keeps its whole stack (rfbpf sees no stack at an
 * op's end). A record_function scope's context begins without the
 * frames from __enter__ on (py_frames_enter_caller): they return before
 * it ends, whether or not an op inside it shows it. */
void stacks_py_context(struct trace *t, const struct thread *th,
		       uint32_t stack_id);
/* Tracing stopped: close every op still open at ts_ns. */
void stacks_detach(struct trace *t, uint64_t ts_ns);
/* A CUDA API call (a launch or a sync): tagged with the op open on its
 * thread (by BPF's rf_addr, else the innermost) and handed to the sinks;
 * a launch keeps that op's stack for its records. */
void trace_gpu_launch(struct trace *t, const struct rf_gpu_launch_event *e);
/* A GPU record: joined to its launch and handed to the sinks. */
void trace_gpu_activity(struct trace *t,
			const struct rf_gpu_activity_event *e);

/* Whether what began at ts reaches the sinks: outside the window of
 * steps asked for, nothing does. */
static inline bool trace_passes(const struct trace *t, uint64_t ts)
{
	return !t->steps || steps_pass(t->steps, ts);
}

/* The chance an op was recorded, for estimates over all ops. */
static inline double trace_keep_prob(const struct trace *t)
{
	return t->sample_prob * t->tree_prob;
}

/* Whether self time (and anything built on an op's children: stacks,
 * the op that launched a kernel) can be estimated from what was kept:
 * not when RecordFunction's sampler picked ops one by one. */
static inline bool trace_self_known(const struct trace *t)
{
	return t->sample_prob >= 1.0;
}
/* Why not, in one sentence, for footers and files. */
extern const char trace_self_unknown_why[];

/* How long it ran, without the time rfbpf held its thread. */
static inline uint64_t op_duration(const struct op *o)
{
	uint64_t d = o->end_ns > o->start_ns ? o->end_ns - o->start_ns : 0;

	return d > o->paused_ns ? d - o->paused_ns : 0;
}

/* at::RecordScope::USER_SCOPE: record_function("...") scopes. */
#define RF_SCOPE_USER 7

/* Scope names as Kineto and torch.profiler show them. */
const char *scope_name(uint8_t scope);
/* The Chrome-trace category for a scope ("cpu_op", "user_annotation"...). */
const char *scope_category(uint8_t scope);
const char *variant_name(unsigned variant);



/* One line listing every counter of things that did not pair cleanly or
 * were lost: the same wording in every output. */
void format_losses(const struct counts *c, char *buf, size_t len);
/* --python-stacks: a line of what was read and what could not be, with
 * the same wording in every output; false when stacks were off. */
/* --shapes: a line on the input records (read, cut, lost); false when
 * shapes are off. */
bool trace_inputs_note(const struct trace *t, char *buf, size_t len);
/* --off-cpu: a line on the intervals seen and their reasons; false when
 * it is off. */
bool trace_off_cpu_note(const struct trace *t, char *buf, size_t len);
bool trace_python_note(const struct trace *t, char *buf, size_t len);
/* Ops whose end was not their own end() call (the LOSS_CUT rows). */
uint64_t counts_truncated(const struct counts *c);

/* model/loss_counters.h's rows, for the outputs to walk. */
struct loss_counter {
	size_t offset;		/* of its field in struct counts */
	enum loss_kind kind;
	const char *json, *reason, *words;
};
extern const struct loss_counter loss_counters[];
extern const size_t nr_loss_counters;

static inline uint64_t loss_count(const struct counts *c,
				  const struct loss_counter *l)
{
	return *(const uint64_t *)((const char *)c + l->offset);
}
#endif
