// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "model/clocks.h"
#include "attach/remote_call.h"
#include "attach/target.h"
#include "fleet/budget.h"
#include "fleet/job.h"
#include "fleet/job_recorder.h"
#include "fleet/job_bursts.h"
#include "fleet/job_ops.h"
#include "fleet/job_window.h"
#include "model/profile_sink.h"
#include "gpu/gpu_session.h"

/* Did something that began at ts (CLOCK_MONOTONIC, as BPF's clock) begin
 * under the window's p = 1? By time, not by when its event is read: the
 * ring buffer is read in batches, and an op weighed 1/p by mistake would
 * count 1/p times too much. */
static bool in_window(const struct job *j, uint64_t ts)
{
	return j->win_on_ns && ts >= j->win_on_ns && ts <= j->win_off_ns;
}

static uint64_t now_ns(void)
{
	return (uint64_t)(monotonic_s() * 1e9);
}

/* A closed op's weight against its parent's self time. A window op can
 * outlast its window: its children after the window are sampled at p,
 * and each recorded one stands for 1/p of them (Horvitz-Thompson), so its
 * self time (duration less the estimated children's) stays unbiased; it
 * kept every unsampled child's time before. Inside a window, 1. */
static double child_weight(void *ctx, const struct op *child)
{
	const struct job *j = ctx;

	return j->bursts || in_window(j, child->start_ns) ? 1.0 : 1 / j->p;
}

/* Reads the job's events, timing rfbpf's CPU doing it: what each traced
 * op costs rfbpf is charged to the job's budget (the loader shares the
 * job's CPUs; on a small host it is a large part of the cost). */
static void read_events(struct job *j)
{
	double t0 = thread_cpu_s();

	/* Bounded: a job faster than the daemon does not hold up the
	 * others (the rest waits in its ring for the next turn). */
	session_read(&j->s, -1, 0.05);
	j->read_cpu_s += thread_cpu_s() - t0;
}

/* Every closed op: its 1/p share of the counters; inside a window also
 * its stack and self time. */
static void on_op(void *ctx, struct trace *t, const struct closed_op *c)
{
	struct job *j = ctx;
	bool full = in_window(j, c->op->start_ns);
	double w = 1 / (full ? 1.0 : j->p);
	struct job_op *r = job_op_row(j, c->op->name);
	uint64_t self_ns, calls;
	const struct input_set *in = op_inputs_get(&t->inputs,
						   c->op->inputs);

	if (j->bursts) {	/* only ops begun in a measured part */
		w = job_bursts_weight(j, c->op->start_ns);
		if (r && w > 0) {
			/* a traced burst's time held fewer ops than the
			 * job runs untraced: calls_scale more each */
			job_op_count(r, w * j->calls_scale, w, c->dur_ns);
			job_op_burst_add(j, r, BURST_CALLS, 1);
			job_op_burst_add(j, r, BURST_TOTAL, c->dur_ns * 1e-9);
			if (in && in->sized)
				r->bytes += w * j->calls_scale * in->bytes;
		}
	} else if (r) {
		job_op_add(r, w, c->dur_ns);
		if (in && in->sized)
			r->bytes += w * in->bytes;
	}
	j->closed_in_interval++;
	if (!full && j->bursts) {
		window_self_forget(&j->self, c->op->id);
		return;
	}
	if (!full) {
		j->sampled_closed++;
		window_self_forget(&j->self, c->op->id);
		return;
	}
	window_self_op(&j->self, t, c, &self_ns, &calls);
	if (self_ns || calls)
		job_window_add(j, t, c, self_ns, calls);
}

/* --memory: a block made. Inside a measured part (--bursts) it counts
 * toward the shares job_share_allocations gives the ops; inside a window
 * its stack gets it, scaled with the window's stacks. */
static void on_memory(void *ctx, struct trace *t, const struct mem_change *c)
{
	struct job *j = ctx;
	struct job_op *r;
	double bytes = c->weight * (double)c->bytes;

	if (c->bytes <= 0)
		return;
	if (in_window(j, c->ts_ns))
		profile_add_alloc(&j->window_stacks, t, c);
	if (!j->bursts || !(job_bursts_weight(j, c->ts_ns) > 0))
		return;
	j->alloc_in_bursts += bytes;
	r = c->op_name != UINT32_MAX ? job_op_row(j, c->op_name) : NULL;
	if (r)
		r->alloc_in_bursts += bytes;
}

/* --memory, --bursts: the interval's bytes, which every byte sample of the
 * job estimates (op or not, burst or not), shared out among the ops as
 * the measured parts saw them made: a ratio of two sums over the same
 * parts, so what tracing slows in them cancels out (weighing each op's
 * bytes as its calls over-counted a job whose allocations keep pace
 * with its sleeps, not its ops: twice its total in a 90 s run). An
 * interval whose parts saw no block keeps its bytes for the next. */
static void job_share_allocations(struct job *j)
{
	double now = (double)j->s.trace.mem.counts.alloc_bytes;

	if (!j->s.trace.mem.on || !j->bursts)
		return;
	j->alloc_pending += now - j->alloc_bytes_prev;
	j->alloc_bytes_prev = now;
	if (!(j->alloc_in_bursts > 0))
		return;
	for (size_t i = 0; i < j->nr_ops; i++) {
		struct job_op *r = &j->ops[i];

		r->alloc_bytes += j->alloc_pending * r->alloc_in_bursts /
				  j->alloc_in_bursts;
		r->alloc_in_bursts = 0;
	}
	j->alloc_in_bursts = 0;
	j->alloc_pending = 0;
}

/* --memory: a block made in a measured part keeps its stack, standing for
 * what the part does (the in-use profile); --sampled keeps none. */
static double stack_weight(void *ctx, uint64_t ts)
{
	const struct job *j = ctx;

	return j->bursts ? job_bursts_weight(j, ts) : 0;
}

/* GPU time launched inside a window goes to its stack. */
static void on_gpu(void *ctx, struct trace *t, const struct gpu_done *g)
{
	struct job *j = ctx;

	if (g->launch && in_window(j, g->launch->ts_ns))
		profile_add_gpu(&j->window_stacks, t, g);
}

/* --bursts: a CUDA synchronize call's time (entry to return), weighed as
 * the ops begun when it began, goes to every op on its stack (each name
 * once), as the table's GPU wait column. --sampled leaves it out: which
 * op made a call is not known outside the window. */
static void on_gpu_api(void *ctx, struct trace *t,
		       const struct gpu_launch *call)
{
	double d = (double)gpu_sync_wait_ns(call) * 1e-9, w;
	struct job *j = ctx;

	if (!j->bursts || !(d > 0))
		return;
	w = job_bursts_weight(j, call->enter_ns);
	if (!(w > 0))
		return;
	for (uint32_t i = 0; i < call->depth; i++) {
		uint32_t name = call->frames[i], k = 0;
		struct job_op *r;

		while (k < i && call->frames[k] != name)
			k++;
		if (k < i || py_frames_loc(&t->py, name))
			continue;	/* seen, or a Python frame */
		if ((r = job_op_row(j, name)))
			r->gpu_wait_s += w * d;
	}
}

/* What a job holds, its session's included (after session_finish or
 * session_abort). */
static void free_job(struct job *j)
{
	job_capture_abort(j);
	job_recorder_free(j);
	session_free(&j->s);
	stack_profile_free(&j->window_stacks);
	stack_profile_free(&j->inuse_stacks);
	aggregate_free(&j->window_agg);
	window_self_free(&j->self);
	free(j->ops);
	free(j->series_name);
	free(j->touched);
	free(j->capture_seqs);
	u64map_free(&j->series);
	j->ops = NULL;
	j->series_name = NULL;
	j->touched = NULL;
}

int job_start(struct job *j, const struct torch_process *proc,
	      const struct options *opt, double p, double now, char *err,
	      size_t len)
{
	struct trace_sink sink = { .op = on_op, .gpu = on_gpu,
				   .gpu_api = on_gpu_api, .memory = on_memory,
				   .ctx = j };

	memset(j, 0, sizeof(*j));
	j->s.want_control = opt->bursts;
	j->s.pidfd = -1;
	j->s.act.lock_fd = -1;
	j->s.gpu.agent.mem_fd = -1;
	j->proc = *proc;
	j->opt = *opt;
	j->opt.pid = proc->pid;
	j->opt.nr_pids = 0;
	j->opt.continuous = false;
	j->opt.all = false;
	j->opt.table = false;
	j->opt.quiet = true;
	j->opt.sample_prob = p;
	j->opt.lib = NULL;
	j->p = p;
	j->s.opt = &j->opt;
	/* The daemon does nothing else meanwhile: a job that reaches no
	 * safe point soon (still importing torch) is tried again later. */
	j->s.attach_find_ms = 1000;
	stack_profile_init(&j->window_stacks);
	stack_profile_init(&j->inuse_stacks);
	j->window_stacks.by_shapes = opt->shapes;
	aggregate_init(&j->window_agg);
	if (session_setup(&j->s, &j->opt)) {
		snprintf(err, len, "%s", j->s.error);
		j->setup_err = j->s.activation_err;
		session_abort(&j->s);
		free_job(j);
		return -1;
	}
	/* The agent registered its own callback (RFBPF_SAMPLE): its p. */
	j->bursts = j->s.control.block != 0;
	j->measured_cost = NAN;		/* until bursts of both kinds */
	j->calls_scale = 1;
	j->fixed_p = !j->s.act.handle && !j->bursts;
	if (j->fixed_p)
		j->p = j->s.trace.sample_prob;
	trace_add_sink(&j->s.trace, &sink);
	sink = job_capture_sink(j);
	trace_add_sink(&j->s.trace, &sink);
	if (job_recorder_start(j))
		fprintf(stderr, "rfbpf: pid %d: no flight recorder: %s\n",
			proc->pid, strerror(errno));
	j->s.trace.child_weight = child_weight;
	j->s.trace.child_weight_ctx = j;
	j->s.trace.mem.stack_weight = stack_weight;
	j->s.trace.mem.stack_weight_ctx = j;
	j->interval_start = now;
	j->cpu_s_prev = target_cpu_seconds(proc->pid);
	j->s.start_s = now;
	if (j->bursts) {
		/* Bursts from the first interval on, before the job's rates
		 * are known: priced as if a full trace doubled its CPU. */
		struct budget_plan first = { .full_cost = 1.0, .span = 1 };

		job_plan(j, &first, opt->interval_s, now);
	}
	return 0;
}

/* Re-registers at p; false (said on stderr) if that failed. times says
 * when the old callback went and the new one came. */
static bool set_p(struct job *j, double p, struct replace_times *times)
{
	struct replace_times ignored;
	char err[512];
	double h;

	if (j->fixed_p || !j->s.act.handle)
		return false;
	double t0 = monotonic_s();

	if (!times)
		times = &ignored;
	if (session_set_sample_prob(&j->s, p, times, err, sizeof(err))) {
		fprintf(stderr, "rfbpf: pid %d: cannot change sampling to %g: "
			"%s\n", j->proc.pid, p, err);
		return false;
	}
	j->reregistrations++;
	/* A window closing: what its ops did from the stop on is not its. */
	if (p < 1)
		window_self_end_at(&j->self, times->held);
	h = (times->released - times->held) * 1e-9;
	j->hold_s = j->hold_s > 0 ? 0.7 * j->hold_s + 0.3 * h : h;
	/* Looking for the safe point (the job runs meanwhile, at p = 1 when
	 * a window is closing) */
	h = times->held * 1e-9 - t0;
	j->search_s = j->search_s > 0 ? 0.7 * j->search_s + 0.3 * h : h;
	/* Its events up to the release are read; the ops it had open were
	 * stopped meanwhile, which is not the job's time. */
	read_events(j);
	stacks_pause(&j->s.trace, times->tid, times->held, times->released);
	if (j->opt.verbose)
		fprintf(stderr, "rfbpf: pid %d: p=%g: %.2f ms to hold, held "
			"%.2f ms, remove %.2f ms, add %.2f ms\n", j->proc.pid,
			p, times->held / 1e6 - t0 * 1e3,
			(times->released - times->held) / 1e6,
			(times->removed - times->held) / 1e6,
			(times->released - times->adding) / 1e6);
	return true;
}

/* The start of a window not measured (see window_on); none when the
 * whole job is traced. */
static double window_guard_s(const struct job *j)
{
	return j->whole_interval ? 0 : j->window_s / 4;
}

/*
 * A window switches the callback to p = 1 and back, each in one stop of
 * one thread. An op recorded after the p = 1 callback was added began
 * under it, and so did one recorded before it was removed: the window
 * for weighing ops is [adding, removed]. The job ran normally traced from
 * the first stop's release to the second stop: that is how long the
 * window lasted, for the T/L scaling, less its first quarter: an op open
 * when the callback came was not seen (unless sampled), and its self
 * time in the window would be lost; measured from a quarter in, only ops
 * open for longer than that lose theirs. The other threads' ops during
 * the first stop are seen whole too, and give only their time after it.
 */
static void window_on(struct job *j)
{
	struct replace_times t;

	if (!set_p(j, 1.0, &t))
		return;
	j->win_on_ns = t.adding;
	j->win_off_ns = UINT64_MAX;
	j->run_from_ns = t.released + (uint64_t)(window_guard_s(j) * 1e9);
	window_self_open(&j->self, t.adding, j->run_from_ns, UINT64_MAX);
	j->in_window = true;
	j->windows++;
}

static void window_off(struct job *j)
{
	struct replace_times t;
	uint64_t from = j->run_from_ns > j->cut_ns ? j->run_from_ns :
			j->cut_ns;

	if (!set_p(j, j->p, &t)) {	/* still at 1: weigh by time */
		t.removed = t.held = now_ns();
		window_self_end_at(&j->self, t.held);
	}
	j->win_off_ns = t.removed;
	j->in_window = false;
	/* Only its part since the last cut (an earlier part was counted at
	 * an interval's end). */
	job_window_count(j, from, t.held);
	/* Its events up to the stop were read (set_p): the ops still open
	 * give their part up to it. */
	window_self_cut(&j->self, &j->s.trace, job_window_add, j);
}

void job_poll(struct job *j, double now)
{
	read_events(j);
	gpu_session_poll(&j->s.gpu, now);
	session_retry_gpu_inject(&j->s);
	if (j->bursts) {
		job_bursts_poll(j);
		return;
	}
	if (!j->in_window && !j->window_done && j->window_s > 0 &&
	    now >= j->window_at) {
		window_on(j);
	} else if (j->in_window && !j->whole_interval &&
		   now_ns() + j->search_s * 1e9 >= j->run_from_ns +
		   (j->window_s - window_guard_s(j)) * 1e9) {
		window_off(j);
		j->window_done = true;
	}
}

double job_next_wakeup(const struct job *j)
{
	if (j->bursts)
		return job_bursts_next_wakeup(j);
	if (j->in_window && !j->whole_interval)
		return j->run_from_ns * 1e-9 + j->window_s -
		       window_guard_s(j) - j->search_s;
	if (!j->in_window && !j->window_done && j->window_s > 0)
		return j->window_at;
	return INFINITY;
}

bool job_gone(const struct job *j)
{
	return !target_alive(j->proc.pid) ||
	       target_start_time(j->proc.pid) != j->proc.start_ticks;
}

/* The interval's end cuts what is being measured: the last burst, if
 * the daemon was late to close it, or a window open across the end. */
static void cut_at_interval_end(struct job *j)
{
	uint64_t cut;

	if (j->bursts) {
		while (j->next_close < j->next_open)
			job_burst_close(j, &j->burst[j->next_close++]);
		return;
	}
	if (!j->in_window)
		return;
	cut = now_ns();
	job_window_count(j, j->run_from_ns > j->cut_ns ? j->run_from_ns :
		     j->cut_ns, cut);
	j->cut_ns = cut;
	/* Traced whole, each interval is its own span: its ops' time up to
	 * the cut is this interval's, the rest the next's. */
	if (j->whole_interval) {
		window_self_end_at(&j->self, cut);
		window_self_cut(&j->self, &j->s.trace, job_window_add, j);
		window_self_open(&j->self, j->win_on_ns, cut, UINT64_MAX);
	}
}

/* The job's op rate (from the sampled part of the interval when there is
 * one, else from the window), its CPU rate, and rfbpf's CPU per op read
 * (from intervals with enough ops to tell, smoothed like the stops). */
static void measure_rates(struct job *j, double t, double cpu,
			  uint64_t window_calls)
{
	double sampled_t = j->bursts ? 0 : t - j->window_in_interval;

	if (sampled_t > 0.01)
		j->op_rate = j->sampled_closed / j->p / sampled_t;
	else if (j->window_time > 0)
		j->op_rate = window_calls / j->window_time;
	j->cpu_rate = t > 0 && !isnan(cpu) && !isnan(j->cpu_s_prev) ?
		      (cpu - j->cpu_s_prev) / t : 0;
	j->cpu_s_prev = cpu;
	if (j->closed_in_interval >= 100) {
		double c = j->read_cpu_s * 1e9 / j->closed_in_interval;

		j->loader_ns_per_op = j->loader_ns_per_op > 0 ?
			0.7 * j->loader_ns_per_op + 0.3 * c : c;
	}
}

void job_end_interval(struct job *j, double now)
{
	double t = now - j->interval_start;
	double cpu = target_cpu_seconds(j->proc.pid);
	double span_len = now - j->span_start, k;
	uint64_t window_calls = 0;
	bool span_done;

	read_events(j);
	cut_at_interval_end(j);
	for (size_t i = 0; i < j->window_agg.nr; i++)
		window_calls += j->window_agg.rows[i].calls;
	/* Self time: the window's sums scaled by span/L (see job.h), once
	 * its span is over. */
	span_done = j->whole_interval || j->bursts ||
		    (j->window_done && now >= j->span_start + j->span_s - 0.01);
	k = span_done && j->window_time > 0 ?
	    span_len / window_self_length(&j->self, j->window_time,
					  j->whole_interval) : 0;
	for (size_t i = 0; k && i < j->window_agg.nr; i++) {
		const struct op_stats *r = &j->window_agg.rows[i];
		struct job_op *o = r->calls ? job_op_row(j, r->name) : NULL;

		if (o)
			o->self_s += r->self_ns * 1e-9 * k;
	}
	if (j->bursts) {
		job_ops_bursts_variance(j, j->burst_weight * j->calls_scale,
					j->burst_weight, k);
		job_bursts_measure(j);
	}
	job_share_allocations(j);
	/* pprof has one profile an interval: a span's window stands for an
	 * interval of it, on average. */
	j->window_scale = k && span_len > 0 ? k * t / span_len : 0;
	measure_rates(j, t, cpu, window_calls);
	if (j->opt.verbose)
		fprintf(stderr, "rfbpf: pid %d: interval %.2fs: p=%g, %llu "
			"sampled ops, window %.4fs (%.4fs in a span of %.1fs, "
			"%llu ops%s); %.0f ops/s on %.2f CPUs\n", j->proc.pid,
			t, j->p, (unsigned long long)j->sampled_closed,
			j->window_in_interval, j->window_time, j->span_s,
			(unsigned long long)window_calls, span_done ?
			", span done" : "", j->op_rate, j->cpu_rate);
	j->closed_in_interval = 0;
	j->read_cpu_s = 0;
	j->sampled_closed = 0;
	j->window_in_interval = 0;
}

/* A new span: its window at a uniformly random moment of it, so every op
 * has the same chance L/span to be in it: what makes the span/L scaling
 * unbiased. */
static void new_span(struct job *j, const struct budget_plan *plan,
		     double interval_s, double now)
{
	stack_profile_reset(&j->window_stacks);
	aggregate_reset(&j->window_agg);
	j->window_time = 0;
	window_self_reset(&j->self);
	j->window_done = false;
	j->span_start = now;
	j->span_s = plan->span * interval_s;
	j->window_s = plan->window_s;
	j->window_at = now + drand48() * (j->span_s - j->window_s);
}

void job_plan(struct job *j, const struct budget_plan *plan,
	      double interval_s, double now)
{
	j->interval_start = now;
	j->est_overhead = plan->est_overhead;
	if (j->bursts) {
		new_span(j, plan, interval_s, now);
		job_bursts_plan(j, plan, interval_s, now);
		return;
	}
	if (!j->fixed_p && budget_should_change(j->p, plan->sample_prob)) {
		j->p = plan->sample_prob;
		if (!j->in_window)
			set_p(j, j->p, NULL);
	}
	if (plan->window_s >= plan->span * interval_s) {
		/* The whole job fits: always on, each interval its span. */
		new_span(j, plan, interval_s, now);
		j->whole_interval = true;
		if (!j->in_window)
			window_on(j);
		return;
	}
	if (j->in_window && j->whole_interval)
		window_off(j);
	j->whole_interval = false;
	if (j->span_s && now < j->span_start + j->span_s - 0.01)
		return;			/* its span goes on */
	if (plan->window_s > 0 || !j->in_window)
		new_span(j, plan, interval_s, now);
}

void job_stop(struct job *j)
{
	session_finish(&j->s);
	remote_set_idle(NULL, NULL);	/* it drained this job's ring */
	if (job_recorder_dump(j, "end", "the job ended or the daemon "
			      "stopped"))
		fprintf(stderr, "rfbpf: pid %d: cannot write its flight "
			"recorder into %s: %s\n", j->proc.pid,
			j->opt.trace_dir, strerror(errno));
	free_job(j);
}
