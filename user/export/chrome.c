// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include "model/aggregate.h"
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

static void write_op(FILE *f, const struct trace *t, const struct op *o)
{
	const char *why = truncation_reason(o->flags);

	fputs(",\n{\"ph\":\"X\",\"cat\":", f);
	json_string(f, scope_category(o->scope));
	fputs(",\"name\":", f);
	json_string(f, names_get(&t->names, o->name));
	fprintf(f, ",\"pid\":%u,\"tid\":%u,\"ts\":", trace_pid_of(t, o->tid),
		o->tid);
	json_us(f, o->start_ns);
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

static void write_metadata_events(FILE *f, const struct trace *t)
{
	fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,"
		"\"tid\":0,\"args\":{\"name\":", t->pid);
	json_string(f, t->process_name);
	fputs("}}", f);
	for (size_t i = 0; i < t->nr_threads; i++) {
		const struct thread *th = &t->threads[i];
		uint32_t pid = th->pid ? th->pid : t->pid;
		char name[64];

		/* A child process's main thread names its process. */
		if (pid != t->pid && th->tid == pid) {
			snprintf(name, sizeof(name), "%s (child of %u)",
				 th->comm[0] ? th->comm : "process", t->pid);
			fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"process_name\""
				",\"pid\":%u,\"tid\":0,\"args\":{\"name\":",
				pid);
			json_string(f, name);
			fputs("}}", f);
		}
		snprintf(name, sizeof(name), "%s [%u]",
			 th->comm[0] ? th->comm : "thread", th->tid);
		fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\","
			"\"pid\":%u,\"tid\":%u,\"args\":{\"name\":", pid,
			th->tid);
		json_string(f, name);
		fputs("}}", f);
	}
}

/* Per-op totals, and for a sampled capture the estimates for all ops
 * (scaled by 1/p) with their standard errors: what a fleet aggregates. */
static void write_op_stats(FILE *f, const struct trace *t)
{
	struct aggregate a;
	bool sampled = trace_keep_prob(t) < 1.0;

	if (aggregate_ops(t, &a))
		return;
	fputs(",\"op_stats\":[", f);
	for (size_t i = 0, n = 0; i < a.nr; i++) {
		const struct op_stats *r = &a.rows[i];
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
	aggregate_free(&a);
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

static void write_other_data(FILE *f, const struct trace *t)
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
	write_gpu_counts(f, t);
	write_op_stats(f, t);
	fputc('}', f);
}

void write_chrome_trace(FILE *f, const struct trace *t)
{
	fputs("{\"displayTimeUnit\":\"ns\",", f);
	write_other_data(f, t);
	fputs(",\n\"traceEvents\":[\n", f);
	write_metadata_events(f, t);
	for (size_t i = 0; i < t->nr_ops; i++)
		write_op(f, t, &t->ops[i]);
	write_chrome_gpu_events(f, t);
	fputs("\n]}\n", f);
}

int export_chrome_trace(const struct trace *t, const char *path)
{
	FILE *f = fopen(path, "we");

	if (!f)
		return -1;
	write_chrome_trace(f, t);
	if (ferror(f)) {
		fclose(f);
		errno = EIO;
		return -1;
	}
	return fclose(f);
}
