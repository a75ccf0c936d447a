// SPDX-License-Identifier: BSD-2-Clause
/*
 * A window's self time is counted by time (fleet/window_self.h): an op's
 * self time inside [a, b] and no more, so a thread in ops all the window
 * long gives exactly b - a, however its ops straddle the window's ends.
 */
#include <math.h>
#include <string.h>
#include "check.h"
#include "fleet/window_self.h"

static struct op op_at(uint64_t id, uint64_t start, uint64_t end)
{
	struct op o;

	memset(&o, 0, sizeof(o));
	o.id = id;
	o.start_ns = start;
	o.end_ns = end;
	o.tid = 7;
	o.parent = -1;
	return o;
}

static void close_op(struct window_self *w, const struct trace *t,
		     const struct op *o, int64_t parent_id, uint64_t self,
		     uint64_t *self_out, uint64_t *calls)
{
	struct closed_op c = { .op = o, .self_ns = self,
			       .parent_id = parent_id };

	window_self_op(w, t, &c, self_out, calls);
}

TEST(a_thread_in_ops_all_along_gives_the_window_length)
{
	struct window_self w;
	struct trace t;
	/* A began before a (seen: after the callback came), B inside, C
	 * runs past b. */
	struct op a = op_at(1, 900, 2500), b = op_at(2, 1200, 1500),
		  c = op_at(3, 1800, 2200);
	uint64_t self, calls, sum = 0, all_calls = 0;

	memset(&w, 0, sizeof(w));
	memset(&t, 0, sizeof(t));
	window_self_open(&w, 500, 1000, UINT64_MAX);
	window_self_end_at(&w, 2000);
	close_op(&w, &t, &b, 1, 300, &self, &calls);
	CHECK_EQ_U64(self, 300);		/* inside: the trace's own */
	sum += self, all_calls += calls;
	close_op(&w, &t, &c, 1, 400, &self, &calls);
	CHECK_EQ_U64(self, 200);		/* up to b only */
	sum += self, all_calls += calls;
	close_op(&w, &t, &a, -1, 1100, &self, &calls);
	CHECK_EQ_U64(self, 500);		/* from a, less B and C there */
	CHECK_EQ_U64(calls, 0);			/* it began before a */
	sum += self, all_calls += calls;
	CHECK_EQ_U64(sum, 1000);
	CHECK_EQ_U64(all_calls, 2);
	CHECK(fabs(window_self_length(&w, 1000e-9, false) - 1000e-9) < 1e-15);
	window_self_free(&w);
}

TEST(an_op_begun_before_the_callback_or_after_b_adds_nothing)
{
	struct window_self w;
	struct trace t;
	struct op early = op_at(1, 100, 1500), late = op_at(2, 2100, 2300);
	uint64_t self, calls;

	memset(&w, 0, sizeof(w));
	memset(&t, 0, sizeof(t));
	window_self_open(&w, 500, 1000, UINT64_MAX);
	window_self_end_at(&w, 2000);
	close_op(&w, &t, &early, -1, 1400, &self, &calls);
	CHECK_EQ_U64(self + calls, 0);
	close_op(&w, &t, &late, -1, 200, &self, &calls);
	CHECK_EQ_U64(self + calls, 0);
	window_self_free(&w);
}

/* --bursts: b is planned, and the cut comes later (the events of the
 * ops closed meanwhile are read first). The callback went off at b, so
 * the parent's children after it were never seen: P below must not take
 * their time as its own self time, nor a child begun after b count. */
TEST(a_span_with_a_planned_end_counts_up_to_it_before_the_cut)
{
	struct window_self w;
	struct trace t;
	/* P: 1100-2600; C1 inside; C2 runs past b; C3 begins after b (seen:
	 * the callback went off a little later); after C3, unseen children
	 * ran until P's end. */
	struct op p = op_at(1, 1100, 2600), c1 = op_at(2, 1200, 1500),
		  c2 = op_at(3, 1800, 2200), c3 = op_at(4, 2050, 2100);
	uint64_t self, calls, sum = 0, all_calls = 0;

	memset(&w, 0, sizeof(w));
	memset(&t, 0, sizeof(t));
	window_self_open(&w, 500, 1000, 2000);
	close_op(&w, &t, &c1, 1, 300, &self, &calls);
	sum += self, all_calls += calls;
	close_op(&w, &t, &c3, 1, 50, &self, &calls);
	CHECK_EQ_U64(self + calls, 0);		/* began after b */
	close_op(&w, &t, &c2, 1, 350, &self, &calls);
	CHECK_EQ_U64(self, 200);		/* up to b only */
	sum += self, all_calls += calls;
	/* its own figure (2600 - 1100 - 300 - 400 - 50 = 850) holds the
	 * unseen children: in [a, b] it has 900 less 300 and 200 */
	close_op(&w, &t, &p, -1, 850, &self, &calls);
	CHECK_EQ_U64(self, 400);
	sum += self, all_calls += calls;
	CHECK_EQ_U64(sum, 900);			/* b - P's start */
	CHECK_EQ_U64(all_calls, 3);
	window_self_end_at(&w, 2000);		/* the cut, later */
	window_self_free(&w);
}

TEST(the_length_never_lets_self_time_pass_the_threads)
{
	struct window_self w;

	memset(&w, 0, sizeof(w));
	/* Two threads, 1.9 s of self time in a 1 s window with 0.2 s of
	 * probes: L = 1 - 0.1 = 0.9 s would give 2.1 threads' worth. */
	u64map_put(&w.threads, 1, 1);
	u64map_put(&w.threads, 2, 1);
	w.self_ns = 1.9e9;
	w.probe_ns = 0.2e9;
	CHECK(window_self_length(&w, 1.0, false) >= 0.95 - 1e-12);
	w.self_ns = 1.0e9;
	CHECK(fabs(window_self_length(&w, 1.0, false) - 0.9) < 1e-12);
	CHECK(window_self_length(&w, 1.0, true) == 1.0);
	window_self_free(&w);
}

RUN_TESTS()
