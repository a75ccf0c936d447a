// SPDX-License-Identifier: BSD-2-Clause
/*
 * --bursts: a job traced in many short bursts at random moments, switched
 * by the control thread rfbpf starts in it (attach/control_thread.h), with
 * no callback registered in between, so that between bursts the job pays
 * nothing (docs/fleet.md, "Bursts").
 *
 * The interval is cut into K strata of length S; each gets one burst whose
 * measured part [a, b) (BURST_MEASURED_NS) starts at a uniformly random
 * moment of its stratum, leaving BURST_GAP_NS before the next stratum.
 * The callback goes on BURST_LEAD_NS before a: the thread wakes late by
 * up to a millisecond, and an op open when the callback came is not seen,
 * so measuring starts after the ops open then had time to end (the guard
 * of window_self.h). Self time inside [a, b) is counted by time
 * (window_self.h) and scaled by the interval over the measured time
 * (job.c), and an op that began in a measured part counts S / (b - a)
 * calls (job_bursts_weight).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "model/clocks.h"
#include "fleet/budget.h"
#include "attach/target.h"
#include "fleet/job_bursts.h"
#include "fleet/job_ops.h"
#include "fleet/job_window.h"

#define BURST_MEASURED_NS	8000000ull
#define BURST_LEAD_NS		3000000ull
#define BURST_GAP_NS		30000000ull
/* rfbpf reads a burst's events this long after it: time for the ops
 * closed in it to reach the ring buffer */
#define BURST_DRAIN_NS		5000000ull
/* the interval's end is left free: its last burst is read before it */
#define BURST_TAIL_NS		30000000ull
/* A registration change makes each thread's next op rebuild its callback
 * lists (recordfunction-costs.md: about 1-2 us, inferred, not measured
 * from outside): charged per thread and switch. */
#define BURST_REBUILD_NS	2000.0

/* How many bursts the budget pays for in an interval: a burst costs the
 * job the full trace's share f of its CPU for its on-time, plus two
 * switches (each thread's next op rebuilds its callback lists). */
static size_t bursts_for(const struct budget_plan *plan, double budget,
			 double interval_s)
{
	double on_s = (BURST_MEASURED_NS + BURST_LEAD_NS) * 1e-9;
	double f = plan->full_cost > 0.02 ? plan->full_cost : 0.02;
	double k = floor(budget * interval_s / (f * on_s));
	double most = (interval_s - BURST_TAIL_NS * 1e-9) /
		      ((BURST_MEASURED_NS + BURST_LEAD_NS + BURST_GAP_NS) *
		       1e-9);

	if (k > most)
		k = most;
	if (k > JOB_MAX_BURSTS)
		k = JOB_MAX_BURSTS;
	return k < 1 ? 1 : (size_t)k;
}

/*
 * What the plan costs the job, as a share of its CPU: the bursts' traced
 * ops at the full trace's share f (the calibrated probe cost and rfbpf's
 * own CPU per op read), and two switches each, at the control thread's
 * measured CPU per switch plus every thread's rebuild.
 */
static double plan_cost(struct job *j, const struct budget_plan *plan,
			size_t k, double interval_s)
{
	double on_s = (BURST_MEASURED_NS + BURST_LEAD_NS) * 1e-9;
	double u = j->cpu_rate > 0 ? j->cpu_rate : 1;
	uint32_t *tids;
	size_t threads = target_threads(j->proc.pid, &tids);
	double sw;

	free(tids);
	sw = 2 * (j->switch_ns + threads * BURST_REBUILD_NS) * 1e-9;
	return k * (on_s * plan->full_cost + sw / u) / interval_s;
}

void job_bursts_measure(struct job *j)
{
	uint64_t cpu, sw;

	if (control_thread_cpu(&j->s.control, &cpu, &sw))
		return;
	if (sw > j->ctl_switches_prev && cpu >= j->ctl_cpu_prev) {
		double c = (double)(cpu - j->ctl_cpu_prev) /
			   (sw - j->ctl_switches_prev);

		j->switch_ns = j->switch_ns > 0 ? 0.7 * j->switch_ns + 0.3 * c :
			       c;
	}
	j->ctl_cpu_prev = cpu;
	j->ctl_switches_prev = sw;
}

void job_bursts_plan(struct job *j, const struct budget_plan *plan,
		     double interval_s, double now)
{
	/* what tracing costs whatever is traced comes off the budget first
	 * (rfbpf's own CPU beyond reading, --off-cpu's programs) */
	double budget = j->opt.budget_pct / 100 - plan->fixed_share;
	size_t k = bursts_for(plan, budget > 0 ? budget : 0, interval_s);
	uint64_t t0 = (uint64_t)(now * 1e9);
	uint64_t span = (uint64_t)(interval_s * 1e9) - BURST_TAIL_NS;
	uint64_t s = span / k;
	uint64_t room = s - BURST_MEASURED_NS - BURST_LEAD_NS - BURST_GAP_NS;

	j->nr_bursts = j->next_open = j->next_close = 0;
	j->nr_periods = j->next_period = 0;
	j->period_seq0 = j->s.control.written;
	for (size_t i = 0; i < k; i++) {
		struct job_burst *b = &j->burst[j->nr_bursts++];

		b->a = t0 + i * s + BURST_LEAD_NS +
		       (uint64_t)(drand48() * room);
		b->b = b->a + BURST_MEASURED_NS;
		b->on = b->a - BURST_LEAD_NS;
		b->opened = b->closed = false;
		j->period[j->nr_periods++] = (struct control_burst){
			b->on, b->b };
	}
	j->burst_weight = (double)s / BURST_MEASURED_NS;
	j->est_overhead = plan_cost(j, plan, k, interval_s) +
			  plan->fixed_share;
	j->span_start = now;
	j->span_s = interval_s;
	j->whole_interval = false;
}

/* Called for every op closed, so a binary search: the bursts are in
 * time order (one per stratum). */
double job_bursts_weight(const struct job *j, uint64_t ts)
{
	size_t lo = 0, hi = j->nr_bursts;

	while (lo < hi) {		/* the first burst ending after ts */
		size_t mid = lo + (hi - lo) / 2;

		if (j->burst[mid].b <= ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < j->nr_bursts && ts >= j->burst[lo].a ? j->burst_weight :
	       0;
}

void job_burst_open(struct job *j, const struct job_burst *b)
{
	j->win_on_ns = b->on;
	j->win_off_ns = UINT64_MAX;
	j->run_from_ns = b->a;
	/* b is known: the callback goes off at b at the earliest, and the
	 * ops its events bring until the cut (BURST_DRAIN_NS later) count
	 * up to b only. */
	window_self_open(&j->self, b->on, b->a, b->b);
	j->in_window = true;
	j->windows++;
}

void job_burst_close(struct job *j, const struct job_burst *b)
{
	j->win_off_ns = b->b;
	j->in_window = false;
	window_self_end_at(&j->self, b->b);
	job_window_count(j, b->a, b->b);
	window_self_cut(&j->self, &j->s.trace, job_window_add, j);
	job_ops_burst_fold(j);
}

/* Hands the thread the bursts its ring has room for. */
static void write_periods(struct job *j)
{
	size_t room = control_thread_room(&j->s.control);

	while (room-- && j->next_period < j->nr_periods) {
		const struct control_burst *p = &j->period[j->next_period];

		if (control_thread_add_burst(&j->s.control, p->on_ns,
					     p->off_ns))
			break;
		j->next_period++;
	}
}

/* What the thread did: bursts it skipped (the job's CPUs too busy to run
 * it before its end), and bursts it switched on after its measured part
 * began (a burst late by more than the lead: ops open then lose some of
 * their self time). Both are counted, not corrected. */
static void read_results(struct job *j)
{
	struct control_result r[CONTROL_BURSTS];
	int n = control_thread_results(&j->s.control, r, CONTROL_BURSTS);

	for (int i = 0; i < n; i++) {
		uint64_t k = r[i].seq - 1 - j->period_seq0;

		j->bursts_total++;
		if (!r[i].on_ns)
			j->bursts_skipped++;
		else if (k < j->nr_periods &&
			 r[i].on_ns > j->period[k].on_ns + BURST_LEAD_NS)
			j->bursts_late++;
	}
}

void job_bursts_poll(struct job *j)
{
	uint64_t now = monotonic_ns();

	/* its lease is the daemon's lease keeper's (fleet/lease_keeper.h) */
	write_periods(j);
	read_results(j);
	/* the burst measured last: its events are in, it is cut at b */
	while (j->next_close < j->next_open &&
	       now >= j->burst[j->next_close].b + BURST_DRAIN_NS) {
		struct job_burst *b = &j->burst[j->next_close++];

		job_burst_close(j, b);
	}
	if (j->next_open == j->next_close && j->next_open < j->nr_bursts &&
	    now >= j->burst[j->next_open].on)
		job_burst_open(j, &j->burst[j->next_open++]);
}

double job_bursts_next_wakeup(const struct job *j)
{
	if (j->next_close < j->next_open)
		return (j->burst[j->next_close].b + BURST_DRAIN_NS) * 1e-9;
	if (j->next_open < j->nr_bursts)
		return j->burst[j->next_open].on * 1e-9;
	return INFINITY;
}
