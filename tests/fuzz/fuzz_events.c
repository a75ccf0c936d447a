/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Arbitrary ring-buffer records (bpf/rfbpf.h) through the very dispatch
 * rfbpf runs (model/events.c) into the trace model, then every exporter
 * over what it rebuilt: the table and the wakers, the Chrome trace (which
 * must parse as JSON), folded, off-CPU and GPU folded stacks, pprof, and
 * fleet mode's metrics. BPF is trusted to send well-formed records, but
 * the loader must not trust it to the point of reading past one: a
 * kernel/user mismatch (an old loader, a new BPF object) looks like this.
 *
 * Input: two option bytes (see struct options below), then records, each
 * a 16-bit little-endian length and that many bytes. Each record is
 * copied to a buffer of exactly its length so that ASan sees any read
 * past it.
 *
 * The session's hooks (model/events.h) run as a live session runs them,
 * with what they would read from the target taken from the record at
 * hand: a new thread's comm (any bytes but NUL and newline, up to 15),
 * its Python name from threading (any bytes, up to 63), a watched CUPTI
 * call's index (any value) into the GPU counts, and a fork's child.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/json_parse.h"
#include "export/chrome.h"
#include "export/folded.h"
#include "export/pprof.h"
#include "export/table.h"
#include "fleet/fleet_metrics.h"
#include "model/events.h"
#include "model/profile_sink.h"

/* Records per input: enough for deep nesting on several threads, few
 * enough that legit growth (open ops, names) stays far below the RSS
 * limit. */
#define MAX_RECORDS 2000

/* What the first two bytes switch on (rfbpf's options). */
enum {
	O_OFF_CPU	= 1u << 0,
	O_PYTHON	= 1u << 1,
	O_SHAPES	= 1u << 2,
	O_SAMPLED	= 1u << 3,	/* --sample 0.5 */
	O_TREES		= 1u << 4,	/* --tree-sample 0.25 */
	O_GROUP_STACK	= 1u << 5,	/* --group-by-stack 3 */
	O_GROUP_SHAPES	= 1u << 6,
	O_FWD_THREADS	= 1u << 7,
	O_ACTIVATED	= 1u << 8,
	O_BY_SHAPES	= 1u << 9,	/* fleet mode's pprof rows */
	/* bits 10-13: the table's sort key, 14: its --top */
	O_FLEET		= 1u << 15,	/* fleet metrics: their fixed text
					 * is most of a run's time, so not
					 * on every input */
};

/* Fleet mode's job: its trace is the one under test (static: it is big). */
static struct job job;

/* The record being dispatched: where the hooks' "target" reads come
 * from. */
static const uint8_t *record;
static size_t record_len;
static uint64_t forks_seen;

/* Up to max bytes of the record's tail, as a C string, stopped at a NUL
 * and (for a comm, which /proc ends with one) a newline. */
static void record_text(char *out, size_t max, bool comm)
{
	size_t from = record_len > max ? record_len - max : 0, n = 0;

	for (size_t i = from; i < record_len && record[i]; i++) {
		if (comm && record[i] == '\n')
			break;
		out[n++] = (char)record[i];
	}
	out[n] = 0;
}

/* session/session.c's name_new_thread: the comm /proc gives, into the
 * model. */
static void hook_new_thread(void *ctx, struct trace *t, struct thread *th)
{
	char comm[16];

	(void)ctx;
	record_text(comm, sizeof(comm) - 1, true);
	trace_name_thread(t, th, comm);
}

/* session/children.c adopts the child; nothing of it reaches the model. */
static void hook_forked(void *ctx, uint32_t child)
{
	(void)ctx, (void)child;
	forks_seen++;
}

/* gpu/gpu_session.c: the first watched call is noted in the GPU counts (and
 * so in every output's CUPTI state), whatever index the record holds. */
static void hook_cupti_call(void *ctx, unsigned index, int tid)
{
	struct trace *t = ctx;
	const char *fn = gpu_note_cupti_taken(&t->gpu.counts, index, tid);

	if (fn && strcmp(fn, t->gpu.counts.cupti_taken_by))
		abort();
}

/* py_session.c's name_thread: the Python name threading holds for the
 * stack's thread, as py_thread_names gives it (fuzzed apart in
 * fuzz_python), labels it. */
static void hook_py_stack(void *ctx, struct trace *t,
			  const struct rf_py_stack_event *e)
{
	struct thread *th = trace_thread(t, e->hdr.tid, NULL);
	char name[64];

	(void)ctx;
	if (!th || th->py_named || (e->hdr.tid & 3) == 0)
		return;		/* a thread threading does not know */
	record_text(name, sizeof(name) - 1, false);
	trace_label_thread(t, th, name);
}

/* A resolver for Python frames that reads no memory: code objects with
 * bit 0 set are unreadable, the others get a name from their address
 * (few distinct ones, so that stacks repeat). */
static int fake_gen(void *ctx, uint32_t pid, uint64_t code, uint32_t *gen)
{
	(void)ctx, (void)pid;
	if (code & 1)
		return -1;
	*gen = (uint32_t)(code >> 8) & 3;
	return 0;
}

static int fake_locate(void *ctx, uint32_t pid, uint64_t code, int32_t unit,
		       char *func, size_t func_len, char *file,
		       size_t file_len, int *line)
{
	(void)ctx;
	if (code & 2)
		return -1;
	snprintf(func, func_len, "f%llx", (unsigned long long)(code & 0xff));
	snprintf(file, file_len, "/srv/m%u.py", pid & 7);
	*line = unit;
	return 0;
}

/* Fleet mode's counters, as fleet/job.c's sink keeps them (1/p each). */
static void job_sink_op(void *ctx, struct trace *t, const struct closed_op *c)
{
	struct job_op *r = job_op_row(ctx, c->op->name);

	if (r)
		job_op_add(r, 1 / trace_keep_prob(t), c->dur_ns);
}

struct sinks {
	struct aggregate agg, grouped;
	struct stack_profile stacks, gpu_stacks;
	struct chrome_writer chrome;
	FILE *chrome_f;
	char *chrome_text;
	size_t chrome_len;
};

static void add_sink(struct trace *t, struct trace_sink s)
{
	if (!trace_add_sink(t, &s))
		abort();
}

static double fuzz_stack_weight(void *ctx, uint64_t ts)
{
	(void)ctx;
	return ts & 1 ? 2.5 : 0;
}

/* The trace and its consumers, as session/setup.c and session/outputs.c make
 * them. */
static void start(struct trace *t, struct sinks *o, unsigned opt)
{
	static const struct py_resolver resolver = { fake_gen, fake_locate,
						     NULL };

	trace_init(t, 100);
	t->off_cpu = opt & O_OFF_CPU;
	/* --memory always (only memory records use it), byte-sampled with
	 * --sample's bit, keeping stacks for the in-use profile in fleet
	 * mode. */
	t->mem.on = true;
	t->mem.sample_bytes = opt & O_SAMPLED ? 65536 : 0;
	if (opt & O_FLEET)
		t->mem.stack_weight = fuzz_stack_weight;
	if (opt & O_PYTHON)
		t->py_resolver = resolver;
	if (opt & O_SHAPES)
		t->inputs.nr_dtypes = 47;	/* torch 2.14's */
	t->sample_prob = opt & O_SAMPLED ? 0.5 : 1.0;
	t->tree_prob = opt & O_TREES ? 0.25 : 1.0;
	t->fwd_threads = opt & O_FWD_THREADS;
	t->activated = opt & O_ACTIVATED;
	job.opt.max_ops = 4;		/* so "[other]" fills too */
	job.proc.pid = 100;
	job.p = t->sample_prob;

	aggregate_init(&o->agg);
	aggregate_init(&o->grouped);
	stack_profile_init(&o->stacks);
	stack_profile_init(&o->gpu_stacks);
	o->stacks.by_shapes = opt & O_BY_SHAPES;
	if (opt & O_TREES) {
		aggregate_by_tree(&o->agg);
		aggregate_by_tree(&o->grouped);
	}
	if (opt & O_GROUP_STACK)
		aggregate_group_by_stack(&o->grouped, &t->py, 3);
	if (opt & O_GROUP_SHAPES)
		aggregate_group_by_shapes(&o->grouped, &t->inputs);
	add_sink(t, aggregate_sink(&o->agg));
	add_sink(t, aggregate_sink(&o->grouped));
	add_sink(t, profile_sink_ops(&o->stacks));
	add_sink(t, profile_sink_gpu_kernels(&o->gpu_stacks));
	o->chrome_f = open_memstream(&o->chrome_text, &o->chrome_len);
	if (!o->chrome_f)
		abort();
	chrome_begin(&o->chrome, o->chrome_f, 0, 0);
	add_sink(t, chrome_sink(&o->chrome));
	add_sink(t, (struct trace_sink){ .op = job_sink_op, .ctx = &job });
}

/* The input's records, each in a buffer of its own size. */
static void feed(struct trace *t, const uint8_t *p, size_t n)
{
	const struct event_hooks hooks = {
		.new_thread = hook_new_thread, .forked = hook_forked,
		.cupti_call = hook_cupti_call, .py_stack = hook_py_stack,
		.ctx = t,
	};

	for (int i = 0; i < MAX_RECORDS && n >= 2; i++) {
		size_t len = p[0] | (size_t)p[1] << 8;
		uint8_t *rec;

		p += 2, n -= 2;
		if (len > n)
			len = n;
		rec = malloc(len ? len : 1);
		if (!rec)
			abort();
		memcpy(rec, p, len);
		record = rec;
		record_len = len;
		events_dispatch(t, &hooks, rec, len);
		free(rec);
		p += len, n -= len;
	}
}

static void check_chrome(struct trace *t, struct sinks *o)
{
	if (chrome_finish(&o->chrome, t, &o->agg))
		abort();
	fclose(o->chrome_f);
	o->chrome_f = NULL;
	if (strlen(o->chrome_text) != o->chrome_len ||
	    !valid_json(o->chrome_text)) {
		fprintf(stderr, "invalid Chrome JSON:\n%s\n", o->chrome_text);
		abort();
	}
}

static void write_pprof(const struct trace *t, const struct stack_profile *p,
			bool gpu)
{
	struct pprof_meta m = {
		.time_nanos = 1, .duration_nanos = 1000000000,
		.scale = 1 / trace_keep_prob(t), .gpu = gpu,
		.off_cpu = t->off_cpu, .memory = t->mem.on, .comment = "fuzz",
		.py = &t->py,
	};
	uint8_t *gz = NULL;
	size_t len = 0;

	if (!pprof_encode(p, &t->names, &m, &gz, &len))
		free(gz);
}

/* Every exporter, as rfbpf ends a run (session_finish, outputs_finish)
 * and as fleet mode ends an interval. */
static void finish(struct trace *t, struct sinks *o, unsigned opt,
		   FILE *devnull)
{
	struct fleet_stats st = { .interval_s = 10, .budget = 0.01 };
	struct job *jobs[1] = { &job };
	struct prom_buf prom;
	char note[1024];

	gpu_detach(&t->gpu);
	stacks_detach(t, t->last_ns);
	print_table(devnull, t, opt & (O_GROUP_STACK | O_GROUP_SHAPES) ?
		    &o->grouped : &o->agg, (enum sort_key)(opt >> 10) % 10,
		    opt & (1u << 14) ? 5 : 0);
	print_wakers(devnull, t, &o->agg, 5);
	check_chrome(t, o);
	write_folded(devnull, t, &o->stacks);
	write_off_cpu_folded(devnull, t, &o->stacks);
	write_gpu_folded(devnull, t, &o->gpu_stacks);
	write_memory_folded(devnull, t, &o->stacks);
	profile_add_inuse(&o->stacks, t);	/* as the daemon's interval */
	write_pprof(t, &o->stacks, false);
	write_pprof(t, &o->gpu_stacks, true);
	if (opt & O_FLEET) {
		prom_init(&prom);
		fleet_metrics_write(&prom, jobs, 1, &st);
		prom_free(&prom);
	}
	trace_sampler_bias_note(t, note, sizeof(note));
	trace_python_note(t, note, sizeof(note));
	trace_inputs_note(t, note, sizeof(note));
	trace_off_cpu_note(t, note, sizeof(note));
	memory_note(&t->mem, t->counts.mem_sampled_full, note, sizeof(note));
	format_losses(&t->counts, note, sizeof(note));
}

static void free_all(struct trace *t, struct sinks *o)
{
	aggregate_free(&o->agg);
	aggregate_free(&o->grouped);
	stack_profile_free(&o->stacks);
	stack_profile_free(&o->gpu_stacks);
	free(o->chrome_text);
	trace_free(t);
	u64map_free(&job.series);
	free(job.ops);
	free(job.series_name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *devnull;
	struct trace *t = &job.s.trace;
	struct sinks o;
	unsigned opt;

	if (size < 2)
		return 0;
	if (!devnull && !(devnull = fopen("/dev/null", "w")))
		abort();
	memset(&job, 0, sizeof(job));
	memset(&o, 0, sizeof(o));
	opt = data[0] | (unsigned)data[1] << 8;
	start(t, &o, opt);
	feed(t, data + 2, size - 2);
	finish(t, &o, opt, devnull);
	free_all(t, &o);
	return 0;
}
