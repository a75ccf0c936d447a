// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "chrome.h"
#include "json_writer.h"
#include "version.h"

static const char *truncation_reason(uint32_t flags)
{
	if (flags & OP_CLOSED_BY_PARENT)
		return "closed_by_parent";
	if (flags & OP_THREAD_EXITED)
		return "thread_exited";
	if (flags & OP_OPEN_AT_DETACH)
		return "open_at_detach";
	if (flags & OP_REPLACED)
		return "replaced";
	return NULL;
}

/* A thread's name, before its first op; a child process's main thread
 * (--children) names its process too. */
static void name_thread(struct chrome_writer *w, const struct trace *t,
			const struct thread *th, uint32_t pid)
{
	char name[64];

	if (u64map_get(&w->threads, th->tid) ||
	    !u64map_put(&w->threads, th->tid, 1))
		return;
	if (pid != t->pid && th->tid == pid) {
		snprintf(name, sizeof(name), "%s (child of %u)",
			 th->comm[0] ? th->comm : "process", t->pid);
		fprintf(w->f, "%s{\"ph\":\"M\",\"name\":\"process_name\","
			"\"pid\":%u,\"tid\":0,\"args\":{\"name\":",
			chrome_next(w), pid);
		json_string(w->f, name);
		fputs("}}", w->f);
	}
	snprintf(name, sizeof(name), "%s [%u]",
		 th->comm[0] ? th->comm : "thread", th->tid);
	fprintf(w->f, "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,"
		"\"tid\":%u,\"args\":{\"name\":", chrome_next(w), pid, th->tid);
	json_string(w->f, name);
	fputs("}}", w->f);
}

static void write_op(void *ctx, struct trace *t, const struct closed_op *c)
{
	struct chrome_writer *w = ctx;
	const struct op *o = c->op;
	const char *why = truncation_reason(o->flags);
	FILE *f = w->f;

	if (c->thread)
		name_thread(w, t, c->thread, c->pid);
	fprintf(f, "%s{\"ph\":\"X\",\"cat\":", chrome_next(w));
	json_string(f, scope_category(o->scope));
	fputs(",\"name\":", f);
	json_string(f, names_get(&t->names, o->name));
	fprintf(f, ",\"pid\":%u,\"tid\":%u,\"ts\":", c->pid, o->tid);
	chrome_ts(w, o->start_ns);
	fputs(",\"dur\":", f);
	json_us(f, op_duration(o));
	fprintf(f, ",\"args\":{\"Sequence number\":%lld,\"scope\":\"%s\"",
		(long long)o->seq, scope_name(o->scope));
	if (why)
		fprintf(f, ",\"truncated\":\"%s\"", why);
	if (o->flags & OP_ASYNC_END)
		fputs(",\"async_end\":true", f);
	if (o->flags & OP_NAME_TRUNCATED)
		fputs(",\"name_truncated\":true", f);
	fputs("}}", f);
}

static void write_process_name(struct chrome_writer *w,
			       const struct trace *t)
{
	fprintf(w->f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,"
		"\"tid\":0,\"args\":{\"name\":", chrome_next(w), t->pid);
	json_string(w->f, t->process_name);
	fputs("}}", w->f);
}

/* Per-op totals, and for a sampled capture the estimates for all ops
 * (scaled by 1/p) with their standard errors: what a fleet aggregates. */
static void write_op_stats(FILE *f, const struct trace *t,
			   const struct aggregate *a)
{
	bool sampled = trace_keep_prob(t) < 1.0;

	fputs(",\"op_stats\":[", f);
	for (size_t i = 0, n = 0; i < a->nr; i++) {
		const struct op_stats *r = &a->rows[i];
		struct op_estimate e;

		if (!r->calls)
			continue;
		fputs(n++ ? ",\n{\"name\":" : "\n{\"name\":", f);
		json_string(f, names_get(&t->names, r->name));
		fprintf(f, ",\"calls\":%llu,\"total_ns\":%llu,\"self_ns\":%llu",
			(unsigned long long)r->calls,
			(unsigned long long)r->total_ns,
			(unsigned long long)r->self_ns);
		if (t->gpu.counts.agent_seen)
			fprintf(f, ",\"self_cuda_ns\":%llu,\"cuda_total_ns\":"
				"%llu,\"kernels\":%llu",
				(unsigned long long)r->gpu_self_ns,
				(unsigned long long)r->gpu_total_ns,
				(unsigned long long)r->kernels);
		if (sampled) {
			estimate_op(r, trace_keep_prob(t), &e);
			fprintf(f, ",\"est_calls\":%.1f,\"est_calls_se\":%.1f,"
				"\"est_total_ns\":%.0f,\"est_total_se_ns\":%.0f,"
				"\"est_self_ns\":%.0f,\"est_self_se_ns\":%.0f",
				e.calls, e.calls_se, e.total_ns, e.total_se,
				e.self_ns, e.self_se);
		}
		fputc('}', f);
	}
	fputs("]", f);
}

#define COUNT(name, v) fprintf(f, ",\"" name "\":%llu", \
			       (unsigned long long)(v))

/* Every GPU counter, under "gpu" (absent when the agent was not seen). */
static void write_gpu_counts(FILE *f, const struct trace *t)
{
	const struct gpu_counts *g = &t->gpu.counts;

	if (!g->agent_seen)
		return;
	fputs(",\"gpu\":{\"agent\":true", f);
	COUNT("launches", g->launches);
	COUNT("syncs", g->syncs);
	COUNT("records", g->activities);
	COUNT("records_without_launch", g->activities_unmatched);
	COUNT("launches_evicted_without_record",
	      g->launches_evicted_unmatched);
	COUNT("launches_without_record_at_detach",
	      g->launches_unmatched_at_end);
	COUNT("launches_outside_ops", g->launches_outside_ops);
	COUNT("launches_in_unrecorded_ops", g->launches_op_unknown);
	COUNT("kernel_names_truncated", g->names_truncated);
	COUNT("kernel_name_faults", g->name_faults);
	COUNT("bpf_launch_hits", t->counts.gpu_launch_hits);
	COUNT("bpf_record_hits", t->counts.gpu_record_hits);
	COUNT("bad_records", t->counts.gpu_bad_records);
	COUNT("agent_launches", g->agent_launches);
	COUNT("agent_records", g->agent_records);
	COUNT("agent_dropped_by_cupti", g->agent_dropped);
	COUNT("agent_untraced_records", g->agent_untraced);
	COUNT("agent_unknown_records", g->agent_unknown);
	COUNT("agent_errors", g->agent_errors);
	fprintf(f, ",\"final_flush_missed\":%s,\"agent_counters_stale\":%s",
		g->final_flush_missed ? "true" : "false",
		g->agent_counters_stale ? "true" : "false");
	fputc('}', f);
}

static void write_other_data(FILE *f, const struct trace *t,
			     const struct aggregate *a, uint64_t base_ns)
{
	const struct counts *c = &t->counts;

	fputs("\"otherData\":{\"tracer\":\"rfbpf " RFBPF_VERSION
	      "\",\"library\":", f);
	json_string(f, t->library);
	fputs(",\"build\":", f);
	json_string(f, t->build);
	fputs(",\"probes\":", f);
	json_string(f, t->probes);
	fprintf(f, ",\"sample_prob\":%g,\"tree_sample_prob\":%g",
		t->sample_prob, t->tree_prob);
	/* ts is µs after this CLOCK_MONOTONIC instant (bpf_ktime_get_ns()),
	 * to join the trace with other monotonic logs. */
	fprintf(f, ",\"base_monotonic_ns\":%llu",
		(unsigned long long)base_ns);
	COUNT("events", c->events);
	fputs(",\"before_events\":{", f);
	for (unsigned v = 0, first = 1; v < RF_V_NR_BEFORE; v++, first = 0)
		fprintf(f, "%s\"%s\":%llu", first ? "" : ",",
			variant_name(v), (unsigned long long)c->before[v]);
	fputs("},\"bpf_hits\":{", f);
	for (unsigned v = 0, first = 1; v < RF_V_NR; v++, first = 0)
		fprintf(f, "%s\"%s\":%llu", first ? "" : ",",
			variant_name(v), (unsigned long long)c->bpf_hits[v]);
	fputc('}', f);
	COUNT("end_events", c->ends);
	COUNT("thread_exits", c->thread_exits);
	COUNT("drops", c->drops);
	COUNT("unmatched_ends", c->unmatched_ends);
	COUNT("repeated_ends", c->repeated_ends);
	COUNT("async_ends", c->async_ends);
	COUNT("truncated_ops", counts_truncated(c));
	COUNT("open_at_detach", c->open_at_detach);
	COUNT("open_at_thread_exit", c->open_at_thread_exit);
	COUNT("closed_by_parent", c->closed_by_parent);
	COUNT("replaced", c->replaced);
	COUNT("names_truncated", c->names_truncated);
	COUNT("name_faults", c->name_faults);
	COUNT("out_of_memory", c->oom);
	COUNT("trees_seen", c->trees_seen);
	COUNT("trees_kept", c->trees_kept);
	COUNT("tree_too_deep", c->tree_too_deep);
	COUNT("ops", c->ops);
	COUNT("threads_seen", c->threads_seen);
	write_gpu_counts(f, t);
	if (a)
		write_op_stats(f, t, a);
	fputc('}', f);
}

static void on_gpu(void *ctx, struct trace *t, const struct gpu_done *g)
{
	chrome_write_gpu(ctx, t, g);
}

static void on_gpu_api(void *ctx, struct trace *t,
		       const struct gpu_launch *call)
{
	chrome_write_gpu_api(ctx, t, call);
}

struct trace_sink chrome_sink(struct chrome_writer *w)
{
	return (struct trace_sink){ .op = write_op, .gpu = on_gpu,
				    .gpu_api = on_gpu_api, .ctx = w };
}

void chrome_begin(struct chrome_writer *w, FILE *f, uint64_t base_ns,
		  uint64_t base_wall_ns)
{
	memset(w, 0, sizeof(*w));
	w->f = f;
	w->base_ns = base_ns;
	/* Kineto's header: times in the file are µs after base, displayed
	 * in ms (older Perfetto readers take "ns" to mean the file's unit
	 * and shrink the trace 1000x). */
	fprintf(f, "{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\","
		"\"baseTimeNanoseconds\":%llu,\"traceEvents\":[\n",
		(unsigned long long)base_wall_ns);
}

int chrome_open(struct chrome_writer *w, const char *path)
{
	struct timespec mono, wall;
	uint64_t mono_ns, wall_ns;
	FILE *f = fopen(path, "we");

	if (!f)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &wall);
	mono_ns = mono.tv_sec * 1000000000ull + mono.tv_nsec;
	wall_ns = wall.tv_sec * 1000000000ull + wall.tv_nsec;
	/* The base is this instant on both clocks: ops begin after it (a
	 * GPU record may come before and is written negative). */
	chrome_begin(w, f, mono_ns, wall_ns);
	w->own_file = true;
	return 0;
}

int chrome_finish(struct chrome_writer *w, const struct trace *t,
		  const struct aggregate *a)
{
	int err;

	write_process_name(w, t);
	fputs("\n],\n", w->f);
	write_other_data(w->f, t, a, w->base_ns);
	fputs("}\n", w->f);
	err = ferror(w->f);
	u64map_free(&w->threads);
	u64map_free(&w->tracks);
	if (w->own_file && fclose(w->f) && !err)
		return -1;
	w->f = NULL;
	if (err) {
		errno = EIO;
		return -1;
	}
	return 0;
}
