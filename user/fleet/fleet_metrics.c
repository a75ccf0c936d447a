// SPDX-License-Identifier: BSD-2-Clause
#include <math.h>
#include <string.h>
#include <stdio.h>
#include "fleet/fleet_collectives.h"
#include "fleet/fleet_metrics.h"
#include "fleet/job_labels.h"

/* One family with one sample per job. */
static void per_job(struct prom_buf *b, struct job *const *jobs, size_t nr,
		    const char *name, const char *type, const char *help,
		    double (*value)(const struct job *j))
{
	prom_family(b, name, type, help);
	for (size_t i = 0; i < nr; i++) {
		struct prom_label l[JOB_LABELS];
		char pid[16];

		job_labels(jobs[i], l, pid, sizeof(pid));
		prom_sample(b, name, l, JOB_LABELS, value(jobs[i]));
	}
}

static double v_prob(const struct job *j) { return j->p; }
static double v_overhead(const struct job *j) { return j->est_overhead; }
static double v_window(const struct job *j) { return j->window_s; }
static double v_op_rate(const struct job *j) { return j->op_rate; }
static double v_cpu_rate(const struct job *j) { return j->cpu_rate; }
static double v_loader_cost(const struct job *j)
{
	return j->loader_ns_per_op * 1e-9;
}
static double v_rereg(const struct job *j) { return j->reregistrations; }
static double v_drops(const struct job *j) { return j->drops_prev; }
static double v_windows(const struct job *j) { return j->windows; }
static double v_bursts(const struct job *j) { return j->bursts_total; }
static double v_bursts_skipped(const struct job *j)
{
	return j->bursts_skipped;
}
static double v_bursts_late(const struct job *j) { return j->bursts_late; }
static double v_bursts_counting(const struct job *j)
{
	return j->bursts_counting;
}
/* NaN in --sampled mode, which has no bursts to price */
static double v_burst_cost(const struct job *j)
{
	return j->bursts ? j->burst_cost : NAN;
}
static double v_threads_started(const struct job *j)
{
	return j->s.trace.counts.threads_started;
}
static double v_ops_on_started(const struct job *j)
{
	return j->s.trace.counts.ops_on_started_threads;
}
static double v_events(const struct job *j)
{
	return j->s.trace.counts.events;
}

/* One job's counts by why: a sample per reason. */
struct reason {
	const char *why;
	uint64_t n;
};

static void reason_samples(struct prom_buf *b, const char *name,
			   struct job *j, const struct reason *r, size_t n)
{
	struct prom_label l[JOB_LABELS + 1];
	char pid[16];

	job_labels(j, l, pid, sizeof(pid));
	for (size_t k = 0; k < n; k++) {
		l[JOB_LABELS] = (struct prom_label){ "reason", r[k].why };
		prom_sample(b, name, l, JOB_LABELS + 1, r[k].n);
	}
}

/* Ops the model could not pair cleanly, by why (never lost silently). */
static void unpaired(struct prom_buf *b, struct job *const *jobs, size_t nr)
{
	static const char *const name = "rfbpf_job_ops_unpaired_total";

	prom_family(b, name, "counter", "Ops or events that did not pair "
		    "cleanly, by reason (see rfbpf's docs/outputs.md)");
	for (size_t i = 0; i < nr; i++) {
		const struct counts *c = &jobs[i]->s.trace.counts;
		struct reason r[RF_LOSS_NR];
		size_t n = 0;

		for (size_t k = 0; k < nr_loss_counters; k++)
			if (loss_counters[k].reason)
				r[n++] = (struct reason){
					loss_counters[k].reason,
					loss_count(c, &loss_counters[k]) };
		reason_samples(b, name, jobs[i], r, n);
	}
}

/* --off-cpu: the time the job's threads spent off CPU, by why, and the
 * part with no recorded op open. */
static void off_cpu(struct prom_buf *b, struct job *const *jobs, size_t nr)
{
	static const char *const name = "rfbpf_job_off_cpu_seconds_total";
	static const char *const outside =
		"rfbpf_job_off_cpu_outside_ops_seconds_total";

	prom_family(b, name, "counter", "Time the job's threads were off CPU "
		    "while traced, by reason");
	for (size_t i = 0; i < nr; i++) {
		const struct counts *c = &jobs[i]->s.trace.counts;
		struct prom_label l[JOB_LABELS + 1];
		char pid[16];

		if (!jobs[i]->s.trace.off_cpu)
			continue;
		job_labels(jobs[i], l, pid, sizeof(pid));
		for (unsigned r = 1; r < RF_OFF_NR; r++) {
			l[JOB_LABELS] = (struct prom_label){
				"reason", off_cpu_reason_name(r) };
			prom_sample(b, name, l, JOB_LABELS + 1,
				    c->off_cpu_by_reason_ns[r] / 1e9);
		}
	}
	prom_family(b, outside, "counter", "Of that, the time no recorded "
		    "op was open on the thread");
	for (size_t i = 0; i < nr; i++) {
		struct prom_label l[JOB_LABELS];
		char pid[16];

		if (!jobs[i]->s.trace.off_cpu)
			continue;
		job_labels(jobs[i], l, pid, sizeof(pid));
		prom_sample(b, outside, l, JOB_LABELS,
			    jobs[i]->s.trace.counts.off_cpu_outside_ns / 1e9);
	}
}

/* --shapes: input records read, and those lost or cut, by why (jobs
 * traced without shapes have no series). */
static void input_records(struct prom_buf *b, struct job *const *jobs,
			  size_t nr)
{
	static const char *const read = "rfbpf_job_input_records_total";
	static const char *const lost = "rfbpf_job_input_records_lost_total";

	prom_family(b, read, "counter", "Input records (dims, dtypes, "
		    "scalars) of sampled ops read");
	for (size_t i = 0; i < nr; i++) {
		struct prom_label l[JOB_LABELS];
		char pid[16];

		if (!jobs[i]->s.trace.inputs.every_op)
			continue;
		job_labels(jobs[i], l, pid, sizeof(pid));
		prom_sample(b, read, l, JOB_LABELS,
			    jobs[i]->s.trace.counts.inputs_records);
	}
	prom_family(b, lost, "counter", "Input records with no op open, or "
		    "cut short, by reason (see rfbpf's docs/shapes.md)");
	for (size_t i = 0; i < nr; i++) {
		const struct counts *c = &jobs[i]->s.trace.counts;
		const struct reason r[] = {
			{ "no_op_open", c->inputs_orphans },
			{ "cut", c->inputs_cut },
			{ "unreadable", c->inputs_faults },
		};

		if (jobs[i]->s.trace.inputs.every_op)
			reason_samples(b, lost, jobs[i], r,
				       sizeof(r) / sizeof(r[0]));
	}
}

/* --python-stacks: stacks read, and ops or frames left without, by why
 * (jobs traced without Python stacks have no series). */
static void python_stacks(struct prom_buf *b, struct job *const *jobs,
			  size_t nr)
{
	static const char *const read = "rfbpf_job_python_stacks_total";
	static const char *const lost = "rfbpf_job_python_stacks_lost_total";

	prom_family(b, read, "counter", "Python stacks of sampled ops read, "
		    "whole or as their thread's last (nested ops of one "
		    "Python call)");
	for (size_t i = 0; i < nr; i++) {
		const struct counts *c = &jobs[i]->s.trace.counts;
		struct prom_label l[JOB_LABELS + 1];
		char pid[16];

		if (!jobs[i]->s.trace.py_resolver.gen)
			continue;
		job_labels(jobs[i], l, pid, sizeof(pid));
		l[JOB_LABELS] = (struct prom_label){ "kind", "whole" };
		prom_sample(b, read, l, JOB_LABELS + 1, c->py_stacks);
		l[JOB_LABELS] = (struct prom_label){ "kind", "same_as_last" };
		prom_sample(b, read, l, JOB_LABELS + 1, c->py_same);
	}
	prom_family(b, lost, "counter", "Ops without a Python stack, stacks "
		    "cut, and frames not named, by reason (see rfbpf's "
		    "docs/python-stacks.md)");
	for (size_t i = 0; i < nr; i++) {
		const struct counts *c = &jobs[i]->s.trace.counts;
		const struct reason r[] = {
			{ "no_thread_state", c->py_no_thread },
			{ "no_op_open", c->py_orphans },
			{ "truncated", c->py_truncated },
			{ "unreadable_frame", c->py_faults },
			{ "frame_unnamed", jobs[i]->s.trace.py.unresolved },
		};

		if (jobs[i]->s.trace.py_resolver.gen)
			reason_samples(b, lost, jobs[i], r,
				       sizeof(r) / sizeof(r[0]));
	}
}

/* Which PyTorch each job runs: one daemon traces builds whose
 * RecordFunction differs (its before() overloads, its layouts), each by
 * its own library's symbols. */
/* --memory: what each job's allocators gave (estimated from the byte
 * samples) and each device's live bytes. */
static void memory(struct prom_buf *b, struct job *const *jobs, size_t nr)
{
	static const char *const alloc = "rfbpf_job_alloc_bytes_total";
	static const char *const live = "rfbpf_job_live_bytes";
	bool any = false;

	for (size_t i = 0; i < nr; i++)
		any |= jobs[i]->s.trace.mem.on;
	if (!any)
		return;
	prom_family(b, alloc, "counter", "Estimated bytes PyTorch's "
		    "allocators gave the job since rfbpf traced it, op or "
		    "not (--memory: every byte-sampled block weighed "
		    "1/(1-exp(-size/mean)))");
	for (size_t i = 0; i < nr; i++) {
		struct prom_label l[JOB_LABELS];
		char pid[16];

		if (!jobs[i]->s.trace.mem.on)
			continue;
		job_labels(jobs[i], l, pid, sizeof(pid));
		prom_sample(b, alloc, l, JOB_LABELS,
			    jobs[i]->s.trace.mem.counts.alloc_bytes);
	}
	prom_family(b, live, "gauge", "Estimated bytes live on each device "
		    "of what the job's allocators gave since rfbpf traced it "
		    "(blocks made before are not seen)");
	for (size_t i = 0; i < nr; i++) {
		const struct memory *m = &jobs[i]->s.trace.mem;
		struct prom_label l[JOB_LABELS + 1];
		char pid[16], dev[32];

		job_labels(jobs[i], l, pid, sizeof(pid));
		for (int d = 0; m->on && d < m->nr_devices; d++) {
			snprintf(dev, sizeof(dev), "%s", memory_device_name(
				 m->devices[d].type));
			if (m->devices[d].index >= 0)
				snprintf(dev + strlen(dev),
					 sizeof(dev) - strlen(dev), ":%d",
					 m->devices[d].index);
			l[JOB_LABELS] = (struct prom_label){ "device", dev };
			prom_sample(b, live, l, JOB_LABELS + 1,
				    (double)(int64_t)m->devices[d].live);
		}
	}
}

static void torch_build(struct prom_buf *b, struct job *const *jobs,
			size_t nr)
{
	static const char *const name = "rfbpf_job_torch_info";

	prom_family(b, name, "gauge", "1 for each job: version is its torch "
		    "build's (from the library's name or torch/version.py; "
		    "\"\" if neither tells), build the RecordFunction entry "
		    "points its libtorch_cpu exports and its string ABI");
	for (size_t i = 0; i < nr; i++) {
		const struct trace *t = &jobs[i]->s.trace;
		struct prom_label l[JOB_LABELS + 2];
		char pid[16];

		job_labels(jobs[i], l, pid, sizeof(pid));
		l[JOB_LABELS] = (struct prom_label){ "version",
						    t->torch_version };
		l[JOB_LABELS + 1] = (struct prom_label){ "build", t->build };
		prom_sample(b, name, l, JOB_LABELS + 2, 1);
	}
}

/* Jobs with the CUPTI agent: whether it has CUPTI, and who holds it when
 * it does not (torch.profiler's Kineto, Nsight: then no GPU activity). */
static void cupti_state(struct prom_buf *b, struct job *const *jobs,
			size_t nr)
{
	static const char *const name = "rfbpf_job_cupti_info";

	prom_family(b, name, "gauge", "1 for each job with rfbpf's CUPTI "
		    "agent: state subscribed, held by another tool (holder "
		    "names it; no GPU activity then), taken by another "
		    "tool (one started during a lease), failed or unknown; "
		    "version is the job's CUPTI API version");
	for (size_t i = 0; i < nr; i++) {
		const struct gpu_counts *g = &jobs[i]->s.trace.gpu.counts;
		struct prom_label l[JOB_LABELS + 3];
		char pid[16], version[16];

		if (!g->agent_seen)
			continue;
		job_labels(jobs[i], l, pid, sizeof(pid));
		l[JOB_LABELS] = (struct prom_label){ "state",
						    gpu_cupti_state(g) };
		l[JOB_LABELS + 1] = (struct prom_label){ "holder",
							g->cupti_holder };
		/* The job's CUPTI API version ("" if none was found). */
		snprintf(version, sizeof(version), "%.0u", g->cupti_version);
		l[JOB_LABELS + 2] = (struct prom_label){ "version", version };
		prom_sample(b, name, l, JOB_LABELS + 3, 1);
	}
}

/* Jobs with the CUPTI agent: GPU work or records lost, by why. */
static void gpu_losses(struct prom_buf *b, struct job *const *jobs,
		       size_t nr)
{
	static const char *const name = "rfbpf_job_gpu_lost_total";

	prom_family(b, name, "counter", "GPU records (or launches) lost or "
		    "left out, by reason (see rfbpf's docs/gpu.md)");
	for (size_t i = 0; i < nr; i++) {
		const struct gpu_counts *g = &jobs[i]->s.trace.gpu.counts;
		const struct reason r[] = {
			{ "dropped_by_cupti", g->agent_dropped },
			{ "record_without_time", g->agent_no_time },
			{ "buffer_cut_short", g->agent_buffers_cut },
			{ "buffer_refused", g->agent_buffers_refused },
			{ "launch_failed", g->agent_launches_failed },
			{ "launch_captured", g->agent_launches_captured },
			{ "buffer_left_to_another_tool",
			  g->agent_buffers_left },
			{ "record_without_launch", g->activities_unmatched },
			{ "sync_without_record", g->syncs_without_record },
			{ "launch_without_record",
			  g->launches_evicted_unmatched +
			  g->launches_unmatched_at_end },
		};

		if (!g->agent_seen)
			continue;
		reason_samples(b, name, jobs[i], r, sizeof(r) / sizeof(r[0]));
	}
}

/* A per-op family: one sample per op series of every job. The standard
 * errors are gauges: they count nothing, and rate() of one means
 * nothing. */
struct op_family {
	const char *name, *type, *help;
	double (*value)(const struct job_op *r);
	bool bursts_only;	/* only jobs traced with --bursts have it */
	bool gpu_only;		/* only jobs with the CUPTI agent have it */
	bool memory_only;	/* only jobs traced with --memory have it */
};

static double v_calls(const struct job_op *r) { return r->calls; }
static double v_total(const struct job_op *r) { return r->total_s; }
static double v_self(const struct job_op *r) { return r->self_s; }
static double v_self_se(const struct job_op *r) { return sqrt(r->self_var); }
static double v_gpu_wait(const struct job_op *r) { return r->gpu_wait_s; }
static double v_alloc(const struct job_op *r) { return r->alloc_bytes; }

static const struct op_family op_families[] = {
	{ "rfbpf_op_calls_total", "counter",
	  "Estimated calls of the op: in bursts (the default), ops begun in "
	  "a traced burst's measured part scaled by (stratum/part) (K/K_t) "
	  "(each interval has K strata, one burst at a random moment of "
	  "each, a random K_t of them traced, the others only counting); "
	  "with --sampled, sampled ops scaled by 1/p", v_calls, false, false, false },
	{ "rfbpf_op_calls_stderr", "gauge",
	  "Standard error of rfbpf_op_calls_total: in bursts, the square "
	  "root of the sum over intervals of K_t w^2/(K_t-1) (sum y_k^2 - "
	  "(sum y_k)^2/K_t) per interval, y_k the op's count in traced "
	  "burst k, w its weight (docs/fleet.md); with --sampled, from the "
	  "sampled ops' 1/p "
	  "weights (square root of the sum of w(w-1), w = 1/p)",
	  job_op_calls_se, false, false, false },
	{ "rfbpf_op_seconds_total", "counter",
	  "Estimated inclusive time of the op's calls, weighed as "
	  "rfbpf_op_calls_total", v_total, false, false, false },
	{ "rfbpf_op_seconds_stderr", "gauge",
	  "Standard error of rfbpf_op_seconds_total: in bursts as "
	  "rfbpf_op_calls_stderr, y_k in seconds; with --sampled, from the "
	  "sampled ops' 1/p weights (square root of the sum of w(w-1)d^2, "
	  "w = 1/p, d the duration in seconds)", job_op_seconds_se, false, false, false },
	{ "rfbpf_op_self_seconds_total", "counter",
	  "Estimated self time of the op: self time inside the bursts' "
	  "measured parts (with --sampled, one full-trace window per span at "
	  "a random moment), scaled by the span over the time measured; no "
	  "standard error with --sampled: one window stands for each span, "
	  "and a single cluster gives no variance estimate",
	  v_self, false, false, false },
	{ "rfbpf_op_self_seconds_stderr", "gauge",
	  "Standard error of rfbpf_op_self_seconds_total, in bursts only "
	  "(--sampled's one window per span gives no estimate): as "
	  "rfbpf_op_calls_stderr, y_k the op's self seconds in burst k and w "
	  "the scaling of the self time", v_self_se, true, false, false },
	{ "rfbpf_op_gpu_wait_seconds_total", "counter",
	  "Estimated time the op's calls spent in CUDA synchronize calls "
	  "(stream, event, context, device; their own or in ops nested in "
	  "them), weighed as rfbpf_op_seconds_total; jobs with rfbpf's CUPTI "
	  "agent, in bursts only", v_gpu_wait, true, true, false },
	{ "rfbpf_op_alloc_bytes_total", "counter",
	  "Estimated bytes PyTorch's allocators gave while the op was the "
	  "innermost op on its thread (--memory): each interval's "
	  "rfbpf_job_alloc_bytes_total shared out among the ops as the "
	  "byte-sampled blocks made in the traced bursts' measured parts "
	  "were; in bursts only", v_alloc, true, false, true },
};

/* Calls each job's op series with its labels (pid, process, container,
 * op), every series with calls. */
static void each_op(struct prom_buf *b, struct job *const *jobs, size_t nr,
		    const void *ctx,
		    const struct op_family *only,
		    void (*fn)(struct prom_buf *b, const struct prom_label *l,
			       const struct job_op *r, const void *ctx))
{
	for (size_t i = 0; i < nr; i++) {
		const struct job *j = jobs[i];
		struct prom_label l[JOB_LABELS + 1];
		char pid[16];

		if (only && ((only->bursts_only && !j->bursts) ||
			     (only->gpu_only &&
			      !j->s.trace.gpu.counts.agent_seen) ||
			     (only->memory_only && !j->s.trace.mem.on)))
			continue;
		job_labels(j, l, pid, sizeof(pid));
		for (size_t o = 0; o < j->nr_ops; o++) {
			if (!(j->ops[o].calls > 0))
				continue;
			l[JOB_LABELS] = (struct prom_label){
				"op", job_op_name(j, o) };
			fn(b, l, &j->ops[o], ctx);
		}
	}
}

static void op_sample(struct prom_buf *b, const struct prom_label *l,
		      const struct job_op *r, const void *ctx)
{
	const struct op_family *f = ctx;

	prom_sample(b, f->name, l, JOB_LABELS + 1, f->value(r));
}

static void op_histogram(struct prom_buf *b, const struct prom_label *l,
			 const struct job_op *r, const void *ctx)
{
	const double *bounds = ctx;
	double cum[AGG_LATENCY_BUCKETS], run = 0;

	for (int k = 0; k < AGG_LATENCY_BUCKETS; k++)
		cum[k] = run += r->latency[k];
	prom_histogram(b, "rfbpf_op_duration_seconds", l, JOB_LABELS + 1,
		       bounds, cum, AGG_LATENCY_BUCKETS - 1, r->total_s, run);
}

/* Per-op counters, their standard errors and the latency histogram,
 * every op a series (up to --max-ops, then "[other]"). */
static void per_op(struct prom_buf *b, struct job *const *jobs, size_t nr)
{
	size_t nr_families = sizeof(op_families) / sizeof(op_families[0]);
	double bounds[AGG_LATENCY_BUCKETS - 1];

	for (size_t f = 0; f < nr_families; f++) {
		const struct op_family *of = &op_families[f];

		prom_family(b, of->name, of->type, of->help);
		each_op(b, jobs, nr, of, of, op_sample);
	}
	for (int k = 0; k < AGG_LATENCY_BUCKETS - 1; k++)
		bounds[k] = agg_latency_bounds_s[k];
	prom_family(b, "rfbpf_op_duration_seconds", "histogram", "Estimated "
		    "durations of the op's calls (sampled ops scaled by 1/p)");
	each_op(b, jobs, nr, bounds, NULL, op_histogram);
}

static void gauge(struct prom_buf *b, const char *name, const char *type,
		  const char *help, double v)
{
	prom_family(b, name, type, help);
	prom_sample(b, name, NULL, 0, v);
}

/* The per-job series, one sample per job each. */
static const struct job_series {
	const char *name, *type, *help;
	double (*value)(const struct job *j);
} job_series[] = {
	{ "rfbpf_job_sample_probability", "gauge",
	  "RecordFunction sampling probability the budget chose",
	  v_prob },
	{ "rfbpf_job_estimated_overhead_ratio", "gauge",
	  "Estimated share of the job's CPU time tracing costs it",
	  v_overhead },
	{ "rfbpf_job_window_seconds", "gauge",
	  "Full-trace window per interval (stacks and self time)",
	  v_window },
	{ "rfbpf_job_ops_per_second", "gauge",
	  "Estimated ops per second, all of them, last interval",
	  v_op_rate },
	{ "rfbpf_job_cpu_ratio", "gauge",
	  "The job's CPU seconds per second, last interval", v_cpu_rate },
	{ "rfbpf_job_loader_seconds_per_op", "gauge",
	  "rfbpf's own CPU per traced op of the job, measured and "
	  "charged to its budget", v_loader_cost },
	{ "rfbpf_job_reregistrations_total", "counter",
	  "Times the callback was re-registered (sampling changes and "
	  "windows)", v_rereg },
	{ "rfbpf_job_windows_total", "counter",
	  "Full-trace windows opened (stacks and self time), bursts "
	  "included", v_windows },
	{ "rfbpf_job_bursts_total", "counter",
	  "Bursts the job's control thread ran or skipped",
	  v_bursts },
	{ "rfbpf_job_bursts_skipped_total", "counter",
	  "Bursts the control thread reached after their end (the job's "
	  "CPUs too busy): not traced, not measured",
	  v_bursts_skipped },
	{ "rfbpf_job_bursts_counting_total", "counter",
	  "Bursts that only counted ops, no probe (a random quarter of the "
	  "strata, half until the price is known): the job's CPU per op in them against that in traced "
	  "bursts is what a traced op costs it",
	  v_bursts_counting },
	{ "rfbpf_job_burst_cost_ratio", "gauge",
	  "Share of the job's CPU in a traced burst that tracing costs it, "
	  "as the budget priced it: 1 - (CPU per op counting) / (CPU per "
	  "op traced), measured in the job, plus rfbpf's own CPU per op; "
	  "the calibrated probe cost while that is not measured yet, or "
	  "if higher", v_burst_cost },
	{ "rfbpf_job_bursts_late_total", "counter",
	  "Bursts switched on after their measured part began: ops open "
	  "then lose part of their self time there",
	  v_bursts_late },
	{ "rfbpf_job_events_total", "counter",
	  "Events read from the job's ring buffer", v_events },
	{ "rfbpf_job_events_dropped_total", "counter",
	  "Events the ring buffer had no room for", v_drops },
	{ "rfbpf_job_threads_started_total", "counter",
	  "Threads of the job first seen after it was switched on",
	  v_threads_started },
	{ "rfbpf_job_ops_on_started_threads_total",
	  "counter", "Ops recorded on those threads: PyTorch's sampler "
	  "starts each new thread from the same random state, so a large "
	  "share biases the sampled estimates", v_ops_on_started },
};

static void job_families(struct prom_buf *b, struct job *const *jobs,
			 size_t nr)
{
	for (size_t k = 0; k < sizeof(job_series) / sizeof(job_series[0]);
	     k++)
		per_job(b, jobs, nr, job_series[k].name, job_series[k].type,
			job_series[k].help, job_series[k].value);
	torch_build(b, jobs, nr);
	unpaired(b, jobs, nr);
	python_stacks(b, jobs, nr);
	input_records(b, jobs, nr);
	off_cpu(b, jobs, nr);
	memory(b, jobs, nr);
	cupti_state(b, jobs, nr);
	gpu_losses(b, jobs, nr);
}

/* The daemon's own: its jobs, its settings, its exports, its cost. */
static void daemon_families(struct prom_buf *b, const struct fleet_stats *st)
{
	gauge(b, "rfbpf_jobs_traced", "gauge", "Processes traced now",
	      st->jobs);
	gauge(b, "rfbpf_jobs_started_total", "counter",
	      "Processes switched on since start", st->jobs_started);
	gauge(b, "rfbpf_jobs_ended_total", "counter",
	      "Processes let go since start (exited, switched off, or "
	      "their control thread's lease ran out)", st->jobs_ended);
	gauge(b, "rfbpf_control_leases_lapsed_total", "counter",
	      "--bursts: control threads whose lease ran out, the daemon "
	      "held up for longer than it (stopped, starved of CPU): each "
	      "removed rfbpf's callback and ended, and its process was let "
	      "go and traced again", st->leases_lapsed);
	gauge(b, "rfbpf_activation_failures_total", "counter",
	      "Attempts to switch a process on that it refused",
	      st->activation_failures);
	gauge(b, "rfbpf_processes_refused_total", "counter",
	      "Processes that refused activation (counted once each)",
	      st->processes_refused);
	gauge(b, "rfbpf_jobs_exited_before_traced_total", "counter",
	      "Processes that exited while being switched on",
	      st->jobs_gone_early);
	gauge(b, "rfbpf_activations_deferred_total", "counter",
	      "Attempts on a young process that dispatched no op yet "
	      "(still importing torch): tried again at the next scan",
	      st->not_yet);
	gauge(b, "rfbpf_budget_ratio", "gauge",
	      "--budget: the share of a job's CPU tracing may cost",
	      st->budget);
	gauge(b, "rfbpf_op_cost_seconds", "gauge", "Calibrated cost of "
	      "tracing one op on this host (two uprobe hits)", st->op_cost_s);
	gauge(b, "rfbpf_interval_seconds", "gauge", "--interval",
	      st->interval_s);
	gauge(b, "rfbpf_intervals_total", "counter", "Intervals exported",
	      st->intervals);
	gauge(b, "rfbpf_pprof_profiles_written_total", "counter",
	      "pprof files written to --pprof-dir", st->pprof_written);
	gauge(b, "rfbpf_export_errors_total", "counter",
	      "pprof or metrics files that could not be written",
	      st->pprof_errors + st->prom_errors);
	gauge(b, "rfbpf_interval_cpu_seconds", "gauge",
	      "rfbpf's own CPU time during the last interval",
	      st->last_interval_cpu_s);
	gauge(b, "rfbpf_interval_resident_memory_bytes", "gauge",
	      "rfbpf's resident memory at the end of the last interval",
	      st->last_interval_rss);
	prom_process_write(b, &st->process);
}

void fleet_metrics_write(struct prom_buf *b, struct job *const *jobs,
			 size_t nr, const struct fleet_stats *st)
{
	per_op(b, jobs, nr);
	job_families(b, jobs, nr);
	fleet_collectives_write(b, jobs, nr, st->interval_s);
	daemon_families(b, st);
}
