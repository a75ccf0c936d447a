/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Per-op statistics over a finished trace, as torch.profiler's
 * key_averages(): calls, total time, self time (total minus the time of
 * direct children on the same thread), min and max.
 */
#ifndef RFBPF_AGGREGATE_H
#define RFBPF_AGGREGATE_H

#include <stdint.h>
#include "trace.h"

/* How the table is ordered (--sort). */
enum sort_key { SORT_SELF, SORT_TOTAL, SORT_CALLS, SORT_CUDA };

struct op_stats {
	uint32_t name;
	uint8_t scope;		/* scope of its first call */
	uint64_t calls;
	uint64_t total_ns, self_ns, min_ns, max_ns;
	uint64_t truncated;	/* calls whose end was not their own end() */
	double total_sq, self_sq;	/* sums of squares, ns^2 (for SEs) */
	/* GPU activity its calls launched: directly (self) or through any
	 * op nested in them (total), and the kernels launched directly. */
	uint64_t gpu_self_ns, gpu_total_ns, kernels;
};

/*
 * What a sampled capture says about all ops: RecordFunction kept each op
 * with probability p, so counts and sums scale by 1/p (Horvitz-Thompson),
 * and their standard errors come from the same sample.
 */
struct op_estimate {
	double calls, calls_se;
	double total_ns, total_se;
	double self_ns, self_se;
};
void estimate_op(const struct op_stats *r, double p, struct op_estimate *e);

struct aggregate {
	struct op_stats *rows;	/* one per name seen */
	size_t nr;
	uint64_t self_ns;	/* sum of every op's self time */
	uint64_t gpu_self_ns;	/* GPU time attributed to some op */
	size_t nr_called;	/* rows with calls (not kernel names) */
};

/* Self time of every op (index as trace.ops); NULL on ENOMEM. */
uint64_t *op_self_times(const struct trace *t);
/* GPU time launched by each op directly and with its descendants, and its
 * kernel count (index as trace.ops); -1 on ENOMEM. */
int op_gpu_times(const struct trace *t, uint64_t **self, uint64_t **total,
		 uint64_t **kernels);
int aggregate_ops(const struct trace *t, struct aggregate *a);
void aggregate_sort(struct aggregate *a, enum sort_key key);
void aggregate_free(struct aggregate *a);

#endif
