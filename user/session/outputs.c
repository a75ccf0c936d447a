// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "export/folded.h"
#include "export/out_file.h"
#include "export/table.h"
#include "export/table_collectives.h"
#include "export/table_sort.h"
#include "model/profile_sink.h"
#include "model/rank_summary.h"
#include "session/outputs.h"

/* 0 if path can be written (it is created, empty), else -1 with errno. */
static int creatable(const char *path)
{
	FILE *f = fopen(path, "we");

	return f ? fclose(f) : -1;
}

/* --slow-step: remembered here, written by outputs_poll once the op
 * that ended the step is in the window too. */
static void on_step(void *ctx, struct trace *t, const struct step *st)
{
	struct outputs *o = ctx;

	(void)t;
	if (st->end_ns - st->start_ns > o->slow_ns) {
		o->slow_step = st->number;
		o->slow_steps++;
		o->slow_dur_ns = st->end_ns - st->start_ns;
	}
}

int outputs_start(struct outputs *o, struct trace *t,
		  const struct options *opt)
{
	struct trace_sink s;

	memset(o, 0, sizeof(*o));
	o->slow_ns = (uint64_t)(opt->slow_step_ms * 1e6);
	/* Steps first: each op is counted in (or kept out of) its step
	 * before any sink sees it. */
	o->slow_step = -1;
	/* --all's children keep steps for the rank table, when every op
	 * (so every marker) is seen. */
	if (options_want_steps(opt) ||
	    (opt->rank_summary && opt->sample_prob == 1.0 &&
	     opt->tree_prob == 1.0 && (opt->scopes & (1u << RF_SCOPE_USER)))) {
		steps_init(&o->steps, opt->step_op, opt->from_step, opt->steps,
			   opt->steps || opt->from_step >= 0);
		t->steps = &o->steps;
	}
	per_step_init(&o->per_step);
	if (opt->per_step) {
		s = per_step_sink(&o->per_step);
		trace_add_sink(t, &s);
	}
	collectives_init(&o->coll);
	s = collectives_sink(&o->coll);
	trace_add_sink(t, &s);
	aggregate_init(&o->agg);
	stack_profile_init(&o->stacks);
	stack_profile_init(&o->gpu_stacks);
	if (opt->tree_prob < 1.0)
		aggregate_by_tree(&o->agg);
	s = aggregate_sink(&o->agg);
	trace_add_sink(t, &s);
	aggregate_init(&o->grouped);
	if (opt->group_stack_n || opt->group_shapes) {
		if (opt->tree_prob < 1.0)
			aggregate_by_tree(&o->grouped);
		if (opt->group_stack_n)
			aggregate_group_by_stack(&o->grouped, &t->py,
						 opt->group_stack_n);
		if (opt->group_shapes)
			aggregate_group_by_shapes(&o->grouped, &t->inputs);
		s = aggregate_sink(&o->grouped);
		trace_add_sink(t, &s);
	}
	if (opt->folded_path || opt->off_cpu_folded_path ||
	    opt->memory_folded_path) {
		s = profile_sink_ops(&o->stacks);
		trace_add_sink(t, &s);
	}
	if (opt->gpu_folded_path) {
		s = profile_sink_gpu_kernels(&o->gpu_stacks);
		trace_add_sink(t, &s);
	}
	/* Every path is tried now, before anything is traced: a path that
	 * cannot be written must not cost the user the whole run. The
	 * folded files are written at the end, into the files made here. */
	if (opt->folded_path && creatable(opt->folded_path)) {
		o->bad_path = opt->folded_path;
		return -1;
	}
	if (opt->gpu_folded_path && creatable(opt->gpu_folded_path)) {
		o->bad_path = opt->gpu_folded_path;
		return -1;
	}
	if (opt->off_cpu_folded_path && creatable(opt->off_cpu_folded_path)) {
		o->bad_path = opt->off_cpu_folded_path;
		return -1;
	}
	if (opt->memory_folded_path && creatable(opt->memory_folded_path)) {
		o->bad_path = opt->memory_folded_path;
		return -1;
	}
	if (opt->flight_s && opt->trace_path) {	/* fleet jobs: job_recorder.c */
		/* The file is made only when a window is written: tried
		 * now, so a bad path fails before anything is traced. */
		o->bad_path = opt->trace_path;
		if (chrome_open(&o->chrome, opt->trace_path))
			return -1;
		chrome_discard(&o->chrome);
		if (flight_recorder_init(&o->flight, opt->flight_s,
					 opt->flight_mb))
			return -1;
		o->bad_path = NULL;
		o->flight_on = true;
		s = flight_recorder_sink(&o->flight);
		trace_add_sink(t, &s);
		if (opt->slow_step_ms) {
			s = (struct trace_sink){ .step = on_step, .ctx = o };
			trace_add_sink(t, &s);
		}
	} else if (opt->trace_path && perfetto_path(opt->trace_path)) {
		o->bad_path = opt->trace_path;
		if (perfetto_open(&o->perfetto, opt->trace_path))
			return -1;
		o->bad_path = NULL;
		o->perfetto_open = true;
		s = perfetto_sink(&o->perfetto);
		trace_add_sink(t, &s);
	} else if (opt->trace_path) {
		o->bad_path = opt->trace_path;
		if (chrome_open(&o->chrome, opt->trace_path))
			return -1;
		o->bad_path = NULL;
		o->chrome_open = true;
		s = chrome_sink(&o->chrome);
		trace_add_sink(t, &s);
	}
	return 0;
}

static int failed(const char *path)
{
	fprintf(stderr, "rfbpf: cannot write %s: %s\n", path,
		strerror(errno));
	return 1;
}

/* --per-step: a block for each step, after the table; --top if given,
 * else 10 rows a step. */
static void print_per_step(FILE *f, const struct trace *t,
			   const struct per_step *p, const struct options *opt)
{
	int top = opt->top_set ? opt->top : 10;

	for (size_t i = 0; i < p->nr; i++)
		print_step_table(f, t, &p->blocks[i].agg, &p->blocks[i].step,
				 opt->sort, top);
	if (!p->nr)
		fprintf(f, "\nNo step to show per step: %s\n",
			t->steps->source == STEP_NONE ? "no step marker was "
			"seen (--step-op names one)" : "none began");
	if (p->ops_past_max)
		fprintf(f, "(%llu ops in steps past the first %d not shown)\n",
			(unsigned long long)p->ops_past_max, PER_STEP_MAX);
}

/* The table and --top-wakers on standard output, through an out_file so
 * that a full disk or a closed pipe is said with its errno. 0, or -1
 * with errno. */
static int print_tables(struct outputs *o, const struct trace *t,
			const struct options *opt)
{
	struct out_file out;
	FILE *f = stdout;

	fflush(stdout);
	if (!out_file_dup(&out, STDOUT_FILENO))
		f = out.f;
	print_table(f, t, opt->group_stack_n || opt->group_shapes ?
		    &o->grouped : &o->agg, opt->sort, opt->top);
	print_collectives(f, t, &o->coll);
	if (opt->top_wakers)
		print_wakers(f, t, &o->agg, opt->top_wakers);
	if (opt->per_step)
		print_per_step(f, t, &o->per_step, opt);
	if (f != stdout)
		return out_file_close(&out);
	return fflush(stdout) ? -1 : 0;
}

/* FILE.json -> FILE.<what>.json (the extension kept last, where
 * viewers look for it). */
static void dump_path(char *buf, size_t len, const char *path,
		      const char *what)
{
	const char *slash = strrchr(path, '/');
	const char *dot = strrchr(slash ? slash : path, '.');
	size_t n = strlen(path);

	/* trace.json.gz -> trace.<what>.json.gz */
	if (n > 8 && !strcmp(path + n - 8, ".json.gz") &&
	    path + n - 8 > (slash ? slash + 1 : path))
		dot = path + n - 8;

	if (!dot || dot == (slash ? slash + 1 : path))
		snprintf(buf, len, "%s.%s", path, what);
	else
		snprintf(buf, len, "%.*s.%s%s", (int)(dot - path), path, what,
			 dot);
}

static void dump(struct outputs *o, const struct trace *t, const char *path,
		 const char *why)
{
	if (flight_recorder_dump(&o->flight, path, t, NULL, why))
		fprintf(stderr, "rfbpf: cannot write %s: %s\n", path,
			strerror(errno));
	else
		fprintf(stderr, "rfbpf: wrote the last %.3g s (%s) to %s\n",
			o->flight.window_ns / 1e9, why, path);
}

void outputs_poll(struct outputs *o, const struct trace *t,
		  const struct options *opt, unsigned dump_requests)
{
	char path[4096], what[64], why[96];

	if (!o->flight_on)
		return;
	if (dump_requests) {
		snprintf(what, sizeof(what), "sigusr1-%u", ++o->sigusr1_dumps);
		dump_path(path, sizeof(path), opt->trace_path, what);
		dump(o, t, path, "SIGUSR1");
	}
	if (o->slow_step >= 0) {
		snprintf(what, sizeof(what), "slow-step-%lld",
			 (long long)o->slow_step);
		snprintf(why, sizeof(why), "step %lld took %.1f ms, over "
			 "--slow-step %g", (long long)o->slow_step,
			 o->slow_dur_ns / 1e6, opt->slow_step_ms);
		dump_path(path, sizeof(path), opt->trace_path, what);
		dump(o, t, path, why);
		o->slow_step = -1;
	}
}

int outputs_publish(struct outputs *o, const struct options *opt)
{
	if ((!o->chrome_open && !o->perfetto_open) || o->published)
		return 0;
	o->published = true;
	if (o->perfetto_open)
		return perfetto_publish(&o->perfetto) ?
		       failed(opt->trace_path) : 0;
	return chrome_publish(&o->chrome) ? failed(opt->trace_path) : 0;
}

bool outputs_discard(struct outputs *o)
{
	bool had = (o->chrome_open && chrome_discard(&o->chrome)) |
		   (o->perfetto_open && perfetto_discard(&o->perfetto));

	o->chrome_open = o->perfetto_open = false;
	return had;
}

/* --all's child: what the rank table needs, for the parent. */
static int write_rank_summary(const struct outputs *o, const struct trace *t,
			      const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	rank_summary_write(f, t, &o->coll);
	return fclose(f) ? -1 : 0;
}

int outputs_finish(struct outputs *o, const struct trace *t,
		   const struct options *opt)
{
	char bias[512];
	int ret = 0;

	if (opt->table) {
		table_sort_key(t, opt->sort, bias, sizeof(bias));
		if (bias[0])
			fprintf(stderr, "rfbpf: warning: %s\n", bias);
		/* A reader that stopped reading (| head) is no failure. */
		if (print_tables(o, t, opt) && errno != EPIPE)
			ret = failed("the table to standard output");
	} else if (trace_sampler_bias_note(t, bias, sizeof(bias)))
		fprintf(stderr, "rfbpf: warning: %s\n", bias);
	if (o->chrome_open && chrome_finish(&o->chrome, t, &o->agg))
		ret = failed(opt->trace_path);
	if (o->perfetto_open && perfetto_finish(&o->perfetto, t))
		ret = failed(opt->trace_path);
	o->perfetto_open = false;
	/* A slow step seen only in the last events read. */
	outputs_poll(o, t, opt, 0);
	if (o->flight_on && flight_recorder_dump(&o->flight, opt->trace_path,
						 t, &o->agg, "end of tracing"))
		ret = failed(opt->trace_path);
	o->chrome_open = false;
	if (opt->folded_path &&
	    export_folded(t, &o->stacks, opt->folded_path))
		ret = failed(opt->folded_path);
	if (opt->off_cpu_folded_path &&
	    export_off_cpu_folded(t, &o->stacks, opt->off_cpu_folded_path))
		ret = failed(opt->off_cpu_folded_path);
	if (opt->memory_folded_path &&
	    export_memory_folded(t, &o->stacks, opt->memory_folded_path))
		ret = failed(opt->memory_folded_path);
	if (opt->gpu_folded_path && !t->gpu.counts.agent_seen)
		fprintf(stderr, "rfbpf: %s has no GPU frames: the target never "
			"loaded the CUPTI agent (run it with "
			"CUDA_INJECTION64_PATH=/path/to/librfbpf_cupti.so)\n",
			opt->gpu_folded_path);
	if (opt->gpu_folded_path &&
	    export_gpu_folded(t, &o->gpu_stacks, opt->gpu_folded_path))
		ret = failed(opt->gpu_folded_path);
	if (opt->rank_summary && write_rank_summary(o, t, opt->rank_summary))
		ret = failed(opt->rank_summary);
	return ret;
}

void outputs_free(struct outputs *o)
{
	aggregate_free(&o->agg);
	aggregate_free(&o->grouped);
	per_step_free(&o->per_step);
	collectives_free(&o->coll);
	if (o->flight_on)
		flight_recorder_free(&o->flight);
	stack_profile_free(&o->stacks);
	stack_profile_free(&o->gpu_stacks);
}
