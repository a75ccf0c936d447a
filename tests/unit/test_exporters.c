// SPDX-License-Identifier: BSD-2-Clause
/*
 * Exporters and the table's arithmetic on one hand-built trace: Chrome
 * trace JSON (checked with a strict JSON parser written here, since no
 * JSON library is a dependency), folded stacks, the aggregate, the table
 * and format_duration(). Every expected number is worked out by hand from
 * the timestamps in build_trace().
 *
 * The trace streams: an op is handed to the consumers when it closes and
 * then forgotten, so every consumer (the op log, the aggregate, the op
 * stack profile, the Chrome writer on a memory stream) is attached right
 * after trace_init, before the first event, as session/outputs.c does.
 */
#include <math.h>
#include <stdint.h>
#include <unistd.h>
#include "model/aggregate.h"
#include "check.h"
#include "chrome_capture.h"
#include "export/chrome.h"
#include "export/folded.h"
#include "export/json_writer.h"
#include "json_parse.h"
#include "model/profile_sink.h"
#include "model/stack_profile.h"
#include "export/table.h"
#include "model/trace.h"
#include "op_log.h"

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
/* The consumers of a trace.                                           */

/* Which consumers a fixture attaches besides the Chrome writer (always
 * there); CHROME_FIRST puts the writer before the others. */
enum {
	WITH_LOG	= 1 << 0,	/* op_log.h's L (always first) */
	WITH_AGG	= 1 << 1,
	WITH_PROFILE	= 1 << 2,	/* profile_sink_ops */
	CHROME_FIRST	= 1 << 3,
	WITH_ALL	= WITH_LOG | WITH_AGG | WITH_PROFILE,
};

struct fixture {
	struct trace t;
	struct aggregate agg;
	struct stack_profile sp;	/* calls and self time by op stack */
	struct chrome_capture cap;
};

static void add_sink(struct trace *t, struct trace_sink s)
{
	CHECK(trace_add_sink(t, &s));
}

/* trace_init and the consumers, before any event. */
static void fixture_init(struct fixture *x, uint32_t pid, unsigned with)
{
	memset(x, 0, sizeof(*x));
	if (with & WITH_LOG)
		trace_init_logged(&x->t, pid);
	else
		trace_init(&x->t, pid);
	aggregate_init(&x->agg);
	stack_profile_init(&x->sp);
	capture_begin(&x->cap);
	if (with & CHROME_FIRST)
		add_sink(&x->t, chrome_sink(&x->cap.w));
	if (with & WITH_AGG)
		add_sink(&x->t, aggregate_sink(&x->agg));
	if (with & WITH_PROFILE)
		add_sink(&x->t, profile_sink_ops(&x->sp));
	if (!(with & CHROME_FIRST))
		add_sink(&x->t, chrome_sink(&x->cap.w));
}

/* Ends the Chrome file (op_stats from a, which may be NULL) and returns
 * its text, owned by x. */
static const char *finish_chrome(struct fixture *x, const struct aggregate *a)
{
	return capture_finish(&x->cap, &x->t, a);
}

static void fixture_free(struct fixture *x)
{
	capture_free(&x->cap, &x->t);
	stack_profile_free(&x->sp);
	aggregate_free(&x->agg);
	trace_free(&x->t);
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
 * Ops by start time (their op.id), per thread:
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
 * In order of their end: 2, 3, 5, 1, 4, 6, 0, 7.
 */
#define TOTAL_SELF 800999ull

static void play_trace(struct trace *t)
{
	strcpy(t->process_name, "python3");
	ev_before(t, 100, 0x1000, 1234567, "forward", 7);
	trace_name_thread(t, trace_thread(t, 100, NULL), "main");
	ev_before(t, 200, 0x2000, 1250000, N_UTF8, 0);
	trace_name_thread(t, trace_thread(t, 200, NULL), "worker");
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

static void build_trace(struct fixture *x, unsigned with)
{
	fixture_init(x, 4242, with);
	play_trace(&x->t);
}

TEST(trace_is_as_designed)
{
	struct fixture x;

	build_trace(&x, WITH_ALL);
	CHECK_EQ_U64(x.t.nr_ops, 8);
	CHECK_EQ_U64(x.t.counts.ops, 8);
	CHECK_EQ_U64(x.t.counts.threads_seen, 2);
	CHECK_EQ_U64(x.t.counts.threads_with_ops, 2);
	/* Everything closed: the log has all 8, nothing is open. */
	CHECK_EQ_U64(L.closed, 8);
	CHECK_EQ_U64(x.t.nr_open, 0);
	CHECK_EQ_U64(op_at(5).depth, 2);
	CHECK_EQ_U64(op_at(5).parent, 4);
	CHECK_EQ_U64(op_at(4).parent, 0);
	CHECK_EQ_U64(op_at(3).parent, 1);
	CHECK_EQ_U64(op_at(7).parent, -1);
	CHECK_EQ_U64(counts_truncated(&x.t.counts) + x.t.counts.unmatched_ends,
		     0);
	fixture_free(&x);
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

/* An event or entry whose "name" is name. */
static int named(const struct jv *e, const char *name)
{
	return jstr(e, "name") && !strcmp(jstr(e, "name"), name);
}

/* The entry of otherData.op_stats named name, or NULL. */
static const struct jv *op_stats_entry(const struct jv *stats,
				       const char *name)
{
	for (size_t i = 0; stats && i < stats->nr; i++)
		if (named(&stats->items[i], name))
			return &stats->items[i];
	return NULL;
}

TEST(chrome_trace)
{
	struct fixture x;
	struct jv root;

	build_trace(&x, WITH_ALL);
	const char *text = finish_chrome(&x, &x.agg);
	CHECK(!json_parse(text, x.cap.len, &root));
	const struct jv *events = jget(&root, "traceEvents");
	const struct jv *other = jget(&root, "otherData");
	CHECK(events && events->type == J_ARR);
	CHECK(other && other->type == J_OBJ);
	CHECK(jnum(other, "drops") && !strcmp(jnum(other, "drops"), "7"));
	/* Kineto's header, then the events; otherData (counters known only
	 * at the end) follows the event array, as the writer streams. */
	CHECK_EQ_U64(root.nr, 5);
	if (root.nr == 5) {
		CHECK_STR(root.keys[0], "schemaVersion");
		CHECK_STR(root.keys[1], "displayTimeUnit");
		CHECK_STR(root.keys[2], "baseTimeNanoseconds");
		CHECK_STR(root.keys[3], "traceEvents");
		CHECK_STR(root.keys[4], "otherData");
	}
	CHECK_STR(jstr(&root, "displayTimeUnit"), "ms");
	CHECK_STR(jnum(other, "ops"), "8");
	CHECK_STR(jnum(other, "threads_seen"), "2");
	CHECK_STR(jnum(other, "threads_with_ops"), "2");

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
			/* The comm alone: viewers show the tid beside it. */
			CHECK_STR(jstr(args, "name"), tid && !strcmp(tid, "100")
				  ? "main" : "worker");
			threads++;
		} else if (!strcmp(ph, "M") && (!strcmp(name, "thread_sort_"
			   "index") || !strcmp(name, "process_sort_index"))) {
			CHECK(jnum(args, "sort_index"));
		} else if (!strcmp(ph, "M") && !strcmp(name, "process_labels")) {
			CHECK_STR(jstr(args, "labels"), "CPU");
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
			for (size_t o = 0; o < x.t.nr_ops; o++) {
				struct op op = op_at(o);

				found += op.start_ns == ts &&
					 op_duration(&op) == dur;
			}
			CHECK_EQ_U64(found, 1);
		} else {
			CHECK(!"unexpected event phase");
		}
	}
	CHECK_EQ_U64(nr_x, x.t.nr_ops);
	for (int k = 0; k < 8; k++)
		CHECK_EQ_U64(matched[k], 1);
	CHECK_EQ_U64(proc, 1);
	CHECK_EQ_U64(threads, 2);

	/* New: the order. Ops are written as they end, each thread's name
	 * just before its first op, the process's name by chrome_finish. */
	const struct { const char *ph, *name, *ts; } order[] = {
		{ "M", "thread_name", NULL },		/* worker [200] */
		{ "M", "thread_sort_index", NULL },
		{ "X", "aten::mul", "1260.000" },
		{ "X", "aten::mul", "1280.000" },
		{ "M", "thread_name", NULL },		/* main [100] */
		{ "M", "thread_sort_index", NULL },
		{ "X", N_CTRL, "1350.000" },
		{ "X", N_UTF8_JSON, "1250.000" },
		{ "X", N_QUOTE, "1300.000" },
		{ "X", N_SEMI, "1600.000" },
		{ "X", "forward", "1234.567" },
		{ "X", "aten::mul", "2000.000" },
		{ "M", "process_name", NULL },
		{ "M", "process_labels", NULL },
		{ "M", "process_sort_index", NULL },
	};
	const size_t nr_order = sizeof(order) / sizeof(order[0]);

	CHECK_EQ_U64(events ? events->nr : 0, nr_order);
	for (size_t i = 0; events && i < events->nr && i < nr_order; i++) {
		const struct jv *e = &events->items[i];

		CHECK_STR(jstr(e, "ph"), order[i].ph);
		CHECK_STR(jstr(e, "name"), order[i].name);
		if (order[i].ts)
			CHECK_STR(jnum(e, "ts"), order[i].ts);
	}
	if (events && events->nr == nr_order) {
		CHECK_STR(jnum(&events->items[0], "tid"), "200");
		CHECK_STR(jnum(&events->items[4], "tid"), "100");
	}

	/* op_stats come from the aggregate passed to chrome_finish. */
	const struct jv *stats = jget(other, "op_stats");
	CHECK(stats && stats->type == J_ARR && stats->nr == 6);
	const struct jv *mul = op_stats_entry(stats, "aten::mul");
	const struct jv *fwd = op_stats_entry(stats, "forward");
	CHECK_STR(jnum(mul, "calls"), "3");
	CHECK_STR(jnum(mul, "total_ns"), "31000");
	CHECK_STR(jnum(mul, "self_ns"), "31000");
	CHECK_STR(jnum(fwd, "calls"), "1");
	CHECK_STR(jnum(fwd, "total_ns"), "600000");
	CHECK_STR(jnum(fwd, "self_ns"), "299500");
	CHECK_STR(jnum(op_stats_entry(stats, N_UTF8_JSON), "self_ns"),
		  "169999");
	jv_free(&root);
	fixture_free(&x);
}

/* Flags on ops reach the event args; an empty trace is valid JSON too. */
TEST(chrome_trace_flags_and_empty)
{
	struct fixture x;
	struct jv root;
	const char *text;

	/* Was: one trace written twice, empty and then with an op. A
	 * writer now streams one trace once, so each is its own. */
	fixture_init(&x, 1, WITH_ALL);
	text = finish_chrome(&x, &x.agg);
	CHECK(!json_parse(text, x.cap.len, &root));
	const struct jv *ev = jget(&root, "traceEvents");
	CHECK(ev && ev->type == J_ARR);
	/* Only the process's name, label and place. */
	CHECK(ev && ev->nr == 3 && named(&ev->items[0], "process_name"));
	jv_free(&root);
	fixture_free(&x);

	fixture_init(&x, 1, WITH_ALL);
	ev_before(&x.t, 5, 0x10, 1000, "open", 0);
	stacks_detach(&x.t, 3000);
	text = finish_chrome(&x, &x.agg);
	CHECK(!json_parse(text, x.cap.len, &root));
	ev = jget(&root, "traceEvents");
	const struct jv *xe = NULL;
	for (size_t i = 0; ev && i < ev->nr; i++)
		if (jstr(&ev->items[i], "ph") &&
		    !strcmp(jstr(&ev->items[i], "ph"), "X"))
			xe = &ev->items[i];
	CHECK(xe != NULL);
	CHECK_STR(jstr(jget(xe, "args"), "truncated"), "open_at_detach");
	CHECK_STR(jnum(xe, "dur"), "2.000");
	/* A thread whose comm is unknown still gets a name. */
	const struct jv *m = NULL;
	for (size_t i = 0; ev && i < ev->nr; i++)
		if (jstr(&ev->items[i], "name") &&
		    !strcmp(jstr(&ev->items[i], "name"), "thread_name"))
			m = &ev->items[i];
	CHECK_STR(jstr(jget(m, "args"), "name"), "thread");
	jv_free(&root);
	fixture_free(&x);
}

/* An op as BPF sends it, with PyTorch's thread numbers. */
static void ev_before_ids(struct trace *t, uint32_t tid, uint64_t addr,
			  uint64_t ts, const char *name, uint8_t scope,
			  int64_t seq, uint64_t rf_thread, uint64_t fwd_thread)
{
	struct rf_before_event e = {
		.hdr = { .ts_ns = ts, .rf_addr = addr, .pid = t->pid,
			 .tid = tid, .kind = RF_EV_BEFORE,
			 .variant = RF_V_CALLBACK, .scope = scope,
			 .name_len = strlen(name) },
		.seq = seq, .thread_id = rf_thread, .fwd_thread_id = fwd_thread,
	};

	snprintf(e.name, sizeof(e.name), "%s", name);
	stacks_before_event(t, &e.hdr, &e);
}

/* The X event named name that starts at ts (µs text), or NULL. */
static const struct jv *x_event(const struct jv *ev, const char *name,
				const char *ts)
{
	for (size_t i = 0; ev && i < ev->nr; i++)
		if (jstr(&ev->items[i], "ph") &&
		    !strcmp(jstr(&ev->items[i], "ph"), "X") &&
		    named(&ev->items[i], name) && jnum(&ev->items[i], "ts") &&
		    !strcmp(jnum(&ev->items[i], "ts"), ts))
			return &ev->items[i];
	return NULL;
}

/* Kineto's categories and args, and its forward-to-backward flows: a
 * backward op links to the forward op with its sequence number on its
 * forward thread that began last, once. */
/* Each loss counter is spelled in one table (model/loss_counters.h); the
 * table's line and the trace's keys are pinned here word for word, in
 * order, as users have seen them. */
TEST(losses_spelled_from_one_table)
{
	static const char *const keys[] = {
		"drops", "unmatched_ends", "repeated_ends", "async_ends",
		"ends_begun_before_tracing", "truncated_ops", "open_at_detach",
		"open_at_thread_exit", "closed_by_parent", "replaced",
		"names_truncated", "name_faults", "nvtx_pops_unmatched",
		"out_of_memory",
	};
	static const char *const values[] = {
		"1", "2", "3", "4", "5", "26", "6", "7", "8", "5", "10", "11",
		"13", "12",
	};
	struct fixture x;
	struct counts *c = &x.t.counts;
	struct jv root;
	char line[1024];
	size_t at = 0;

	fixture_init(&x, 9, WITH_ALL);
	c->drops = 1, c->unmatched_ends = 2, c->repeated_ends = 3;
	c->async_ends = 4, c->ends_begun_untraced = 5;
	c->open_at_detach = 6, c->open_at_thread_exit = 7;
	c->closed_by_parent = 8, c->replaced = 5;
	c->names_truncated = 10, c->name_faults = 11, c->oom = 12;
	c->nvtx_pops_unmatched = 13;
	format_losses(c, line, sizeof(line));
	CHECK_STR(line, "drops 1; unmatched ends 2; repeated ends 3; async "
		  "ends 4; ends of ops begun before tracing 5; truncated ops "
		  "26 (open at detach 6, at thread exit 7, closed by parent 8, "
		  "replaced 5); names truncated 10; unreadable names 11; "
		  "unmatched NVTX pops 13; EVENTS LOST TO OUT-OF-MEMORY");
	c->oom = 0;
	format_losses(c, line, 40);		/* cut, still a string */
	CHECK_EQ_U64(strlen(line), 39);
	c->oom = 12;

	const char *text = finish_chrome(&x, &x.agg);
	CHECK(!json_parse(text, x.cap.len, &root));
	const struct jv *other = jget(&root, "otherData");

	/* in this order, one after the other */
	for (size_t i = 0; other && i < other->nr; i++)
		if (at < sizeof(keys) / sizeof(keys[0]) &&
		    !strcmp(other->keys[i], keys[at])) {
			CHECK_STR(other->items[i].str, values[at]);
			at++;
		}
	CHECK_EQ_U64(at, sizeof(keys) / sizeof(keys[0]));
	jv_free(&root);
	fixture_free(&x);
}

TEST(chrome_kineto_args_and_fwdbwd_flows)
{
	struct fixture x;
	struct jv root;

	fixture_init(&x, 1, WITH_ALL);
	x.t.fwd_threads = true;
	/* Thread 100 (PyTorch's thread 1): a user scope around forward ops;
	 * two carry seq 5 (the later one built the node), one has none. */
	ev_before_ids(&x.t, 100, 0x10, 1000000, "step", 7, -1, 1, 0);
	ev_before_ids(&x.t, 100, 0x20, 1100000, "aten::mul", 0, 5, 1, 0);
	ev_end(&x.t, 100, 0x20, 1200000);
	ev_before_ids(&x.t, 100, 0x30, 1300000, "aten::mul", 0, 5, 1, 0);
	ev_end(&x.t, 100, 0x30, 1400000);
	ev_before_ids(&x.t, 100, 0x40, 1500000, "aten::empty", 0, -1, 1, 0);
	ev_end(&x.t, 100, 0x40, 1600000);
	/* Thread 2 runs seq 5 too: same number, another forward thread. */
	ev_before_ids(&x.t, 200, 0x50, 1150000, "aten::add", 0, 5, 2, 0);
	ev_end(&x.t, 200, 0x50, 1250000);
	ev_end(&x.t, 100, 0x10, 1700000);
	/* The engine's thread runs the backward op of thread 1's seq 5,
	 * then a second one with the same key, which finds nothing. */
	ev_before_ids(&x.t, 300, 0x60, 2000000, "MulBackward0", 1, 5, 3, 1);
	ev_end(&x.t, 300, 0x60, 2100000);
	ev_before_ids(&x.t, 300, 0x70, 2200000, "MulBackward0", 1, 5, 3, 1);
	ev_end(&x.t, 300, 0x70, 2300000);

	const char *text = finish_chrome(&x, &x.agg);
	CHECK(!json_parse(text, x.cap.len, &root));
	const struct jv *ev = jget(&root, "traceEvents");
	const struct jv *step = x_event(ev, "step", "1000.000");
	const struct jv *mul = x_event(ev, "aten::mul", "1300.000");
	const struct jv *empty = x_event(ev, "aten::empty", "1500.000");
	const struct jv *bwd = x_event(ev, "MulBackward0", "2000.000");

	CHECK(step && mul && empty && bwd);
	CHECK_STR(jstr(step, "cat"), "user_annotation");
	CHECK_STR(jstr(bwd, "cat"), "cpu_op");	/* backward scope too */
	CHECK(!jget(jget(step, "args"), "Sequence number"));
	CHECK(!jget(jget(empty, "args"), "Fwd thread id"));
	CHECK_STR(jnum(jget(mul, "args"), "Sequence number"), "5");
	CHECK_STR(jnum(jget(mul, "args"), "Fwd thread id"), "0");
	CHECK_STR(jnum(jget(bwd, "args"), "Fwd thread id"), "1");
	CHECK_STR(jnum(jget(step, "args"), "External id"), "1");
	CHECK_STR(jnum(jget(mul, "args"), "External id"), "3");

	int starts = 0, ends = 0;
	const char *sid = NULL, *fid = NULL;
	for (size_t i = 0; ev && i < ev->nr; i++) {
		const struct jv *e = &ev->items[i];

		if (!jstr(e, "cat") || strcmp(jstr(e, "cat"), "fwdbwd"))
			continue;
		if (!strcmp(jstr(e, "ph"), "s")) {
			starts++;
			sid = jnum(e, "id");
			CHECK_STR(jnum(e, "ts"), "1300.000");
			CHECK_STR(jnum(e, "tid"), "100");
		} else if (!strcmp(jstr(e, "ph"), "f")) {
			ends++;
			fid = jnum(e, "id");
			CHECK_STR(jnum(e, "ts"), "2000.000");
			CHECK_STR(jnum(e, "tid"), "300");
			CHECK_STR(jstr(e, "bp"), "e");
		}
	}
	CHECK_EQ_U64(starts, 1);
	CHECK_EQ_U64(ends, 1);
	CHECK(sid && fid && !strcmp(sid, fid));
	CHECK_STR(jnum(jget(&root, "otherData"), "fwdbwd_flows"), "1");
	jv_free(&root);
	fixture_free(&x);
}

static const struct op_stats *row_of(const struct trace *t,
				     const struct aggregate *a,
				     const char *name);

/* An op ended on another thread: an async slice begun on its thread and
 * ended on the other, so thread 1's slices still nest; and its parent's
 * self time does not lose its span twice (once for it, once for the op
 * its thread ran meanwhile). */
TEST(chrome_async_end_nests_on_both_threads)
{
	struct fixture x;
	struct jv root;

	fixture_init(&x, 1, WITH_ALL);
	ev_before(&x.t, 100, 0x10, 1000000, "P", 0);
	ev_before(&x.t, 100, 0x20, 1100000, "future", 0);
	ev_before(&x.t, 100, 0x30, 1200000, "C", 0);
	ev_end(&x.t, 200, 0x20, 1300000);	/* ends on thread 200 */
	ev_end(&x.t, 100, 0x30, 1600000);	/* C outlives it */
	ev_end(&x.t, 100, 0x10, 2000000);
	const struct op_stats *p = row_of(&x.t, &x.agg, "P");
	CHECK(p && p->self_ns == 1000000 - 400000);	/* less C only */
	const struct op_stats *fut = row_of(&x.t, &x.agg, "future");
	CHECK(fut && fut->self_ns == 0 && fut->total_ns == 200000);
	const char *text = finish_chrome(&x, &x.agg);
	CHECK(!json_parse(text, x.cap.len, &root));
	const struct jv *ev = jget(&root, "traceEvents");
	int b = 0, e = 0;
	for (size_t i = 0; ev && i < ev->nr; i++) {
		const struct jv *v = &ev->items[i];

		if (!named(v, "future"))
			continue;
		CHECK(strcmp(jstr(v, "ph"), "X"));
		if (!strcmp(jstr(v, "ph"), "b")) {
			b++;
			CHECK_STR(jnum(v, "tid"), "100");
			CHECK_STR(jnum(v, "ts"), "1100.000");
		} else if (!strcmp(jstr(v, "ph"), "e")) {
			e++;
			CHECK_STR(jnum(v, "tid"), "200");
			CHECK_STR(jnum(v, "ts"), "1300.000");
		}
	}
	CHECK_EQ_U64(b, 1);
	CHECK_EQ_U64(e, 1);
	CHECK(x_event(ev, "C", "1200.000") && x_event(ev, "P", "1000.000"));
	jv_free(&root);
	fixture_free(&x);
}

/* The Chrome file is the same bytes whatever else consumes the trace and
 * wherever the writer sits among the sinks. */
TEST(chrome_same_with_or_without_other_sinks)
{
	static const unsigned with[] = {
		0,				/* the writer alone */
		WITH_ALL,			/* after the others */
		CHROME_FIRST | WITH_AGG | WITH_PROFILE,
	};
	struct fixture x[3];
	const char *text[3];

	for (int i = 0; i < 3; i++) {
		build_trace(&x[i], with[i]);
		text[i] = finish_chrome(&x[i], NULL);
		CHECK(valid_json(text[i]));
	}
	CHECK(x[0].cap.len > 0);
	for (int i = 1; i < 3; i++) {
		CHECK_EQ_U64(x[i].cap.len, x[0].cap.len);
		CHECK_STR(text[i], text[0]);
	}
	/* The other sinks did see every op. */
	CHECK_EQ_U64(x[1].agg.self_ns, TOTAL_SELF);
	CHECK_EQ_U64(x[2].agg.self_ns, TOTAL_SELF);
	CHECK_EQ_U64(x[1].sp.nr, 7);
	CHECK_EQ_U64(x[2].sp.nr, 7);
	for (int i = 0; i < 3; i++)
		fixture_free(&x[i]);

	/* With the aggregate passed in, only op_stats is added at the end:
	 * the lone writer's file up to its last "}}\n" is a prefix. */
	struct fixture y;
	build_trace(&y, WITH_ALL);
	const char *with_stats = finish_chrome(&y, &y.agg);
	build_trace(&x[0], 0);
	text[0] = finish_chrome(&x[0], NULL);
	CHECK(x[0].cap.len > 3 && y.cap.len > x[0].cap.len);
	CHECK(!strcmp(text[0] + x[0].cap.len - 3, "}}\n"));
	CHECK(!strncmp(with_stats, text[0], x[0].cap.len - 3));
	CHECK(!strncmp(with_stats + x[0].cap.len - 3, ",\"op_stats\":[",
		       13));
	fixture_free(&x[0]);
	fixture_free(&y);
}

/* chrome_open's file (what --trace writes), for a trace with no event:
 * valid JSON, closed by chrome_finish. */
TEST(chrome_streamed_file_of_empty_trace)
{
	char path[] = "/tmp/rfbpf-test-chrome-XXXXXX";
	int fd = mkstemp(path);
	struct chrome_writer w;
	struct aggregate a;
	struct trace t;
	struct jv root;
	char *text = NULL;
	size_t cap = 0;
	ssize_t len;
	FILE *f;

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	close(fd);
	CHECK(chrome_open(&w, "/nonexistent-dir/trace.json") == -1);
	trace_init(&t, 77);
	aggregate_init(&a);
	CHECK(!chrome_open(&w, path));
	CHECK(w.own_file);
	add_sink(&t, aggregate_sink(&a));
	add_sink(&t, chrome_sink(&w));
	stacks_detach(&t, 1000);		/* nothing open: nothing out */
	CHECK(!chrome_finish(&w, &t, &a));
	CHECK(w.f == NULL);
	f = fopen(path, "r");
	CHECK(f != NULL);
	len = f ? getdelim(&text, &cap, '\0', f) : -1;
	CHECK(len > 0);
	if (len > 0) {
		CHECK(!json_parse(text, len, &root));
		const struct jv *ev = jget(&root, "traceEvents");
		const struct jv *other = jget(&root, "otherData");

		CHECK(ev && ev->type == J_ARR && ev->nr == 3);
		CHECK(ev && ev->nr == 3 &&
		      named(&ev->items[0], "process_name"));
		CHECK_STR(jnum(ev ? &ev->items[0] : NULL, "pid"), "77");
		CHECK_STR(jnum(other, "ops"), "0");
		CHECK(jget(other, "op_stats") &&
		      jget(other, "op_stats")->type == J_ARR &&
		      jget(other, "op_stats")->nr == 0);
		jv_free(&root);
	}
	if (f)
		fclose(f);
	free(text);
	unlink(path);
	aggregate_free(&a);
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

struct folded_want {
	const char *stack;
	uint64_t w;
};

/* The parsed lines are exactly these stacks, with these weights. */
static void check_folded_lines(const struct folded_line *lines, int n,
			       const struct folded_want *want, size_t nr)
{
	CHECK_EQ_U64(n, nr);
	for (size_t k = 0; k < nr; k++) {
		const struct folded_line *l = find_line(lines, n,
							want[k].stack);

		CHECK(l != NULL);
		if (l)
			CHECK_EQ_U64(l->weight, want[k].w);
	}
}

TEST(folded)
{
	struct fixture x;
	struct folded_line lines[32];
	char *text = NULL;
	size_t len;

	build_trace(&x, WITH_ALL);
	FILE *f = open_memstream(&text, &len);
	CHECK(f && !write_folded(f, &x.t, &x.sp));
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
	/* The model's self times and root durations, from the op log. */
	CHECK_EQ_U64(L.nr, x.t.nr_ops);
	for (size_t i = 0; i < L.nr; i++) {
		struct op o = op_at(i);

		self_sum += L.self[i];
		if (o.parent < 0)
			roots += op_duration(&o);
	}
	CHECK_EQ_U64(sum, TOTAL_SELF);
	CHECK_EQ_U64(sum, self_sum);
	CHECK_EQ_U64(sum, roots);

	/* Every op's stack, with the weights worked out by hand. */
	const struct folded_want want[] = {
		{ "python3;main [100];forward", 299500 },
		{ "python3;main [100];forward;" N_QUOTE, 150000 },
		{ "python3;main [100];forward;" N_QUOTE ";" N_CTRL, 50000 },
		{ "python3;main [100];forward;a:b", 100500 },
		{ "python3;main [100];aten::mul", 999 },
		{ "python3;worker [200];" N_UTF8, 169999 },
		/* two calls, one stack: 10000 + 20001 */
		{ "python3;worker [200];" N_UTF8 ";aten::mul", 30001 },
	};
	check_folded_lines(lines, n, want, sizeof(want) / sizeof(want[0]));
	free(text);
	fixture_free(&x);
}

/* The frame itself: '\r' is a line break to speedscope's parser, and an
 * empty name would leave "a;;b" or a trailing ';' (an empty frame). */
TEST(folded_frame_cr_and_empty_name)
{
	char buf[64];
	size_t used;

	used = folded_put_frame(buf, 0, sizeof(buf), "a\rb\r\nc");
	buf[used] = 0;
	CHECK_STR(buf, "a b  c");
	used = folded_put_frame(buf, 0, sizeof(buf), "");
	used = folded_put_frame(buf, used, sizeof(buf), "x");
	used = folded_put_frame(buf, used, sizeof(buf), "");
	used = folded_put_frame(buf, used, sizeof(buf), "");
	buf[used] = 0;
	CHECK_STR(buf, "[no name];x;[no name];[no name]");
}

/* The same names through write_folded: one line per stack, each
 * "frame;...;frame weight" with no '\r', no empty frame. */
TEST(folded_file_cr_and_empty_name)
{
	struct fixture x;
	struct folded_line lines[8];
	char *text = NULL;
	size_t len;

	fixture_init(&x, 4242, WITH_PROFILE);
	strcpy(x.t.process_name, "python3");
	ev_before(&x.t, 100, 0x10, 1000, "step\r1", 0);
	trace_name_thread(&x.t, trace_thread(&x.t, 100, NULL), "ma\rin");
	ev_before(&x.t, 100, 0x20, 1100, "", 0);
	ev_before(&x.t, 100, 0x30, 1200, "aten::mul", 0);
	ev_end(&x.t, 100, 0x30, 1300);			/* self 100 */
	ev_end(&x.t, 100, 0x20, 1500);			/* 400 - 100 */
	ev_end(&x.t, 100, 0x10, 2000);			/* 1000 - 400 */
	FILE *f = open_memstream(&text, &len);
	CHECK(f && !write_folded(f, &x.t, &x.sp));
	fclose(f);
	CHECK(text && !strchr(text, '\r'));
	CHECK(text && !strstr(text, ";;") && !strstr(text, "; "));
	int n = text ? parse_folded(text, lines, 8) : -1;
	const struct folded_want want[] = {
		{ "python3;ma in [100];step 1", 600 },
		{ "python3;ma in [100];step 1;[no name]", 300 },
		{ "python3;ma in [100];step 1;[no name];aten::mul", 100 },
	};
	check_folded_lines(lines, n, want, sizeof(want) / sizeof(want[0]));
	free(text);
	fixture_free(&x);
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
	struct fixture x;
	const struct aggregate *a = &x.agg;
	struct op_stats *sorted;
	size_t nr;

	build_trace(&x, WITH_ALL);
	/* Was a.nr == 6: rows are now indexed by name id (thread names
	 * have ids too), so the rows with calls are what is counted. */
	sorted = aggregate_sorted(a, &x.t, SORT_SELF, &nr);
	CHECK(sorted != NULL);
	CHECK_EQ_U64(nr, 6);
	CHECK_EQ_U64(a->nr_called, 6);
	CHECK(!a->oom);
	free(sorted);
	for (size_t i = 0; i < a->nr; i++)
		CHECK_EQ_U64(a->rows[i].name, i);
	CHECK_EQ_U64(a->self_ns, TOTAL_SELF);
	/* Latency buckets (le 1us, 10us, 100us, 1ms, ...), bounds
	 * inclusive: 999 -> 0, 10000 -> 1, 20001 and 50000 -> 2, the
	 * rest (100500 to 600000) -> 3. */
	const struct { const char *name; uint64_t calls, total, self, min,
		max; uint8_t scope; uint64_t lat[4]; } want[] = {
		{ "forward", 1, 600000, 299500, 600000, 600000, 7,
		  { 0, 0, 0, 1 } },
		{ N_QUOTE, 1, 200000, 150000, 200000, 200000, 0,
		  { 0, 0, 0, 1 } },
		{ N_CTRL, 1, 50000, 50000, 50000, 50000, 0, { 0, 0, 1, 0 } },
		{ N_SEMI, 1, 100500, 100500, 100500, 100500, 0,
		  { 0, 0, 0, 1 } },
		{ N_UTF8, 1, 200000, 169999, 200000, 200000, 0,
		  { 0, 0, 0, 1 } },
		/* 999 + 10000 + 20001, all leaves */
		{ "aten::mul", 3, 31000, 31000, 999, 20001, 0,
		  { 1, 1, 1, 0 } },
	};
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		const struct op_stats *r = row_of(&x.t, a, want[k].name);

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
		for (int b = 0; b < AGG_LATENCY_BUCKETS; b++)
			CHECK_EQ_U64(r->latency[b], b < 4 ? want[k].lat[b] : 0);
	}
	fixture_free(&x);
}

static void check_order(const struct trace *t, const struct aggregate *a,
			enum sort_key key, const char *const *order, size_t n)
{
	size_t nr;
	struct op_stats *rows = aggregate_sorted(a, t, key, &nr);

	CHECK(rows != NULL);
	CHECK_EQ_U64(nr, n);
	for (size_t i = 0; rows && i < n && i < nr; i++)
		CHECK_STR(names_get(&t->names, rows[i].name), order[i]);
	free(rows);
}

TEST(aggregate_sort_orders)
{
	struct fixture x;

	build_trace(&x, WITH_ALL);
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
	/* Avg, min and max: 600000, then the 200000 tie by self, 100500,
	 * 50000, and aten::mul last (avg 10333, min 999, max 20001). */
	const char *by_time[] = { "forward", N_UTF8, N_QUOTE, N_SEMI, N_CTRL,
				  "aten::mul" };
	/* Name, A to Z by bytes: "a;" < "aten::\"" < "aten::m" < "ca" <
	 * "ct" < "f". */
	const char *by_name[] = { N_SEMI, N_QUOTE, "aten::mul", N_UTF8, N_CTRL,
				  "forward" };
	check_order(&x.t, &x.agg, SORT_CALLS, by_calls, 6);
	check_order(&x.t, &x.agg, SORT_SELF, by_self, 6);
	check_order(&x.t, &x.agg, SORT_TOTAL, by_total, 6);
	check_order(&x.t, &x.agg, SORT_AVG, by_time, 6);
	check_order(&x.t, &x.agg, SORT_MIN, by_time, 6);
	check_order(&x.t, &x.agg, SORT_MAX, by_time, 6);
	check_order(&x.t, &x.agg, SORT_NAME, by_name, 6);
	/* No GPU here: every GPU key ties at 0, so the order is self's. */
	check_order(&x.t, &x.agg, SORT_CUDA, by_self, 6);
	check_order(&x.t, &x.agg, SORT_SELF_CUDA, by_self, 6);
	check_order(&x.t, &x.agg, SORT_KERNELS, by_self, 6);
	/* Sorting makes a copy: the rows stay indexed by name id. */
	for (size_t i = 0; i < x.agg.nr; i++)
		CHECK_EQ_U64(x.agg.rows[i].name, i);
	fixture_free(&x);
}

/* The total-sort tie above happens to agree with self order; make total
 * and self disagree so a sort by the wrong key fails. */
TEST(aggregate_sort_total_differs_from_self)
{
	struct fixture x;
	struct trace *t = &x.t;

	fixture_init(&x, 1, WITH_ALL);
	ev_before(t, 1, 0x10, 0, "outer", 0);	/* total 1000, self 100 */
	ev_before(t, 1, 0x20, 50, "inner", 0);	/* total/self 900 */
	ev_end(t, 1, 0x20, 950);
	ev_end(t, 1, 0x10, 1000);
	ev_before(t, 1, 0x30, 2000, "tiny", 0);	/* 3 x 10 */
	ev_end(t, 1, 0x30, 2010);
	ev_before(t, 1, 0x30, 2020, "tiny", 0);
	ev_end(t, 1, 0x30, 2030);
	ev_before(t, 1, 0x30, 2040, "tiny", 0);
	ev_end(t, 1, 0x30, 2050);
	const char *by_self[] = { "inner", "outer", "tiny" };
	const char *by_total[] = { "outer", "inner", "tiny" };
	const char *by_calls[] = { "tiny", "inner", "outer" };
	check_order(t, &x.agg, SORT_SELF, by_self, 3);
	check_order(t, &x.agg, SORT_TOTAL, by_total, 3);
	check_order(t, &x.agg, SORT_CALLS, by_calls, 3);
	CHECK_EQ_U64(x.agg.self_ns, 1030);
	fixture_free(&x);
}

/*
 * Every --sort key on rows built by hand, chosen so that each key gives
 * an order of its own and most keys meet a tie: numbers descend, a tie
 * goes to the larger self time, then to the smaller name id; name sorts
 * A to Z. A row with neither calls nor GPU time is left out.
 */
TEST(aggregate_sort_every_key)
{
	static const char *const names[] = { "mm", "add", "relu", "copy_",
					     "kernel" };
	/* id: calls total self ended ended_ns min max cuda self_cuda kern */
	static const uint64_t v[][10] = {
		{ 5, 1000, 100, 5, 1000,  50, 400, 700, 700, 1 },
		{ 1,  500, 400, 1,  500, 500, 500,   0,   0, 0 },
		{ 5,  900, 300, 5,  900,  50, 300, 700, 200, 3 },
		/* two calls, one cut short: avg 600 (not 1000 / 2) */
		{ 2, 1000, 300, 1,  600, 600, 600, 100, 100, 3 },
		{ 0,    0,   0, 0,    0,   0,   0,   0,   0, 0 },
	};
	static const struct { enum sort_key key; int order[4]; } want[] = {
		{ SORT_SELF, { 1, 2, 3, 0 } },		/* 2, 3 tie: id */
		{ SORT_TOTAL, { 3, 0, 2, 1 } },		/* 3, 0 tie: self */
		{ SORT_CALLS, { 2, 0, 3, 1 } },		/* 2, 0 tie: self */
		{ SORT_CUDA, { 2, 0, 3, 1 } },		/* 2, 0 tie: self */
		{ SORT_AVG, { 3, 1, 0, 2 } },		/* 600 500 200 180 */
		{ SORT_MIN, { 3, 1, 2, 0 } },		/* 2, 0 tie: self */
		{ SORT_MAX, { 3, 1, 0, 2 } },
		{ SORT_SELF_CUDA, { 0, 2, 3, 1 } },
		{ SORT_KERNELS, { 2, 3, 0, 1 } },	/* 2, 3 tie: id */
		{ SORT_NAME, { 1, 3, 0, 2 } },		/* add copy_ mm relu */
	};
	struct op_stats rows[5];
	struct aggregate a;
	bool seen[SORT_NAME + 1] = { false };
	struct trace t;

	trace_init(&t, 1);
	aggregate_init(&a);
	memset(rows, 0, sizeof(rows));
	for (size_t i = 0; i < 5; i++) {
		const uint64_t *r = v[i];

		CHECK_EQ_U64(names_intern(&t.names, names[i],
					  strlen(names[i])), i);
		rows[i] = (struct op_stats){ .name = i, .calls = r[0],
			.total_ns = r[1], .self_ns = r[2], .ended = r[3],
			.ended_ns = r[4], .min_ns = r[5], .max_ns = r[6],
			.gpu_total_ns = r[7], .gpu_self_ns = r[8],
			.kernels = r[9], .truncated = r[0] - r[3] };
	}
	a.rows = rows;
	a.nr = 5;
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		const char *order[4];

		for (int i = 0; i < 4; i++)
			order[i] = names[want[k].order[i]];
		check_order(&t, &a, want[k].key, order, 4);
		seen[want[k].key] = true;
	}
	/* Every key (the CLI's --sort list is the enum's) was checked. */
	for (int key = 0; key <= SORT_NAME; key++)
		CHECK(seen[key]);
	trace_free(&t);
}

TEST(aggregate_counts_truncated_calls)
{
	struct fixture x;
	struct trace *t = &x.t;

	fixture_init(&x, 1, WITH_ALL);
	ev_before(t, 1, 0x10, 100, "p", 0);
	ev_before(t, 1, 0x20, 200, "c", 0);
	ev_end(t, 1, 0x10, 300);			/* c closed by parent */
	ev_before(t, 1, 0x30, 400, "c", 0);
	ev_end(t, 1, 0x30, 450);
	const struct op_stats *c = row_of(t, &x.agg, "c");
	CHECK(c && c->calls == 2 && c->truncated == 1);
	/* The cut call counts in Total, not in Min, Max or Avg. */
	CHECK(c && c->min_ns == 50 && c->max_ns == 50 && c->total_ns == 150);
	CHECK(c && c->ended == 1 && c->ended_ns == 50);
	const struct op_stats *p = row_of(t, &x.agg, "p");
	CHECK(p && p->self_ns == 100 && p->truncated == 0);
	fixture_free(&x);
}

/* The table from the aggregate: rows in the chosen order, --top cuts. */
/* --children: what the children lost is said in the footer and in
 * otherData, each count only where it is not zero in the footer, and
 * nothing of it without --children. */
TEST(children_losses_in_footer_and_other_data)
{
	struct fixture x;
	struct jv root;
	char *text = NULL;
	size_t len;

	build_trace(&x, WITH_ALL);
	x.t.children = true;
	x.t.counts.child_ops_missed = 3;
	x.t.counts.children_probed_late = 4;
	x.t.counts.children_unprobed = 2;
	FILE *f = open_memstream(&text, &len);
	CHECK(f != NULL);
	print_table(f, &x.t, &x.agg, SORT_SELF, 2);
	fclose(f);
	CHECK(strstr(text, "; ops missed in children 3, and uncounted ones in "
		      "the first moments of 4 children probed after their "
		      "fork (entry probes); 2 children never probed (gone "
		      "before rfbpf reached them), their ops unseen\n"));
	free(text);
	const char *json = finish_chrome(&x, &x.agg);
	CHECK(!json_parse(json, x.cap.len, &root));
	const struct jv *other = jget(&root, "otherData");
	CHECK_STR(jnum(other, "child_ops_missed"), "3");
	CHECK_STR(jnum(other, "children_probed_after_fork"), "4");
	CHECK_STR(jnum(other, "children_never_probed"), "2");
	jv_free(&root);
	fixture_free(&x);

	build_trace(&x, WITH_ALL);	/* without --children: not a word */
	x.t.counts.children_unprobed = 2;
	f = open_memstream(&text, &len);
	CHECK(f != NULL);
	print_table(f, &x.t, &x.agg, SORT_SELF, 2);
	fclose(f);
	CHECK(!strstr(text, "children"));
	free(text);
	fixture_free(&x);
}

TEST(table_from_aggregate)
{
	struct fixture x;
	char *text = NULL;
	size_t len;

	build_trace(&x, WITH_ALL);
	FILE *f = open_memstream(&text, &len);
	CHECK(f != NULL);
	print_table(f, &x.t, &x.agg, SORT_SELF, 2);
	fclose(f);
	const char *fwd = strstr(text, "\nforward ");
	/* Invalid bytes show as U+FFFD, as in JSON. */
	const char *utf8 = strstr(text, "\n" N_UTF8_JSON " ");
	CHECK(fwd && utf8 && fwd < utf8);
	CHECK(!strstr(text, "\naten::mul "));	/* third of 2 shown */
	CHECK(strstr(text, "(4 more ops not shown: --top 0 shows all)\n"));
	/* forward: self 299.500us, 37.39% of 800999 ns. */
	CHECK(fwd && strstr(fwd, "37.39%") && strstr(fwd, "299.500us"));
	CHECK(strstr(text, "Self time total: 800.999us; 8 ops on 2 threads "
		      "in PID 4242 (python3)\n"));
	free(text);
	fixture_free(&x);
}

/* Names are cut by terminal columns at a character boundary, control
 * characters cannot break a row, and a row with cut calls is marked. */
TEST(table_names_by_display_width)
{
	struct fixture x;
	char *text = NULL;
	size_t len;
	/* 30 wide characters: 60 columns, more than the 52 there are. */
	char wide[30 * 3 + 1] = "";

	for (int i = 0; i < 30; i++)
		strcat(wide, "\xe6\xbc\xa2");		/* U+6F22, 2 columns */
	fixture_init(&x, 1, WITH_ALL);
	ev_before(&x.t, 1, 0x10, 100, wide, 0);
	ev_end(&x.t, 1, 0x10, 200);
	ev_before(&x.t, 1, 0x20, 300, "two\nlines", 0);
	ev_end(&x.t, 1, 0x20, 400);
	ev_before(&x.t, 1, 0x30, 500, "cut", 0);
	stacks_detach(&x.t, 700);
	FILE *f = open_memstream(&text, &len);
	CHECK(f != NULL);
	print_table(f, &x.t, &x.agg, SORT_NAME, 0);
	fclose(f);
	/* 24 wide characters (48 columns) and "...", then a space to 52. */
	char want[24 * 3 + 8];
	memcpy(want, wide, 24 * 3);
	strcpy(want + 24 * 3, "... ");
	CHECK(strstr(text, want) != NULL);
	/* Not 25 of them: that would be 53 columns with "...". */
	char over[25 * 3 + 4];
	memcpy(over, wide, 25 * 3);
	strcpy(over + 25 * 3, "...");
	CHECK(!strstr(text, over));
	CHECK(strstr(text, "\ntwo lines ") != NULL);
	CHECK(!strstr(text, "\nlines"));
	CHECK(strstr(text, "\ncut* ") != NULL);
	CHECK(strstr(text, "* rows with calls cut short (1 in all"));
	/* The cut call has no Avg, Min or Max of its own. */
	const char *cut = strstr(text, "\ncut* ");
	CHECK(cut && strstr(cut, "         -           -           -"));
	/* By name: "cut" < "two..." < the wide name. */
	const char *two = strstr(text, "\ntwo lines");
	const char *w = strstr(text, wide);
	CHECK(cut && two && cut < two && (!w || two < w));
	free(text);
	fixture_free(&x);
}

/* Under --sample self time is not an estimate of anything: the table,
 * its footer and op_stats say so instead of showing a number. */
TEST(sampled_self_time_is_not_available)
{
	struct fixture x;
	char *text = NULL;
	size_t len;
	struct jv root;

	build_trace(&x, WITH_ALL);
	x.t.sample_prob = 0.1;
	FILE *f = open_memstream(&text, &len);
	CHECK(f != NULL);
	print_table(f, &x.t, &x.agg, SORT_SELF, 0);
	fclose(f);
	CHECK(strstr(text, "Est. total"));
	CHECK(strstr(text, "Self time: not available under --sample"));
	CHECK(strstr(text, "Sorted by Est. total"));
	const char *fwd = strstr(text, "\nforward ");
	CHECK(fwd && strstr(fwd, "    n/a         n/a         n/a  "));
	free(text);
	const char *json = finish_chrome(&x, &x.agg);
	CHECK(!json_parse(json, x.cap.len, &root));
	const struct jv *other = jget(&root, "otherData");
	const struct jv *mul = op_stats_entry(jget(other, "op_stats"),
					      "aten::mul");
	CHECK(mul && jnum(mul, "est_total_ns") && jnum(mul, "est_calls"));
	CHECK(mul && !jget(mul, "est_self_ns") && !jget(mul, "self_ns"));
	CHECK(jstr(other, "self_time") &&
	      strstr(jstr(other, "self_time"), "not available"));
	jv_free(&root);
	fixture_free(&x);
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

/* JSON has no NaN or infinity: the writer's doubles are null then, and
 * otherwise the fewest digits that read back (what %g would lose). */
TEST(json_doubles)
{
	const struct { double v; int decimals; const char *s; } want[] = {
		{ 0.1, -1, "0.1" },
		{ 0.0125, -1, "0.0125" },
		{ 1.0 / 3, -1, "0.3333333333333333" },
		{ 1e300, -1, "1e+300" },
		{ 0.1 + 0.2, -1, "0.30000000000000004" },
		{ NAN, -1, "null" },
		{ -INFINITY, -1, "null" },
		{ 2.5, 1, "2.5" },
		{ 1e300 / 1e-300, 0, "null" },	/* --sample 1e-300 */
		{ -NAN, 0, "null" },
	};
	char *text = NULL;
	size_t len = 0;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		FILE *f = open_memstream(&text, &len);

		if (want[i].decimals < 0)
			json_double(f, want[i].v);
		else
			json_fixed(f, want[i].v, want[i].decimals);
		fclose(f);
		CHECK_STR(text, want[i].s);
		free(text);
		text = NULL;
	}
}

/* --off-cpu: time off CPU with no op open gets its thread's row, by
 * reason; the wakers table says why it is empty when wakeups came from
 * outside ops (torch 1.13's GIL waits). */
static void ev_off_cpu(struct trace *t, uint32_t tid, uint64_t start,
		       uint64_t end, uint32_t reason, uint32_t waker)
{
	struct rf_off_cpu_event e = {
		.hdr = { .ts_ns = end, .pid = t->pid, .tid = tid,
			 .kind = RF_EV_OFF_CPU },
		.start_ns = start, .reason = reason, .waker_tid = waker,
		.wake_ns = waker ? end - 1 : 0,
	};
	stacks_off_cpu(t, &e);
}

static void ev_wake(struct trace *t, uint32_t waker, uint32_t woken,
		    uint64_t ts)
{
	struct rf_wake_event e = {
		.hdr = { .ts_ns = ts, .pid = t->pid, .tid = waker,
			 .kind = RF_EV_WAKE },
		.woken_tid = woken,
	};
	stacks_wake(t, &e);
}

TEST(off_cpu_with_no_op_open_has_rows_per_thread)
{
	struct fixture x;
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	const char *idle, *row7, *row8;

	fixture_init(&x, 4242, WITH_AGG);
	x.t.off_cpu = true;
	trace_name_thread(&x.t, trace_thread(&x.t, 7, NULL), "main");
	trace_name_thread(&x.t, trace_thread(&x.t, 8, NULL), "loader");
	ev_before(&x.t, 7, 0x10, 1000, "aten::mm", 0);
	ev_off_cpu(&x.t, 7, 1100, 1600, RF_OFF_SLEEP, 0);	/* in the op */
	ev_end(&x.t, 7, 0x10, 2000);
	ev_wake(&x.t, 8, 7, 2999);			/* outside any op */
	ev_off_cpu(&x.t, 7, 2000, 2002000, RF_OFF_GIL, 8);
	ev_off_cpu(&x.t, 7, 3000000, 4000000, RF_OFF_SLEEP, 0);
	ev_off_cpu(&x.t, 8, 5000000, 5500000, RF_OFF_PREEMPTED, 0);
	CHECK_EQ_U64(x.agg.nr_idle, 2);
	f = open_memstream(&text, &len);
	print_table(f, &x.t, &x.agg, SORT_SELF, 0);
	print_wakers(f, &x.t, &x.agg, 5);
	fclose(f);
	idle = strstr(text, "\nOff CPU with no op open, per thread:\n");
	row7 = idle ? strstr(idle, "\nmain [7] ") : NULL;
	row8 = idle ? strstr(idle, "\nloader [8] ") : NULL;
	CHECK(idle && row7 && row8 && row7 < row8);	/* most time first */
	/* main: 2 intervals, 3ms in all, 1ms sleeping, 2ms on the GIL. */
	CHECK(row7 && strstr(row7, " 2     3.000ms     1.000ms     2.000ms "));
	CHECK(row8 && strstr(row8, " 1   500.000us "));
	CHECK(strstr(text, "(none: of the 1 wakeups by traced threads, 0 came "
		     "from inside an op"));
	free(text);
	fixture_free(&x);
}

RUN_TESTS()
