// SPDX-License-Identifier: BSD-2-Clause
/*
 * Exporters and the table's arithmetic on one hand-built trace: Chrome
 * trace JSON (checked with a strict JSON parser written here, since no
 * JSON library is a dependency), folded stacks, aggregate_ops() and
 * format_duration(). Every expected number is worked out by hand from the
 * timestamps in build_trace().
 */
#include <stdint.h>
#include "model/aggregate.h"
#include "check.h"
#include "export/chrome.h"
#include "export/folded.h"
#include "json_parse.h"
#include "export/table.h"
#include "model/trace.h"

/* The validator must be able to say no, or the Chrome test proves nothing. */
TEST(json_validator_itself)
{
	CHECK(valid_json("{\"a\":[1,-0.5,2e3,true,false,null,\"x\\u00e9\"]}"));
	CHECK(valid_json(" [ ] "));
	CHECK(valid_json("\"\\ud83d\\ude00 \xf0\x9f\x98\x80\""));
	CHECK(!valid_json("{\"a\":1,}"));
	CHECK(!valid_json("[1 2]"));
	CHECK(!valid_json("01"));
	CHECK(!valid_json("1."));
	CHECK(!valid_json("\"a\x01\""));		/* raw control char */
	CHECK(!valid_json("\"\\x\""));			/* unknown escape */
	CHECK(!valid_json("\"\\ud800\""));		/* lone surrogate */
	CHECK(!valid_json("\"\xe2\x82\""));		/* cut UTF-8 */
	CHECK(!valid_json("\"\xc0\xaf\""));		/* overlong */
	CHECK(!valid_json("\"a\"\"b\""));		/* two values */
	CHECK(!valid_json("{\"a\" 1}"));
	CHECK(!valid_json("[\"unterminated]"));

	struct jv v;
	const char *esc = "\"q\\\"b\\\\c\\u0001\"";
	CHECK(!json_parse(esc, strlen(esc), &v));
	CHECK(v.type == J_STR && v.len == 6 && !memcmp(v.str, "q\"b\\c\x01", 6));
	jv_free(&v);
}

/* ------------------------------------------------------------------ */
/* The trace under test.                                               */

#define N_QUOTE "aten::\"quoted\"\\back"
#define N_CTRL "ctl\x01tab\t"
#define N_UTF8 "caf\xc3\xa9 cut\xe2\x82"	/* é, then a cut € */
/* What a JSON reader gets back for N_UTF8: each stray byte -> U+FFFD. */
#define N_UTF8_JSON "caf\xc3\xa9 cut\xef\xbf\xbd\xef\xbf\xbd"
#define N_SEMI "a;b"

static void ev_before(struct trace *t, uint32_t tid, uint64_t addr,
		      uint64_t ts, const char *name, uint8_t scope)
{
	struct rf_event_hdr h = {
		.ts_ns = ts, .rf_addr = addr, .pid = t->pid, .tid = tid,
		.kind = RF_EV_BEFORE, .variant = RF_V_CSTR, .scope = scope,
		.name_len = strlen(name),
	};
	stacks_before(t, &h, name, 1000 + (int64_t)t->nr_ops);
}

static void ev_end(struct trace *t, uint32_t tid, uint64_t addr, uint64_t ts)
{
	struct rf_event_hdr h = {
		.ts_ns = ts, .rf_addr = addr, .pid = t->pid, .tid = tid,
		.kind = RF_EV_END, .variant = RF_V_END,
	};
	stacks_end(t, &h);
}

/*
 * Ops by start time (their index in trace.ops), per thread:
 * Thread 100 "main":                          [start, end] ns   dur
 *   0 forward (scope 7)                       [1234567, 1834567] 600000
 *     4 N_QUOTE                               [1300000, 1500000] 200000
 *       5 N_CTRL                              [1350000, 1400000]  50000
 *     6 N_SEMI                                [1600000, 1700500] 100500
 *   7 aten::mul                               [2000000, 2000999]    999
 * Thread 200 "worker":
 *   1 N_UTF8                                  [1250000, 1450000] 200000
 *     2 aten::mul                             [1260000, 1270000]  10000
 *     3 aten::mul                             [1280000, 1300001]  20001
 * Self: forward 600000-200000-100500 = 299500; N_QUOTE 150000; N_CTRL
 * 50000; N_SEMI 100500; main's aten::mul 999; N_UTF8 200000-10000-20001
 * = 169999; worker's aten::mul 10000 and 20001.
 * Sum 800999 = root durations 600000 + 999 + 200000.
 */
#define TOTAL_SELF 800999ull

static void build_trace(struct trace *t)
{
	trace_init(t, 4242);
	strcpy(t->process_name, "python3");
	ev_before(t, 100, 0x1000, 1234567, "forward", 7);
	strcpy(trace_thread(t, 100, NULL)->comm, "main");
	ev_before(t, 200, 0x2000, 1250000, N_UTF8, 0);
	strcpy(trace_thread(t, 200, NULL)->comm, "worker");
	ev_before(t, 200, 0x2010, 1260000, "aten::mul", 0);
	ev_end(t, 200, 0x2010, 1270000);
	ev_before(t, 200, 0x2010, 1280000, "aten::mul", 0);
	ev_before(t, 100, 0x1010, 1300000, N_QUOTE, 0);
	ev_end(t, 200, 0x2010, 1300001);
	ev_before(t, 100, 0x1020, 1350000, N_CTRL, 0);
	ev_end(t, 100, 0x1020, 1400000);
	ev_end(t, 200, 0x2000, 1450000);
	ev_end(t, 100, 0x1010, 1500000);
	ev_before(t, 100, 0x1010, 1600000, N_SEMI, 0);
	ev_end(t, 100, 0x1010, 1700500);
	ev_end(t, 100, 0x1000, 1834567);
	ev_before(t, 100, 0x1000, 2000000, "aten::mul", 0);
	ev_end(t, 100, 0x1000, 2000999);
	t->counts.drops = 7;
}

static char *capture_chrome(const struct trace *t, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		abort();
	write_chrome_trace(f, t);
	fclose(f);
	return buf;
}

TEST(trace_is_as_designed)
{
	struct trace t;

	build_trace(&t);
	CHECK_EQ_U64(t.nr_ops, 8);
	CHECK_EQ_U64(t.ops[5].depth, 2);
	CHECK_EQ_U64(t.ops[5].parent, 4);
	CHECK_EQ_U64(t.ops[4].parent, 0);
	CHECK_EQ_U64(t.ops[3].parent, 1);
	CHECK_EQ_U64(t.ops[7].parent, -1);
	CHECK_EQ_U64(counts_truncated(&t.counts) + t.counts.unmatched_ends, 0);
	trace_free(&t);
}

/* "1234.567" back to 1234567: digits, one '.', exactly three decimals. */
static int us_text_to_ns(const char *s, uint64_t *ns)
{
	const char *dot = s ? strchr(s, '.') : NULL;

	if (!dot || dot == s || strlen(dot + 1) != 3)
		return -1;
	*ns = 0;
	for (const char *p = s; *p; p++) {
		if (p == dot)
			continue;
		if (*p < '0' || *p > '9')
			return -1;
		*ns = *ns * 10 + (*p - '0');
	}
	return 0;
}

TEST(chrome_trace)
{
	struct trace t;
	struct jv root;
	size_t len;

	build_trace(&t);
	char *text = capture_chrome(&t, &len);
	CHECK(strlen(text) == len);		/* no NUL inside */
	CHECK(!json_parse(text, len, &root));
	const struct jv *events = jget(&root, "traceEvents");
	const struct jv *other = jget(&root, "otherData");
	CHECK(events && events->type == J_ARR);
	CHECK(other && other->type == J_OBJ);
	CHECK(jnum(other, "drops") && !strcmp(jnum(other, "drops"), "7"));

	/* Hand-written expectations for a few ops. */
	const struct { const char *name; uint32_t tid; const char *ts, *dur,
		*cat; } want[] = {
		{ "forward", 100, "1234.567", "600.000", "user_annotation" },
		{ N_QUOTE, 100, "1300.000", "200.000", "cpu_op" },
		{ N_CTRL, 100, "1350.000", "50.000", "cpu_op" },
		{ N_SEMI, 100, "1600.000", "100.500", "cpu_op" },
		{ "aten::mul", 100, "2000.000", "0.999", "cpu_op" },
		{ N_UTF8_JSON, 200, "1250.000", "200.000", "cpu_op" },
		{ "aten::mul", 200, "1260.000", "10.000", "cpu_op" },
		{ "aten::mul", 200, "1280.000", "20.001", "cpu_op" },
	};
	int matched[8] = { 0 }, nr_x = 0, proc = 0, threads = 0;

	for (size_t i = 0; events && i < events->nr; i++) {
		const struct jv *e = &events->items[i];
		const char *ph = jstr(e, "ph"), *name = jstr(e, "name");
		const struct jv *args = jget(e, "args");

		CHECK(ph && name && jnum(e, "pid"));
		if (!ph || !name)
			continue;
		CHECK_STR(jnum(e, "pid"), "4242");
		if (!strcmp(ph, "M") && !strcmp(name, "process_name")) {
			CHECK_STR(jstr(args, "name"), "python3");
			proc++;
		} else if (!strcmp(ph, "M") && !strcmp(name, "thread_name")) {
			const char *tid = jnum(e, "tid");
			CHECK(tid && (!strcmp(tid, "100") || !strcmp(tid, "200")));
			CHECK_STR(jstr(args, "name"), tid && !strcmp(tid, "100")
				  ? "main [100]" : "worker [200]");
			threads++;
		} else if (!strcmp(ph, "X")) {
			uint64_t ts, dur;
			nr_x++;
			CHECK(!us_text_to_ns(jnum(e, "ts"), &ts));
			CHECK(!us_text_to_ns(jnum(e, "dur"), &dur));
			for (int k = 0; k < 8; k++) {
				if (strcmp(name, want[k].name) ||
				    strcmp(jnum(e, "ts") ? jnum(e, "ts") : "",
					   want[k].ts))
					continue;
				matched[k]++;
				CHECK_STR(jnum(e, "dur"), want[k].dur);
				CHECK_STR(jstr(e, "cat"), want[k].cat);
				char tid[16];
				snprintf(tid, sizeof(tid), "%u", want[k].tid);
				CHECK_STR(jnum(e, "tid"), tid);
			}
			/* Every X event is one op, at its exact ns times. */
			int found = 0;
			for (size_t o = 0; o < t.nr_ops; o++)
				found += t.ops[o].start_ns == ts &&
					 op_duration(&t.ops[o]) == dur;
			CHECK_EQ_U64(found, 1);
		} else {
			CHECK(!"unexpected event phase");
		}
	}
	CHECK_EQ_U64(nr_x, t.nr_ops);
	for (int k = 0; k < 8; k++)
		CHECK_EQ_U64(matched[k], 1);
	CHECK_EQ_U64(proc, 1);
	CHECK_EQ_U64(threads, 2);
	jv_free(&root);
	free(text);
	trace_free(&t);
}

/* Flags on ops reach the event args; an empty trace is valid JSON too. */
TEST(chrome_trace_flags_and_empty)
{
	struct trace t;
	struct jv root;
	size_t len;
	char *text;

	trace_init(&t, 1);
	text = capture_chrome(&t, &len);
	CHECK(!json_parse(text, len, &root));
	CHECK(jget(&root, "traceEvents") &&
	      jget(&root, "traceEvents")->type == J_ARR);
	jv_free(&root);
	free(text);

	ev_before(&t, 5, 0x10, 1000, "open", 0);
	stacks_detach(&t, 3000);
	text = capture_chrome(&t, &len);
	CHECK(!json_parse(text, len, &root));
	const struct jv *ev = jget(&root, "traceEvents");
	const struct jv *x = NULL;
	for (size_t i = 0; ev && i < ev->nr; i++)
		if (jstr(&ev->items[i], "ph") &&
		    !strcmp(jstr(&ev->items[i], "ph"), "X"))
			x = &ev->items[i];
	CHECK(x != NULL);
	CHECK_STR(jstr(jget(x, "args"), "truncated"), "open_at_detach");
	CHECK_STR(jnum(x, "dur"), "2.000");
	/* A thread whose comm is unknown still gets a name. */
	const struct jv *m = NULL;
	for (size_t i = 0; ev && i < ev->nr; i++)
		if (jstr(&ev->items[i], "name") &&
		    !strcmp(jstr(&ev->items[i], "name"), "thread_name"))
			m = &ev->items[i];
	CHECK_STR(jstr(jget(m, "args"), "name"), "thread [5]");
	jv_free(&root);
	free(text);
	trace_free(&t);
}

/* ------------------------------------------------------------------ */
/* Folded stacks.                                                      */

struct folded_line {
	char *stack;
	uint64_t weight;
};

/* Splits "frames weight" lines; returns the number of lines, -1 if any
 * line is malformed. */
static int parse_folded(char *text, struct folded_line *lines, int max)
{
	int n = 0;

	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *sp = strrchr(line, ' '), *endp;

		if (!sp || n == max || !sp[1])
			return -1;
		*sp = 0;
		lines[n].stack = line;
		lines[n].weight = strtoull(sp + 1, &endp, 10);
		if (*endp)
			return -1;
		n++;
	}
	return n;
}

static const struct folded_line *find_line(const struct folded_line *l,
					   int n, const char *stack)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(l[i].stack, stack))
			return &l[i];
	return NULL;
}

TEST(folded)
{
	struct trace t;
	struct folded_line lines[32];
	char *text = NULL;
	size_t len;

	build_trace(&t);
	FILE *f = open_memstream(&text, &len);
	CHECK(f && !write_folded(f, &t));
	fclose(f);
	int n = parse_folded(text, lines, 32);
	CHECK(n > 0);

	uint64_t sum = 0, self_sum = 0, roots = 0;
	for (int i = 0; i < n; i++) {
		sum += lines[i].weight;
		CHECK(!strncmp(lines[i].stack, "python3;main [100];", 19) ||
		      !strncmp(lines[i].stack, "python3;worker [200];", 21));
		CHECK(!strstr(lines[i].stack, "a;b"));
		for (int k = 0; k < i; k++)	/* one line per stack */
			CHECK(strcmp(lines[i].stack, lines[k].stack));
	}
	uint64_t *self = op_self_times(&t);
	CHECK(self != NULL);
	for (size_t i = 0; self && i < t.nr_ops; i++)
		self_sum += self[i];
	for (size_t i = 0; i < t.nr_ops; i++)
		if (t.ops[i].parent < 0)
			roots += op_duration(&t.ops[i]);
	free(self);
	CHECK_EQ_U64(sum, TOTAL_SELF);
	CHECK_EQ_U64(sum, self_sum);
	CHECK_EQ_U64(sum, roots);

	/* Every op's stack, with the weights worked out by hand. */
	const struct { const char *stack; uint64_t w; } want[] = {
		{ "python3;main [100];forward", 299500 },
		{ "python3;main [100];forward;" N_QUOTE, 150000 },
		{ "python3;main [100];forward;" N_QUOTE ";" N_CTRL, 50000 },
		{ "python3;main [100];forward;a:b", 100500 },
		{ "python3;main [100];aten::mul", 999 },
		{ "python3;worker [200];" N_UTF8, 169999 },
		/* two calls, one stack: 10000 + 20001 */
		{ "python3;worker [200];" N_UTF8 ";aten::mul", 30001 },
	};
	CHECK_EQ_U64(n, sizeof(want) / sizeof(want[0]));
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		const struct folded_line *l = find_line(lines, n, want[k].stack);

		CHECK(l != NULL);
		if (l)
			CHECK_EQ_U64(l->weight, want[k].w);
	}
	free(text);
	trace_free(&t);
}

/* ------------------------------------------------------------------ */
/* Aggregation and the table's units.                                  */

static const struct op_stats *row_of(const struct trace *t,
				     const struct aggregate *a,
				     const char *name)
{
	for (size_t i = 0; i < a->nr; i++)
		if (!strcmp(names_get(&t->names, a->rows[i].name), name))
			return &a->rows[i];
	return NULL;
}

TEST(aggregate_by_name)
{
	struct trace t;
	struct aggregate a;

	build_trace(&t);
	CHECK(!aggregate_ops(&t, &a));
	CHECK_EQ_U64(a.nr, 6);
	CHECK_EQ_U64(a.self_ns, TOTAL_SELF);
	const struct { const char *name; uint64_t calls, total, self, min,
		max; uint8_t scope; } want[] = {
		{ "forward", 1, 600000, 299500, 600000, 600000, 7 },
		{ N_QUOTE, 1, 200000, 150000, 200000, 200000, 0 },
		{ N_CTRL, 1, 50000, 50000, 50000, 50000, 0 },
		{ N_SEMI, 1, 100500, 100500, 100500, 100500, 0 },
		{ N_UTF8, 1, 200000, 169999, 200000, 200000, 0 },
		/* 999 + 10000 + 20001, all leaves */
		{ "aten::mul", 3, 31000, 31000, 999, 20001, 0 },
	};
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		const struct op_stats *r = row_of(&t, &a, want[k].name);

		CHECK(r != NULL);
		if (!r)
			continue;
		CHECK_EQ_U64(r->calls, want[k].calls);
		CHECK_EQ_U64(r->total_ns, want[k].total);
		CHECK_EQ_U64(r->self_ns, want[k].self);
		CHECK_EQ_U64(r->min_ns, want[k].min);
		CHECK_EQ_U64(r->max_ns, want[k].max);
		CHECK_EQ_U64(r->scope, want[k].scope);
		CHECK_EQ_U64(r->truncated, 0);
	}
	aggregate_free(&a);
	trace_free(&t);
}

static void check_order(const struct trace *t, struct aggregate *a,
			enum sort_key key, const char *const *order, int n)
{
	aggregate_sort(a, key);
	CHECK_EQ_U64(a->nr, n);
	for (int i = 0; i < n && i < (int)a->nr; i++)
		CHECK_STR(names_get(&t->names, a->rows[i].name), order[i]);
}

TEST(aggregate_sort_orders)
{
	struct trace t;
	struct aggregate a;

	build_trace(&t);
	CHECK(!aggregate_ops(&t, &a));
	/* Self: 299500, 169999, 150000, 100500, 50000, 31000. */
	const char *by_self[] = { "forward", N_UTF8, N_QUOTE, N_SEMI, N_CTRL,
				  "aten::mul" };
	/* Total: 600000, then a 200000 tie broken by self (169999 beats
	 * 150000), 100500, 50000, 31000. */
	const char *by_total[] = { "forward", N_UTF8, N_QUOTE, N_SEMI, N_CTRL,
				   "aten::mul" };
	/* Calls: aten::mul (3), then the 1-call rows by self. */
	const char *by_calls[] = { "aten::mul", "forward", N_UTF8, N_QUOTE,
				   N_SEMI, N_CTRL };
	check_order(&t, &a, SORT_CALLS, by_calls, 6);
	check_order(&t, &a, SORT_SELF, by_self, 6);
	check_order(&t, &a, SORT_TOTAL, by_total, 6);
	aggregate_free(&a);
	trace_free(&t);
}

/* The total-sort tie above happens to agree with self order; make total
 * and self disagree so a sort by the wrong key fails. */
TEST(aggregate_sort_total_differs_from_self)
{
	struct trace t;
	struct aggregate a;

	trace_init(&t, 1);
	ev_before(&t, 1, 0x10, 0, "outer", 0);		/* total 1000, self 100 */
	ev_before(&t, 1, 0x20, 50, "inner", 0);		/* total/self 900 */
	ev_end(&t, 1, 0x20, 950);
	ev_end(&t, 1, 0x10, 1000);
	ev_before(&t, 1, 0x30, 2000, "tiny", 0);	/* 3 x 10 */
	ev_end(&t, 1, 0x30, 2010);
	ev_before(&t, 1, 0x30, 2020, "tiny", 0);
	ev_end(&t, 1, 0x30, 2030);
	ev_before(&t, 1, 0x30, 2040, "tiny", 0);
	ev_end(&t, 1, 0x30, 2050);
	CHECK(!aggregate_ops(&t, &a));
	const char *by_self[] = { "inner", "outer", "tiny" };
	const char *by_total[] = { "outer", "inner", "tiny" };
	const char *by_calls[] = { "tiny", "inner", "outer" };
	check_order(&t, &a, SORT_SELF, by_self, 3);
	check_order(&t, &a, SORT_TOTAL, by_total, 3);
	check_order(&t, &a, SORT_CALLS, by_calls, 3);
	CHECK_EQ_U64(a.self_ns, 1030);
	aggregate_free(&a);
	trace_free(&t);
}

TEST(aggregate_counts_truncated_calls)
{
	struct trace t;
	struct aggregate a;

	trace_init(&t, 1);
	ev_before(&t, 1, 0x10, 100, "p", 0);
	ev_before(&t, 1, 0x20, 200, "c", 0);
	ev_end(&t, 1, 0x10, 300);			/* c closed by parent */
	ev_before(&t, 1, 0x30, 400, "c", 0);
	ev_end(&t, 1, 0x30, 450);
	CHECK(!aggregate_ops(&t, &a));
	const struct op_stats *c = row_of(&t, &a, "c");
	CHECK(c && c->calls == 2 && c->truncated == 1);
	CHECK(c && c->min_ns == 50 && c->max_ns == 100 && c->total_ns == 150);
	const struct op_stats *p = row_of(&t, &a, "p");
	CHECK(p && p->self_ns == 100 && p->truncated == 0);
	aggregate_free(&a);
	trace_free(&t);
}

TEST(format_duration_units)
{
	const struct { uint64_t ns; const char *s; } want[] = {
		{ 0, "0.000us" },
		{ 1, "0.001us" },
		{ 999000, "999.000us" },
		{ 999999, "999.999us" },
		{ 1000000, "1.000ms" },		/* 1 ms: unit switches */
		{ 1500000, "1.500ms" },
		{ 999999000, "999.999ms" },
		{ 999999499, "999.999ms" },
		{ 999999500, "1.000s" },	/* not "1000.000ms" */
		{ 1000000000, "1.000s" },	/* 1 s: unit switches */
		{ 61234000000ull, "61.234s" },
	};
	char buf[32];

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		format_duration(want[i].ns, buf, sizeof(buf));
		CHECK_STR(buf, want[i].s);
	}
}

RUN_TESTS()
