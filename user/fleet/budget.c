// SPDX-License-Identifier: BSD-2-Clause
#include "budget.h"

static double clamp(double x, double lo, double hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

void budget_plan(const struct budget_input *in, struct budget_plan *out)
{
	double f, w;

	out->full_cost = 0;
	if (!(in->op_rate > 0) || !(in->cpu_rate > 0) || !(in->cost_ns > 0)) {
		/* Nothing measured yet (or an idle job): stay cheap. */
		out->sample_prob = BUDGET_FIRST_PROB;
		out->window_s = 0;
		out->est_overhead = 0;
		return;
	}
	f = in->op_rate * in->cost_ns * 1e-9 / in->cpu_rate;
	out->full_cost = f;
	if (f <= in->budget) {		/* every op fits */
		out->sample_prob = 1;
		out->window_s = in->interval_s;
		out->est_overhead = f;
		return;
	}
	w = in->budget / 2 / f;
	out->window_s = w * in->interval_s;
	if (out->window_s < BUDGET_MIN_WINDOW_S) {
		out->window_s = 0;
		w = 0;
		out->sample_prob = clamp(in->budget / f, BUDGET_MIN_PROB, 1);
	} else {
		out->sample_prob = clamp(in->budget / 2 / f, BUDGET_MIN_PROB,
					 1);
	}
	out->est_overhead = f * (out->sample_prob * (1 - w) + w);
}

bool budget_should_change(double current_p, double wanted_p)
{
	return wanted_p > 2 * current_p || wanted_p < current_p / 2;
}
