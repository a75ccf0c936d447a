// SPDX-License-Identifier: BSD-2-Clause
/* Rebuilding per-thread op stacks from before()/end()/exit events
 * (user/model/stacks.c), fed with hand-built event headers. */
#include "check.h"
#include "model/trace.h"
#include "op_log.h"

static void before_v(struct trace *t, uint32_t tid, uint64_t addr,
		     uint64_t ts, const char *name, uint8_t variant,
		     uint8_t flags)
{
	struct rf_event_hdr h = {
		.ts_ns = ts, .rf_addr = addr, .pid = 1, .tid = tid,
		.kind = RF_EV_BEFORE, .variant = variant, .scope = 0,
		.flags = flags, .name_len = strlen(name),
	};
	stacks_before(t, &h, name, (int64_t)ts / 10);
}

static void before(struct trace *t, uint32_t tid, uint64_t addr,
		   uint64_t ts, const char *name)
{
	before_v(t, tid, addr, ts, name, RF_V_CSTR, 0);
}

static void end(struct trace *t, uint32_t tid, uint64_t addr, uint64_t ts)
{
	struct rf_event_hdr h = {
		.ts_ns = ts, .rf_addr = addr, .pid = 1, .tid = tid,
		.kind = RF_EV_END, .variant = RF_V_END,
	};
	stacks_end(t, &h);
}

static const char *op_name(const struct trace *t, size_t i)
{
	return names_get(&t->names, op_at(i).name);
}

static uint32_t depth_of(struct trace *t, uint32_t tid)
{
	struct thread *th = trace_thread(t, tid, NULL);

	return th ? th->depth : 0;
}

/* Ops flagged with `flag`: counters must agree with the flags on ops. */
static uint64_t nr_flagged(const struct trace *t, uint32_t flag)
{
	uint64_t n = 0;

	(void)t;

	for (size_t i = 0; i < L.nr; i++)
		n += (op_at(i).flags & flag) != 0;
	return n;
}

/* A parent and the child it forked (--children) have RecordFunctions at
 * the same addresses: their ops must not pair with each other. */
TEST(same_address_in_two_processes)
{
	struct rf_event_hdr b = { .ts_ns = 10, .rf_addr = 0x7ffd1000,
				  .pid = 1, .tid = 1, .kind = RF_EV_BEFORE,
				  .name_len = 1 };
	struct rf_event_hdr e = { .rf_addr = 0x7ffd1000, .kind = RF_EV_END };
	struct trace t;

	trace_init_logged(&t, 1);
	stacks_before(&t, &b, "p", 1);
	b.pid = b.tid = 2;		/* the child, same address */
	b.ts_ns = 20;
	stacks_before(&t, &b, "c", 1);
	e.pid = e.tid = 1;
	e.ts_ns = 30;
	stacks_end(&t, &e);
	e.pid = e.tid = 2;
	e.ts_ns = 40;
	stacks_end(&t, &e);
	CHECK_EQ_U64(t.nr_ops, 2);
	CHECK_EQ_U64(t.counts.replaced + t.counts.async_ends +
		     t.counts.unmatched_ends, 0);
	CHECK_EQ_U64(op_at(0).end_ns, 30);
	CHECK_EQ_U64(op_at(1).end_ns, 40);
	trace_free(&t);
}

TEST(plain_nesting)
{
	struct trace t;

	trace_init_logged(&t, 1);
	before(&t, 10, 0xa0, 100, "A");
	before(&t, 10, 0xb0, 110, "B");
	before(&t, 10, 0xc0, 120, "C");
	end(&t, 10, 0xc0, 130);
	end(&t, 10, 0xb0, 140);
	before(&t, 10, 0xd0, 150, "D");
	end(&t, 10, 0xd0, 160);
	end(&t, 10, 0xa0, 200);

	CHECK_EQ_U64(t.nr_ops, 4);
	const char *names[] = { "A", "B", "C", "D" };
	const int32_t parent[] = { -1, 0, 1, 0 };
	const uint16_t depth[] = { 0, 1, 2, 1 };
	const uint64_t start[] = { 100, 110, 120, 150 };
	const uint64_t stop[] = { 200, 140, 130, 160 };
	for (size_t i = 0; i < 4 && i < t.nr_ops; i++) {
		CHECK_STR(op_name(&t, i), names[i]);
		CHECK_EQ_U64(op_at(i).parent, parent[i]);
		CHECK_EQ_U64(op_at(i).depth, depth[i]);
		CHECK_EQ_U64(op_at(i).start_ns, start[i]);
		CHECK_EQ_U64(op_at(i).end_ns, stop[i]);
		CHECK_EQ_U64(op_at(i).flags, 0);
		CHECK_EQ_U64(op_at(i).tid, 10);
		CHECK_EQ_U64(op_at(i).seq, start[i] / 10);
		CHECK_EQ_U64(op_at(i).variant, RF_V_CSTR);
	}
	CHECK_EQ_U64(t.counts.events, 8);
	CHECK_EQ_U64(t.counts.ends, 4);
	CHECK_EQ_U64(t.counts.before[RF_V_CSTR], 4);
	CHECK_EQ_U64(t.counts.unmatched_ends + t.counts.repeated_ends +
		     t.counts.async_ends + counts_truncated(&t.counts), 0);
	CHECK_EQ_U64(t.open.len, 0);
	CHECK_EQ_U64(depth_of(&t, 10), 0);
	CHECK_EQ_U64(t.first_ns, 100);
	CHECK_EQ_U64(t.last_ns, 200);
	CHECK_EQ_U64(t.nr_threads, 1);
	trace_free(&t);
}

TEST(name_uses_name_len_only)
{
	struct trace t;
	struct rf_event_hdr h = { .ts_ns = 5, .rf_addr = 0x10, .tid = 3,
				  .kind = RF_EV_BEFORE, .name_len = 4 };

	trace_init_logged(&t, 1);
	stacks_before(&t, &h, "aten::add", 0);
	CHECK_EQ_U64(t.nr_ops, 1);
	CHECK_STR(op_name(&t, 0), "aten");
	trace_free(&t);
}

TEST(end_without_before_is_counted_and_ignored)
{
	struct trace t;

	trace_init_logged(&t, 1);
	before(&t, 10, 0xa0, 100, "A");
	end(&t, 10, 0xeee0, 110);		/* never began */
	CHECK_EQ_U64(t.counts.unmatched_ends, 1);
	CHECK_EQ_U64(t.counts.repeated_ends, 0);
	CHECK_EQ_U64(t.counts.ends, 1);
	CHECK_EQ_U64(t.nr_ops, 1);
	CHECK(op_at(0).flags & OP_OPEN);	/* A untouched */
	CHECK_EQ_U64(depth_of(&t, 10), 1);
	end(&t, 10, 0xa0, 120);
	CHECK_EQ_U64(op_at(0).end_ns, 120);
	CHECK_EQ_U64(op_at(0).flags, 0);
	trace_free(&t);
}

/* A thread that only ends an op begun before tracing is seen, but ran no
 * op: the table says "N ops on 1 thread (2 seen)", not "2 threads". */
TEST(threads_with_ops_are_told_from_threads_seen)
{
	struct trace t;

	trace_init_logged(&t, 1);
	before(&t, 10, 0xa0, 100, "A");
	before(&t, 10, 0xb0, 105, "B");
	trace_thread(&t, 11, NULL);		/* its first record: an end */
	end(&t, 11, 0xeee0, 110);
	CHECK_EQ_U64(t.counts.threads_seen, 2);
	CHECK_EQ_U64(t.counts.threads_with_ops, 1);
	trace_free(&t);
}

/* The end callback of an op whose start rfbpf never saw (it began in a
 * forked child before the child was traced): counted apart, not as an
 * unpaired end; an end() probe hit with no start stays unmatched. */
TEST(end_callback_of_an_op_begun_before_tracing)
{
	struct trace t;
	struct rf_event_hdr h = {
		.ts_ns = 110, .rf_addr = 0xbee0, .pid = 1, .tid = 10,
		.kind = RF_EV_END, .variant = RF_V_END, .flags = RF_F_BEGAN,
	};

	trace_init_logged(&t, 1);
	stacks_end(&t, &h);
	CHECK_EQ_U64(t.counts.ends_begun_untraced, 1);
	CHECK_EQ_U64(t.counts.unmatched_ends, 0);
	end(&t, 10, 0xcee0, 120);
	CHECK_EQ_U64(t.counts.unmatched_ends, 1);
	CHECK_EQ_U64(t.counts.ends_begun_untraced, 1);
	CHECK_EQ_U64(t.nr_ops, 0);
	trace_free(&t);
}

TEST(repeated_end)
{
	struct trace t;

	trace_init_logged(&t, 1);
	before(&t, 10, 0xa0, 100, "A");
	end(&t, 10, 0xa0, 110);
	end(&t, 10, 0xa0, 115);		/* explicit end(), then destructor */
	CHECK_EQ_U64(t.counts.repeated_ends, 1);
	CHECK_EQ_U64(t.counts.unmatched_ends, 0);
	CHECK_EQ_U64(op_at(0).end_ns, 110);	/* the first end counts */
	CHECK_EQ_U64(t.counts.ends, 2);
	trace_free(&t);
}

TEST(end_before_start_time_is_clamped)
{
	struct trace t;

	trace_init_logged(&t, 1);
	before(&t, 10, 0xa0, 100, "A");
	end(&t, 10, 0xa0, 90);		/* clocks of two CPUs */
	CHECK_EQ_U64(op_at(0).end_ns, 100);
	CHECK_EQ_U64(op_duration((struct op[]){ op_at(0) }), 0);
	trace_free(&t);
}

TEST(async_end_on_other_thread)
{
	struct trace t;

	trace_init_logged(&t, 1);
	before(&t, 1, 0xa0, 100, "async");
	end(&t, 2, 0xa0, 150);
	CHECK_EQ_U64(t.counts.async_ends, 1);
	CHECK_EQ_U64(t.counts.unmatched_ends, 0);
	CHECK_EQ_U64(op_at(0).flags, OP_ASYNC_END);
	CHECK_EQ_U64(op_at(0).end_ns, 150);
	CHECK_EQ_U64(op_at(0).tid, 1);		/* stays where it began */
	CHECK_EQ_U64(depth_of(&t, 1), 0);
	CHECK_EQ_U64(depth_of(&t, 2), 0);
	CHECK_EQ_U64(t.open.len, 0);
	/* Thread 1's stack was cleaned: its next op is a root. */
	before(&t, 1, 0xb0, 160, "next");
	CHECK_EQ_U64(op_at(1).parent, -1);
	CHECK_EQ_U64(op_at(1).depth, 0);
	trace_free(&t);
}

/* The async op's owner opened more ops above it: it leaves the middle of
 * the stack and the op above it is re-parented to its parent. */
TEST(async_end_from_middle_of_stack)
{
	struct trace t;

	trace_init_logged(&t, 1);
	before(&t, 1, 0x10, 100, "P");		/* 0 */
	before(&t, 1, 0x20, 110, "async");	/* 1 */
	before(&t, 1, 0x30, 120, "C");		/* 2, child of async */
	before(&t, 1, 0x40, 125, "D");		/* 3, child of C */
	end(&t, 2, 0x20, 130);
	CHECK_EQ_U64(t.counts.async_ends, 1);
	CHECK_EQ_U64(op_at(1).flags, OP_ASYNC_END);
	CHECK_EQ_U64(op_at(1).end_ns, 130);
	CHECK_EQ_U64(op_at(2).parent, 0);
	CHECK_EQ_U64(op_at(2).depth, 1);
	CHECK_EQ_U64(op_at(3).parent, 2);
	CHECK_EQ_U64(op_at(3).depth, 2);
	CHECK_EQ_U64(depth_of(&t, 1), 3);
	CHECK(op_at(2).flags & OP_OPEN);
	CHECK(op_at(3).flags & OP_OPEN);
	/* The rest closes cleanly, nothing closed by a parent. */
	end(&t, 1, 0x40, 140);
	end(&t, 1, 0x30, 150);
	before(&t, 1, 0x50, 155, "E");		/* 4: P's child now */
	CHECK_EQ_U64(op_at(4).parent, 0);
	CHECK_EQ_U64(op_at(4).depth, 1);
	end(&t, 1, 0x50, 158);
	end(&t, 1, 0x10, 160);
	CHECK_EQ_U64(t.counts.closed_by_parent, 0);
	CHECK_EQ_U64(t.counts.unmatched_ends, 0);
	CHECK_EQ_U64(op_at(3).end_ns, 140);
	CHECK_EQ_U64(op_at(2).end_ns, 150);
	CHECK_EQ_U64(op_at(0).end_ns, 160);
	for (size_t i = 0; i < t.nr_ops; i++)
		CHECK(!(op_at(i).flags & (OP_OPEN | OP_TRUNCATED)));
	CHECK_EQ_U64(depth_of(&t, 1), 0);
	trace_free(&t);
}

TEST(parent_ends_with_child_open)
{
	struct trace t;

	trace_init_logged(&t, 1);
	before(&t, 1, 0x10, 100, "P");
	before(&t, 1, 0x20, 110, "C");
	before(&t, 1, 0x30, 120, "G");
	end(&t, 1, 0x10, 150);
	CHECK_EQ_U64(t.counts.closed_by_parent, 2);
	CHECK_EQ_U64(nr_flagged(&t, OP_CLOSED_BY_PARENT), 2);
	CHECK_EQ_U64(op_at(0).flags, 0);
	CHECK_EQ_U64(op_at(0).end_ns, 150);
	CHECK_EQ_U64(op_at(1).flags, OP_CLOSED_BY_PARENT);
	CHECK_EQ_U64(op_at(2).flags, OP_CLOSED_BY_PARENT);
	CHECK_EQ_U64(op_at(1).end_ns, 150);
	CHECK_EQ_U64(op_at(2).end_ns, 150);
	CHECK_EQ_U64(depth_of(&t, 1), 0);
	CHECK_EQ_U64(t.open.len, 0);
	/* The child's own late end changes nothing but a counter. */
	end(&t, 1, 0x20, 170);
	CHECK_EQ_U64(op_at(1).end_ns, 150);
	CHECK_EQ_U64(t.counts.unmatched_ends + t.counts.repeated_ends, 1);
	trace_free(&t);
}

TEST(thread_exit_with_ops_open)
{
	struct trace t;

	trace_init_logged(&t, 1);
	before(&t, 1, 0x10, 100, "A");
	before(&t, 1, 0x20, 110, "B");
	before(&t, 2, 0x30, 120, "other");
	stacks_thread_exit(&t, 1, 300);
	CHECK_EQ_U64(t.counts.thread_exits, 1);
	CHECK_EQ_U64(t.counts.open_at_thread_exit, 2);
	CHECK_EQ_U64(op_at(0).flags, OP_THREAD_EXITED);
	CHECK_EQ_U64(op_at(1).flags, OP_THREAD_EXITED);
	CHECK_EQ_U64(op_at(0).end_ns, 300);
	CHECK_EQ_U64(op_at(1).end_ns, 300);
	CHECK(op_at(2).flags & OP_OPEN);	/* other thread untouched */
	/* The exited thread is forgotten, the other untouched. */
	CHECK_EQ_U64(trace_thread_index(&t, 1), -1);
	CHECK(!trace_thread(&t, 2, NULL)->exited);
	CHECK_EQ_U64(t.counts.threads_seen, 2);
	CHECK_EQ_U64(t.counts.threads_with_ops, 2);
	CHECK_EQ_U64(t.last_ns, 300);
	/* A thread never seen exits: counted, nothing else. */
	stacks_thread_exit(&t, 99, 310);
	CHECK_EQ_U64(t.counts.thread_exits, 2);
	CHECK_EQ_U64(t.counts.open_at_thread_exit, 2);
	CHECK_EQ_U64(trace_thread_index(&t, 99), -1);
	trace_free(&t);
}

TEST(open_at_detach)
{
	struct trace t;

	trace_init_logged(&t, 1);
	before(&t, 1, 0x10, 100, "A");
	before(&t, 1, 0x20, 110, "B");
	end(&t, 1, 0x20, 120);
	before(&t, 2, 0x30, 130, "C");
	stacks_detach(&t, 500);
	CHECK_EQ_U64(t.counts.open_at_detach, 2);
	CHECK_EQ_U64(nr_flagged(&t, OP_OPEN_AT_DETACH), 2);
	CHECK_EQ_U64(op_at(0).flags, OP_OPEN_AT_DETACH);
	CHECK_EQ_U64(op_at(0).end_ns, 500);
	CHECK_EQ_U64(op_at(1).flags, 0);
	CHECK_EQ_U64(op_at(1).end_ns, 120);
	CHECK_EQ_U64(op_at(2).flags, OP_OPEN_AT_DETACH);
	CHECK_EQ_U64(op_at(2).end_ns, 500);
	CHECK_EQ_U64(nr_flagged(&t, OP_OPEN), 0);
	CHECK_EQ_U64(t.open.len, 0);
	/* Detaching twice closes nothing more. */
	stacks_detach(&t, 600);
	CHECK_EQ_U64(t.counts.open_at_detach, 2);
	CHECK_EQ_U64(op_at(0).end_ns, 500);
	trace_free(&t);
}

TEST(before_on_open_address_replaces)
{
	struct trace t;

	trace_init_logged(&t, 1);
	before(&t, 1, 0x10, 100, "old");
	before(&t, 1, 0x10, 120, "new");	/* old's end was lost */
	CHECK_EQ_U64(t.nr_ops, 2);
	CHECK_EQ_U64(op_at(0).flags, OP_REPLACED);
	CHECK_EQ_U64(op_at(0).end_ns, 120);
	CHECK_EQ_U64(t.counts.replaced, 1);
	CHECK_EQ_U64(op_at(1).parent, -1);	/* not a child of the dead op */
	CHECK_EQ_U64(op_at(1).depth, 0);
	CHECK(op_at(1).flags & OP_OPEN);
	end(&t, 1, 0x10, 130);			/* ends the new one */
	CHECK_EQ_U64(op_at(1).end_ns, 130);
	CHECK_EQ_U64(op_at(1).flags, 0);
	CHECK_EQ_U64(op_at(0).end_ns, 120);
	trace_free(&t);
}

/* Reused address below other open ops, and on another thread. */
TEST(replace_below_and_across_threads)
{
	struct trace t;

	trace_init_logged(&t, 1);
	before(&t, 1, 0x10, 100, "root");
	before(&t, 1, 0x20, 110, "lost");
	before(&t, 1, 0x30, 115, "above");
	before(&t, 2, 0x20, 120, "reuse");	/* 0x20 now on thread 2 */
	CHECK(op_at(1).flags & OP_REPLACED);
	CHECK(!(op_at(1).flags & OP_OPEN));
	CHECK_EQ_U64(op_at(1).end_ns, 120);
	/* What was above the lost op cannot stay open on top of nothing. */
	CHECK(!(op_at(2).flags & OP_OPEN));
	CHECK(op_at(2).flags & OP_TRUNCATED);
	CHECK(op_at(0).flags & OP_OPEN);	/* below: untouched */
	CHECK_EQ_U64(depth_of(&t, 1), 1);
	CHECK_EQ_U64(depth_of(&t, 2), 1);
	CHECK_EQ_U64(t.counts.replaced, nr_flagged(&t, OP_REPLACED));
	CHECK_EQ_U64(op_at(3).tid, 2);
	CHECK_EQ_U64(op_at(3).parent, -1);
	before(&t, 1, 0x40, 130, "child");	/* root's child again */
	CHECK_EQ_U64(op_at(4).parent, 0);
	CHECK_EQ_U64(op_at(4).depth, 1);
	trace_free(&t);
}

TEST(name_flags_counted)
{
	struct trace t;

	trace_init_logged(&t, 1);
	before_v(&t, 1, 0x10, 100, "cut", RF_V_CSTR, RF_F_NAME_TRUNCATED);
	before_v(&t, 1, 0x20, 110, "", RF_V_STRING, RF_F_NAME_FAULT);
	before_v(&t, 1, 0x30, 120, "x", RF_V_CSTR,
		 RF_F_NAME_TRUNCATED | RF_F_NAME_FAULT);
	before_v(&t, 1, 0x40, 130, "fine", RF_V_CSTR, 0);
	CHECK_EQ_U64(t.counts.names_truncated, 2);
	CHECK_EQ_U64(t.counts.name_faults, 2);
	CHECK_EQ_U64(op_at(0).flags & (OP_NAME_TRUNCATED | OP_NAME_FAULT),
		     OP_NAME_TRUNCATED);
	CHECK_EQ_U64(op_at(1).flags & (OP_NAME_TRUNCATED | OP_NAME_FAULT),
		     OP_NAME_FAULT);
	CHECK_EQ_U64(op_at(2).flags & (OP_NAME_TRUNCATED | OP_NAME_FAULT),
		     OP_NAME_TRUNCATED | OP_NAME_FAULT);
	CHECK_EQ_U64(op_at(3).flags & (OP_NAME_TRUNCATED | OP_NAME_FAULT), 0);
	/* Name flags are not truncation of the interval. */
	stacks_detach(&t, 200);
	CHECK_EQ_U64(op_at(0).flags & ~(OP_NAME_TRUNCATED | OP_OPEN_AT_DETACH),
		     0);
	trace_free(&t);
}

TEST(per_variant_before_counts)
{
	struct trace t;
	const uint8_t v[] = { RF_V_CSTR, RF_V_STRING, RF_V_STRING,
			      RF_V_SCHEMA, RF_V_SCHEMA, RF_V_SCHEMA,
			      RF_V_DESCRIPTOR_DK, RF_V_STRING_OLD };
	uint64_t expect[RF_V_NR_BEFORE] = { 0 };

	trace_init_logged(&t, 1);
	for (size_t i = 0; i < sizeof(v); i++) {
		before_v(&t, 1, 0x100 + i * 16, 100 + i, "op", v[i], 0);
		end(&t, 1, 0x100 + i * 16, 100 + i);
		expect[v[i]]++;
	}
	for (unsigned k = 0; k < RF_V_NR_BEFORE; k++)
		CHECK_EQ_U64(t.counts.before[k], expect[k]);
	CHECK_EQ_U64(t.counts.before[RF_V_DESCRIPTOR], 0);
	for (size_t i = 0; i < sizeof(v) && i < t.nr_ops; i++)
		CHECK_EQ_U64(op_at(i).variant, v[i]);
	CHECK_EQ_U64(t.counts.ends, sizeof(v));
	CHECK_EQ_U64(t.counts.events, 2 * sizeof(v));
	trace_free(&t);
}

/* What the sinks get: self time (duration minus direct children), the
 * stack as names outermost first, and the parent's id. */
static char last_stack[256];
static uint64_t last_self;
static int64_t last_parent;

static void remember(void *ctx, struct trace *t, const struct closed_op *c)
{
	size_t used = 0;

	(void)ctx;
	for (uint32_t i = 0; i < c->depth; i++)
		used += snprintf(last_stack + used, sizeof(last_stack) - used,
				 "%s%s", i ? ";" : "",
				 names_get(&t->names, c->frames[i]));
	last_self = c->self_ns;
	last_parent = c->parent_id;
}

TEST(closed_ops_carry_self_time_and_stack)
{
	struct trace_sink sink = { .op = remember };
	struct trace t;

	trace_init_logged(&t, 1);
	trace_add_sink(&t, &sink);
	before(&t, 1, 0x10, 100, "step");
	before(&t, 1, 0x20, 110, "linear");
	before(&t, 1, 0x30, 120, "addmm");
	end(&t, 1, 0x30, 150);
	CHECK_STR(last_stack, "step;linear;addmm");
	CHECK_EQ_U64(last_self, 30);
	CHECK_EQ_U64(last_parent, 1);
	before(&t, 1, 0x30, 160, "relu");
	end(&t, 1, 0x30, 165);
	end(&t, 1, 0x20, 200);
	CHECK_STR(last_stack, "step;linear");
	CHECK_EQ_U64(last_self, 90 - 30 - 5);
	end(&t, 1, 0x10, 300);
	CHECK_STR(last_stack, "step");
	CHECK_EQ_U64(last_self, 200 - 90);
	CHECK_EQ_U64(last_parent, -1);
	trace_free(&t);
}

/* rfbpf held a thread (to re-register the callback) inside two open ops:
 * their durations leave the hold out, self time stays where it was, and
 * an op begun after the hold is untouched. */
TEST(hold_is_not_the_jobs_time)
{
	struct trace_sink sink = { .op = remember };
	struct trace t;

	trace_init_logged(&t, 1);
	trace_add_sink(&t, &sink);
	before(&t, 1, 0x10, 100, "outer");
	before(&t, 1, 0x20, 110, "inner");
	stacks_pause(&t, 1, 120, 1120);		/* held 1000 ns */
	before(&t, 1, 0x30, 1130, "after");
	end(&t, 1, 0x30, 1140);
	CHECK_EQ_U64(last_self, 10);
	end(&t, 1, 0x20, 1150);
	CHECK_EQ_U64(op_duration((struct op[]){ op_at(1) }), 40);
	CHECK_EQ_U64(last_self, 30);
	end(&t, 1, 0x10, 1200);
	CHECK_EQ_U64(op_duration((struct op[]){ op_at(0) }), 100);
	CHECK_EQ_U64(last_self, 60);
	stacks_pause(&t, 2, 10, 20);		/* an unknown thread: nothing */
	trace_free(&t);
}

/* A long run keeps only what is open: slots are reused, exited threads
 * are dropped, so the model's size does not grow with the op count. */
TEST(memory_follows_what_is_open)
{
	struct trace t;
	size_t slots_after_warmup = 0;

	trace_init(&t, 1);
	for (uint32_t i = 0; i < 200000; i++) {
		uint32_t tid = 10 + i / 1000;	/* a new thread every 1000 */

		before(&t, tid, 0x10, 10 * i, "outer");
		before(&t, tid, 0x20, 10 * i + 1, "inner");
		end(&t, tid, 0x20, 10 * i + 2);
		end(&t, tid, 0x10, 10 * i + 3);
		if (i % 1000 == 999)
			stacks_thread_exit(&t, tid, 10 * i + 4);
		if (i == 1000)
			slots_after_warmup = t.cap_ops;
	}
	CHECK_EQ_U64(t.nr_ops, 400000);
	CHECK_EQ_U64(t.nr_open, 0);
	CHECK_EQ_U64(t.cap_ops, slots_after_warmup);
	CHECK(t.cap_ops <= 256);
	CHECK_EQ_U64(t.nr_threads, 0);
	CHECK_EQ_U64(t.counts.threads_seen, 200);
	trace_free(&t);
}

TEST(interleaved_threads_keep_separate_stacks)
{
	struct trace t;

	trace_init_logged(&t, 1);
	before(&t, 1, 0x10, 100, "A1");		/* 0 */
	before(&t, 2, 0x20, 101, "X2");		/* 1 */
	before(&t, 1, 0x30, 102, "B1");		/* 2 */
	before(&t, 2, 0x40, 103, "Y2");		/* 3 */
	before(&t, 2, 0x50, 104, "Z2");		/* 4 */
	end(&t, 2, 0x50, 105);
	end(&t, 1, 0x30, 106);
	end(&t, 2, 0x40, 107);
	before(&t, 1, 0x60, 108, "C1");		/* 5 */
	end(&t, 1, 0x60, 109);
	end(&t, 2, 0x20, 110);
	end(&t, 1, 0x10, 111);

	const int32_t parent[] = { -1, -1, 0, 1, 3, 0 };
	const uint16_t depth[] = { 0, 0, 1, 1, 2, 1 };
	const uint32_t tid[] = { 1, 2, 1, 2, 2, 1 };
	const uint64_t stop[] = { 111, 110, 106, 107, 105, 109 };
	CHECK_EQ_U64(t.nr_ops, 6);
	for (size_t i = 0; i < 6 && i < t.nr_ops; i++) {
		CHECK_EQ_U64(op_at(i).parent, parent[i]);
		CHECK_EQ_U64(op_at(i).depth, depth[i]);
		CHECK_EQ_U64(op_at(i).tid, tid[i]);
		CHECK_EQ_U64(op_at(i).end_ns, stop[i]);
		CHECK_EQ_U64(op_at(i).flags, 0);
	}
	CHECK_EQ_U64(t.nr_threads, 2);
	CHECK_EQ_U64(t.counts.async_ends + t.counts.closed_by_parent +
		     t.counts.unmatched_ends, 0);
	trace_free(&t);
}

RUN_TESTS()

/* Children begun after 1000 ns stand for 4 each (fleet mode: sampled at
 * p = 0.25 after its window closed). */
static double weigh_late_children(void *ctx, const struct op *child)
{
	(void)ctx;
	return child->start_ns > 1000 ? 4.0 : 1.0;
}

/* A parent's self time subtracts each child's time as much as the child
 * counts for (trace.child_weight): [0, 10000] with a child [100, 600]
 * recorded in the window and one [2000, 2500] sampled after it has
 * 10000 - 500 - 4 * 500 = 7500 ns of its own, where the unweighed 9000
 * kept the unsampled children's time. */
TEST(self_time_subtracts_weighed_children)
{
	struct trace t;

	trace_init_logged(&t, 1);
	t.child_weight = weigh_late_children;
	before(&t, 1, 0x10, 0, "parent");
	before(&t, 1, 0x20, 100, "early");
	end(&t, 1, 0x20, 600);
	before(&t, 1, 0x30, 2000, "late");
	end(&t, 1, 0x30, 2500);
	end(&t, 1, 0x10, 10000);
	CHECK_EQ_U64(L.closed, 3);
	CHECK_STR(op_name(&t, 0), "parent");
	CHECK_EQ_U64(L.self[0], 7500);
	CHECK_EQ_U64(L.self[1], 500);
	CHECK_EQ_U64(L.self[2], 500);
	/* Unweighed, as one-shot traces keep it. */
	trace_free(&t);
	trace_init_logged(&t, 1);
	before(&t, 1, 0x10, 0, "parent");
	before(&t, 1, 0x30, 2000, "late");
	end(&t, 1, 0x30, 2500);
	end(&t, 1, 0x10, 10000);
	CHECK_EQ_U64(L.self[0], 9500);
	trace_free(&t);
}

/* Threads that start while traced are told from the ones alive at the
 * start, and under sampling a large share of ops on them is reported. */
TEST(threads_started_while_traced_are_counted_and_flagged)
{
	static const uint32_t alive[] = { 1, 2 };
	struct trace t;
	char note[512];

	trace_init(&t, 1);
	t.sample_prob = 0.01;
	trace_threads_alive(&t, alive, 2);
	for (uint32_t i = 0; i < 40; i++) {	/* 40 ops on the old threads */
		before(&t, 1 + i % 2, 0x10, 10 * i, "old");
		end(&t, 1 + i % 2, 0x10, 10 * i + 5);
	}
	before(&t, 7, 0x10, 1000, "new");	/* one op on a new thread */
	end(&t, 7, 0x10, 1005);
	CHECK_EQ_U64(t.counts.threads_seen, 3);
	CHECK_EQ_U64(t.counts.threads_started, 1);
	CHECK_EQ_U64(t.counts.ops_on_started_threads, 1);
	CHECK(!trace_sampler_bias_note(&t, note, sizeof(note)));
	/* A second new thread: 2 of 42 ops is still under a twentieth... */
	before(&t, 8, 0x10, 1100, "new");
	end(&t, 8, 0x10, 1105);
	CHECK(!trace_sampler_bias_note(&t, note, sizeof(note)));
	/* ...a third makes 3 of 43, over it. */
	before(&t, 9, 0x10, 1200, "new");
	end(&t, 9, 0x10, 1205);
	CHECK_EQ_U64(t.counts.threads_started, 3);
	CHECK(trace_sampler_bias_note(&t, note, sizeof(note)));
	CHECK(strstr(note, "3 of 43 sampled ops came from 3 threads") != NULL);
	/* Unsampled, nothing is biased. */
	t.sample_prob = 1.0;
	CHECK(!trace_sampler_bias_note(&t, note, sizeof(note)));
	trace_free(&t);

	/* Threads never listed (unit use, or listing failed): none counted. */
	trace_init(&t, 1);
	t.sample_prob = 0.01;
	before(&t, 5, 0x10, 0, "op");
	CHECK_EQ_U64(t.counts.threads_started, 0);
	trace_free(&t);
}
