/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The overhead budget: how much of a job to trace so that tracing costs it
 * at most a share of its CPU time.
 *
 * Tracing one op costs c: the job's thread pays two optimized uprobe hits
 * with rfbpf's programs (calibrated on this host at start), and rfbpf
 * pays for reading the op (measured per job, since rfbpf shares the
 * job's CPUs and that cost is charged to the job's budget). A job running
 * r ops/s on u CPUs would pay f = r c / u of its CPU time if every op were
 * traced. Half the budget B goes to RecordFunction sampling at p = B/2f
 * (counts and inclusive times: unbiased at any p), half to full-trace
 * windows (stacks and self time, which sampled ops cannot give). A window
 * of L seconds costs L f u of CPU plus the two re-registrations that open
 * and close it, each stopping one thread for h: when one interval's half
 * budget cannot pay for a window of at least BUDGET_MIN_WINDOW_S, a window
 * stands for a span of several intervals, placed at random in the span.
 */
#ifndef RFBPF_BUDGET_H
#define RFBPF_BUDGET_H

#include <stdbool.h>

/* Before a job's rate is known: cheap for any job (0.1% of its ops). */
#define BUDGET_FIRST_PROB 0.001
/* Shorter full-trace windows hold too few ops to be worth two stops. */
#define BUDGET_MIN_WINDOW_S 0.002
/* A window stands for at most this many intervals; beyond, no windows,
 * and the whole budget goes to sampling. */
#define BUDGET_MAX_SPAN 60
/* What a re-registration stops a thread for, until one was measured. */
#define BUDGET_FIRST_HOLD_S 0.01
/* --off-cpu: what one context switch of a traced thread costs (the
 * switch program, its record, the loader reading it), an estimate from
 * bench/off_cpu_cost.py's program run times and the loader's per-event
 * cost, on the high side. */
#define BUDGET_OFF_CPU_NS_PER_SWITCH 1000.0
/* --memory: what one allocator probe hit costs the job (an int3 uprobe
 * and, when sampled, a record). bench/memory_cost.py measured 2.07 us
 * for an allocation and its free together on this VM. */
#define BUDGET_MEMORY_NS_PER_HIT 1000.0
/* Sampling never goes below this: RecordFunction's sampler needs p > 0,
 * and below it a job's counts would rest on a handful of ops. */
#define BUDGET_MIN_PROB 1e-5

struct budget_input {
	double cost_ns;		/* one traced op: to the job (calibrated)
				 * and to rfbpf reading it (measured) */
	double op_rate;		/* the job's ops per second, all of them */
	double cpu_rate;	/* the job's CPU seconds per second */
	double budget;		/* share of its CPU time, e.g. 0.01 */
	double interval_s;
	double hold_s;		/* one re-registration's stop, measured (0:
				 * not yet) */
	double fixed_share;	/* share of its CPU that tracing costs
				 * whatever is sampled (--off-cpu's
				 * scheduler programs, rfbpf's own CPU
				 * beyond reading events): taken from the
				 * budget first */
};

struct budget_plan {
	double sample_prob;	/* RecordFunction's sampling outside windows */
	double window_s;	/* full-trace window (0: none; the whole span
				 * when the job fits) */
	unsigned span;		/* intervals the window stands for */
	double full_cost;	/* f: share of its CPU a full trace costs */
	double est_overhead;	/* share of its CPU this plan costs, stops
				 * included */
	double fixed_share;	/* of it, what tracing costs whatever is
				 * traced (the input's) */
};

void budget_plan(const struct budget_input *in, struct budget_plan *out);
/* The rule for re-registering: the wanted probability differs from the
 * current one by more than 2x (callers ask at most once per interval). */
bool budget_should_change(double current_p, double wanted_p);

#endif
