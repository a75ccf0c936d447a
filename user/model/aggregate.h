/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Per-op statistics as torch.profiler's key_averages(): calls, total time,
 * self time (total minus the time of direct children on the same thread),
 * min, max and a latency histogram. A trace sink: each closed op is added
 * to its name's row and forgotten, so the size is the number of names.
 */
#ifndef RFBPF_AGGREGATE_H
#define RFBPF_AGGREGATE_H

#include <stdint.h>
#include "trace.h"

/* How the table is ordered (--sort): one key per column. */
enum sort_key { SORT_SELF, SORT_TOTAL, SORT_CALLS, SORT_CUDA, SORT_AVG,
		SORT_MIN, SORT_MAX, SORT_SELF_CUDA, SORT_KERNELS, SORT_NAME,
		SORT_GPU_WAIT };

/* Upper bounds of the latency histogram (seconds), as Prometheus's "le";
 * the last bucket is +Inf. */
#define AGG_LATENCY_BUCKETS 9
extern const double agg_latency_bounds_s[AGG_LATENCY_BUCKETS - 1];
/* The bucket a duration falls in (bounds inclusive, as "le"). */
unsigned agg_latency_bucket(uint64_t ns);

struct op_stats {
	uint32_t name;
	uint32_t group;		/* grouped by stack: the Python frames it is
				 * grouped by (a stack id in trace.py), 0 if
				 * none or not grouped */
	uint32_t shapes;	/* grouped by shapes: its Input Dims (an id
				 * in trace.names) + 1, 0 if none recorded
				 * or not grouped */
	/* --off-cpu: its threads off CPU while it was the innermost op,
	 * and while it or an op below it was. */
	uint64_t self_off_cpu_ns, off_cpu_ns;
	/* --memory: bytes its calls allocated less those they freed, by
	 * themselves and with every op below them (per enum mem_where). */
	int64_t self_mem[MEM_WHERE_NR], mem[MEM_WHERE_NR];
	uint8_t scope;		/* scope of its first call */
	uint64_t calls;
	uint64_t total_ns, self_ns;
	uint64_t truncated;	/* calls whose end was not their own end() */
	/* Calls that ended with their own end(): a call cut short (at
	 * detach, thread exit...) has no duration of its own to give. */
	uint64_t ended, ended_ns, min_ns, max_ns;
	/* For standard errors: sums over the units that were sampled
	 * (each op under --sample, each top-level tree under --tree-sample)
	 * of the square of what the unit added to this row. */
	double calls_sq, total_sq, self_sq;
	uint64_t latency[AGG_LATENCY_BUCKETS];	/* calls per bucket (not
						 * cumulative) */
	/* GPU activity its calls launched: directly (self) or through any
	 * op nested in them (total), and the kernels launched directly. */
	uint64_t gpu_self_ns, gpu_total_ns, kernels;
	/* Time its calls spent in CUDA synchronize calls (stream, event,
	 * context, device), made in them or in any op nested in them: the
	 * CPU waiting on the GPU. */
	uint64_t gpu_wait_ns;
};

/*
 * What a sampled capture says about all ops. Each unit (an op under
 * --sample, a whole top-level tree under --tree-sample) was kept with
 * probability p, independently, so counts and sums scale by 1/p
 * (Horvitz-Thompson) and their variance is estimated from the kept units'
 * squares. Self time is an estimate only when whole trees were kept:
 * RecordFunction's own sampler drops the children it did not pick, whose
 * time then stays in the parent (see aggregate_self_known).
 */
struct op_estimate {
	double calls, calls_se;
	double total_ns, total_se;
	double self_ns, self_se;
};
void estimate_op(const struct op_stats *r, double p, struct op_estimate *e);

/* What the tree open on one thread has added to each row so far. */
struct tree_part {
	uint32_t row;
	uint64_t calls, total_ns, self_ns;
};
struct open_tree {
	uint32_t tid;
	struct tree_part *parts;
	size_t nr, cap;
};

/* --off-cpu: a thread in op `waker` woke a thread off CPU in op `woken`
 * (name ids) this many times; the woken threads' intervals off CPU. */
struct waker_pair {
	uint32_t waker, woken;
	uint64_t wakes, off_cpu_ns;
};

/* --off-cpu: a thread's time off CPU with no op open, by reason (on
 * torch 1.13 every GIL wait falls there: no op column shows it). */
struct idle_thread {
	uint32_t pid, tid;
	uint32_t name;		/* its name when last seen, id in names */
	uint64_t intervals;
	uint64_t ns[RF_OFF_NR];
	uint64_t total_ns;
};

struct aggregate {
	struct op_stats *rows;	/* indexed by name id */
	/* by_tree: squares are taken per top-level tree, not per op */
	bool by_tree;
	struct open_tree *trees;	/* one per thread with an open tree */
	size_t nr_trees, cap_trees;
	size_t nr, cap;
	uint64_t self_ns;	/* sum of every op's self time */
	uint64_t gpu_self_ns;	/* GPU time attributed to some op */
	size_t nr_called;	/* rows with calls (not kernel names) */
	bool oom;		/* a row could not be added */
	/* --group-by stack:N: a row per op and its innermost group_n
	 * Python frames (rows then in order of first sight, keyed in
	 * group_index by name and group), as group_by_stack_n. */
	unsigned group_n;
	struct py_frames *group_py;	/* where the groups are interned */
	struct u64map group_index;
	/* --group-by shapes: a row per op and its Input Dims too, as
	 * group_by_input_shape (with stacks: per both). */
	const struct op_inputs *group_inputs;
	struct u64map group_pairs;	/* (stack, shapes) + 1 -> its number */
	/* --off-cpu: which op woke which (by name), in order of first
	 * sight, keyed in waker_index by the pair. */
	struct waker_pair *wakers;
	size_t nr_wakers, cap_wakers;
	struct u64map waker_index;
	/* --off-cpu: threads off CPU outside ops, keyed by tid + 1 */
	struct idle_thread *idle;
	size_t nr_idle, cap_idle;
	struct u64map idle_index;
};

void aggregate_init(struct aggregate *a);
/* Standard errors per top-level tree (--tree-sample keeps whole trees,
 * so the ops of one tree are not independent). */
void aggregate_by_tree(struct aggregate *a);

/* Rows per op and its n innermost Python frames (interned in py), as
 * key_averages(group_by_stack_n=n). */
void aggregate_group_by_stack(struct aggregate *a, struct py_frames *py,
			      unsigned n);
/* Rows per op and its input dims (the sets in inputs), as
 * key_averages(group_by_input_shape=True). */
void aggregate_group_by_shapes(struct aggregate *a,
			       const struct op_inputs *inputs);
/* The sink that feeds a (closed ops and GPU activity). */
struct trace_sink aggregate_sink(struct aggregate *a);
/* Adds one closed op (what the sink does). */
void aggregate_add(struct aggregate *a, const struct closed_op *c);
/* The rows with calls or GPU time, ordered by key, heaviest first (by
 * name: A to Z, with names from t): a malloc'd copy (*nr rows), NULL on
 * ENOMEM. */
struct op_stats *aggregate_sorted(const struct aggregate *a,
				  const struct trace *t, enum sort_key key,
				  size_t *nr);
/* Forgets every row (a new interval), keeping the memory. */
void aggregate_reset(struct aggregate *a);
void aggregate_free(struct aggregate *a);

#endif
