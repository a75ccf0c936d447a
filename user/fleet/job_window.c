// SPDX-License-Identifier: BSD-2-Clause
/*
 * A job's full-trace windows (and --bursts' measured parts): what each op
 * gives the window's self times and stacks, and the window's length, which
 * the self times are scaled by at the interval's end (job.c).
 */
#include "fleet/job_ops.h"
#include "fleet/job_window.h"
#include "model/profile_sink.h"

/* An op's part of the window: its self time there to its name and its
 * stack (window_self.h), and its call if it began there. */
void job_window_add(void *ctx, struct trace *t, const struct closed_op *c,
		    uint64_t self_ns, uint64_t calls)
{
	struct job *j = ctx;
	struct closed_op part = *c;

	part.self_ns = self_ns;
	aggregate_add(&j->window_agg, &part);
	if (j->bursts) {
		struct job_op *r = job_op_row(j, c->op->name);

		if (r)
			job_op_burst_add(j, r, BURST_SELF, self_ns * 1e-9);
	}
	profile_add_op_part(&j->window_stacks, t, &part, calls);
}

/* The window's seconds since `from`, into the span's and the interval's
 * totals. */
void job_window_count(struct job *j, uint64_t from, uint64_t to)
{
	double d = to > from ? (to - from) * 1e-9 : 0;

	j->window_time += d;
	j->window_in_interval += d;
}
