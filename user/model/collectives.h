/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Collectives: the process group's work as torch.profiler shows it
 * ("gloo:all_reduce", "nccl:all_reduce", 2.x's "record_param_comms"),
 * summed by name for the table's collectives block, the fleet metrics and
 * the straggler table. A collective's time runs from when its work began
 * to when it completed, so it holds the wait for the slowest rank: a late
 * rank waits little, its peers wait long. Its bytes are its tensors'
 * (its inputs, read for collectives with or without --shapes).
 *
 * A trace sink; with steps (model/steps.h) it also keeps, per step, the
 * step's time and the collective time in it.
 */
#ifndef RFBPF_MODEL_COLLECTIVES_H
#define RFBPF_MODEL_COLLECTIVES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "trace.h"

struct collective_row {
	uint32_t name;		/* id in trace.names */
	uint64_t calls, dur_ns;
	uint64_t bytes, elems;	/* of the calls whose tensors were read */
	uint64_t unsized;	/* calls without: no input record, or one cut
				 * short */
};

#define COLLECTIVE_STEPS_MAX 1000

struct collective_step {
	int64_t number;
	uint64_t dur_ns;	/* 0 while it runs */
	uint64_t coll_ns;	/* collectives begun in it */
};

struct collectives {
	struct collective_row *rows;
	size_t nr, cap;
	struct collective_step *steps;
	size_t nr_steps, cap_steps;
	uint64_t steps_past_max;
};

/* Whether an op of this name is a collective. */
bool collective_name(const char *name);

void collectives_init(struct collectives *c);
struct trace_sink collectives_sink(struct collectives *c);
/* The rows by time, most first (in place). */
void collectives_sort(struct collectives *c);
void collectives_free(struct collectives *c);

#endif
