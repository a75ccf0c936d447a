// SPDX-License-Identifier: BSD-2-Clause
#include <math.h>
#include <string.h>
#include <stdlib.h>
#include "table.h"
#include "table_memory.h"
#include "table_sort.h"
#include "text_cell.h"

#define NAME_W 52

void format_duration(uint64_t ns, char *buf, size_t len)
{
	if (ns < 1000000ull)
		snprintf(buf, len, "%.3fus", ns / 1e3);
	else if (ns < 999999500ull)	/* would round up to "1000.000ms" */
		snprintf(buf, len, "%.3fms", ns / 1e6);
	else
		snprintf(buf, len, "%.3fs", ns / 1e9);
}

/* An estimate (a sum scaled by 1/p) as a duration, rounded. It can pass
 * what uint64_t holds (a sum near it, halved p): such a value, or a NaN,
 * is shown clamped rather than converted (which C leaves undefined). */
static void format_estimate(double ns, char *buf, size_t len)
{
	double r = ns + 0.5;

	format_duration(!(r >= 1) ? 0 : r >= 0x1p64 ? UINT64_MAX :
			(uint64_t)r, buf, len);
}

/* The columns after the name, as torch.profiler names them. */
static const char *const full_cols[] = {
	"Self %", "Self", "Total %", "Total", "Avg", "Min", "Max", "Calls",
};
static const int full_w[] = { 7, 10, 7, 10, 10, 10, 10, 8 };
static const char *const sampled_cols[] = {
	"Self %", "Est. self", "+- self", "Est. total", "+- total", "Sampled",
	"Est. calls", "+- calls",
};
static const int sampled_w[] = { 7, 10, 10, 10, 10, 8, 10, 8 };
static const char *const gpu_cols[] = { "Self CUDA", "CUDA total", "Kernels",
					 "GPU wait" };
static const int gpu_w[] = { 10, 10, 7, 10 };
#define GPU_COLS 4
#define NR_COLS 8

/* --group-by stack: the Source Location column's rule. */
#define SOURCE_W 40

/* --group-by shapes: the Input Shapes column's width when Source Location
 * follows it (last, it is printed whole). */
#define SHAPES_W 40

/* --off-cpu's two columns. */
static const char *const off_cols[] = { "Self off-CPU", "Off-CPU total" };
#define OFF_W 12

/* --memory's columns, as profile_memory=True names them. */
static const char *const mem_cols[] = { "Self CPU Mem", "CPU Mem",
					"Self CUDA Mem", "CUDA Mem" };
#define MEM_W 13

/* Which column groups a table has. */
struct layout {
	bool sampled, gpu, off, shapes, source;
	int mem;	/* --memory's columns: 0, 2 (CPU) or 4 (and device) */
};

/* Where the Source Location column starts. */
static int source_column(const struct layout *l)
{
	const int *w = l->sampled ? sampled_w : full_w;
	int x = NAME_W;

	for (int c = 0; c < NR_COLS; c++)
		x += 2 + w[c];
	for (int c = 0; l->gpu && c < GPU_COLS; c++)
		x += 2 + gpu_w[c];
	x += l->off ? 2 * (2 + OFF_W) : 0;
	x += l->mem * (2 + MEM_W);
	return x + (l->shapes ? 2 + SHAPES_W : 0);
}

static void dashes(FILE *f, int n)
{
	fputs("  ", f);
	for (int i = 0; i < n; i++)
		fputc('-', f);
}

static void rule(FILE *f, const struct layout *l)
{
	const int *w = l->sampled ? sampled_w : full_w;

	for (int i = 0; i < NAME_W; i++)
		fputc('-', f);
	for (int c = 0; c < NR_COLS; c++)
		dashes(f, w[c]);
	for (int c = 0; l->gpu && c < GPU_COLS; c++)
		dashes(f, gpu_w[c]);
	for (int c = 0; l->off && c < 2; c++)
		dashes(f, OFF_W);
	for (int c = 0; c < l->mem; c++)
		dashes(f, MEM_W);
	if (l->shapes)
		dashes(f, l->source ? SHAPES_W : 20);
	if (l->source)
		dashes(f, SOURCE_W);
	fputc('\n', f);
}

/* A row's Input Dims, as key_averages(group_by_input_shape=True) shows
 * them: cut to the column if Source Location follows. */
static void print_shapes(FILE *f, const struct trace *t,
			 const struct op_stats *r, bool source)
{
	const char *dims = r->shapes ? names_get(&t->names, r->shapes - 1) :
			   "-";

	fputs("  ", f);
	if (source)
		print_cell(f, dims, SHAPES_W, 0);
	else
		fputs(dims, f);
}

/* A grouped row's Python frames, innermost first, one a line, in the
 * last column (as torch.profiler prints its Source Location). */
static void print_source(FILE *f, const struct trace *t,
			 const struct op_stats *r, int column)
{
	uint32_t n;
	const uint32_t *l = py_frames_get(&t->py, r->group, &n);

	if (!n) {
		fputs("  -", f);
		return;
	}
	for (uint32_t i = n; i-- > 0;)
		fprintf(f, "%*s  %s%s", i + 1 == n ? 0 : column, "",
			names_get(&t->names, l[i]), i ? "\n" : "");
}

/* GPU columns, as torch.profiler's Self CUDA / CUDA total, and the time
 * the op waited in CUDA synchronize calls. Every GPU record is seen
 * whatever was sampled, but which op launched it is not under --sample
 * (a launch in an unsampled op goes to the nearest sampled one), so then
 * they are not available; kept trees hold all their launches, so under
 * --tree-sample they scale by 1/p. */
static void print_gpu_cells(FILE *f, const struct trace *t,
			    const struct op_stats *r)
{
	double p = trace_keep_prob(t);
	char self[24], total[24], wait[24];

	if (!trace_self_known(t)) {
		fprintf(f, "  %10s  %10s  %7s  %10s", "n/a", "n/a", "n/a",
			"n/a");
		return;
	}
	format_estimate(r->gpu_self_ns / p, self, sizeof(self));
	format_estimate(r->gpu_total_ns / p, total, sizeof(total));
	format_estimate(r->gpu_wait_ns / p, wait, sizeof(wait));
	fprintf(f, "  %10s  %10s  %7.0f  %10s", self, total, r->kernels / p,
		wait);
}

/* --off-cpu: the time the op's threads were off CPU in it, scaled like
 * the other columns; not available when self time is not (under --sample
 * an interval goes to the nearest recorded op, not to the op it was in). */
static void print_off_cpu_cells(FILE *f, const struct trace *t,
				const struct op_stats *r)
{
	double p = trace_keep_prob(t);
	char self[24], total[24];

	if (!trace_self_known(t)) {
		fprintf(f, "  %*s  %*s", OFF_W, "n/a", OFF_W, "n/a");
		return;
	}
	format_estimate(r->self_off_cpu_ns / p, self, sizeof(self));
	format_estimate(r->off_cpu_ns / p, total, sizeof(total));
	fprintf(f, "  %*s  %*s", OFF_W, self, OFF_W, total);
}

/* A row's name; '*' marks a row with calls cut short. */
static void print_name(FILE *f, const struct op_stats *r, const char *name)
{
	print_cell(f, name, NAME_W, r->truncated ? '*' : 0);
}

static void print_row(FILE *f, const struct op_stats *r, const char *name,
		      uint64_t all_self)
{
	char self[24], total[24], avg[24] = "-", min[24] = "-", max[24] = "-";
	double denom = all_self ? (double)all_self : 1;

	format_duration(r->self_ns, self, sizeof(self));
	format_duration(r->total_ns, total, sizeof(total));
	if (r->ended) {
		format_duration(r->ended_ns / r->ended, avg, sizeof(avg));
		format_duration(r->min_ns, min, sizeof(min));
		format_duration(r->max_ns, max, sizeof(max));
	}
	print_name(f, r, name);
	fprintf(f, "  %6.2f%%  %10s  %6.2f%%  %10s  %10s  %10s  %10s  %8llu",
		100.0 * r->self_ns / denom, self, 100.0 * r->total_ns / denom,
		total, avg, min, max, (unsigned long long)r->calls);
}

/* Sampled captures: estimates for all ops, with standard errors; self
 * time only when whole trees were kept. */
static void print_sampled_row(FILE *f, const struct op_stats *r,
			      const char *name, uint64_t all_self, double p,
			      bool self_known)
{
	char self[24] = "n/a", self_se[24] = "n/a", pct[24] = "n/a";
	char total[24], se[24];
	struct op_estimate e;

	estimate_op(r, p, &e);
	if (self_known) {
		format_estimate(e.self_ns, self, sizeof(self));
		format_estimate(e.self_se, self_se, sizeof(self_se));
		snprintf(pct, sizeof(pct), "%6.2f%%", 100.0 * r->self_ns /
			 (all_self ? (double)all_self : 1));
	}
	format_estimate(e.total_ns, total, sizeof(total));
	format_estimate(e.total_se, se, sizeof(se));
	print_name(f, r, name);
	fprintf(f, "  %7s  %10s  %10s  %10s  %10s  %8llu  %10.0f  %8.0f",
		pct, self, self_se, total, se, (unsigned long long)r->calls,
		e.calls, e.calls_se);
}

static void print_header(FILE *f, const struct layout *l)
{
	const char *const *cols = l->sampled ? sampled_cols : full_cols;
	const int *w = l->sampled ? sampled_w : full_w;

	fprintf(f, "%-*s", NAME_W, "Name");
	for (int c = 0; c < NR_COLS; c++)
		fprintf(f, "  %*s", w[c], cols[c]);
	for (int c = 0; l->gpu && c < GPU_COLS; c++)
		fprintf(f, "  %*s", gpu_w[c], gpu_cols[c]);
	for (int c = 0; l->off && c < 2; c++)
		fprintf(f, "  %*s", OFF_W, off_cols[c]);
	for (int c = 0; c < l->mem; c++)
		fprintf(f, "  %*s", MEM_W, mem_cols[c]);
	if (l->shapes)
		fprintf(f, "  %-*s", l->source ? SHAPES_W : 0, "Input Shapes");
	if (l->source)
		fputs("  Source Location", f);
	fputc('\n', f);
}

/* What the whole table adds up to, estimated for all ops if sampled. */
static void print_self_total(FILE *f, const struct trace *t,
			     const struct aggregate *a)
{
	double p = trace_keep_prob(t);
	char total[24], se[24];
	double sq = 0;

	if (!trace_self_known(t)) {
		fprintf(f, "Self time: %s\n", trace_self_unknown_why);
		return;
	}
	if (p >= 1.0) {
		format_duration(a->self_ns, total, sizeof(total));
		fprintf(f, "Self time total: %s; ", total);
		return;
	}
	for (size_t i = 0; i < a->nr; i++)
		sq += a->rows[i].self_sq;
	format_estimate(a->self_ns / p, total, sizeof(total));
	format_estimate(sqrt(sq * (1 - p)) / p, se, sizeof(se));
	fprintf(f, "Est. self time total: %s (+- %s, rows not independent); ",
		total, se);
}

static int by_idle_time(const void *x, const void *y)
{
	const struct idle_thread *a = x, *b = y;

	return a->total_ns < b->total_ns ? 1 : a->total_ns > b->total_ns ?
	       -1 : a->tid > b->tid ? 1 : -1;
}

/* --off-cpu: time off CPU with no op open has no op row to go in, so the
 * threads get rows of their own, by reason (torch 1.13 waits for the GIL
 * there; the footer's totals alone showed no thread). */
static void print_idle_threads(FILE *f, const struct trace *t,
			       const struct aggregate *a, int top)
{
	static const unsigned order[] = {
		RF_OFF_SLEEP, RF_OFF_GIL, RF_OFF_PREEMPTED, RF_OFF_BLOCK_IO,
		RF_OFF_UNINTERRUPTIBLE,
	};
	static const char *const heads[] = {
		"Sleeping", "GIL", "Preempted", "Block I/O", "Uninterr.",
	};
	struct idle_thread *r;
	char cell[24], who[64];
	size_t n = a->nr_idle;

	if (!t->off_cpu || !n || !(r = malloc(n * sizeof(*r))))
		return;
	memcpy(r, a->idle, n * sizeof(*r));
	qsort(r, n, sizeof(*r), by_idle_time);
	fprintf(f, "\nOff CPU with no op open, per thread:\n%-32s  %9s  "
		"%10s", "Thread", "Intervals", "Total");
	for (size_t k = 0; k < sizeof(heads) / sizeof(*heads); k++)
		fprintf(f, "  %10s", heads[k]);
	fputc('\n', f);
	for (size_t i = 0; i < n && (!top || i < (size_t)top); i++) {
		snprintf(who, sizeof(who), "%s [%u]", r[i].name == UINT32_MAX ?
			 "thread" : names_get(&t->names, r[i].name), r[i].tid);
		print_cell(f, who, 32, 0);
		format_duration(r[i].total_ns, cell, sizeof(cell));
		fprintf(f, "  %9llu  %10s", (unsigned long long)r[i].intervals,
			cell);
		for (size_t k = 0; k < sizeof(order) / sizeof(*order); k++) {
			format_duration(r[i].ns[order[k]], cell, sizeof(cell));
			fprintf(f, "  %10s", cell);
		}
		fputc('\n', f);
	}
	if (top && n > (size_t)top)
		fprintf(f, "(%zu more threads not shown: --top 0 shows all)\n",
			n - (size_t)top);
	fputc('\n', f);
	free(r);
}

/* "Self time ...", then how many ops on how many threads, in which
 * processes. */
static void print_summary(FILE *f, const struct trace *t,
			  const struct aggregate *a)
{
	const struct counts *c = &t->counts;
	char children[64] = "";
	uint64_t nr_children = c->child_processes_seen;

	if (nr_children)
		snprintf(children, sizeof(children), " and %llu child "
			 "process%s", (unsigned long long)nr_children,
			 nr_children > 1 ? "es" : "");
	print_self_total(f, t, a);
	fprintf(f, "%llu op%s on %llu thread%s", (unsigned long long)c->ops,
		c->ops == 1 ? "" : "s",
		(unsigned long long)c->threads_with_ops,
		c->threads_with_ops == 1 ? "" : "s");
	/* Threads that ran no op: ends of ops begun before tracing, off-CPU
	 * switches, GPU launches outside ops. */
	if (c->threads_seen > c->threads_with_ops)
		fprintf(f, " (%llu seen)", (unsigned long long)c->threads_seen);
	fprintf(f, " in PID %u (%s)%s\n", t->pid, t->process_name, children);
	if (counts_truncated(c))
		fprintf(f, "* rows with calls cut short (%llu in all: see "
			"below): their time up to the cut counts in Total, not "
			"in Avg, Min or Max\n",
			(unsigned long long)counts_truncated(c));
}

/* Whether the probe cost was taken out of the times, and by how much. */
static void print_probe_cost(FILE *f, const struct trace *t)
{
	if (t->probe_cost.inside_ns || t->probe_cost.outside_ns)
		fprintf(f, "Times less rfbpf's probe cost, calibrated at start:"
			" %.3fus in each op (rounds %.3f-%.3fus), %.3fus more "
			"for each op nested in it (rounds %.3f-%.3fus; "
			"--raw-times keeps it)\n",
			t->probe_cost.inside_ns / 1e3,
			t->probe_cost.inside_lo_ns / 1e3,
			t->probe_cost.inside_hi_ns / 1e3,
			(t->probe_cost.inside_ns + t->probe_cost.outside_ns) /
			1e3, t->probe_cost.op_lo_ns / 1e3,
			t->probe_cost.op_hi_ns / 1e3);
	else
		fprintf(f, "Times include rfbpf's probe cost (not compensated:"
			" %s)\n", t->probe_cost_note[0] ? t->probe_cost_note :
			"not calibrated");
}

/* The events read and what was lost or unpaired, with the Python
 * stacks', inputs' and off-CPU notes. */
static void print_event_counts(FILE *f, const struct trace *t)
{
	const struct counts *c = &t->counts;
	char losses[768];

	fprintf(f, "Events: %llu (", (unsigned long long)c->events);
	for (unsigned v = 0; v < RF_V_NR_BEFORE; v++)
		if (c->before[v] || c->bpf_hits[v])
			fprintf(f, "%s %llu, ", variant_name(v),
				(unsigned long long)c->before[v]);
	fprintf(f, "end() %llu, thread exits %llu)\n",
		(unsigned long long)c->ends,
		(unsigned long long)c->thread_exits);
	format_losses(c, losses, sizeof(losses));
	fprintf(f, "Lost or unpaired: %s", losses);
	if (t->children)
		fprintf(f, "; ops missed in children %llu",
			(unsigned long long)c->child_ops_missed);
	if (t->children && c->children_probed_late)
		fprintf(f, ", and uncounted ones in the first moments of %llu "
			"children probed after their fork (entry probes)",
			(unsigned long long)c->children_probed_late);
	if (t->children && c->children_unprobed)
		fprintf(f, "; %llu children never probed (gone before rfbpf "
			"reached them), their ops unseen",
			(unsigned long long)c->children_unprobed);
	fputc('\n', f);
	if (trace_python_note(t, losses, sizeof(losses)))
		fprintf(f, "Python stacks: %s\n", losses);
	if (trace_inputs_note(t, losses, sizeof(losses)))
		fprintf(f, "Inputs: %s\n", losses);
	if (trace_off_cpu_note(t, losses, sizeof(losses)))
		fprintf(f, "Off CPU: %s\n", losses);
	if (memory_note(&t->mem, t->counts.mem_sampled_full, losses,
			sizeof(losses)))
		fprintf(f, "Memory: %s\n", losses);
}

/* What the estimates rest on: sampling, its bias, the GPU's attribution,
 * tree sampling. */
static void print_estimate_notes(FILE *f, const struct trace *t,
				 const struct aggregate *a)
{
	const struct counts *c = &t->counts;
	char total[24], losses[768];

	if (t->sample_prob < 1.0)
		fprintf(f, "SAMPLED: RecordFunction kept each op with p=%g; "
			"Est. columns are the sampled values scaled by 1/p, "
			"+- is one standard error\n", t->sample_prob);
	if (trace_sampler_bias_note(t, losses, sizeof(losses)))
		fprintf(f, "BIASED: %s\n", losses);
	if (t->gpu.counts.agent_seen) {
		format_duration(a->gpu_self_ns, total, sizeof(total));
		gpu_format_losses(&t->gpu.counts, c->gpu_bad_records, losses,
				  sizeof(losses));
		fprintf(f, "GPU time attributed to ops: %s. %s\n", total,
			losses);
		gpu_format_cupti(&t->gpu.counts, losses, sizeof(losses));
		fprintf(f, "%s\n", losses);
		if (!trace_self_known(t))
			fprintf(f, "GPU columns: not available under --sample "
				"(a kernel launched in an op that was not sampled "
				"would count for the nearest sampled op around "
				"it)\n");
		else if (trace_keep_prob(t) < 1.0)
			fprintf(f, "GPU columns: estimates, scaled by 1/p "
				"(kept trees hold all their launches)\n");
	}
	if (t->tree_prob < 1.0)
		fprintf(f, "TREE-SAMPLED: kept %llu of %llu top-level op trees "
			"(p=%g)%s; Est. columns also scale by 1/p, +- is one "
			"standard error over whole trees\n",
			(unsigned long long)c->trees_kept,
			(unsigned long long)c->trees_seen, t->tree_prob,
			c->tree_too_deep ? ", some nested too deep to track" :
			"");
}

/* --steps, --from-step, --per-step: which steps the table holds. */
static void print_steps(FILE *f, const struct trace *t)
{
	const struct steps *s = t->steps;
	char longest[32];

	if (!s)
		return;
	if (s->source == STEP_NONE || (!s->done && !s->in_step)) {
		fprintf(f, "Steps: none %s: no %s ended on a traced thread%s\n",
			s->gate ? "traced" : "seen",
			s->source == STEP_NONE ? "ProfilerStep#N or "
			"Optimizer.step#... scope" : steps_source_name(s),
			s->source == STEP_NONE ? " (name the step's "
			"record_function scope with --step-op)" : "");
		return;
	}
	format_duration(s->longest_ns, longest, sizeof(longest));
	fprintf(f, "Steps: %llu whole (%s on thread %u), longest %s",
		(unsigned long long)s->done, steps_source_name(s), s->tid,
		longest);
	if (s->gate)
		fprintf(f, "; only what began in them is counted (%llu ops "
			"outside them left out)", (unsigned long long)
			t->counts.ops_outside_steps);
	if (s->from >= 0 && s->first > s->from)
		fprintf(f, "; from step %lld: step %lld had passed when "
			"tracing began", (long long)s->first,
			(long long)s->from);
	if (s->want && s->done < s->want)
		fprintf(f, "; %llu of the %llu asked for",
			(unsigned long long)s->done,
			(unsigned long long)s->want);
	fputc('\n', f);
}

static void print_footer(FILE *f, const struct trace *t,
			 const struct aggregate *a, enum sort_key sort)
{
	print_summary(f, t, a);
	print_steps(f, t);
	print_probe_cost(f, t);
	if (sort == SORT_SELF && !trace_self_known(t))
		fprintf(f, "Sorted by Est. total: self time is not "
			"available\n");
	print_event_counts(f, t);
	print_estimate_notes(f, t, a);
}

/* --memory: bytes its calls allocated less those they freed, by
 * themselves and with every op below them. */
static void print_mem_cells(FILE *f, const struct op_stats *r, int n)
{
	for (int c = 0; c < n; c++) {
		char cell[32];
		int w = c / 2;

		memory_format(c % 2 ? r->mem[w] : r->self_mem[w], cell,
			      sizeof(cell));
		fprintf(f, "  %*s", MEM_W, cell);
	}
}

static struct layout layout_of(const struct trace *t,
			       const struct aggregate *a)
{
	struct layout l = {
		.sampled = trace_keep_prob(t) < 1.0,
		.gpu = t->gpu.counts.agent_seen,
		.off = t->off_cpu,
		.shapes = a->group_inputs != NULL,
		.source = a->group_n > 0,
	};

	if (t->mem.on)
		l.mem = t->mem.nr_devices > 1 || (t->mem.nr_devices == 1 &&
			t->mem.devices[0].type != RF_DEVICE_CPU) ? 4 : 2;
	return l;
}

/* The rows, between rules, and how many more there were. */
static void print_rows(FILE *f, const struct trace *t,
		       const struct aggregate *a, enum sort_key sort, int top)
{
	size_t shown = 0, nr;
	bool self_known = trace_self_known(t);
	struct layout l = layout_of(t, a);
	/* Why, if another key: session/outputs.c says it, once. */
	struct op_stats *rows = aggregate_sorted(a, t,
						 table_sort_key(t, sort, NULL,
								0), &nr);

	if (!rows || a->oom) {
		fprintf(f, "rfbpf: out of memory building the table\n");
		free(rows);
		return;
	}
	rule(f, &l);
	print_header(f, &l);
	rule(f, &l);
	for (size_t i = 0; i < nr && (!top || shown < (size_t)top); i++) {
		const char *name = names_get(&t->names, rows[i].name);

		if (!rows[i].calls)
			continue;
		if (l.sampled)
			print_sampled_row(f, &rows[i], name, a->self_ns,
					  trace_keep_prob(t), self_known);
		else
			print_row(f, &rows[i], name, a->self_ns);
		if (l.gpu)
			print_gpu_cells(f, t, &rows[i]);
		if (l.off)
			print_off_cpu_cells(f, t, &rows[i]);
		print_mem_cells(f, &rows[i], l.mem);
		if (l.shapes)
			print_shapes(f, t, &rows[i], l.source);
		if (l.source)
			print_source(f, t, &rows[i], source_column(&l));
		fputc('\n', f);
		shown++;
	}
	rule(f, &l);
	if (shown < a->nr_called)
		fprintf(f, "(%zu more ops not shown: --top 0 shows all)\n",
			a->nr_called - shown);
	free(rows);
}

void print_table(FILE *f, const struct trace *t, const struct aggregate *a,
		 enum sort_key sort, int top)
{
	print_rows(f, t, a, sort, top);
	if (a->oom)
		return;
	print_idle_threads(f, t, a, top);
	print_memory(f, t, !top ? 0 : top > 10 ? 10 : top);
	print_footer(f, t, a, sort);
}

void print_step_table(FILE *f, const struct trace *t,
		      const struct aggregate *a, const struct step *st,
		      enum sort_key sort, int top)
{
	char dur[32];

	format_duration(st->end_ns > st->start_ns ?
			st->end_ns - st->start_ns : 0, dur, sizeof(dur));
	fprintf(f, "\nStep %lld: %s on thread %u", (long long)st->number,
		st->end_ns ? dur : "(not ended)", st->tid);
	if (t->steps && !steps_marker_is_step(t->steps))
		fprintf(f, " (ended by %s)", steps_source_name(t->steps));
	fputc('\n', f);
	print_rows(f, t, a, sort, top);
}

static int by_wakes(const void *x, const void *y)
{
	const struct waker_pair *a = x, *b = y;

	return a->wakes < b->wakes ? 1 : a->wakes > b->wakes ? -1 :
	       a->off_cpu_ns < b->off_cpu_ns ? 1 : -1;
}

void print_wakers(FILE *f, const struct trace *t, const struct aggregate *a,
		  unsigned top)
{
	struct waker_pair *w = malloc((a->nr_wakers ? a->nr_wakers : 1) *
				      sizeof(*w));
	char off[24];

	if (!w) {
		fprintf(f, "rfbpf: out of memory building the wakers table\n");
		return;
	}
	if (a->nr_wakers)	/* wakers is NULL then: no memcpy from it */
		memcpy(w, a->wakers, a->nr_wakers * sizeof(*w));
	qsort(w, a->nr_wakers, sizeof(*w), by_wakes);
	fprintf(f, "\nWho woke whom (a traced thread's op woke a thread off CPU "
		"in an op):\n%-40s  %-40s  %8s  %12s\n", "Waker op",
		"Woken op", "Wakeups", "Woken off-CPU");
	for (size_t i = 0; i < a->nr_wakers && i < top; i++) {
		format_duration(w[i].off_cpu_ns, off, sizeof(off));
		print_cell(f, names_get(&t->names, w[i].waker), 40, 0);
		fputs("  ", f);
		print_cell(f, names_get(&t->names, w[i].woken), 40, 0);
		fprintf(f, "  %8llu  %12s\n", (unsigned long long)w[i].wakes,
			off);
	}
	if (!a->nr_wakers)
		fprintf(f, "(none: of the %llu wakeups by traced threads, %llu "
			"came from inside an op, and none of those woke a "
			"thread off CPU inside an op)\n",
			(unsigned long long)t->counts.wakes,
			(unsigned long long)t->counts.wakes_in_ops);
	free(w);
}
