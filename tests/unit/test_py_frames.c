// SPDX-License-Identifier: BSD-2-Clause
/* Python call sites of ops (user/model/py_frames.c) and where they go in
 * an op's stack (trace_frames) and in grouped tables (aggregate.c), with
 * a table standing in for the target's memory. */
#include <math.h>
#include <stdarg.h>
#include "check.h"
#include "chrome_capture.h"
#include "model/aggregate.h"
#include "model/trace.h"
#include "op_log.h"

/* The "target": code objects by address, each a function, a file and
 * the line of unit u, first_line + u; gen moves when one is replaced. */
static struct fake_code {
	uint64_t code;
	const char *func, *file;
	int first_line;
	uint32_t gen;
} codes[8];
static int nr_codes, locates;

static struct fake_code *find(uint64_t code)
{
	for (int i = 0; i < nr_codes; i++)
		if (codes[i].code == code)
			return &codes[i];
	return NULL;
}

static int fake_gen(void *ctx, uint32_t pid, uint64_t code, uint32_t *gen)
{
	struct fake_code *c = find(code);

	(void)ctx, (void)pid;
	if (!c)
		return -1;
	*gen = c->gen;
	return 0;
}

static int fake_locate(void *ctx, uint32_t pid, uint64_t code, int32_t unit,
		       char *func, size_t flen, char *file, size_t filen,
		       int *line)
{
	struct fake_code *c = find(code);

	(void)ctx, (void)pid;
	if (!c)
		return -1;
	locates++;
	snprintf(func, flen, "%s", c->func);
	snprintf(file, filen, "%s", c->file);
	*line = c->first_line + unit;
	return 0;
}

static const struct py_resolver resolver = { fake_gen, fake_locate, NULL };

static void setup(struct trace *t)
{
	static const struct fake_code init[] = {
		{ 0x1000, "main", "/srv/train.py", 10, 1 },
		{ 0x2000, "Model.forward", "/srv/model.py", 40, 1 },
		{ 0x3000, "step", "/srv/train.py", 20, 1 },
	};

	memcpy(codes, init, sizeof(init));
	nr_codes = 3;
	locates = 0;
	trace_init_logged(t, 1);
	t->py_resolver = resolver;
}

/* Sends t's slices to a Chrome writer on cap (s: the sink, which must
 * live as long as t). */
static void capture_into(struct trace *t, struct chrome_capture *cap,
			 struct trace_sink *s)
{
	capture_begin(cap);
	*s = chrome_sink(&cap->w);
	trace_add_sink(t, s);
}

static const char *label(const struct trace *t, uint32_t id)
{
	return names_get(&t->names, id);
}

/* frames: innermost first, as BPF sends them */
static uint32_t stack_of(struct trace *t, const struct rf_py_frame *f,
			 uint32_t n, uint32_t flags)
{
	return py_frames_stack(&t->py, &t->names, &t->py_resolver, 1, f, n,
			       flags);
}

TEST(frames_are_named_and_interned_outermost_first)
{
	struct rf_py_frame f[] = { { 0x2000, 3, 0 }, { 0x1000, 5, 0 } };
	struct trace t;
	const uint32_t *l;
	uint32_t id, n;

	setup(&t);
	id = stack_of(&t, f, 2, 0);
	CHECK(id > 0);
	l = py_frames_get(&t.py, id, &n);
	CHECK_EQ_U64(n, 2);
	CHECK_STR(label(&t, l[0]), "main (/srv/train.py:15)");
	CHECK_STR(label(&t, l[1]), "Model.forward (/srv/model.py:43)");
	/* The parts, for pprof; an op name is no Python frame. */
	CHECK(py_frames_loc(&t.py, l[1]) != NULL);
	CHECK_STR(label(&t, py_frames_loc(&t.py, l[1])->func),
		  "Model.forward");
	CHECK_STR(label(&t, py_frames_loc(&t.py, l[1])->file),
		  "/srv/model.py");
	CHECK_EQ_U64(py_frames_loc(&t.py, l[1])->line, 43);
	CHECK(py_frames_loc(&t.py, names_intern(&t.names, "aten::mm", 8)) ==
	      NULL);
	/* The same stack again: the same id, nothing read anew. */
	CHECK_EQ_U64(stack_of(&t, f, 2, 0), id);
	CHECK_EQ_U64(locates, 2);
	/* Another unit of the same code: another line. */
	f[0].unit = 4;
	CHECK(stack_of(&t, f, 2, 0) != id);
	CHECK_EQ_U64(locates, 3);
	trace_free(&t);
}

TEST(a_replaced_code_object_is_named_anew)
{
	struct rf_py_frame f[] = { { 0x2000, 0, 0 } };
	struct trace t;
	const uint32_t *l;
	uint32_t n;

	setup(&t);
	l = py_frames_get(&t.py, stack_of(&t, f, 1, 0), &n);
	CHECK_STR(label(&t, l[0]), "Model.forward (/srv/model.py:40)");
	codes[1].func = "Other.run";	/* freed, another made there */
	codes[1].gen = 2;
	l = py_frames_get(&t.py, stack_of(&t, f, 1, 0), &n);
	CHECK_STR(label(&t, l[0]), "Other.run (/srv/model.py:40)");
	trace_free(&t);
}

TEST(truncated_and_unreadable_frames_are_marked_and_counted)
{
	struct rf_py_frame f[] = { { 0x9999, 0, 0 }, { 0x1000, 0, 0 } };
	struct trace t;
	const uint32_t *l;
	uint32_t n;

	setup(&t);
	l = py_frames_get(&t.py, stack_of(&t, f, 2, RF_PY_F_TRUNCATED), &n);
	CHECK_EQ_U64(n, 3);
	CHECK_STR(label(&t, l[0]), PY_TRUNCATED_LABEL);
	CHECK_STR(label(&t, l[1]), "main (/srv/train.py:10)");
	CHECK_STR(label(&t, l[2]), PY_UNKNOWN_LABEL);
	CHECK_EQ_U64(t.py.unresolved, 1);
	/* Markers are no op either: outputs leave them out of op rows. */
	CHECK(py_frames_loc(&t.py, l[0]) != NULL);
	trace_free(&t);
}

static void before(struct trace *t, uint32_t tid, uint64_t addr,
		   uint64_t ts, const char *name)
{
	struct rf_event_hdr h = {
		.ts_ns = ts, .rf_addr = addr, .pid = 1, .tid = tid,
		.kind = RF_EV_BEFORE, .name_len = strlen(name),
	};

	stacks_before(t, &h, name, 0);
}

/* A record_function("name") scope beginning. */
static void before_user_scope(struct trace *t, uint32_t tid, uint64_t addr,
			      uint64_t ts, const char *name)
{
	struct rf_event_hdr h = {
		.ts_ns = ts, .rf_addr = addr, .pid = 1, .tid = tid,
		.kind = RF_EV_BEFORE, .name_len = strlen(name),
		.scope = RF_SCOPE_USER,
	};

	stacks_before(t, &h, name, 0);
}

static void end(struct trace *t, uint32_t tid, uint64_t addr, uint64_t ts)
{
	struct rf_event_hdr h = {
		.ts_ns = ts, .rf_addr = addr, .pid = 1, .tid = tid,
		.kind = RF_EV_END,
	};

	stacks_end(t, &h);
}

/* The stack record of the op at addr just opened on tid. */
static void py(struct trace *t, uint32_t tid, uint64_t addr, uint32_t flags,
	       uint32_t n, ...)
{
	static struct rf_py_stack_event e;
	va_list ap;

	memset(&e, 0, sizeof(e));
	e.hdr = (struct rf_event_hdr){ .rf_addr = addr, .pid = 1,
				       .tid = tid, .kind = RF_EV_PY_STACK };
	e.nr_frames = n;
	e.py_flags = flags;
	va_start(ap, n);
	for (uint32_t i = 0; i < n; i++) {	/* innermost first */
		uint64_t at = va_arg(ap, uint64_t);

		e.frames[i].code = at & ~0xffull;	/* code | unit */
		e.frames[i].unit = at & 0xff;
	}
	va_end(ap);
	stacks_py_stack(t, &e, RF_PY_STACK_SIZE(n));
}

/* Frames of the next op to close, as a ';' list. */
static char seen[1024];

static void keep_frames(void *ctx, struct trace *t, const struct closed_op *c)
{
	(void)ctx;
	seen[0] = 0;
	for (uint32_t i = 0; i < c->depth; i++)
		snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen),
			 "%s%s", i ? ";" : "", names_get(&t->names,
							 c->frames[i]));
}

/* A scope opened in main() around a call of forward(), whose op has a
 * nested op of its own: each op's Python frames come before it, those it
 * shares with the op around it once; a thread's "same as last" record
 * takes its last stack. */
TEST(python_frames_interleave_with_the_ops_they_called)
{
	struct trace_sink s = { .op = keep_frames };
	struct trace t;

	setup(&t);
	trace_add_sink(&t, &s);
	before(&t, 7, 0xa, 10, "step");
	py(&t, 7, 0xa, 0, 1, 0x1000ull);
	before(&t, 7, 0xb, 20, "aten::mm");
	py(&t, 7, 0xb, 0, 3, 0x2000ull, 0x3000ull, 0x1000ull);
	before(&t, 7, 0xc, 30, "aten::resolve_conj");
	py(&t, 7, 0xc, RF_PY_F_SAME, 0);
	end(&t, 7, 0xc, 40);
	CHECK_STR(seen, "main (/srv/train.py:10);step;step (/srv/train.py:20);"
		  "Model.forward (/srv/model.py:40);aten::mm;"
		  "aten::resolve_conj");
	end(&t, 7, 0xb, 50);
	CHECK_STR(seen, "main (/srv/train.py:10);step;step (/srv/train.py:20);"
		  "Model.forward (/srv/model.py:40);aten::mm");
	end(&t, 7, 0xa, 60);
	CHECK_STR(seen, "main (/srv/train.py:10);step");
	CHECK_EQ_U64(t.counts.py_stacks, 2);
	CHECK_EQ_U64(t.counts.py_same, 1);
	/* A record with no op open on its thread is counted. */
	py(&t, 7, 0xd, 0, 1, 0x1000ull);
	CHECK_EQ_U64(t.counts.py_orphans, 1);
	trace_free(&t);
}

/* --group-by stack:1: a row per op and its innermost Python frame; GPU
 * time a launch brought goes to the op rows only. */
TEST(grouped_rows_split_an_op_by_call_site)
{
	struct aggregate a;
	struct trace_sink s;
	struct trace t;
	struct op_stats *rows;
	size_t nr;
	uint32_t mm = 0;

	setup(&t);
	aggregate_init(&a);
	aggregate_group_by_stack(&a, &t.py, 1);
	s = aggregate_sink(&a);
	trace_add_sink(&t, &s);
	for (int i = 0; i < 4; i++) {	/* forward once, step three times */
		uint64_t addr = 0x100 + i;

		before(&t, 7, addr, 100 * i, "aten::mm");
		if (i == 0)
			py(&t, 7, addr, 0, 2, 0x2000ull, 0x1000ull);
		else
			py(&t, 7, addr, 0, 2, 0x3000ull, 0x1000ull);
		end(&t, 7, addr, 100 * i + 50);
	}
	rows = aggregate_sorted(&a, &t, SORT_CALLS, &nr);
	CHECK_EQ_U64(nr, 2);
	for (size_t i = 0; i < nr; i++) {
		uint32_t n;
		const uint32_t *l = py_frames_get(&t.py, rows[i].group, &n);

		CHECK_STR(label(&t, rows[i].name), "aten::mm");
		CHECK_EQ_U64(n, 1);
		CHECK_STR(label(&t, l[0]), i == 0 ?
			  "step (/srv/train.py:20)" :
			  "Model.forward (/srv/model.py:40)");
		CHECK_EQ_U64(rows[i].calls, i == 0 ? 3 : 1);
		mm += rows[i].calls;
	}
	CHECK_EQ_U64(mm, 4);
	free(rows);
	aggregate_free(&a);
	trace_free(&t);
}

/* How far past the last op it held frame i's slice ends. */
#define PAD(i) (RF_PY_MAX_FRAMES + 1 - (i))

/* The text between two strings of s, for reading one event. */
static const char *event_named(const char *text, const char *name)
{
	const char *at = strstr(text, name);

	while (at && at > text && *at != '{')
		at--;
	return at;
}

static double arg_of(const char *ev, const char *key)
{
	const char *at = ev ? strstr(ev, key) : NULL;

	return at ? strtod(at + strlen(key), NULL) : -1;
}

/* Python frames as python_function slices around the ops under them: a
 * function's slice spans its ops whatever line they came from, closes
 * when an op starts outside it, and nests in its caller's. */
TEST(chrome_python_slices_span_the_ops_under_them)
{
	struct chrome_capture cap;
	struct trace_sink s;
	struct trace t;
	const char *text, *fwd, *step, *main_;

	setup(&t);
	codes[nr_codes++] = (struct fake_code){ 0x4000, "loss", "/srv/t.py",
						70, 1 };
	capture_into(&t, &cap, &s);
	/* main -> step -> forward: two ops from two lines of forward */
	before(&t, 7, 0xa, 1000, "aten::mm");
	py(&t, 7, 0xa, 0, 3, 0x2000ull, 0x3000ull, 0x1000ull);
	end(&t, 7, 0xa, 2000);
	before(&t, 7, 0xb, 3000, "aten::add");
	py(&t, 7, 0xb, 0, 3, 0x2005ull, 0x3000ull, 0x1000ull);
	end(&t, 7, 0xb, 4000);
	/* main -> step -> loss: forward's slice closes */
	before(&t, 7, 0xc, 5000, "aten::sum");
	py(&t, 7, 0xc, 0, 3, 0x4000ull, 0x3000ull, 0x1000ull);
	end(&t, 7, 0xc, 6000);
	text = capture_finish(&cap, &t, NULL);
	fwd = event_named(text, "\"/srv/model.py(40): Model.forward\"");
	step = event_named(text, "\"/srv/train.py(20): step\"");
	main_ = event_named(text, "\"/srv/train.py(10): main\"");
	CHECK(fwd && step && main_);
	CHECK(fwd && strstr(fwd, "\"cat\":\"python_function\""));
	/* A ns per frame before its op, so that viewers nest them. */
	CHECK_EQ_U64(arg_of(fwd, "\"ts\":") * 1000, 999);
	/* Both ops, and a ns per frame it is below the deepest possible
	 * after the last (no two nested slices end at once). */
	CHECK_EQ_U64(arg_of(fwd, "\"dur\":") * 1000, 4000 + PAD(2) - 999);
	CHECK_EQ_U64(arg_of(step, "\"ts\":") * 1000, 998);
	CHECK_EQ_U64(arg_of(step, "\"dur\":") * 1000, 6000 + PAD(1) - 998);
	CHECK_EQ_U64(arg_of(fwd, "\"Python parent id\":"),
		     arg_of(step, "\"Python id\":"));
	CHECK_EQ_U64(arg_of(step, "\"Python parent id\":"),
		     arg_of(main_, "\"Python id\":"));
	CHECK(main_ && !strstr(main_, "Python parent id"));
	/* one slice per function: forward once, though two lines */
	CHECK(fwd && !strstr(strstr(fwd, "Model.forward") + 1,
			     "Model.forward"));
	capture_free(&cap, &t);
	trace_free(&t);
}

/* record_function's machinery, as torch.optim's scopes meet it: the
 * scope opens inside record_function.__enter__ and torch/_ops.py, which
 * return before the ops in the scope run. */
static void add_scope_codes(void)
{
	codes[nr_codes++] = (struct fake_code){ 0x5000, "Optimizer.zero_grad",
						"/srv/optim.py", 100, 1 };
	codes[nr_codes++] = (struct fake_code){
		0x6000, "record_function.__enter__", "/srv/profiler.py", 488, 1 };
	codes[nr_codes++] = (struct fake_code){
		0x7000, "OpOverloadPacket.__call__", "/srv/_ops.py", 442, 1 };
}

#define ZG "Optimizer.zero_grad#Adam.zero_grad"

/* An op that outlives frames it began in (here one that is not a user
 * scope, so only the ops after it tell): its context is the frame that
 * still runs once an op shows __enter__ returned; ops closed before that
 * saw its whole begin stack. An op around it keeps its own. */
TEST(a_scope_outliving_its_frames_takes_the_frames_still_running)
{
	struct trace_sink s = { .op = keep_frames };
	struct trace t;

	setup(&t);
	add_scope_codes();
	trace_add_sink(&t, &s);
	before(&t, 7, 0x9, 500, "train_step");
	py(&t, 7, 0x9, 0, 1, 0x1000ull);
	before(&t, 7, 0xa, 1000, ZG);
	py(&t, 7, 0xa, 0, 4, 0x7000ull, 0x6000ull, 0x5003ull, 0x1000ull);
	CHECK_EQ_U64(t.ops[stacks_open_op(&t, 7, 0xa)].py_live, 4);
	before(&t, 7, 0xb, 1100, "aten::empty");
	py(&t, 7, 0xb, RF_PY_F_SAME, 0);
	end(&t, 7, 0xb, 1200);
	CHECK_STR(seen, "main (/srv/train.py:10);train_step;"
		  "Optimizer.zero_grad (/srv/optim.py:103);"
		  "record_function.__enter__ (/srv/profiler.py:488);"
		  "OpOverloadPacket.__call__ (/srv/_ops.py:442);" ZG
		  ";aten::empty");
	before(&t, 7, 0xc, 1300, "aten::zero_");
	py(&t, 7, 0xc, 0, 2, 0x5005ull, 0x1000ull);
	CHECK_EQ_U64(t.ops[stacks_open_op(&t, 7, 0xa)].py_live, 2);
	CHECK_EQ_U64(t.ops[stacks_open_op(&t, 7, 0x9)].py_live, 1);
	end(&t, 7, 0xc, 1400);
	CHECK_STR(seen, "main (/srv/train.py:10);train_step;"
		  "Optimizer.zero_grad (/srv/optim.py:103);" ZG ";"
		  "Optimizer.zero_grad (/srv/optim.py:105);aten::zero_");
	end(&t, 7, 0xa, 1500);
	CHECK_STR(seen, "main (/srv/train.py:10);train_step;"
		  "Optimizer.zero_grad (/srv/optim.py:103);" ZG);
	/* The function returned too: the next op's stack is main's alone. */
	before(&t, 7, 0xd, 1600, "aten::add");
	py(&t, 7, 0xd, 0, 1, 0x1002ull);
	CHECK_EQ_U64(t.ops[stacks_open_op(&t, 7, 0x9)].py_live, 1);
	end(&t, 7, 0xd, 1700);
	end(&t, 7, 0x9, 1800);
	CHECK_STR(seen, "main (/srv/train.py:10);train_step");
	trace_free(&t);
}

/* The complete events of thread tid in a Chrome trace's text, as
 * integer ns. */
struct span {
	long long start, end;
	char name[64];
	long long id, parent;
};

static int spans_of(const char *text, uint32_t tid, struct span *out,
		    int max)
{
	char want[32];
	int n = 0;

	snprintf(want, sizeof(want), "\"tid\":%u,", tid);
	for (const char *e = strstr(text, "{\"ph\":\"X\""); e;
	     e = strstr(e + 1, "{\"ph\":\"X\"")) {
		const char *nl = strchr(e, '\n'), *name = strstr(e, "\"name\":\"");
		const char *tp = strstr(e, want);
		struct span *s = &out[n];
		size_t len;

		if (!tp || (nl && tp > nl) || n == max)
			continue;
		s->start = llround(arg_of(e, "\"ts\":") * 1000);
		s->end = s->start + llround(arg_of(e, "\"dur\":") * 1000);
		name += 8;
		len = strcspn(name, "\"");
		snprintf(s->name, sizeof(s->name), "%.*s", (int)len, name);
		s->id = strstr(e, "\"Python id\":") &&
			(!nl || strstr(e, "\"Python id\":") < nl) ?
			(long long)arg_of(e, "\"Python id\":") : -1;
		s->parent = strstr(e, "\"Python parent id\":") &&
			(!nl || strstr(e, "\"Python parent id\":") < nl) ?
			(long long)arg_of(e, "\"Python parent id\":") : -1;
		n++;
	}
	return n;
}

static int by_start_then_longest(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end > y->end ? -1 : x->end < y->end;
}

/* Slices that start inside another and end after it: what viewers
 * cannot draw. */
static int misnested(struct span *s, int n)
{
	int stack[256], depth = 0, bad = 0;

	qsort(s, n, sizeof(*s), by_start_then_longest);
	for (int i = 0; i < n; i++) {
		while (depth && s[i].start >= s[stack[depth - 1]].end &&
		       !(s[i].start == s[stack[depth - 1]].end &&
			 s[i].end == s[i].start))
			depth--;
		if (depth && s[i].end > s[stack[depth - 1]].end) {
			fprintf(stderr, "  misnested: %s [%lld, %lld] in "
				"%s [%lld, %lld]\n", s[i].name, s[i].start,
				s[i].end, s[stack[depth - 1]].name,
				s[stack[depth - 1]].start,
				s[stack[depth - 1]].end);
			bad++;
		}
		if (depth < 256)
			stack[depth++] = i;
	}
	return bad;
}

static const struct span *span_named(const struct span *s, int n,
				     const char *prefix, int nth)
{
	for (int i = 0; i < n; i++)
		if (!strncmp(s[i].name, prefix, strlen(prefix)) && !nth--)
			return &s[i];
	return NULL;
}

static int count_named(const struct span *s, int n, const char *prefix)
{
	int k = 0;

	while (span_named(s, n, prefix, k))
		k++;
	return k;
}

/* The Chrome trace of the scope above: __enter__ and _ops.py, whose
 * slices began before the scope, become slices inside it (with the op
 * they held); the scope sits in the slice of the frame holding the
 * `with`, which spans it and the op before it. */
TEST(chrome_slices_nest_around_a_scope_that_outlives_its_frames)
{
	struct chrome_capture cap;
	struct trace_sink s;
	struct trace t;
	struct span sp[64];
	const struct span *zg, *scope, *enter, *call;
	int n;

	setup(&t);
	add_scope_codes();
	capture_into(&t, &cap, &s);
	before(&t, 7, 0x8, 500, "aten::zeros");
	py(&t, 7, 0x8, 0, 2, 0x5001ull, 0x1000ull);
	end(&t, 7, 0x8, 800);
	before(&t, 7, 0xa, 1000, ZG);
	py(&t, 7, 0xa, 0, 4, 0x7000ull, 0x6000ull, 0x5003ull, 0x1000ull);
	before(&t, 7, 0xb, 1100, "aten::empty");
	py(&t, 7, 0xb, RF_PY_F_SAME, 0);
	end(&t, 7, 0xb, 1200);
	before(&t, 7, 0xc, 1300, "aten::zero_");
	py(&t, 7, 0xc, 0, 2, 0x5005ull, 0x1000ull);
	end(&t, 7, 0xc, 1400);
	end(&t, 7, 0xa, 1500);
	before(&t, 7, 0xd, 1600, "aten::add");
	py(&t, 7, 0xd, 0, 1, 0x1002ull);
	end(&t, 7, 0xd, 1700);
	n = spans_of(capture_finish(&cap, &t, NULL), 7, sp, 64);
	CHECK_EQ_U64(n, 9);	/* 5 ops, 4 frames (one in each place) */
	CHECK_EQ_U64(misnested(sp, n), 0);
	zg = span_named(sp, n, "/srv/optim.py(101)", 0);
	scope = span_named(sp, n, ZG, 0);
	enter = span_named(sp, n, "/srv/profiler.py", 0);
	call = span_named(sp, n, "/srv/_ops.py", 0);
	CHECK(zg && scope && enter && call);
	if (!zg || !scope || !enter || !call)
		goto out;
	CHECK_EQ_U64(count_named(sp, n, "/srv/profiler.py"), 1);
	CHECK_EQ_U64(zg->start, 499);	/* from before aten::zeros */
	CHECK_EQ_U64(zg->end, 1599);	/* past the scope, before aten::add */
	CHECK_EQ_U64(enter->start, 1001);	/* inside the scope */
	CHECK_EQ_U64(enter->end, 1299);	/* past aten::empty, before zero_ */
	CHECK_EQ_U64(call->start, 1002);
	CHECK_EQ_U64(call->parent, enter->id);
	CHECK_EQ_U64(enter->parent, zg->id);
out:
	capture_free(&cap, &t);
	trace_free(&t);
}

/* A frame that held an op before a scope began in it, and returned
 * inside the scope, is cut at the scope's start: once outside it, with
 * that op, and once inside it, with what it held there. */
TEST(a_frame_returning_inside_a_scope_is_cut_at_its_start)
{
	struct chrome_capture cap;
	struct trace_sink s;
	struct trace t;
	struct span sp[64];
	const struct span *a, *b, *enter, *main_;
	int n;

	setup(&t);
	add_scope_codes();
	capture_into(&t, &cap, &s);
	before(&t, 7, 0xa, 1000, "aten::mm");
	py(&t, 7, 0xa, 0, 2, 0x2000ull, 0x1000ull);
	end(&t, 7, 0xa, 2000);
	/* forward opens a scope and returns with it open */
	before(&t, 7, 0xb, 3000, "scope");
	py(&t, 7, 0xb, 0, 3, 0x6000ull, 0x2003ull, 0x1000ull);
	before(&t, 7, 0xc, 3500, "aten::empty");
	py(&t, 7, 0xc, RF_PY_F_SAME, 0);
	end(&t, 7, 0xc, 3600);
	before(&t, 7, 0xd, 4000, "aten::add");
	py(&t, 7, 0xd, 0, 1, 0x1005ull);
	end(&t, 7, 0xd, 4500);
	end(&t, 7, 0xb, 5000);
	n = spans_of(capture_finish(&cap, &t, NULL), 7, sp, 64);
	CHECK_EQ_U64(misnested(sp, n), 0);
	CHECK_EQ_U64(count_named(sp, n, "/srv/model.py"), 2);
	a = span_named(sp, n, "/srv/model.py", 0);
	b = span_named(sp, n, "/srv/model.py", 1);
	enter = span_named(sp, n, "/srv/profiler.py", 0);
	main_ = span_named(sp, n, "/srv/train.py", 0);
	CHECK(a && b && enter && main_);
	if (!a || !b || !enter || !main_)
		goto out;
	CHECK_EQ_U64(a->start, 999);
	CHECK_EQ_U64(a->end, 2000 + PAD(1));	/* aten::mm */
	CHECK_EQ_U64(b->start, 3001);	/* inside the scope */
	CHECK_EQ_U64(b->end, 3600 + PAD(1));	/* aten::empty */
	CHECK_EQ_U64(enter->start, 3002);
	CHECK_EQ_U64(enter->parent, b->id);
	CHECK(a->id != b->id);
	CHECK_EQ_U64(a->parent, main_->id);
	CHECK_EQ_U64(b->parent, main_->id);
	CHECK_EQ_U64(main_->start, 998);
	CHECK_EQ_U64(main_->end, 5000 + PAD(0));
out:
	capture_free(&cap, &t);
	trace_free(&t);
}

/* Two nested ops both outlive a frame they began in: its slice has a
 * part inside each, with the op each held there. */
TEST(a_frame_outlived_by_two_nested_ops_is_cut_at_each)
{
	struct chrome_capture cap;
	struct trace_sink s;
	struct trace t;
	struct span sp[64];
	const struct span *x, *y;
	int n;

	setup(&t);
	capture_into(&t, &cap, &s);
	before(&t, 7, 0xa, 1000, "outer");
	py(&t, 7, 0xa, 0, 2, 0x2000ull, 0x1000ull);
	before(&t, 7, 0xb, 1100, "m1");
	py(&t, 7, 0xb, RF_PY_F_SAME, 0);
	end(&t, 7, 0xb, 1200);
	before(&t, 7, 0xc, 2000, "inner");
	py(&t, 7, 0xc, 0, 2, 0x2002ull, 0x1000ull);
	before(&t, 7, 0xd, 2100, "m2");
	py(&t, 7, 0xd, RF_PY_F_SAME, 0);
	end(&t, 7, 0xd, 2200);
	before(&t, 7, 0xe, 3000, "n");
	py(&t, 7, 0xe, 0, 1, 0x1003ull);
	end(&t, 7, 0xe, 3100);
	end(&t, 7, 0xc, 4000);
	end(&t, 7, 0xa, 5000);
	n = spans_of(capture_finish(&cap, &t, NULL), 7, sp, 64);
	CHECK_EQ_U64(misnested(sp, n), 0);
	CHECK_EQ_U64(count_named(sp, n, "/srv/model.py"), 2);
	x = span_named(sp, n, "/srv/model.py", 0);
	y = span_named(sp, n, "/srv/model.py", 1);
	CHECK(x && y);
	if (x && y) {
		CHECK_EQ_U64(x->start, 1001);
		CHECK_EQ_U64(x->end, 1200 + PAD(1));	/* m1, in outer */
		CHECK_EQ_U64(y->start, 2001);
		CHECK_EQ_U64(y->end, 2200 + PAD(1));	/* m2, in inner */
	}
	capture_free(&cap, &t);
	trace_free(&t);
}

/* A record_function scope with no op inside it (zero_grad setting
 * grads to None): nothing shows __enter__ returned, but a scope's frames
 * from __enter__ on are record_function's own, so its context is the
 * frame holding the `with`, and the Chrome trace draws __enter__ and
 * _ops.py inside it, the op they held with them. */
TEST(a_user_scope_sits_under_the_frame_holding_the_with)
{
	struct trace_sink k = { .op = keep_frames };
	struct chrome_capture cap;
	struct trace_sink s;
	struct trace t;
	struct span sp[64];
	const struct span *zg, *scope, *enter, *call;
	int n;

	setup(&t);
	add_scope_codes();
	capture_into(&t, &cap, &s);
	trace_add_sink(&t, &k);
	before_user_scope(&t, 7, 0xa, 1000, ZG);
	py(&t, 7, 0xa, 0, 4, 0x7000ull, 0x6000ull, 0x5003ull, 0x1000ull);
	CHECK_EQ_U64(t.ops[stacks_open_op(&t, 7, 0xa)].py_live, 2);
	before(&t, 7, 0xb, 1100, "aten::empty");
	py(&t, 7, 0xb, RF_PY_F_SAME, 0);
	end(&t, 7, 0xb, 1200);
	CHECK_STR(seen, "main (/srv/train.py:10);"
		  "Optimizer.zero_grad (/srv/optim.py:103);" ZG ";"
		  "record_function.__enter__ (/srv/profiler.py:488);"
		  "OpOverloadPacket.__call__ (/srv/_ops.py:442);aten::empty");
	end(&t, 7, 0xa, 1500);
	CHECK_STR(seen, "main (/srv/train.py:10);"
		  "Optimizer.zero_grad (/srv/optim.py:103);" ZG);
	before(&t, 7, 0xd, 1600, "aten::add");
	py(&t, 7, 0xd, 0, 1, 0x1002ull);
	end(&t, 7, 0xd, 1700);
	/* The same scope with no op inside: its own frames are left out. */
	before_user_scope(&t, 7, 0xe, 2000, ZG);
	py(&t, 7, 0xe, 0, 4, 0x7000ull, 0x6000ull, 0x5003ull, 0x1000ull);
	end(&t, 7, 0xe, 2500);
	n = spans_of(capture_finish(&cap, &t, NULL), 7, sp, 64);
	CHECK_EQ_U64(n, 9);
	CHECK_EQ_U64(count_named(sp, n, "/srv/profiler.py"), 1);
	CHECK_EQ_U64(misnested(sp, n), 0);
	zg = span_named(sp, n, "/srv/optim.py", 0);
	scope = span_named(sp, n, ZG, 0);
	enter = span_named(sp, n, "/srv/profiler.py", 0);
	call = span_named(sp, n, "/srv/_ops.py", 0);
	CHECK(zg && scope && enter && call);
	if (zg && scope && enter && call) {
		CHECK_EQ_U64(zg->start, 999);
		CHECK_EQ_U64(zg->end, 1599);
		CHECK_EQ_U64(enter->start, 1001);
		CHECK_EQ_U64(enter->end, 1200 + PAD(2));
		CHECK_EQ_U64(call->start, 1002);
		CHECK_EQ_U64(enter->parent, zg->id);
		CHECK_EQ_U64(call->parent, enter->id);
	}
	capture_free(&cap, &t);
	trace_free(&t);
}

/* A scope begun inside an op that runs in __enter__ itself (a build
 * that records profiler::_record_function_enter_new) is inside that op:
 * its context is never cut below the op's, and the slices nest. */
TEST(a_user_scope_inside_an_op_in_enter_keeps_that_ops_frames)
{
	struct chrome_capture cap;
	struct trace_sink s;
	struct trace t;
	struct span sp[64];
	int n;

	setup(&t);
	add_scope_codes();
	capture_into(&t, &cap, &s);
	before(&t, 7, 0xa, 1000, "profiler::_record_function_enter_new");
	py(&t, 7, 0xa, 0, 3, 0x7000ull, 0x6000ull, 0x1000ull);
	before_user_scope(&t, 7, 0xb, 1100, "my_scope");
	py(&t, 7, 0xb, RF_PY_F_SAME, 0);
	CHECK_EQ_U64(t.ops[stacks_open_op(&t, 7, 0xb)].py_live, 3);
	end(&t, 7, 0xb, 1200);
	end(&t, 7, 0xa, 1300);
	before(&t, 7, 0xc, 1400, "aten::mm");
	py(&t, 7, 0xc, 0, 1, 0x1002ull);
	end(&t, 7, 0xc, 1500);
	n = spans_of(capture_finish(&cap, &t, NULL), 7, sp, 64);
	CHECK_EQ_U64(misnested(sp, n), 0);
	CHECK_EQ_U64(count_named(sp, n, "/srv/profiler.py"), 1);
	capture_free(&cap, &t);
	trace_free(&t);
}

/* An op ended on another thread is drawn apart and holds no frame: the
 * frames it began in end as they would have without it, uncut. */
TEST(an_async_op_leaves_its_frames_uncut)
{
	struct chrome_capture cap;
	struct trace_sink s;
	struct trace t;
	struct span sp[64];
	const struct span *fwd;
	int n;

	setup(&t);
	capture_into(&t, &cap, &s);
	before(&t, 7, 0xa, 1000, "future");
	py(&t, 7, 0xa, 0, 2, 0x2000ull, 0x1000ull);
	end(&t, 8, 0xa, 1500);
	before(&t, 7, 0xb, 2000, "aten::add");
	py(&t, 7, 0xb, 0, 1, 0x1000ull);
	end(&t, 7, 0xb, 2500);
	n = spans_of(capture_finish(&cap, &t, NULL), 7, sp, 64);
	CHECK_EQ_U64(misnested(sp, n), 0);
	CHECK_EQ_U64(count_named(sp, n, "/srv/model.py"), 1);
	fwd = span_named(sp, n, "/srv/model.py", 0);
	CHECK(fwd && fwd->start == 999 && fwd->end == 1000 + PAD(1));
	capture_free(&cap, &t);
	trace_free(&t);
}

int main(void)
{
	return check_run_all(__FILE__);
}
