// SPDX-License-Identifier: BSD-2-Clause
/* The overhead budget (user/fleet/budget.c): every plan it makes stays
 * within the budget, stops included, and it spends what it may. */
#include <math.h>
#include "check.h"
#include "fleet/budget.h"

static struct budget_plan plan_h(double cost_ns, double rate, double cpu,
				 double budget, double hold_s)
{
	struct budget_input in = {
		.cost_ns = cost_ns, .op_rate = rate, .cpu_rate = cpu,
		.budget = budget, .interval_s = 60, .hold_s = hold_s,
	};
	struct budget_plan p;

	budget_plan(&in, &p);
	return p;
}

static struct budget_plan plan(double cost_ns, double rate, double cpu,
			       double budget)
{
	return plan_h(cost_ns, rate, cpu, budget, 0.005);
}

TEST(unknown_rate_starts_cheap)
{
	struct budget_plan p = plan(1000, 0, 1, 0.01);

	CHECK(p.sample_prob == BUDGET_FIRST_PROB);
	CHECK(p.window_s == 0);
}

TEST(a_job_that_fits_is_traced_whole)
{
	/* 1000 ops/s at 1 us on one CPU: 0.1% < 1%. */
	struct budget_plan p = plan(1000, 1000, 1, 0.01);

	CHECK(p.sample_prob == 1);
	CHECK(p.window_s == 60);
	CHECK(fabs(p.est_overhead - 0.001) < 1e-12);
}

TEST(busy_job_splits_the_budget)
{
	/* 200k ops/s at 2 us on one CPU: a full trace would cost 40%. Half
	 * of 1% of 60 s is 0.3 CPU-s: 10 ms of stops, 0.29 s of window at
	 * f = 0.4, so a 0.725 s window every interval. */
	struct budget_plan p = plan(2000, 200000, 1, 0.01);

	CHECK(fabs(p.full_cost - 0.4) < 1e-12);
	CHECK(fabs(p.sample_prob - 0.0125) < 1e-12);
	CHECK(p.span == 1);
	CHECK(fabs(p.window_s - 0.725) < 1e-9);
	CHECK(p.est_overhead <= 0.01 + 1e-12);
	CHECK(p.est_overhead > 0.0099);
}

TEST(costly_windows_stand_for_several_intervals)
{
	/* 1 CPU, f = 100: the shortest window (2 ms) costs 0.2 CPU-s plus
	 * 2 stops of 50 ms; half the budget is 0.3 CPU-s an interval. */
	struct budget_plan p = plan_h(1000, 1e8, 1, 0.01, 0.05);

	CHECK_EQ_U64(p.span, 2);
	CHECK(fabs(p.window_s - (0.6 - 0.1) / 100) < 1e-12);
	CHECK(p.est_overhead <= 0.01 + 1e-12);
}

TEST(windows_beyond_reach_go_to_sampling)
{
	/* Stops of 10 s (a job that seldom reaches a safe point) do not fit
	 * in 60 intervals' half budgets. */
	struct budget_plan p = plan_h(2000, 200000, 1, 0.01, 10);

	CHECK(p.window_s == 0);
	CHECK(fabs(p.sample_prob - 0.025) < 1e-12);
	CHECK(p.est_overhead <= 0.01 + 1e-12);
}

TEST(every_plan_is_within_budget)
{
	for (double rate = 10; rate < 1e9; rate *= 3.7)
		for (double cpu = 0.05; cpu < 64; cpu *= 2.3)
			for (double b = 0.001; b <= 0.5; b *= 4)
				for (double h = 0.001; h < 1; h *= 10) {
					struct budget_plan p = plan_h(1300, rate,
								      cpu, b, h);

					CHECK(p.est_overhead <= b * (1 + 1e-9) ||
					      p.sample_prob == BUDGET_MIN_PROB);
					CHECK(p.sample_prob > 0 &&
					      p.sample_prob <= 1);
					CHECK(p.window_s >= 0 &&
					      p.window_s <= 60.0 * p.span);
					CHECK(p.span >= 1 &&
					      p.span <= BUDGET_MAX_SPAN);
				}
}

/* --off-cpu's scheduler programs cost the job whatever is sampled: that
 * share comes off the budget first, and the plan's estimate includes it. */
TEST(fixed_costs_come_off_the_budget)
{
	struct budget_input in = {
		.cost_ns = 2000, .op_rate = 1e6, .cpu_rate = 1,
		.budget = 0.01, .interval_s = 60, .hold_s = 0.005,
	};
	struct budget_plan free_of, with;

	budget_plan(&in, &free_of);
	in.fixed_share = 0.004;
	budget_plan(&in, &with);
	CHECK(with.sample_prob < free_of.sample_prob);
	CHECK(with.est_overhead <= in.budget + 1e-9);
	CHECK(with.est_overhead >= in.fixed_share);
	/* handed on, for --bursts to take off its own budget */
	CHECK(with.fixed_share == in.fixed_share);
	CHECK(free_of.fixed_share == 0);
	in.fixed_share = 0.02;		/* over budget by itself */
	budget_plan(&in, &with);
	CHECK(with.sample_prob <= BUDGET_MIN_PROB * 1.0001);
	CHECK(with.window_s == 0);
}

TEST(reregister_only_on_a_2x_change)
{
	CHECK(!budget_should_change(0.01, 0.015));
	CHECK(!budget_should_change(0.01, 0.006));
	CHECK(!budget_should_change(0.01, 0.02));
	CHECK(budget_should_change(0.01, 0.021));
	CHECK(budget_should_change(0.01, 0.0049));
}

RUN_TESTS()
