// SPDX-License-Identifier: BSD-2-Clause
/*
 * --bursts: a job traced in many short bursts at random moments, switched
 * by the control thread rfbpf starts in it (attach/control_thread.h), with
 * no callback registered in between, so that between bursts the job pays
 * nothing (docs/fleet.md, "Bursts").
 *
 * The interval, less its first BURST_START_NS and its last BURST_TAIL_NS,
 * is cut into K strata of length S; each gets one burst whose
 * measured part [a, b) (BURST_MEASURED_NS) starts at a uniformly random
 * moment of its stratum, leaving BURST_GAP_NS before the next stratum.
 * The callback goes on BURST_LEAD_NS before a: the thread wakes late by
 * up to a millisecond, and an op open when the callback came is not seen,
 * so measuring starts after the ops open then had time to end (the guard
 * of window_self.h). Self time inside [a, b) is counted by time
 * (window_self.h) and scaled by the interval over the measured time
 * (job.c), and an op that began in a measured part counts S / (b - a)
 * calls (job_bursts_weight), times the interval over the part the strata
 * cover.
 *
 * What a traced op costs the job is measured in the job: about a quarter
 * of the strata, drawn at random, get a burst that only counts ops (the
 * page's count callbacks, no probe), and the control thread reads the
 * job's CPU clock and the op count at every switch. The job's CPU per op
 * in counting bursts against that in traced ones prices a burst with all
 * it costs the job (the probes, and its own code slowed after each
 * kernel entry, which no calibration outside it sees). The traced
 * strata then stand for all: an op begun in one counts S / (b - a)
 * times K / K_traced.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "model/clocks.h"
#include "fleet/budget.h"
#include "attach/target.h"
#include "fleet/job_bursts.h"
#include "fleet/job_capture.h"
#include "fleet/job_ops.h"
#include "fleet/job_window.h"

#define BURST_MEASURED_NS	8000000ull
#define BURST_LEAD_NS		3000000ull
#define BURST_GAP_NS		30000000ull
/* rfbpf reads a burst's events this long after it: time for the ops
 * closed in it to reach the ring buffer */
#define BURST_DRAIN_NS		5000000ull
/* How far ahead the thread is handed its bursts (the daemon polls every
 * 0.5 s at the least, and a burst must reach the thread BURST_START_NS
 * before it starts). */
#define BURST_HORIZON_NS	3000000000ull
/* the interval's end is left free: its last burst is read before it */
#define BURST_TAIL_NS		30000000ull
/* ...and its start: the control thread, with no burst to run, looks for
 * new ones every CONTROL_MAX_SLEEP_NS, so a burst planned sooner than
 * that after the plan was often found after its end and skipped (about
 * one an interval: the call estimates read 6% low at --interval 1). The
 * bursts stand for the whole interval all the same: its bounds are the
 * daemon's clock, which the job does not see. */
#define BURST_START_NS		(CONTROL_MAX_SLEEP_NS + 20000000ull)
/* A registration change makes each thread's next op rebuild its callback
 * lists (recordfunction-costs.md: about 1-2 us, inferred, not measured
 * from outside): charged per thread and switch. */
#define BURST_REBUILD_NS	2000.0
/* Counting bursts per traced one (drawn, on average), one each until
 * the price is known; the price's sums fade with this time constant (a
 * job's mix of ops changes), and need this many bursts of each kind
 * before they are used. Until then a traced burst is priced at
 * BURST_PRIOR_COST: as if tracing took all of the job's CPU in it, a
 * price no job measured here comes near (the MLP's is about 0.5). */
#define BURST_COUNTING_SHARE	(1.0 / 3)
#define BURST_PRIOR_COST	1.0
#define BURST_PRICE_FADE_S	30.0
#define BURST_PRICE_MIN_N	4.0

/* The part of an interval its strata cover. */
static uint64_t strata_span(double interval_s)
{
	return (uint64_t)(interval_s * 1e9) - BURST_TAIL_NS - BURST_START_NS;
}

/* How many bursts the budget pays for in an interval: a burst costs the
 * job the full trace's share f of its CPU for its on-time, plus two
 * switches (each thread's next op rebuilds its callback lists). */
static size_t bursts_for(double f, double budget, double interval_s)
{
	double on_s = (BURST_MEASURED_NS + BURST_LEAD_NS) * 1e-9;
	double k = floor(budget * interval_s / ((f > 0.02 ? f : 0.02) * on_s));
	double most = strata_span(interval_s) * 1e-9 /
		      ((BURST_MEASURED_NS + BURST_LEAD_NS + BURST_GAP_NS) *
		       1e-9);

	if (!(k <= most))	/* NaN and infinity too */
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
static double plan_cost(struct job *j, double f, size_t traced, size_t k,
			double interval_s)
{
	double on_s = (BURST_MEASURED_NS + BURST_LEAD_NS) * 1e-9;
	double u = j->cpu_rate > 0 ? j->cpu_rate : 1;
	uint32_t *tids;
	size_t threads = target_threads(j->proc.pid, &tids);
	double sw;

	free(tids);
	sw = 2 * (j->switch_ns + threads * BURST_REBUILD_NS) * 1e-9;
	return (traced * on_s * f + k * sw / u) / interval_s;
}

/*
 * f, the share of the job's CPU in a traced burst that tracing costs it:
 * once enough bursts of both kinds were read, 1 - c_counted / c_traced
 * (the job's CPU per op in each) plus rfbpf's own share; the plan's (the
 * calibrated probe cost and rfbpf's own CPU per op) if higher, since
 * that is what the probes alone cost; until then BURST_PRIOR_COST.
 * Sets what the interval's weights use from the same sums: measured_cost
 * and calls_scale.
 */
static double burst_full_cost(struct job *j, const struct budget_plan *plan)
{
	double own = j->cpu_rate > 0 ?
		     j->op_rate * j->loader_ns_per_op * 1e-9 / j->cpu_rate : 0;
	double c_traced, c_counted;

	j->measured_cost = NAN;
	j->calls_scale = 1;
	if (j->price_n[0] >= BURST_PRICE_MIN_N &&
	    j->price_n[1] >= BURST_PRICE_MIN_N && j->price_ops[0] > 0 &&
	    j->price_ops[1] > 0 && j->price_cpu[0] > 0 &&
	    j->price_wall[0] > 0 && j->price_wall[1] > 0) {
		c_traced = j->price_cpu[0] / j->price_ops[0];
		c_counted = j->price_cpu[1] / j->price_ops[1];
		j->measured_cost = 1 - c_counted / c_traced;
		j->calls_scale = (j->price_ops[1] / j->price_wall[1]) /
				 (j->price_ops[0] / j->price_wall[0]);
	}
	if (isnan(j->measured_cost))
		return fmax(BURST_PRIOR_COST, plan->full_cost);
	return fmax(j->measured_cost + own, plan->full_cost);
}

/* Which strata get a burst that only counts: n of k, every set of n
 * alike (Knuth's selection sampling). */
static void draw_counting(bool *counting, size_t k, size_t n)
{
	for (size_t i = 0; i < k; i++) {
		counting[i] = drand48() * (k - i) < n;
		if (counting[i])
			n--;
	}
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

static void write_periods(struct job *j);

void job_bursts_plan(struct job *j, const struct budget_plan *plan,
		     double interval_s, double now)
{
	/* what tracing costs whatever is traced comes off the budget first
	 * (rfbpf's own CPU beyond reading, --off-cpu's programs) */
	double budget = j->opt.budget_pct / 100 - plan->fixed_share;
	double f = burst_full_cost(j, plan);
	size_t traced, counting, k;
	bool is_counting[JOB_MAX_BURSTS];
	uint64_t t0 = (uint64_t)(now * 1e9) + BURST_START_NS;
	uint64_t span = strata_span(interval_s);
	uint64_t s, room;
	double keep = exp(-interval_s / BURST_PRICE_FADE_S);

	for (int kind = 0; kind < 2; kind++) {	/* the price ages */
		j->price_cpu[kind] *= keep;
		j->price_ops[kind] *= keep;
		j->price_n[kind] *= keep;
		j->price_wall[kind] *= keep;
	}
	j->burst_cost = f;
	traced = bursts_for(f, budget > 0 ? budget : 0, interval_s);
	/* the counting bursts come on top (they cost the job little), in
	 * the strata left; at least one traced */
	counting = (size_t)floor(traced * (isnan(j->measured_cost) ? 1 :
					   BURST_COUNTING_SHARE) + drand48());
	k = bursts_for(0, INFINITY, interval_s);	/* as many as fit */
	if (traced + counting < k)
		k = traced + counting;
	if (counting > k - 1)
		counting = k - 1;
	traced = k - counting;
	s = span / k;
	room = s - BURST_MEASURED_NS - BURST_LEAD_NS - BURST_GAP_NS;
	draw_counting(is_counting, k, counting);
	j->nr_bursts = j->next_open = j->next_close = 0;
	j->nr_periods = j->next_period = 0;
	j->period_seq0 = j->s.control.written;
	j->nr_capture_seqs = 0;
	for (size_t i = 0; i < k; i++) {
		uint64_t a = t0 + i * s + BURST_LEAD_NS +
			     (uint64_t)(drand48() * room);
		struct job_burst *b;

		j->period[j->nr_periods++] = (struct control_burst){
			a - BURST_LEAD_NS, a + BURST_MEASURED_NS,
			is_counting[i] };
		if (is_counting[i])
			continue;
		b = &j->burst[j->nr_bursts++];
		b->a = a;
		b->b = a + BURST_MEASURED_NS;
		b->on = a - BURST_LEAD_NS;
		b->opened = b->closed = false;
	}
	/* the traced strata, a random k_traced of the k, stand for all,
	 * and the span for the whole interval */
	j->burst_weight = interval_s * 1e9 / span * s / BURST_MEASURED_NS *
			  k / traced;
	j->est_overhead = plan_cost(j, f, traced, k, interval_s) +
			  plan->fixed_share;
	if (j->opt.verbose)
		fprintf(stderr, "rfbpf: pid %d: %zu bursts traced, %zu "
			"counting; a traced burst costs the job %.1f%% of its "
			"CPU (measured in it: %.1f%%), estimate %.2f%%\n",
			j->proc.pid, traced, counting, 100 * f,
			100 * j->measured_cost, 100 * j->est_overhead);
	j->span_start = now;
	j->span_s = interval_s;
	j->whole_interval = false;
	write_periods(j);	/* now: the next turn may be tens of ms away */
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
	uint64_t now = monotonic_ns();

	/* A capture (job_capture.h) holds the thread; the periods due
	 * meanwhile are dropped, not handed late. */
	if (job_capture_holds_bursts(j))
		return;
	while (j->capture.resuming && j->next_period < j->nr_periods &&
	       j->period[j->next_period].off_ns < now + BURST_START_NS) {
		j->next_period++;
		j->bursts_dropped++;
	}
	j->capture.resuming = false;
	/* Only the next BURST_HORIZON_NS: a capture waits for the bursts
	 * handed before it, and would otherwise wait for the interval's. */
	while (room && j->next_period < j->nr_periods &&
	       j->period[j->next_period].on_ns < now + BURST_HORIZON_NS) {
		const struct control_burst *p = &j->period[j->next_period];

		if (control_thread_add_burst(&j->s.control, p->on_ns,
					     p->off_ns, p->count_only))
			break;
		j->next_period++;
		room--;
	}
}

/* What the thread did: bursts it skipped (the job's CPUs too busy to run
 * it before its end), and bursts it switched on after its measured part
 * began (a burst late by more than the lead: ops open then lose some of
 * their self time). Both are counted, not corrected. And the job's CPU
 * and ops in each burst, for the price. */
static void read_results(struct job *j)
{
	struct control_result r[CONTROL_BURSTS];
	int n = control_thread_results(&j->s.control, r, CONTROL_BURSTS);

	for (int i = 0; i < n; i++) {
		uint64_t k = r[i].seq - 1 - j->period_seq0;
		int kind;

		if (job_capture_owns(j, r[i].seq))
			continue;	/* not a planned period */
		for (size_t c = 0; c < j->nr_capture_seqs; c++)
			k -= j->capture_seqs[c] < r[i].seq;
		j->bursts_total++;
		if (!r[i].on_ns) {
			j->bursts_skipped++;
			continue;
		}
		if (k >= j->nr_periods)	/* an earlier interval's */
			continue;
		if (r[i].on_ns > j->period[k].on_ns + BURST_LEAD_NS)
			j->bursts_late++;
		kind = j->period[k].count_only ? 1 : 0;
		j->bursts_counting += kind;
		j->price_cpu[kind] += r[i].cpu_ns;
		j->price_ops[kind] += r[i].ops;
		j->price_wall[kind] += r[i].off_ns - r[i].on_ns;
		j->price_n[kind]++;
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
