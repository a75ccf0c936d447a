// SPDX-License-Identifier: BSD-2-Clause
#include <math.h>
#include "budget.h"

static double clamp(double x, double lo, double hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

static void plan_ops(const struct budget_input *in, struct budget_plan *out)
{
	double f, u = in->cpu_rate, t = in->interval_s;
	double b = in->budget - in->fixed_share;
	double h = in->hold_s > 0 ? in->hold_s : BUDGET_FIRST_HOLD_S;
	double half, k;

	out->full_cost = 0;
	out->span = 1;
	if (b < 0)	/* the fixed costs alone are over budget: the least */
		b = 0;
	if (!(in->op_rate > 0) || !(u > 0) || !(in->cost_ns > 0)) {
		/* Nothing measured yet (or an idle job): stay cheap. */
		out->sample_prob = BUDGET_FIRST_PROB;
		out->window_s = 0;
		out->est_overhead = 0;
		return;
	}
	f = in->op_rate * in->cost_ns * 1e-9 / u;
	out->full_cost = f;
	if (f <= b) {			/* every op fits */
		out->sample_prob = 1;
		out->window_s = t;
		out->est_overhead = f;
		return;
	}
	/* One interval's half budget, in the job's CPU seconds, and how many
	 * intervals it takes to pay for the shortest window and its stops. */
	half = b / 2 * t * u;
	k = ceil((BUDGET_MIN_WINDOW_S * f * u + 2 * h) / half);
	if (k > BUDGET_MAX_SPAN) {	/* windows cost too much here */
		out->sample_prob = clamp(b / f, BUDGET_MIN_PROB, 1);
		out->window_s = 0;
		out->est_overhead = f * out->sample_prob;
		return;
	}
	out->span = k < 1 ? 1 : (unsigned)k;
	out->sample_prob = clamp(b / 2 / f, BUDGET_MIN_PROB, 1);
	out->window_s = fmin((out->span * half - 2 * h) / (f * u),
			     out->span * t);
	out->est_overhead = f * out->sample_prob *
			    (1 - out->window_s / (out->span * t)) +
			    (out->window_s * f * u + 2 * h) /
			    (out->span * t * u);
}

void budget_plan(const struct budget_input *in, struct budget_plan *out)
{
	plan_ops(in, out);
	out->est_overhead += in->fixed_share;
	out->fixed_share = in->fixed_share;
}

bool budget_should_change(double current_p, double wanted_p)
{
	return wanted_p > 2 * current_p || wanted_p < current_p / 2;
}
