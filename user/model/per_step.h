/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * --per-step: an aggregate of ops (as the table's) for each training
 * step, an op counted in the step it began in (model/steps.h tells which,
 * on any thread). A trace sink; a run of very many steps keeps the first
 * PER_STEP_MAX and counts the ops of the rest as not shown.
 */
#ifndef RFBPF_MODEL_PER_STEP_H
#define RFBPF_MODEL_PER_STEP_H

#include <stddef.h>
#include <stdint.h>
#include "aggregate.h"
#include "steps.h"
#include "trace.h"

#define PER_STEP_MAX 1000

struct step_block {
	struct step step;	/* end_ns 0 while it runs */
	struct aggregate agg;
};

struct per_step {
	struct step_block *blocks;
	size_t nr, cap;
	uint64_t ops_between;	/* began between steps (not in any) */
	uint64_t ops_past_max;	/* in steps past PER_STEP_MAX */
};

void per_step_init(struct per_step *p);
struct trace_sink per_step_sink(struct per_step *p);
void per_step_free(struct per_step *p);

#endif
