// SPDX-License-Identifier: BSD-2-Clause
/* The trace model's storage: init, free, threads, and the names of scopes
 * and variants every output uses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace.h"

void trace_init(struct trace *t, uint32_t pid)
{
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->free_slot = UINT32_MAX;
	t->sample_prob = 1.0;
	t->tree_prob = 1.0;
	gpu_init(&t->gpu);
	dist_info_init(&t->dist);
	t->mem.free_head = UINT32_MAX;
}

void trace_free(struct trace *t)
{
	for (size_t i = 0; i < t->nr_threads; i++)
		free(t->threads[i].stack);
	free(t->threads);
	free(t->ops);
	free(t->frames);
	free(t->chain);
	free(t->frame_inputs);
	py_frames_free(&t->py);
	memory_free(&t->mem);
	op_inputs_free(&t->inputs);
	names_free(&t->names);
	u64map_free(&t->thread_index);
	u64map_free(&t->alive_at_start);
	u64map_free(&t->open);
	gpu_free(&t->gpu);
	memset(t, 0, sizeof(*t));
}

bool trace_add_sink(struct trace *t, const struct trace_sink *sink)
{
	if (t->nr_sinks == TRACE_MAX_SINKS)
		return false;
	t->sinks[t->nr_sinks++] = *sink;
	return true;
}

/* Makes the array *a (capacity *cap) hold n entries; false if it cannot. */
static bool fit(uint32_t **a, uint32_t *cap, uint32_t n)
{
	uint32_t *f;

	if (n <= *cap)
		return true;
	f = realloc(*a, n * 2 * sizeof(*f));
	if (!f)
		return false;
	*a = f;
	*cap = n * 2;
	return true;
}

/* How many of a's first frames b starts with. */
static uint32_t common_prefix(const uint32_t *a, uint32_t na,
			      const uint32_t *b, uint32_t nb)
{
	uint32_t i = 0;

	while (i < na && i < nb && a[i] == b[i])
		i++;
	return i;
}

const uint32_t *trace_frames(struct trace *t, uint32_t slot, uint32_t *depth)
{
	const uint32_t *shown = NULL, *py;
	uint32_t n = 0, nr_shown = 0, np, at = 0;

	for (int32_t k = slot; k >= 0; k = t->ops[k].parent)
		n++;
	*depth = 0;
	if (!fit(&t->chain, &t->cap_chain, n))
		return t->frames;
	for (int32_t k = slot, i = (int32_t)n; k >= 0; k = t->ops[k].parent)
		t->chain[--i] = k;
	/* Outermost first: each op's Python context (the frames of its
	 * begin stack still running when it ends, as far as is known now)
	 * past what the ops around it showed, then the op. */
	for (uint32_t i = 0; i < n; i++) {
		const struct op *o = &t->ops[t->chain[i]];
		uint32_t j = 0;

		py = py_frames_get(&t->py, o->py_stack, &np);
		if (np > o->py_live)
			np = o->py_live;
		if (py)
			j = common_prefix(shown, nr_shown, py, np);
		if (!fit(&t->frames, &t->cap_frames, at + np - j + 1) ||
		    !fit(&t->frame_inputs, &t->cap_frame_inputs,
			 at + np - j + 1))
			return t->frames;	/* *depth 0: ENOMEM */
		while (j < np) {
			t->frame_inputs[at] = 0;
			t->frames[at++] = py[j++];
		}
		if (py)
			shown = py, nr_shown = np;
		t->frame_inputs[at] = o->inputs;
		t->frames[at++] = o->name;
	}
	*depth = at;
	return t->frames;
}

void trace_name_thread(struct trace *t, struct thread *th, const char *comm)
{
	uint32_t id;

	snprintf(th->comm, sizeof(th->comm), "%s", comm);
	if (th->py_named)
		return;
	id = names_intern(&t->names, th->comm[0] ? th->comm : "thread",
			  strlen(th->comm[0] ? th->comm : "thread"));
	if (id != UINT32_MAX)
		th->comm_name = id;
}

void trace_label_thread(struct trace *t, struct thread *th, const char *name)
{
	uint32_t id = names_intern(&t->names, name, strlen(name));

	if (id == UINT32_MAX || !*name)
		return;
	th->comm_name = id;
	th->py_named = true;
}

void trace_forget_thread(struct trace *t, uint32_t tid)
{
	long i = trace_thread_index(t, tid);
	size_t last = t->nr_threads - 1;

	if (i < 0 || t->threads[i].depth)
		return;
	free(t->threads[i].stack);
	u64map_del(&t->thread_index, tid);
	if ((size_t)i != last) {
		t->threads[i] = t->threads[last];
		u64map_put(&t->thread_index, t->threads[i].tid, i);
	}
	t->nr_threads--;
}

long trace_thread_index(const struct trace *t, uint32_t tid)
{
	uint64_t *i = u64map_get(&t->thread_index, tid);

	return i ? (long)*i : -1;
}

uint32_t trace_pid_of(const struct trace *t, uint32_t tid)
{
	long i = trace_thread_index(t, tid);

	return i >= 0 && t->threads[i].pid ? t->threads[i].pid : t->pid;
}

struct thread *trace_thread(struct trace *t, uint32_t tid, bool *created)
{
	long i = trace_thread_index(t, tid);

	if (created)
		*created = false;
	if (i >= 0)
		return &t->threads[i];
	if (t->nr_threads == t->cap_threads) {
		size_t cap = t->cap_threads ? t->cap_threads * 2 : 16;
		struct thread *th = realloc(t->threads, cap * sizeof(*th));

		if (!th)
			return NULL;
		t->threads = th;
		t->cap_threads = cap;
	}
	if (!u64map_put(&t->thread_index, tid, t->nr_threads))
		return NULL;
	struct thread *th = &t->threads[t->nr_threads++];
	memset(th, 0, sizeof(*th));
	th->tid = tid;
	th->comm_name = names_intern(&t->names, "thread", 6);
	t->counts.threads_seen++;
	if (t->threads_listed && !u64map_get(&t->alive_at_start, tid)) {
		th->started_traced = true;
		t->counts.threads_started++;
	}
	if (created)
		*created = true;
	return th;
}

void trace_threads_alive(struct trace *t, const uint32_t *tids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		u64map_put(&t->alive_at_start, tids[i], 1);
	t->threads_listed = true;
}

/* PyTorch draws each sampled callback's skip from a thread-local
 * std::mt19937 that is never seeded (record_function.cpp), so every
 * thread starts from the same state: a new thread running the same code
 * as the last one is sampled at the same ops. Threads that live long
 * drift apart; short ones (a thread per request or per call) all sample
 * the same few ops, whose counts come out too high and the others' too
 * low, and no 1/p scaling undoes it. Worth a line once they hold a
 * twentieth of what was recorded. */
bool trace_sampler_bias_note(const struct trace *t, char *buf, size_t len)
{
	const struct counts *c = &t->counts;

	if (t->sample_prob >= 1.0 || c->threads_started < 2 ||
	    c->ops_on_started_threads * 20 < c->ops)
		return false;
	snprintf(buf, len, "%llu of %llu sampled ops came from %llu threads "
		 "started while traced: PyTorch's sampler starts every thread "
		 "from the same unseeded random state, so threads that run "
		 "the same code sample the same ops and these estimates are "
		 "biased (use --tree-sample, or full tracing, for such jobs)",
		 (unsigned long long)c->ops_on_started_threads,
		 (unsigned long long)c->ops,
		 (unsigned long long)c->threads_started);
	return true;
}

const char trace_self_unknown_why[] =
	"not available under --sample: RecordFunction samples each op on "
	"its own, so a sampled op's children that were not sampled cannot "
	"be subtracted from it, nor its unsampled parents seen (use "
	"--tree-sample for self times and stacks)";

static const char *const scope_names[] = {
	"function", "backward_function", "torchscript_function",
	"kernel_function_dtype", "custom_class", "build_feature",
	"lite_interpreter", "user_scope", "static_runtime_op",
	"static_runtime_model",
};

const char *scope_name(uint8_t scope)
{
	if (scope == RF_SCOPE_NVTX)
		return "nvtx";
	if (scope < sizeof(scope_names) / sizeof(scope_names[0]))
		return scope_names[scope];
	return "unknown";
}

/* Kineto files every RecordFunction op under "cpu_op" whatever its scope
 * (HTA and TensorBoard filter on it), and user scopes under
 * "user_annotation"; the scope itself is in args. NVTX ranges, which
 * Kineto does not record, are "nvtx". */
const char *scope_category(uint8_t scope)
{
	if (scope == RF_SCOPE_NVTX)
		return "nvtx";
	return scope == RF_SCOPE_USER ? "user_annotation" : "cpu_op";
}

const char *variant_name(unsigned variant)
{
	static const char *const names[] = {
		[RF_V_CSTR] = "before(const char*)",
		[RF_V_STRING] = "before(std::string)",
		[RF_V_STRING_OLD] = "before(std::string, old ABI)",
		[RF_V_SCHEMA] = "before(FunctionSchema)",
		[RF_V_DESCRIPTOR] = "before(FunctionDescriptor)",
		[RF_V_DESCRIPTOR_DK] = "before(FunctionDescriptor, DispatchKey)",
		[RF_V_CALLBACK] = "start callback",
		[RF_V_END] = "end()",
	};
	return variant < RF_V_NR ? names[variant] : "?";
}

#define LOSS_ROW(field, kind, json, reason, words, help) \
	{ offsetof(struct counts, field), kind, json, reason, words },
const struct loss_counter loss_counters[] = { RF_LOSS_COUNTERS(LOSS_ROW) };
const size_t nr_loss_counters = RF_LOSS_NR;

uint64_t counts_truncated(const struct counts *c)
{
	uint64_t n = 0;

	for (size_t i = 0; i < nr_loss_counters; i++)
		if (loss_counters[i].kind == LOSS_CUT)
			n += loss_count(c, &loss_counters[i]);
	return n;
}

/* "drops N; ...; truncated ops N (open at detach N, ...); ...": the
 * LOSS_CUT rows, which follow each other, are grouped under their sum. */
void format_losses(const struct counts *c, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = 0;
	for (size_t i = 0; i < nr_loss_counters && at < len; i++) {
		const struct loss_counter *l = &loss_counters[i];
		bool cut = l->kind == LOSS_CUT;
		bool first_cut = cut && (!i || loss_counters[i - 1].kind !=
					 LOSS_CUT);
		bool last_cut = cut && (i + 1 == nr_loss_counters ||
					loss_counters[i + 1].kind != LOSS_CUT);

		if (!l->words)
			continue;
		if (first_cut)
			at += snprintf(buf + at, len - at, "%struncated ops %llu (",
				       at ? "; " : "",
				       (unsigned long long)counts_truncated(c));
		else if (at < len)
			at += snprintf(buf + at, len - at, "%s",
				       !at ? "" : cut ? ", " : "; ");
		if (at < len)
			at += snprintf(buf + at, len - at, "%s %llu%s",
				       l->words,
				       (unsigned long long)loss_count(c, l),
				       last_cut ? ")" : "");
	}
	if (c->oom && at < len)
		snprintf(buf + at, len - at, "; EVENTS LOST TO OUT-OF-MEMORY");
}

bool trace_inputs_note(const struct trace *t, char *buf, size_t len)
{
	const struct counts *c = &t->counts;

	/* Without --shapes only collectives' inputs are read: a note only
	 * if some were. */
	if (!t->inputs.nr_dtypes || (!t->inputs.every_op && !c->inputs_records))
		return false;
	snprintf(buf, len, "%llu input records read (%zu distinct), %llu "
		 "with no op open; cut: %llu past the caps (%u words, %u dims "
		 "per tensor), %llu at unreadable memory",
		 (unsigned long long)c->inputs_records, t->inputs.nr,
		 (unsigned long long)c->inputs_orphans,
		 (unsigned long long)c->inputs_cut, RF_IN_MAX_WORDS,
		 RF_IN_MAX_DIMS, (unsigned long long)c->inputs_faults);
	return true;
}

bool trace_off_cpu_note(const struct trace *t, char *buf, size_t len)
{
	const struct counts *c = &t->counts;
	const uint64_t *r = c->off_cpu_by_reason_ns;

	if (!t->off_cpu)
		return false;
	snprintf(buf, len, "%llu intervals in %llu switches of traced "
		 "threads (%llu with no op open, %.3f ms); sleeping %.3f ms, "
		 "waiting for the GIL %.3f ms, preempted %.3f ms, block I/O "
		 "%.3f ms, uninterruptible %.3f ms; %llu wakeups by traced "
		 "threads (%llu from inside an op)",
		 (unsigned long long)c->off_cpu_intervals,
		 (unsigned long long)c->off_cpu_switches,
		 (unsigned long long)c->off_cpu_outside_ops,
		 c->off_cpu_outside_ns / 1e6, r[RF_OFF_SLEEP] / 1e6,
		 r[RF_OFF_GIL] / 1e6, r[RF_OFF_PREEMPTED] / 1e6, r[RF_OFF_BLOCK_IO] / 1e6,
		 r[RF_OFF_UNINTERRUPTIBLE] / 1e6,
		 (unsigned long long)c->wakes,
		 (unsigned long long)c->wakes_in_ops);
	return true;
}

bool trace_python_note(const struct trace *t, char *buf, size_t len)
{
	const struct counts *c = &t->counts;

	if (!t->py_resolver.gen)
		return false;
	snprintf(buf, len, "%llu read whole, %llu as their thread's last; "
		 "ops without one: %llu on threads with no Python state, %llu "
		 "stacks with no op open; cut: %llu deeper than the depth "
		 "cap, %llu at an unreadable frame; %llu frames unnamed",
		 (unsigned long long)c->py_stacks,
		 (unsigned long long)c->py_same,
		 (unsigned long long)c->py_no_thread,
		 (unsigned long long)c->py_orphans,
		 (unsigned long long)c->py_truncated,
		 (unsigned long long)c->py_faults,
		 (unsigned long long)t->py.unresolved);
	return true;
}
