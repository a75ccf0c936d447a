// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "chrome.h"
#include "chrome_python.h"
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

static void write_sort_index(struct chrome_writer *w, const char *what,
			     uint32_t pid, uint32_t tid, uint64_t index)
{
	fprintf(w->f, "%s{\"ph\":\"M\",\"name\":\"%s_sort_index\","
		"\"pid\":%u,\"tid\":%u,\"args\":{\"sort_index\":%llu}}",
		chrome_next(w), what, pid, tid, (unsigned long long)index);
}

/* A process's name, label and place, as Kineto writes them: the target
 * first, its children (--children) after it, GPUs last. */
static void name_process(struct chrome_writer *w, uint32_t pid,
			 const char *name, unsigned sort_index)
{
	fprintf(w->f, "%s{\"ph\":\"M\",\"name\":\"process_name\","
		"\"pid\":%u,\"tid\":0,\"args\":{\"name\":", chrome_next(w),
		pid);
	json_string(w->f, name);
	fprintf(w->f, "}},\n{\"ph\":\"M\",\"name\":\"process_labels\","
		"\"pid\":%u,\"tid\":0,\"args\":{\"labels\":\"CPU\"}}", pid);
	w->events++;
	write_sort_index(w, "process", pid, 0, sort_index);
}

/* A thread's name (its comm: viewers show the tid beside it), before its
 * first op; a child process's main thread (--children) names its process
 * too. */
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
		name_process(w, pid, name, 1);
	}
	fprintf(w->f, "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,"
		"\"tid\":%u,\"args\":{\"name\":", chrome_next(w), pid, th->tid);
	json_string(w->f, names_get(&t->names, th->comm_name));
	fputs("}}", w->f);
	write_sort_index(w, "thread", pid, th->tid, th->tid);
}

/* Kineto's flow from a forward op to the backward op of its autograd
 * node: "s" on the forward op's start, "f" bound to the backward op. */
static void write_fwdbwd(struct chrome_writer *w, const struct closed_op *c)
{
	const struct op *o = c->op;
	struct fwd_op fwd;
	uint64_t id;

	if (o->seq < 0)
		return;
	if (!o->fwd_thread) {
		fwdbwd_forward(&w->fwdbwd, c->pid, o);
		return;
	}
	if (!fwdbwd_backward(&w->fwdbwd, c->pid, o, &fwd))
		return;
	id = ++w->flows;
	w->fwdbwd_flows++;
	fprintf(w->f, "%s{\"ph\":\"s\",\"cat\":\"fwdbwd\",\"name\":"
		"\"fwdbwd\",\"id\":%llu,\"pid\":%u,\"tid\":%u,\"ts\":",
		chrome_next(w), (unsigned long long)id, fwd.pid, fwd.tid);
	chrome_ts(w, fwd.start_ns);
	fprintf(w->f, "},\n{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"fwdbwd\","
		"\"name\":\"fwdbwd\",\"id\":%llu,\"pid\":%u,\"tid\":%u,"
		"\"ts\":", (unsigned long long)id, c->pid, o->tid);
	w->events++;
	chrome_ts(w, o->start_ns);
	fputc('}', w->f);
}

/* One end of an async slice, up to its timestamp: the slice is the op's
 * id, so the "b" and the "e" pair up whatever comes between them. */
static void async_event(struct chrome_writer *w, const struct trace *t,
			const struct closed_op *c, const char *ph,
			uint32_t tid, uint64_t ns)
{
	FILE *f = w->f;

	fprintf(f, "%s{\"ph\":\"%s\",\"cat\":", chrome_next(w), ph);
	json_string(f, scope_category(c->op->scope));
	fputs(",\"name\":", f);
	json_string(f, names_get(&t->names, c->op->name));
	fprintf(f, ",\"id\":%llu,\"pid\":%u,\"tid\":%u,\"ts\":",
		(unsigned long long)c->op->id + 1, c->pid, tid);
	chrome_ts(w, ns);
}

/* An op that ended on another thread than it began on is no slice of
 * either thread (it would cross the slices its thread opened after it):
 * it is an async slice, begun on its thread and ended on the other, in
 * a track of its own, as Perfetto draws futures. */
static void write_async_op(struct chrome_writer *w, const struct trace *t,
			   const struct closed_op *c)
{
	const struct op *o = c->op;
	FILE *f = w->f;

	async_event(w, t, c, "b", o->tid, o->start_ns);
	fprintf(f, ",\"args\":{\"External id\":%llu,\"scope\":\"%s\","
		"\"async_end\":true,\"end tid\":%u,\"dur\":",
		(unsigned long long)o->id + 1, scope_name(o->scope),
		o->end_tid);
	json_us(f, op_duration(o));
	fputs("}}", f);
	async_event(w, t, c, "e", o->end_tid, o->end_ns);
	fputc('}', f);
}

/* --shapes: the op's inputs, as Kineto writes them with record_shapes
 * (the lists are JSON already: user/model/op_inputs.h). */
static void write_inputs(FILE *f, const struct trace *t, const struct op *o)
{
	const struct input_set *in = op_inputs_get(&t->inputs, o->inputs);

	if (!in)
		return;
	fprintf(f, ",\"Input Dims\":%s,\"Input type\":%s,\"Input Strides\":%s"
		",\"Concrete Inputs\":%s", names_get(&t->names, in->dims),
		names_get(&t->names, in->types),
		names_get(&t->names, in->strides),
		names_get(&t->names, in->concrete));
}

static void write_op(void *ctx, struct trace *t, const struct closed_op *c)
{
	struct chrome_writer *w = ctx;
	const struct op *o = c->op;
	const char *why = truncation_reason(o->flags);
	FILE *f = w->f;

	if (c->thread)
		name_thread(w, t, c->thread, c->pid);
	if (o->flags & OP_ASYNC_END) {
		write_async_op(w, t, c);
		chrome_py_closed(w, t, o);
		return;
	}
	fprintf(f, "%s{\"ph\":\"X\",\"cat\":", chrome_next(w));
	json_string(f, scope_category(o->scope));
	fputs(",\"name\":", f);
	json_string(f, names_get(&t->names, o->name));
	fprintf(f, ",\"pid\":%u,\"tid\":%u,\"ts\":", c->pid, o->tid);
	chrome_ts(w, o->start_ns);
	fputs(",\"dur\":", f);
	json_us(f, op_duration(o));
	/* Kineto's args: the id that joins an op to its CUDA runtime calls
	 * and kernels, and the sequence number only when there is one,
	 * with the forward op's thread (0 on forward ops). */
	fprintf(f, ",\"args\":{\"External id\":%llu,\"Record function id\":"
		"%llu", (unsigned long long)o->id + 1,
		(unsigned long long)o->id + 1);
	if (o->seq >= 0) {
		fprintf(f, ",\"Sequence number\":%lld", (long long)o->seq);
		if (t->fwd_threads || o->fwd_thread)
			fprintf(f, ",\"Fwd thread id\":%llu",
				(unsigned long long)o->fwd_thread);
	}
	fprintf(f, ",\"scope\":\"%s\"", scope_name(o->scope));
	write_inputs(f, t, o);
	if (why)
		fprintf(f, ",\"truncated\":\"%s\"", why);
	if (o->flags & OP_ASYNC_END)
		fputs(",\"async_end\":true", f);
	if (o->flags & OP_NAME_TRUNCATED)
		fputs(",\"name_truncated\":true", f);
	fputs("}}", f);
	write_fwdbwd(w, c);
	chrome_py_closed(w, t, o);
}

static void write_process_name(struct chrome_writer *w,
			       const struct trace *t)
{
	name_process(w, t->pid, t->process_name, 0);
}

/* Per-op totals, and for a sampled capture the estimates for all ops
 * (scaled by 1/p) with their standard errors: what a fleet aggregates. */
/* ,"key":v with `decimals` digits, null when v is not finite. */
static void est_field(FILE *f, const char *key, double v, int decimals)
{
	fprintf(f, ",\"%s\":", key);
	json_fixed(f, v, decimals);
}

static void write_op_stats(FILE *f, const struct trace *t,
			   const struct aggregate *a)
{
	bool sampled = trace_keep_prob(t) < 1.0;
	bool self_known = trace_self_known(t);

	/* A quantity that cannot be estimated is absent, and says why. */
	if (!self_known) {
		fputs(",\"self_time\":", f);
		json_string(f, trace_self_unknown_why);
	}
	fputs(",\"op_stats\":[", f);
	for (size_t i = 0, n = 0; i < a->nr; i++) {
		const struct op_stats *r = &a->rows[i];
		struct op_estimate e;

		if (!r->calls)
			continue;
		fputs(n++ ? ",\n{\"name\":" : "\n{\"name\":", f);
		json_string(f, names_get(&t->names, r->name));
		fprintf(f, ",\"calls\":%llu,\"total_ns\":%llu",
			(unsigned long long)r->calls,
			(unsigned long long)r->total_ns);
		if (self_known)
			fprintf(f, ",\"self_ns\":%llu",
				(unsigned long long)r->self_ns);
		fprintf(f, ",\"truncated_calls\":%llu",
			(unsigned long long)r->truncated);
		/* --off-cpu: time its threads were off CPU in it (self:
		 * while it was the innermost op; its own calls only). */
		if (t->off_cpu && self_known)
			fprintf(f, ",\"self_off_cpu_ns\":%llu,\"off_cpu_ns\":%llu",
				(unsigned long long)r->self_off_cpu_ns,
				(unsigned long long)r->off_cpu_ns);
		/* --memory: as key_averages()' memory columns. */
		if (t->mem.on)
			fprintf(f, ",\"self_cpu_memory_usage\":%lld,"
				"\"cpu_memory_usage\":%lld,"
				"\"self_device_memory_usage\":%lld,"
				"\"device_memory_usage\":%lld",
				(long long)r->self_mem[MEM_CPU],
				(long long)r->mem[MEM_CPU],
				(long long)r->self_mem[MEM_DEVICE],
				(long long)r->mem[MEM_DEVICE]);
		/* Which op launched a kernel is unknown under --sample (see
		 * the table); kept trees hold all their launches. */
		if (t->gpu.counts.agent_seen && self_known)
			fprintf(f, ",\"self_cuda_ns\":%llu,\"cuda_total_ns\":"
				"%llu,\"kernels\":%llu,\"gpu_wait_ns\":%llu",
				(unsigned long long)r->gpu_self_ns,
				(unsigned long long)r->gpu_total_ns,
				(unsigned long long)r->kernels,
				(unsigned long long)r->gpu_wait_ns);
		/* Estimates divide by p, which --sample 1e-300 allows: an
		 * infinite one is null (printf would write "inf"). */
		if (t->gpu.counts.agent_seen && self_known && sampled) {
			est_field(f, "est_self_cuda_ns",
				  r->gpu_self_ns / trace_keep_prob(t), 0);
			est_field(f, "est_cuda_total_ns",
				  r->gpu_total_ns / trace_keep_prob(t), 0);
			est_field(f, "est_gpu_wait_ns",
				  r->gpu_wait_ns / trace_keep_prob(t), 0);
		}
		if (sampled) {
			estimate_op(r, trace_keep_prob(t), &e);
			est_field(f, "est_calls", e.calls, 1);
			est_field(f, "est_calls_se", e.calls_se, 1);
			est_field(f, "est_total_ns", e.total_ns, 0);
			est_field(f, "est_total_se_ns", e.total_se, 0);
			if (self_known) {
				est_field(f, "est_self_ns", e.self_ns, 0);
				est_field(f, "est_self_se_ns", e.self_se, 0);
			}
		}
		fputc('}', f);
	}
	fputs("]", f);
}

#define COUNT(name, v) fprintf(f, ",\"" name "\":%llu", \
			       (unsigned long long)(v))

/* model/loss_counters.h's rows; the children's misses, then the sum of
 * the ways an op was cut short, before the first of those. */
static void write_loss_counts(FILE *f, const struct trace *t)
{
	const struct counts *c = &t->counts;

	for (size_t i = 0; i < nr_loss_counters; i++) {
		const struct loss_counter *l = &loss_counters[i];

		if (l->kind == LOSS_CUT &&
		    (!i || loss_counters[i - 1].kind != LOSS_CUT)) {
			if (t->children) {
				COUNT("child_ops_missed", c->child_ops_missed);
				COUNT("children_probed_after_fork",
				      c->children_probed_late);
				COUNT("children_never_probed",
				      c->children_unprobed);
			}
			COUNT("truncated_ops", counts_truncated(c));
		}
		fprintf(f, ",\"%s\":%llu", l->json,
			(unsigned long long)loss_count(c, l));
	}
}

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
	COUNT("sync_records", g->sync_records);
	COUNT("syncs_without_record", g->syncs_without_record);
	COUNT("launches_evicted_without_record",
	      g->launches_evicted_unmatched);
	COUNT("launches_without_record_at_detach",
	      g->launches_unmatched_at_end);
	COUNT("launches_outside_ops", g->launches_outside_ops);
	COUNT("launches_in_unrecorded_ops", g->launches_op_unknown);
	COUNT("kernel_names_truncated", g->names_truncated);
	COUNT("kernel_names_read_whole", g->names_read_whole);
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
	COUNT("agent_records_without_time", g->agent_no_time);
	COUNT("agent_buffers_cut_short", g->agent_buffers_cut);
	COUNT("agent_buffers_refused", g->agent_buffers_refused);
	COUNT("agent_launches_failed", g->agent_launches_failed);
	COUNT("agent_launches_captured", g->agent_launches_captured);
	COUNT("agent_buffers_left_to_another_tool", g->agent_buffers_left);
	COUNT("agent_left_cupti_inside_its_subscribe",
	      g->agent_yields_in_call);
	fprintf(f, ",\"final_flush_missed\":%s,\"agent_counters_stale\":%s",
		g->final_flush_missed ? "true" : "false",
		g->agent_counters_stale ? "true" : "false");
	fprintf(f, ",\"cupti\":\"%s\"", gpu_cupti_state(g));
	COUNT("cupti_result", g->cupti_result);
	COUNT("clock_source", g->clock_source);
	COUNT("cupti_version", g->cupti_version);
	fputs(",\"cupti_holder\":", f);
	json_string(f, g->cupti_holder);
	if (g->cupti_taken) {
		fputs(",\"cupti_taken_by\":", f);
		json_string(f, g->cupti_taken_by);
		fprintf(f, ",\"cupti_taken_tid\":%d", g->cupti_taken_tid);
	}
	fputc('}', f);
}

/* What traced what: rfbpf, the library and its build, p, the clock. */
static void write_provenance(const struct chrome_writer *w,
			     const struct trace *t)
{
	FILE *f = w->f;

	fputs("\"otherData\":{\"tracer\":\"rfbpf " RFBPF_VERSION
	      "\",\"library\":", f);
	json_string(f, t->library);
	fputs(",\"build\":", f);
	json_string(f, t->build);
	fputs(",\"torch_version\":", f);
	json_string(f, t->torch_version);
	fputs(",\"probes\":", f);
	json_string(f, t->probes);
	fputs(",\"sample_prob\":", f);
	json_double(f, t->sample_prob);
	fputs(",\"tree_sample_prob\":", f);
	json_double(f, t->tree_prob);
	/* ts is µs after this CLOCK_MONOTONIC instant (bpf_ktime_get_ns()),
	 * to join the trace with other monotonic logs. */
	fprintf(f, ",\"base_monotonic_ns\":%llu",
		(unsigned long long)w->base_ns);
}

/* The events read, what was lost, and the ops and threads they made. */
static void write_event_counts(FILE *f, const struct trace *t)
{
	const struct counts *c = &t->counts;

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
	write_loss_counts(f, t);
	COUNT("trees_seen", c->trees_seen);
	COUNT("trees_kept", c->trees_kept);
	COUNT("tree_too_deep", c->tree_too_deep);
	COUNT("ops", c->ops);
	COUNT("threads_seen", c->threads_seen);
	COUNT("threads_with_ops", c->threads_with_ops);
	COUNT("threads_started", c->threads_started);
	COUNT("ops_on_started_threads", c->ops_on_started_threads);
}

/* --python-stacks', --off-cpu's and --shapes' counts, when they are on. */
static void write_feature_counts(FILE *f, const struct trace *t)
{
	const struct counts *c = &t->counts;

	if (t->py_resolver.gen) {
		COUNT("python_stacks", c->py_stacks);
		COUNT("python_stacks_same_as_last", c->py_same);
		COUNT("python_ops_without_thread_state", c->py_no_thread);
		COUNT("python_stacks_without_op", c->py_orphans);
		COUNT("python_stacks_truncated", c->py_truncated);
		COUNT("python_stacks_cut_unreadable", c->py_faults);
		COUNT("python_frames_unnamed", t->py.unresolved);
	}
	if (t->off_cpu) {
		COUNT("off_cpu_intervals", c->off_cpu_intervals);
		COUNT("off_cpu_intervals_outside_ops", c->off_cpu_outside_ops);
		COUNT("off_cpu_ns_outside_ops", c->off_cpu_outside_ns);
		COUNT("off_cpu_switches", c->off_cpu_switches);
		COUNT("wakeups_by_traced_threads", c->wakes);
		COUNT("wakeups_from_inside_ops", c->wakes_in_ops);
		COUNT("off_cpu_ns_preempted",
		      c->off_cpu_by_reason_ns[RF_OFF_PREEMPTED]);
		COUNT("off_cpu_ns_sleeping", c->off_cpu_by_reason_ns[RF_OFF_SLEEP]);
		COUNT("off_cpu_ns_uninterruptible",
		      c->off_cpu_by_reason_ns[RF_OFF_UNINTERRUPTIBLE]);
		COUNT("off_cpu_ns_block_io",
		      c->off_cpu_by_reason_ns[RF_OFF_BLOCK_IO]);
		COUNT("off_cpu_ns_gil", c->off_cpu_by_reason_ns[RF_OFF_GIL]);
	}
	if (t->mem.on) {
		const struct mem_counts *m = &t->mem.counts;

		COUNT("memory_allocations", m->allocs);
		COUNT("memory_frees", m->frees);
		COUNT("memory_allocated_bytes", m->alloc_bytes);
		COUNT("memory_freed_bytes", m->free_bytes);
		COUNT("memory_frees_of_blocks_made_before_tracing",
		      m->frees_unknown);
		COUNT("memory_allocations_outside_ops", m->outside_ops);
		COUNT("memory_blocks_whose_free_was_lost", m->replaced);
		COUNT("memory_allocator_hits", c->mem_alloc_hits);
		COUNT("memory_free_hits", c->mem_free_hits);
		COUNT("memory_sample_bytes", t->mem.sample_bytes);
		COUNT("memory_sampled_blocks_not_sent", c->mem_sampled_full);
	}
	if (t->inputs.nr_dtypes) {
		COUNT("input_records", c->inputs_records);
		COUNT("input_sets", t->inputs.nr);
		COUNT("input_records_without_op", c->inputs_orphans);
		COUNT("input_records_cut", c->inputs_cut);
		COUNT("input_records_unreadable", c->inputs_faults);
	}
}

/* The probe cost taken out of op_stats, the table and the stacks (the X
 * events keep raw times: they nest), or why it was not. */
static void write_probe_cost(FILE *f, const struct trace *t)
{
	COUNT("probe_cost_inside_op_ns", t->probe_cost.inside_ns);
	COUNT("probe_cost_outside_op_ns", t->probe_cost.outside_ns);
	if (t->probe_cost.inside_ns || t->probe_cost.outside_ns) {
		COUNT("probe_cost_inside_op_ns_lowest_round",
		      t->probe_cost.inside_lo_ns);
		COUNT("probe_cost_inside_op_ns_highest_round",
		      t->probe_cost.inside_hi_ns);
		COUNT("probe_cost_per_op_ns_lowest_round",
		      t->probe_cost.op_lo_ns);
		COUNT("probe_cost_per_op_ns_highest_round",
		      t->probe_cost.op_hi_ns);
	}
	if (t->probe_cost_note[0]) {
		fputs(",\"probe_cost_not_compensated\":", f);
		json_string(f, t->probe_cost_note);
	}
}

/* --steps and the rest: what a step was, and which the file holds. */
static void write_steps(FILE *f, const struct trace *t)
{
	const struct steps *s = t->steps;

	if (!s)
		return;
	fputs(",\"steps\":{\"marker\":", f);
	json_string(f, steps_source_name(s));
	fprintf(f, ",\"whole_steps\":%llu,\"asked\":%llu,\"from_step\":%lld,"
		"\"only_steps\":%s,\"ops_outside_steps\":%llu,\"thread\":%u",
		(unsigned long long)s->done, (unsigned long long)s->want,
		(long long)s->from, s->gate ? "true" : "false",
		(unsigned long long)t->counts.ops_outside_steps, s->tid);
	if (s->done) {
		fprintf(f, ",\"first_step\":%lld", (long long)s->first);
		fputs(",\"longest_step_us\":", f);
		json_us(f, s->longest_ns);
	}
	fputc('}', f);
}

static void write_other_data(const struct chrome_writer *w,
			     const struct trace *t, const struct aggregate *a)
{
	FILE *f = w->f;
	char note[512];

	write_provenance(w, t);
	write_event_counts(f, t);
	write_feature_counts(f, t);
	if (trace_sampler_bias_note(t, note, sizeof(note))) {
		fputs(",\"sampler_bias\":", f);
		json_string(f, note);
	}
	write_probe_cost(f, t);
	write_steps(f, t);
	COUNT("fwdbwd_flows", w->fwdbwd_flows);
	COUNT("fwdbwd_forward_ops_forgotten", w->fwdbwd.forgotten);
	fprintf(f, ",\"fwd_thread_ids\":%s", t->fwd_threads ? "true" :
		"false");
	write_gpu_counts(f, t);
	if (a)
		write_op_stats(f, t, a);
	chrome_write_live_blocks(f, t);
	if (w->extra_other)
		fputs(w->extra_other, f);
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

static void on_py_stack(void *ctx, struct trace *t, const struct op *o)
{
	chrome_py_opened(ctx, t, o, trace_pid_of(t, o->tid));
}

static void on_off_cpu(void *ctx, struct trace *t,
		       const struct off_cpu_interval *iv)
{
	struct chrome_writer *w = ctx;
	const struct thread *th = NULL;
	long i = trace_thread_index(t, iv->tid);

	if (i >= 0)
		th = &t->threads[i];
	if (th)
		name_thread(w, t, th, iv->pid);
	chrome_write_off_cpu(w, t, iv);
}

static void on_memory(void *ctx, struct trace *t, const struct mem_change *c)
{
	struct chrome_writer *w = ctx;
	long i = trace_thread_index(t, c->tid);

	if (i >= 0)
		name_thread(w, t, &t->threads[i], c->pid);
	chrome_write_memory(w, t, c);
}

/* A step whose marker is not itself a step (the optimizer's scope, a
 * --step-op) is drawn as Kineto draws its own steps: a ProfilerStep#N
 * slice on the step's thread, around the step's ops. */
static void on_step(void *ctx, struct trace *t, const struct step *st)
{
	struct chrome_writer *w = ctx;
	long i = trace_thread_index(t, st->tid);
	FILE *f = w->f;

	if (steps_marker_is_step(t->steps))
		return;
	if (i >= 0)
		name_thread(w, t, &t->threads[i], trace_pid_of(t, st->tid));
	fprintf(f, "%s{\"ph\":\"X\",\"cat\":\"user_annotation\","
		"\"name\":\"ProfilerStep#%lld\",\"pid\":%u,\"tid\":%u,"
		"\"ts\":", chrome_next(w), (long long)st->number,
		trace_pid_of(t, st->tid), st->tid);
	chrome_ts(w, st->start_ns);
	fputs(",\"dur\":", f);
	json_us(f, st->end_ns - st->start_ns);
	fputs(",\"args\":{\"rfbpf step marker\":", f);
	json_string(f, steps_source_name(t->steps));
	fputs("}}", f);
}

static void on_thread_exit(void *ctx, struct trace *t, uint32_t tid)
{
	chrome_py_thread_exit(ctx, t, tid);
}

struct trace_sink chrome_sink(struct chrome_writer *w)
{
	return (struct trace_sink){ .op = write_op, .gpu = on_gpu,
				    .gpu_sync = on_gpu,
				    .gpu_api = on_gpu_api,
				    .py_stack = on_py_stack,
				    .off_cpu = on_off_cpu, .step = on_step,
				    .memory = on_memory,
				    .thread_exit = on_thread_exit, .ctx = w };
}

/* The header, into a writer already cleared. */
static void begin(struct chrome_writer *w, FILE *f, uint64_t base_ns,
		  uint64_t base_wall_ns)
{
	w->f = f;
	w->base_ns = base_ns;
	/* Kineto's header: times in the file are µs after base, displayed
	 * in ms (older Perfetto readers take "ns" to mean the file's unit
	 * and shrink the trace 1000x). */
	fprintf(f, "{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\","
		"\"baseTimeNanoseconds\":%llu,\"traceEvents\":[\n",
		(unsigned long long)base_wall_ns);
}

void chrome_begin(struct chrome_writer *w, FILE *f, uint64_t base_ns,
		  uint64_t base_wall_ns)
{
	memset(w, 0, sizeof(*w));
	begin(w, f, base_ns, base_wall_ns);
}

int chrome_open(struct chrome_writer *w, const char *path)
{
	struct timespec mono, wall;

	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &wall);
	/* The base is this instant on both clocks: ops begin after it (a
	 * GPU record may come before and is written negative). */
	return chrome_open_at(w, path,
			      mono.tv_sec * 1000000000ull + mono.tv_nsec,
			      wall.tv_sec * 1000000000ull + wall.tv_nsec);
}

void chrome_name_threads(struct chrome_writer *w, const struct trace *t)
{
	for (size_t i = 0; i < t->nr_threads; i++)
		if (t->threads[i].ran_ops)
			name_thread(w, t, &t->threads[i],
				    trace_pid_of(t, t->threads[i].tid));
}

/* trace.json.gz: written gzipped, as Kineto's readers (Perfetto, HTA,
 * TensorBoard) take it. */
static bool gzipped(const char *path)
{
	size_t n = strlen(path);

	return n > 3 && !strcmp(path + n - 3, ".gz");
}

int chrome_open_at(struct chrome_writer *w, const char *path,
		   uint64_t mono_ns, uint64_t wall_ns)
{
	/* Cleared before the file is made: its stream keeps &w->file. */
	memset(w, 0, sizeof(*w));
	if (output_file_open(&w->file, path, gzipped(path)))
		return -1;
	begin(w, w->file.out.f, mono_ns, wall_ns);
	w->own_file = true;
	return 0;
}

int chrome_publish(struct chrome_writer *w)
{
	return w->own_file ? output_file_publish(&w->file) : 0;
}

bool chrome_discard(struct chrome_writer *w)
{
	bool had;

	if (!w->own_file)
		return false;
	w->f = NULL;
	had = output_file_discard(&w->file);
	u64map_free(&w->threads);
	u64map_free(&w->tracks);
	fwdbwd_free(&w->fwdbwd);
	w->own_file = false;
	return had;
}

/* ,"distributedInfo":{...} at the top level, as Kineto writes it (HTA's
 * multi-rank analyses read rank and world_size there), for a job that is
 * distributed; what rfbpf read beyond Kineto's keys after them. */
static void write_distributed(FILE *f, const struct dist_info *d)
{
	bool comma = false;

	if (!dist_info_known(d))
		return;
	fputs(",\n\"distributedInfo\":{", f);
	if (d->backend[0]) {
		fputs("\"backend\":", f);
		json_string(f, d->backend);
		comma = true;
	}
#define NUMBER(key, v) do { \
	if ((v) >= 0) { \
		fprintf(f, "%s\"" key "\":%d", comma ? "," : "", (v)); \
		comma = true; \
	} \
} while (0)
#define TEXT(key, v) do { \
	if ((v)[0]) { \
		fprintf(f, "%s\"" key "\":", comma ? "," : ""); \
		json_string(f, (v)); \
		comma = true; \
	} \
} while (0)
	NUMBER("rank", d->rank);
	NUMBER("world_size", d->world_size);
	NUMBER("local_rank", d->local_rank);
	TEXT("master_addr", d->master_addr);
	TEXT("master_port", d->master_port);
	TEXT("run_id", d->run_id);
#undef NUMBER
#undef TEXT
	fputc('}', f);
}

int chrome_finish(struct chrome_writer *w, const struct trace *t,
		  const struct aggregate *a)
{
	int err;

	chrome_py_finish(w, t);
	write_process_name(w, t);
	fputs("\n],\n", w->f);
	write_other_data(w, t, a);
	chrome_write_devices(w->f, t);
	write_distributed(w->f, &t->dist);
	fputs("}\n", w->f);
	u64map_free(&w->threads);
	u64map_free(&w->tracks);
	fwdbwd_free(&w->fwdbwd);
	if (w->own_file) {
		w->f = NULL;
		w->own_file = false;
		return output_file_close(&w->file);
	}
	err = ferror(w->f);
	w->f = NULL;
	if (err) {
		errno = EIO;	/* the caller's stream: it knows more */
		return -1;
	}
	return 0;
}
