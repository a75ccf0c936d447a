// SPDX-License-Identifier: BSD-2-Clause
/*
 * The flight recorder (export/flight_recorder.h): it keeps the Chrome
 * events of the last window only, lets go of the oldest past the window
 * or the memory bound and counts them, and writes the window as a whole
 * Chrome file a strict JSON parser reads back.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "json_parse.h"
#include "export/flight_recorder.h"
#include "model/trace.h"

#define MS 1000000ull

/* An event whose "name" is name. */
static int named(const struct jv *e, const char *name)
{
	return jstr(e, "name") && !strcmp(jstr(e, "name"), name);
}

/* One op on thread 100, [at, at + 1 ms]. */
static void one_op(struct trace *t, uint64_t at, const char *name)
{
	struct rf_event_hdr h = {
		.ts_ns = at, .rf_addr = 0x1000, .pid = t->pid, .tid = 100,
		.kind = RF_EV_BEFORE, .variant = RF_V_CSTR, .scope = 0,
		.name_len = strlen(name),
	};

	stacks_before(t, &h, name, -1);
	h.ts_ns = at + MS;
	h.kind = RF_EV_END;
	h.variant = RF_V_END;
	stacks_end(t, &h);
}

/* The dump's X events named name, and its flight_recorder counters. */
static size_t dump_and_count(struct flight_recorder *r, struct trace *t,
			     const char *name, struct jv *root)
{
	char path[] = "/tmp/rfbpf-test-fr-XXXXXX";
	int fd = mkstemp(path);
	char *text = NULL;
	size_t cap = 0, n = 0;
	ssize_t len;
	FILE *f;

	CHECK(fd >= 0);
	close(fd);
	CHECK(!flight_recorder_dump(r, path, t, NULL, "test"));
	f = fopen(path, "r");
	len = f ? getdelim(&text, &cap, '\0', f) : -1;
	CHECK(len > 0);
	memset(root, 0, sizeof(*root));
	if (len > 0 && !json_parse(text, len, root)) {
		const struct jv *ev = jget(root, "traceEvents");

		for (size_t i = 0; ev && i < ev->nr; i++)
			if (named(&ev->items[i], name))
				n++;
	} else {
		CHECK(!"the dump is JSON");
	}
	if (f)
		fclose(f);
	free(text);
	unlink(path);
	return n;
}

TEST(keeps_the_last_window_and_counts_the_rest)
{
	struct flight_recorder r;
	struct trace_sink s;
	struct trace t;
	struct jv root;

	trace_init(&t, 77);
	CHECK(!flight_recorder_init(&r, 0.010, 64));	/* 10 ms */
	s = flight_recorder_sink(&r);
	trace_add_sink(&t, &s);
	for (int i = 0; i < 100; i++)		/* one op a ms */
		one_op(&t, 1000 * MS + i * MS, i < 50 ? "old" : "new");
	/* The last op ended at 1100 ms: ops that ended from 1090 on are
	 * kept, the first 89 let go. */
	CHECK_EQ_U64(r.nr, 11);
	CHECK_EQ_U64(r.dropped_old, 89);
	CHECK_EQ_U64(r.dropped_full, 0);
	CHECK_EQ_U64(dump_and_count(&r, &t, "new", &root), 11);
	jv_free(&root);
	CHECK_EQ_U64(dump_and_count(&r, &t, "old", &root), 0);
	{
		const struct jv *fr = jget(jget(&root, "otherData"),
					   "flight_recorder");

		CHECK(fr != NULL);
		CHECK_STR(jnum(fr, "let_go_past_window"), "89");
		CHECK_STR(jnum(fr, "records"), "11");
	}
	jv_free(&root);
	CHECK_EQ_U64(r.dumps, 2);
	flight_recorder_free(&r);
	trace_free(&t);
}

TEST(memory_bound_lets_the_oldest_go)
{
	struct flight_recorder r;
	struct trace_sink s;
	struct trace t;
	struct jv root;

	trace_init(&t, 77);
	CHECK(!flight_recorder_init(&r, 3600, 1));	/* 1 MiB */
	s = flight_recorder_sink(&r);
	trace_add_sink(&t, &s);
	for (int i = 0; i < 20000; i++)
		one_op(&t, 1000 * MS + i * MS, "op");
	CHECK(r.dropped_full > 0);
	CHECK_EQ_U64(r.dropped_old, 0);
	CHECK(r.bytes <= 1 << 20);
	CHECK(r.peak_bytes <= 1 << 20);
	CHECK_EQ_U64(r.nr + r.dropped_full, 20000);
	/* What is kept is the newest: the dump holds r.nr ops, the last
	 * one among them. */
	CHECK_EQ_U64(dump_and_count(&r, &t, "op", &root), r.nr);
	jv_free(&root);
	flight_recorder_free(&r);
	trace_free(&t);
}

RUN_TESTS()
