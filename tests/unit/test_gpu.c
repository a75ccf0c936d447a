// SPDX-License-Identifier: BSD-2-Clause
/*
 * The loader's GPU logic on hand-built events: joining launches with
 * activity records by correlation id (graphs fan out, strays and old
 * launches are counted), GPU time per op (self and with descendants), and
 * the GPU parts of the Chrome trace and of --gpu-folded. Every expected
 * number follows from the timestamps in build_gpu_trace().
 *
 * Records are not kept by the model: each is joined to its launch and
 * handed to the sinks, so the consumers (op log, aggregate, both stack
 * profiles, the Chrome writer and gpu_log below, which keeps what each
 * record came with) are attached before the first event.
 */
#include <stdint.h>
#include <string.h>
#include "model/aggregate.h"
#include "check.h"
#include "model/demangle.h"
#include "chrome_capture.h"
#include "export/chrome.h"
#include "export/folded.h"
#include "export/table.h"
#include "json_parse.h"
#include "model/profile_sink.h"
#include "model/stack_profile.h"
#include "model/trace.h"
#include "op_log.h"

/* ------------------------------------------------------------------ */
/* A sink that logs GPU records with a copy of their launch.          */

#define GPU_REC_FRAMES 8

struct gpu_rec {
	struct gpu_activity act;
	uint32_t pid;
	const struct gpu_launch *launch_at;	/* ring slot, NULL: none */
	struct gpu_launch launch;	/* as it was then; .frames is below */
	uint32_t frames[GPU_REC_FRAMES];
};

struct gpu_log {
	struct gpu_rec *recs;
	size_t nr;
	struct gpu_launch *calls;	/* API calls as handed on, no frames */
	size_t nr_calls;
};

static void gpu_log_on_gpu(void *ctx, struct trace *t,
			   const struct gpu_done *g)
{
	struct gpu_log *log = ctx;
	struct gpu_rec *r;

	(void)t;
	log->recs = realloc(log->recs, (log->nr + 1) * sizeof(*log->recs));
	if (!log->recs)
		abort();
	r = &log->recs[log->nr++];
	memset(r, 0, sizeof(*r));
	r->act = *g->act;
	r->pid = g->pid;
	r->launch_at = g->launch;
	if (!g->launch)
		return;
	r->launch = *g->launch;
	CHECK(g->launch->depth <= GPU_REC_FRAMES);
	for (uint32_t i = 0; i < g->launch->depth && i < GPU_REC_FRAMES; i++)
		r->frames[i] = g->launch->frames[i];
	r->launch.frames = r->frames;
}

static void gpu_log_on_api(void *ctx, struct trace *t,
			   const struct gpu_launch *call)
{
	struct gpu_log *log = ctx;

	(void)t;
	log->calls = realloc(log->calls,
			     (log->nr_calls + 1) * sizeof(*log->calls));
	if (!log->calls)
		abort();
	log->calls[log->nr_calls] = *call;
	log->calls[log->nr_calls++].frames = NULL;
}

static void gpu_log_free(struct gpu_log *log)
{
	free(log->recs);
	free(log->calls);
}

static void gpu_log_attach(struct trace *t, struct gpu_log *log)
{
	struct trace_sink s = { .gpu = gpu_log_on_gpu,
				.gpu_api = gpu_log_on_api, .ctx = log };

	memset(log, 0, sizeof(*log));
	CHECK(trace_add_sink(t, &s));
}

/* ------------------------------------------------------------------ */
/* The trace under test.                                               */

struct fixture {
	struct trace t;
	struct aggregate agg;
	struct stack_profile ops;	/* profile_sink_ops */
	struct stack_profile kernels;	/* profile_sink_gpu_kernels */
	struct chrome_capture cap;
	struct gpu_log log;
};

static void add_sink(struct trace *t, struct trace_sink s)
{
	CHECK(trace_add_sink(t, &s));
}

/* trace_init and every consumer, before any event. */
static void fixture_init(struct fixture *x, uint32_t pid)
{
	memset(x, 0, sizeof(*x));
	trace_init_logged(&x->t, pid);
	aggregate_init(&x->agg);
	stack_profile_init(&x->ops);
	stack_profile_init(&x->kernels);
	capture_begin(&x->cap);
	add_sink(&x->t, aggregate_sink(&x->agg));
	add_sink(&x->t, profile_sink_ops(&x->ops));
	add_sink(&x->t, profile_sink_gpu_kernels(&x->kernels));
	add_sink(&x->t, chrome_sink(&x->cap.w));
	gpu_log_attach(&x->t, &x->log);
}

/* Ends the Chrome file and returns its text, owned by x. */
static const char *finish_chrome(struct fixture *x)
{
	return capture_finish(&x->cap, &x->t, &x->agg);
}

static void fixture_free(struct fixture *x)
{
	capture_free(&x->cap, &x->t);
	gpu_log_free(&x->log);
	stack_profile_free(&x->kernels);
	stack_profile_free(&x->ops);
	aggregate_free(&x->agg);
	trace_free(&x->t);
}

static void op_begin(struct trace *t, uint32_t tid, uint64_t addr,
		     uint64_t ts, const char *name)
{
	struct rf_event_hdr h = {
		.ts_ns = ts, .rf_addr = addr, .pid = t->pid, .tid = tid,
		.kind = RF_EV_BEFORE, .variant = RF_V_CALLBACK,
		.name_len = strlen(name),
	};
	stacks_before(t, &h, name, 1);
}

static void op_end(struct trace *t, uint32_t tid, uint64_t addr, uint64_t ts)
{
	struct rf_event_hdr h = {
		.ts_ns = ts, .rf_addr = addr, .pid = t->pid, .tid = tid,
		.kind = RF_EV_END, .variant = RF_V_END,
	};
	stacks_end(t, &h);
}

/* As session/session.c does: BPF tagged the call with the open op's address;
 * the agent said when it entered (0: unknown). */
static void api_call(struct trace *t, uint32_t tid, uint64_t op_addr,
		     uint64_t enter, uint64_t exit, uint32_t corr,
		     uint8_t flags, const char *api)
{
	struct rf_gpu_launch_event e = {
		.hdr = { .ts_ns = exit, .rf_addr = op_addr, .pid = t->pid,
			 .tid = tid, .kind = RF_EV_GPU_LAUNCH },
		.correlation_id = corr, .domain = RF_GPU_API_RUNTIME,
		.cbid = 211, .launch_flags = flags, .enter_ns = enter,
	};
	uint64_t oom = t->counts.oom;

	snprintf(e.api_name, sizeof(e.api_name), "%s", api);
	trace_gpu_launch(t, &e);
	CHECK_EQ_U64(t->counts.oom, oom);
}

/* A launch that entered 100 ns before it returned at ts. */
static void launch(struct trace *t, uint32_t tid, uint64_t op_addr,
		   uint64_t ts, uint32_t corr, uint8_t flags)
{
	api_call(t, tid, op_addr, ts - 100, ts, corr, flags,
		 flags & RF_GPU_LAUNCH_F_GRAPH ? "cudaGraphLaunch" :
		 "cudaLaunchKernel");
}

static void activity(struct trace *t, uint32_t kind, uint32_t corr,
		     uint64_t start, uint64_t end, uint32_t stream,
		     const char *name)
{
	struct rf_gpu_activity_event e = {
		.hdr = { .kind = RF_EV_GPU_ACTIVITY, .pid = t->pid },
		.act = { .abi_version = RF_GPU_ABI_VERSION,
			 .size = sizeof(struct rf_gpu_activity), .kind = kind,
			 .correlation_id = corr, .start_ns = start,
			 .end_ns = end, .device_id = 0, .stream_id = stream,
			 .grid = { 4, 1, 1 }, .block = { 128, 1, 1 },
			 .bytes = kind == RF_GPU_ACT_KERNEL ? 0 : 4096,
			 /* copies HtoD, pageable to device; sets, device */
			 .copy_kind = kind == RF_GPU_ACT_MEMCPY ? 1 : 0,
			 .src_kind = kind == RF_GPU_ACT_MEMCPY ? 1 : 0,
			 .dst_kind = kind == RF_GPU_ACT_KERNEL ? 0 : 3 },
	};
	uint64_t oom = t->counts.oom;

	snprintf(e.act.name, sizeof(e.act.name), "%s", name ? name : "");
	trace_gpu_activity(t, &e);
	CHECK_EQ_U64(t->counts.oom, oom);
}

#define ONE RF_GPU_LAUNCH_F_ONE_RECORD

/*
 * Every call enters 100 ns before it returns (launch()), as the agent
 * reports them now: kernels and copies with RF_GPU_LAUNCH_F_ONE_RECORD.
 * Thread 10: "outer" [1000, 9000] (op id 0) holds "inner" [2000, 5000]
 * (op id 1).
 *   launch corr 1 in inner at 3000 -> kernel k1 [10000, 10400] stream 7
 *   cudaStreamSynchronize corr 6 in inner [3500, 4500]: no record
 *   launch corr 2 in outer at 6000 (graph) -> k2 [11000, 11100],
 *                                             k3 [11100, 11300] stream 7
 *   launch corr 3 in outer at 7000 -> memcpy HtoD [12000, 12050] stream 9
 * Thread 20: launch corr 4 with no op open -> k1 [13000, 13010] stream 7
 *            launch corr 5 in an op never recorded (addr 0x999): k4
 *            [14000, 14020]
 * A record with corr 77 that no launch had: k5 [15000, 15005].
 * GPU self: inner 400; outer 100+200+50 = 350. Total: outer 750.
 * Every record arrives after both ops closed (as in a real run, where
 * the agent flushes about once a second).
 */
static void build_gpu_trace(struct fixture *x)
{
	struct trace *t = &x->t;

	fixture_init(x, 4242);
	strcpy(t->process_name, "python3");
	t->gpu.counts.agent_seen = true;
	op_begin(t, 10, 0xa0, 1000, "outer");
	trace_name_thread(t, trace_thread(t, 10, NULL), "main");
	op_begin(t, 10, 0xb0, 2000, "inner");
	launch(t, 10, 0xb0, 3000, 1, ONE);
	api_call(t, 10, 0xb0, 3500, 4500, 6, RF_GPU_LAUNCH_F_SYNC,
		 "cudaStreamSynchronize");
	op_end(t, 10, 0xb0, 5000);
	launch(t, 10, 0xa0, 6000, 2, RF_GPU_LAUNCH_F_GRAPH);
	launch(t, 10, 0xa0, 7000, 3, ONE);
	op_end(t, 10, 0xa0, 9000);
	launch(t, 20, 0, 9500, 4, ONE);
	launch(t, 20, 0x999, 9600, 5, ONE);
	activity(t, RF_GPU_ACT_KERNEL, 1, 10000, 10400, 7, "k1");
	activity(t, RF_GPU_ACT_KERNEL, 2, 11000, 11100, 7, "k2");
	activity(t, RF_GPU_ACT_KERNEL, 2, 11100, 11300, 7, "k3");
	activity(t, RF_GPU_ACT_MEMCPY, 3, 12000, 12050, 9, NULL);
	activity(t, RF_GPU_ACT_KERNEL, 4, 13000, 13010, 7, "k1");
	activity(t, RF_GPU_ACT_KERNEL, 5, 14000, 14020, 7, "k4");
	activity(t, RF_GPU_ACT_KERNEL, 77, 15000, 15005, 7, "k5");
	gpu_detach(&t->gpu);
}

/* The id of a name in t's table, or UINT32_MAX (the table unchanged). */
static uint32_t name_id(const struct trace *t, const char *name)
{
	for (size_t i = 0; i < t->names.nr; i++)
		if (!strcmp(t->names.strs[i], name))
			return i;
	return UINT32_MAX;
}

/* The launch of record r ran in the op whose stack is want[0..n). */
static void check_launch_stack(const struct trace *t, const struct gpu_rec *r,
			       const char *const *want, uint32_t n)
{
	CHECK(r->launch_at != NULL);
	CHECK_EQ_U64(r->launch.depth, n);
	CHECK_EQ_U64(r->launch.op_name, name_id(t, want[n - 1]));
	for (uint32_t i = 0; i < n && i < r->launch.depth; i++)
		CHECK_STR(names_get(&t->names, r->frames[i]), want[i]);
	CHECK(!r->launch.outside_ops);
}

TEST(join_by_correlation)
{
	struct fixture x;
	const struct gpu_counts *c = &x.t.gpu.counts;
	const struct gpu_rec *r;
	static const char *const in_inner[] = { "outer", "inner" };
	static const char *const in_outer[] = { "outer" };

	build_gpu_trace(&x);
	/* 5 launches waited (the sync did not), none is left after
	 * detach; records are handed on, 7 reached the sinks. */
	CHECK_EQ_U64(gpu_pending(&x.t.gpu), 0);
	CHECK_EQ_U64(x.t.gpu.oldest, UINT32_MAX);
	CHECK_EQ_U64(x.t.gpu.pending.len, 0);
	CHECK_EQ_U64(x.log.nr, 7);
	if (x.log.nr != 7) {
		fixture_free(&x);
		return;
	}
	r = x.log.recs;
	/* Was: gpu_activity_op() == the op's index. Now the launch carries
	 * that op's name and whole stack, the op itself long closed. */
	check_launch_stack(&x.t, &r[0], in_inner, 2);
	CHECK_EQ_U64(r[0].launch.correlation_id, 1);
	/* The graph launch fans out to both of its kernels. */
	check_launch_stack(&x.t, &r[1], in_outer, 1);
	check_launch_stack(&x.t, &r[2], in_outer, 1);
	CHECK(r[1].launch_at == r[2].launch_at);
	CHECK_EQ_U64(r[2].launch.correlation_id, 2);
	CHECK_EQ_U64(r[2].launch.ts_ns, 6000);
	CHECK_EQ_U64(r[1].launch.activities, 1);
	CHECK_EQ_U64(r[2].launch.activities, 2);
	check_launch_stack(&x.t, &r[3], in_outer, 1);
	CHECK_EQ_U64(r[3].launch.correlation_id, 3);
	CHECK_STR(names_get(&x.t.names, r[3].act.name),
		  "Memcpy HtoD (Pageable -> Device)");
	CHECK_STR(names_get(&x.t.names, r[0].act.name), "k1");
	/* Joined to a launch, but no op: outside any, or not recorded. */
	CHECK(r[4].launch_at != NULL);
	CHECK_EQ_U64(r[4].launch.depth, 0);
	CHECK_EQ_U64(r[4].launch.op_name, UINT32_MAX);
	CHECK(r[4].launch.outside_ops);
	CHECK(r[5].launch_at != NULL);
	CHECK_EQ_U64(r[5].launch.depth, 0);
	CHECK_EQ_U64(r[5].launch.op_name, UINT32_MAX);
	CHECK(!r[5].launch.outside_ops);
	CHECK(r[6].launch_at == NULL);
	for (int i = 0; i < 7; i++)
		CHECK_EQ_U64(r[i].pid, 4242);
	CHECK_EQ_U64(c->launches, 5);
	CHECK_EQ_U64(c->syncs, 1);
	CHECK_EQ_U64(c->activities, 7);
	CHECK_EQ_U64(c->activities_unmatched, 1);
	CHECK_EQ_U64(c->launches_outside_ops, 1);
	CHECK_EQ_U64(c->launches_op_unknown, 1);
	CHECK_EQ_U64(c->launches_unmatched_at_end, 0);
	/* The ops closed normally, before any record came. */
	CHECK_EQ_U64(L.closed, 2);
	CHECK_STR(names_get(&x.t.names, op_at(0).name), "outer");
	CHECK_EQ_U64(op_at(1).parent, 0);
	fixture_free(&x);
}

/* A set's record carries the id of the driver call nested in the runtime
 * call; the launch waits under both ids and is counted once. */
TEST(join_by_nested_driver_id)
{
	struct trace t;
	struct gpu_log log;
	struct rf_gpu_launch_event e = {
		.hdr = { .ts_ns = 100, .rf_addr = 0, .tid = 1,
			 .kind = RF_EV_GPU_LAUNCH },
		.correlation_id = 5, .driver_correlation_id = 6,
		.domain = RF_GPU_API_RUNTIME, .api_name = "cudaMemsetAsync",
	};
	const struct gpu_launch_site site = {
		.pid = 1, .tid = 1, .thread_name = UINT32_MAX,
	};

	const struct gpu_launch *first;

	trace_init(&t, 1);
	gpu_log_attach(&t, &log);
	first = gpu_add_launch(&t.gpu, &t.names, 100, &site, &e);
	CHECK(first == &t.gpu.slots[0]);
	e.correlation_id = 7;		/* another, never matched */
	e.driver_correlation_id = 8;
	CHECK(gpu_add_launch(&t.gpu, &t.names, 200, &site, &e));
	activity(&t, RF_GPU_ACT_MEMSET, 6, 300, 400, 1, NULL);
	/* Joined to the first launch, the one with runtime id 5. */
	CHECK_EQ_U64(log.nr, 1);
	if (log.nr == 1) {
		CHECK(log.recs[0].launch_at == first);
		CHECK_EQ_U64(log.recs[0].launch.correlation_id, 5);
		CHECK_EQ_U64(log.recs[0].launch.driver_correlation_id, 6);
		CHECK_EQ_U64(log.recs[0].act.correlation_id, 6);
	}
	CHECK_EQ_U64(t.gpu.counts.activities_unmatched, 0);
	gpu_detach(&t.gpu);
	CHECK_EQ_U64(t.gpu.counts.launches_unmatched_at_end, 1);
	gpu_log_free(&log);
	trace_free(&t);
}

TEST(old_launches_are_evicted_and_counted)
{
	struct trace t;
	struct gpu_log log;

	trace_init(&t, 1);
	gpu_log_attach(&t, &log);
	launch(&t, 1, 0, 1000, 1, 0);			/* never matched */
	launch(&t, 1, 0, 2000, 2, 0);
	activity(&t, RF_GPU_ACT_KERNEL, 2, 3000, 3100, 1, "k");
	/* trace_gpu_launch evicts as it goes, as session/session.c's loop did. */
	launch(&t, 1, 0, GPU_PENDING_NS + 5000, 3, 0);	/* recent */
	gpu_evict(&t.gpu, GPU_PENDING_NS + 5000);
	CHECK_EQ_U64(t.gpu.counts.launches_evicted_unmatched, 1);
	CHECK_EQ_U64(t.gpu.pending.len, 1);
	/* The two old ones (flags 0: an agent that does not say how many
	 * records, so the matched one waited too) left; the recent one
	 * remains. */
	CHECK_EQ_U64(gpu_pending(&t.gpu), 1);
	CHECK(t.gpu.oldest == t.gpu.newest && t.gpu.oldest != UINT32_MAX);
	if (t.gpu.oldest != UINT32_MAX)
		CHECK_EQ_U64(t.gpu.slots[t.gpu.oldest].correlation_id, 3);
	/* A record for an evicted launch no longer joins: counted. */
	activity(&t, RF_GPU_ACT_KERNEL, 2, 4000, 4100, 1, "k");
	CHECK_EQ_U64(t.gpu.counts.activities_unmatched, 1);
	CHECK_EQ_U64(log.nr, 2);
	if (log.nr == 2) {
		CHECK(log.recs[0].launch_at != NULL);
		CHECK(log.recs[1].launch_at == NULL);
	}
	/* At detach the recent one, still without records, is counted. */
	gpu_detach(&t.gpu);
	CHECK_EQ_U64(t.gpu.counts.launches_unmatched_at_end, 1);
	gpu_log_free(&log);
	trace_free(&t);
}

TEST(many_launches_evict_in_one_sweep)
{
	struct trace t;

	trace_init(&t, 1);
	for (uint32_t i = 1; i <= 5000; i++)
		launch(&t, 1, 0, i, i, 0);
	launch(&t, 1, 0, GPU_PENDING_NS + 10000, 9999, 0);
	gpu_evict(&t.gpu, GPU_PENDING_NS + 10000);
	CHECK_EQ_U64(t.gpu.counts.launches_evicted_unmatched, 5000);
	CHECK_EQ_U64(t.gpu.pending.len, 1);
	CHECK(u64map_get(&t.gpu.pending, 9999 + 1) != NULL);
	CHECK_EQ_U64(gpu_pending(&t.gpu), 1);
	/* The freed slots are taken again before the slots grow. */
	for (uint32_t i = 1; i <= 5000; i++)
		launch(&t, 1, 0, GPU_PENDING_NS + 10000 + i, 10000 + i, 0);
	CHECK_EQ_U64(gpu_pending(&t.gpu), 5001);
	CHECK_EQ_U64(t.gpu.cap, 8192);
	trace_free(&t);
}

/* A steady stream over twice the pending window: only the last window's
 * launches that still wait for a record stay pending, and each launch is
 * looked at once (a sweep of the whole map per launch took minutes here).
 * With one_record (the agent's RF_GPU_LAUNCH_F_ONE_RECORD) a launch
 * leaves at its record, so memory follows what is pending; without it
 * (an older agent) every launch of the window waits. */
static void steady_launches(bool one_record)
{
	const uint64_t step = 300000;		/* a launch every 300 us */
	const uint32_t n = 200000;		/* 60 s of trace time */
	struct trace t;
	uint64_t in_window = 0, unmatched_in_window = 0, expect_pending;

	trace_init(&t, 1);
	for (uint32_t i = 1; i <= n; i++) {
		launch(&t, 1, 0, i * step, i, one_record ? ONE : 0);
		if (i % 2)		/* half of them get their record */
			activity(&t, RF_GPU_ACT_KERNEL, i, i * step + 10,
				 i * step + 20, 1, "k");
		gpu_evict(&t.gpu, i * step);
	}
	for (uint32_t i = 1; i <= n; i++) {
		bool in = i * step >= n * step - GPU_PENDING_NS;

		in_window += in;
		unmatched_in_window += in && !(i % 2);
	}
	expect_pending = one_record ? unmatched_in_window : in_window;
	CHECK_EQ_U64(gpu_pending(&t.gpu), expect_pending);
	/* One map entry per pending launch (kernels have no driver id). */
	CHECK_EQ_U64(t.gpu.pending.len, expect_pending);
	/* The slots are sized by what is pending, not by the run. */
	CHECK(t.gpu.cap < 2 * (expect_pending + 1));
	/* Of the evicted, the ones without a record are counted. */
	CHECK_EQ_U64(t.gpu.counts.launches_evicted_unmatched,
		     (n - in_window) / 2);
	CHECK_EQ_U64(t.gpu.counts.activities_unmatched, 0);
	trace_free(&t);
}

TEST(steady_launches_keep_a_bounded_window)
{
	steady_launches(false);
}

TEST(steady_launches_leave_at_their_record)
{
	steady_launches(true);
}

/* Launches that make one record leave when it is in (under both of a
 * set's ids), so a second record with the same id joins nothing and is
 * counted; a graph launch and a launch that does not say wait for more
 * until evicted; a sync never waits. */
TEST(launches_leave_once_their_records_are_in)
{
	struct trace t;
	struct gpu_log log;
	struct rf_gpu_launch_event set = {
		.hdr = { .ts_ns = 1000, .tid = 1, .kind = RF_EV_GPU_LAUNCH },
		.correlation_id = 40, .driver_correlation_id = 41,
		.domain = RF_GPU_API_RUNTIME, .api_name = "cudaMemsetAsync",
		.launch_flags = ONE,
	};

	trace_init(&t, 1);
	gpu_log_attach(&t, &log);
	launch(&t, 1, 0, 1000, 1, ONE);
	launch(&t, 1, 0, 1100, 2, RF_GPU_LAUNCH_F_GRAPH);
	launch(&t, 1, 0, 1200, 3, 0);
	trace_gpu_launch(&t, &set);
	api_call(&t, 1, 0, 1300, 1400, 4, RF_GPU_LAUNCH_F_SYNC,
		 "cudaDeviceSynchronize");
	CHECK_EQ_U64(gpu_pending(&t.gpu), 4);
	CHECK_EQ_U64(t.gpu.pending.len, 5);	/* the set waits twice */
	activity(&t, RF_GPU_ACT_KERNEL, 1, 2000, 2100, 7, "k");
	CHECK_EQ_U64(gpu_pending(&t.gpu), 3);
	CHECK(!u64map_get(&t.gpu.pending, 1 + 1));
	activity(&t, RF_GPU_ACT_MEMSET, 41, 2200, 2300, 7, NULL);
	CHECK_EQ_U64(gpu_pending(&t.gpu), 2);
	CHECK_EQ_U64(t.gpu.pending.len, 2);	/* both of its ids left */
	for (int k = 0; k < 3; k++)
		activity(&t, RF_GPU_ACT_KERNEL, 2, 3000 + k, 3001 + k, 7, "g");
	activity(&t, RF_GPU_ACT_KERNEL, 3, 3100, 3200, 7, "k");
	CHECK_EQ_U64(gpu_pending(&t.gpu), 2);
	/* Every record was joined to its launch, as it came. */
	CHECK_EQ_U64(log.nr, 6);
	for (size_t r = 0; r < log.nr; r++)
		CHECK(log.recs[r].launch_at != NULL);
	CHECK_EQ_U64(t.gpu.counts.activities_unmatched, 0);
	/* A record for a launch that already had its one: not joined. */
	activity(&t, RF_GPU_ACT_KERNEL, 1, 4000, 4100, 7, "k");
	CHECK_EQ_U64(t.gpu.counts.activities_unmatched, 1);
	/* The freed slots are reused before the slots grow. */
	launch(&t, 1, 0, 5000, 5, ONE);
	launch(&t, 1, 0, 5100, 6, ONE);
	CHECK_EQ_U64(t.gpu.cap, 256);
	CHECK(t.gpu.newest < 4);
	/* The graph and the unsaid launch leave at eviction, matched (not
	 * counted); the two new ones, unmatched. */
	gpu_evict(&t.gpu, GPU_PENDING_NS + 6000);
	CHECK_EQ_U64(gpu_pending(&t.gpu), 0);
	CHECK_EQ_U64(t.gpu.pending.len, 0);
	CHECK_EQ_U64(t.gpu.counts.launches_evicted_unmatched, 2);
	CHECK_EQ_U64(t.gpu.counts.launches, 6);
	CHECK_EQ_U64(t.gpu.counts.syncs, 1);
	gpu_detach(&t.gpu);
	CHECK_EQ_U64(t.gpu.counts.launches_unmatched_at_end, 0);
	gpu_log_free(&log);
	trace_free(&t);
}

/* Every call reaches the sinks as it comes, with its enter and exit, the
 * id of the op it ran in (-1: none recorded) and its cbid; a sync too. */
TEST(calls_carry_enter_time_and_op)
{
	struct fixture x;
	const struct gpu_launch *c = NULL;

	build_gpu_trace(&x);
	CHECK_EQ_U64(x.log.nr_calls, 6);
	if (x.log.nr_calls == 6)
		c = x.log.calls;
	for (size_t i = 0; c && i < 6; i++)
		CHECK_EQ_U64(c[i].cbid, 211);
	if (c) {
		/* In inner (op id 1), entered at 2900. */
		CHECK_EQ_U64(c[0].correlation_id, 1);
		CHECK_EQ_U64(c[0].enter_ns, 2900);
		CHECK_EQ_U64(c[0].ts_ns, 3000);
		CHECK_EQ_U64(c[0].op_id, 1);
		CHECK_STR(names_get(&x.t.names, c[0].op_name), "inner");
		CHECK_EQ_U64(c[0].tid, 10);
		CHECK_EQ_U64(c[0].pid, 4242);
		/* The sync, in inner too. */
		CHECK_EQ_U64(c[1].correlation_id, 6);
		CHECK(c[1].flags & RF_GPU_LAUNCH_F_SYNC);
		CHECK_EQ_U64(c[1].enter_ns, 3500);
		CHECK_EQ_U64(c[1].ts_ns, 4500);
		CHECK_EQ_U64(c[1].op_id, 1);
		CHECK_STR(names_get(&x.t.names, c[1].api_name),
			  "cudaStreamSynchronize");
		/* In outer (op id 0). */
		CHECK_EQ_U64(c[2].op_id, 0);
		CHECK_EQ_U64(c[3].op_id, 0);
		/* Outside any op, and in an op never recorded. */
		CHECK_EQ_U64(c[4].op_id, (uint64_t)-1);
		CHECK(c[4].outside_ops);
		CHECK_EQ_U64(c[5].op_id, (uint64_t)-1);
		CHECK(!c[5].outside_ops);
	}
	fixture_free(&x);
}

/* An enter the agent could not give (0), or one after the exit, is
 * unknown. */
TEST(unknown_enter_times)
{
	struct trace t;
	struct gpu_log log;

	trace_init(&t, 1);
	gpu_log_attach(&t, &log);
	api_call(&t, 1, 0, 0, 1000, 1, ONE, "cudaLaunchKernel");
	api_call(&t, 1, 0, 1500, 1200, 2, ONE, "cudaLaunchKernel");
	CHECK_EQ_U64(log.nr_calls, 2);
	if (log.nr_calls == 2) {
		CHECK_EQ_U64(log.calls[0].enter_ns, 0);
		CHECK_EQ_U64(log.calls[1].enter_ns, 0);
		CHECK_EQ_U64(log.calls[1].ts_ns, 1200);
	}
	gpu_log_free(&log);
	trace_free(&t);
}

/* One kernel record named name (the agent's copy: cut to 255 bytes and
 * flagged when longer), CUPTI's string at addr (0: not said, as an agent
 * from before name_addr); what the model made of it. */
static struct gpu_activity kernel_at(struct trace *t, const char *name,
				     uint64_t addr)
{
	struct rf_gpu_activity_event e = {
		.hdr = { .kind = RF_EV_GPU_ACTIVITY },
		.act = { .abi_version = RF_GPU_ABI_VERSION,
			 .size = sizeof(struct rf_gpu_activity),
			 .kind = RF_GPU_ACT_KERNEL, .correlation_id = 1,
			 .name_len = strlen(name), .name_addr = addr },
	};
	const struct gpu_launch *l;
	struct gpu_activity a;

	snprintf(e.act.name, sizeof(e.act.name), "%s", name);
	if (e.act.name_len >= RF_GPU_NAME_MAX)
		e.hdr.flags |= RF_F_NAME_TRUNCATED;
	CHECK(gpu_add_activity(&t->gpu, &t->names, &e, &a, &l));
	return a;
}

static struct gpu_activity kernel_named(struct trace *t, const char *name)
{
	return kernel_at(t, name, 0);
}

/* A reader of "the job's" memory: this process's, counting its reads;
 * fails while reads_fail is set. */
static unsigned reads;
static bool reads_fail;

static bool read_here(void *ctx, uint32_t pid, uint64_t addr, char *buf,
		      size_t len)
{
	(void)ctx;
	(void)pid;
	reads++;
	if (reads_fail)
		return false;
	memcpy(buf, (const void *)(uintptr_t)addr, len);
	return true;
}

#define LONG_NS(i) "17long_namespace_" #i
#define LONG_KERNEL(last) "_ZN2at6native" LONG_NS(00) LONG_NS(01) \
	LONG_NS(02) LONG_NS(03) LONG_NS(04) LONG_NS(05) LONG_NS(06) \
	LONG_NS(07) LONG_NS(08) LONG_NS(09) LONG_NS(10) LONG_NS(11) \
	LONG_NS(12) LONG_NS(last) "6kernelEPKfPfi"
#define LONG_SHOWN(last) "at::native::long_namespace_00::" \
	"long_namespace_01::long_namespace_02::long_namespace_03::" \
	"long_namespace_04::long_namespace_05::long_namespace_06::" \
	"long_namespace_07::long_namespace_08::long_namespace_09::" \
	"long_namespace_10::long_namespace_11::long_namespace_12::" \
	"long_namespace_" #last "::kernel(float const*, float*, int)"

/* A name the event cut is read whole where CUPTI keeps it, once per
 * address, and demangled; read again when another name of the same
 * length comes to that address; left cut (and counted) when it cannot be
 * read, when no address is given, or with no reader. */
TEST(cut_kernel_names_are_read_whole)
{
	char job[sizeof(LONG_KERNEL(13))] = LONG_KERNEL(13);
	uint64_t at = (uintptr_t)job;
	struct trace t;
	struct gpu_activity a;

	trace_init(&t, 1);
	reads = 0;
	reads_fail = false;
	a = kernel_at(&t, job, at);		/* no reader yet */
	CHECK(a.name_truncated);
	CHECK_EQ_U64(t.gpu.counts.names_truncated, 1);
	t.gpu.read_name = read_here;
	CHECK(strlen(job) > RF_GPU_NAME_MAX);
	a = kernel_at(&t, job, at);
	CHECK(!a.name_truncated);
	CHECK_STR(names_get(&t.names, a.name), LONG_SHOWN(13));
	CHECK_STR(names_get(&t.names, a.mangled_name), job);
	a = kernel_at(&t, job, at);
	CHECK_STR(names_get(&t.names, a.name), LONG_SHOWN(13));
	CHECK_EQ_U64(reads, 1);			/* remembered by address */
	CHECK_EQ_U64(t.gpu.counts.names_read_whole, 2);
	/* Another kernel's name at the same address (a module unloaded,
	 * another loaded): its end differs, its first 255 bytes too. */
	memcpy(job, LONG_KERNEL(14), sizeof(job));
	memcpy(job + 13, "17long_namespace_99", 19);
	a = kernel_at(&t, job, at);
	CHECK(!a.name_truncated);
	CHECK_EQ_U64(reads, 2);
	CHECK(strstr(names_get(&t.names, a.name), "long_namespace_14::kernel"));
	/* Unreadable, or no address: cut, flagged and counted. */
	reads_fail = true;
	memcpy(job, LONG_KERNEL(15), sizeof(job));
	a = kernel_at(&t, job, at + 0);
	CHECK(a.name_truncated);
	CHECK_EQ_U64(strlen(names_get(&t.names, a.name)), RF_GPU_NAME_MAX - 1);
	reads_fail = false;
	a = kernel_at(&t, job, 0);
	CHECK(a.name_truncated);
	CHECK_EQ_U64(t.gpu.counts.names_truncated, 3);
	CHECK_EQ_U64(t.gpu.counts.names_read_whole, 3);
	trace_free(&t);
}

TEST(cxx_demangle_symbols_only)
{
	char *d = cxx_demangle("_Z10gemm_tiledPKfS0_Pfiii");

	CHECK_STR(d, "gemm_tiled(float const*, float const*, float*, int, "
		  "int, int)");
	free(d);
	d = cxx_demangle("_ZN2at6native29vectorized_elementwise_kernelILi4E"
			 "EEvi");
	CHECK_STR(d, "void at::native::vectorized_elementwise_kernel<4>"
		  "(int)");
	free(d);
	/* Not symbols: a bare type would demangle ("f": float). */
	CHECK(cxx_demangle("f") == NULL);
	CHECK(cxx_demangle("triton_poi_fused_add_0") == NULL);
	CHECK(cxx_demangle("") == NULL);
	CHECK(cxx_demangle(NULL) == NULL);
	/* Not valid: cut inside a name. */
	CHECK(cxx_demangle("_Z10gemm_ti") == NULL);
}

/* Kernels are shown demangled (the mangled name kept), once per distinct
 * name; names that are not C++ symbols, or cut too short to demangle,
 * are shown as they came. */
TEST(kernel_names_are_demangled)
{
	struct trace t;
	struct gpu_activity a;
	char cut[400];
	size_t names_before;

	trace_init(&t, 1);
	a = kernel_named(&t, "_Z10gemm_tiledPKfS0_Pfiii");
	CHECK_STR(names_get(&t.names, a.name), "gemm_tiled(float const*, "
		  "float const*, float*, int, int, int)");
	CHECK_STR(names_get(&t.names, a.mangled_name),
		  "_Z10gemm_tiledPKfS0_Pfiii");
	CHECK(!a.name_truncated);
	names_before = t.names.nr;
	a = kernel_named(&t, "_Z10gemm_tiledPKfS0_Pfiii");
	CHECK_EQ_U64(t.names.nr, names_before);		/* remembered */
	CHECK_STR(names_get(&t.names, a.name), "gemm_tiled(float const*, "
		  "float const*, float*, int, int, int)");
	a = kernel_named(&t, "triton_poi_fused_add_0");
	CHECK_STR(names_get(&t.names, a.name), "triton_poi_fused_add_0");
	CHECK_EQ_U64(a.mangled_name, UINT32_MAX);
	a = kernel_named(&t, "f");
	CHECK_STR(names_get(&t.names, a.name), "f");
	/* A templated name past 255 bytes arrives cut in the middle of a
	 * name: no demangling, the cut text kept and flagged. */
	snprintf(cut, sizeof(cut), "_ZN2at6native18elementwise_kernelILi128"
		 "ELi4EZNS0_%s", "");
	memset(cut + strlen(cut), 'x', sizeof(cut) - 1 - strlen(cut));
	cut[sizeof(cut) - 1] = 0;
	cut[60] = '9';		/* "9xxx...": a 9-letter name, cut */
	a = kernel_named(&t, cut);
	CHECK(a.name_truncated);
	CHECK_EQ_U64(strlen(names_get(&t.names, a.name)), RF_GPU_NAME_MAX - 1);
	CHECK(!strncmp(names_get(&t.names, a.name), cut, RF_GPU_NAME_MAX - 1));
	CHECK_EQ_U64(a.mangled_name, UINT32_MAX);
	CHECK_EQ_U64(t.gpu.counts.names_truncated, 1);
	trace_free(&t);
}

/* One copy or set record of these kinds; its name. */
static const char *copy_named(struct trace *t, uint32_t kind, uint8_t copy,
			      uint8_t src, uint8_t dst)
{
	struct rf_gpu_activity_event e = {
		.hdr = { .kind = RF_EV_GPU_ACTIVITY },
		.act = { .abi_version = RF_GPU_ABI_VERSION,
			 .size = sizeof(struct rf_gpu_activity), .kind = kind,
			 .correlation_id = 1, .copy_kind = copy,
			 .src_kind = src, .dst_kind = dst },
	};
	const struct gpu_launch *l;
	struct gpu_activity a;

	CHECK(gpu_add_activity(&t->gpu, &t->names, &e, &a, &l));
	CHECK_EQ_U64(a.mangled_name, UINT32_MAX);
	return names_get(&t->names, a.name);
}

/* As Kineto names them, from CUPTI's CUpti_ActivityMemcpyKind and
 * CUpti_ActivityMemoryKind values (cupti_activity.h). */
TEST(copies_and_sets_are_named_as_kineto_does)
{
	struct trace t;
	static const char *const memory[] = {
		"Unknown", "Pageable", "Pinned", "Device", "Array", "Managed",
		"Device Static", "Managed Static",
	};
	static const char *const copies[] = {
		"<unknown>", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD",
		"DtoA", "DtoD", "HtoH", "PtoP",
	};
	char want[96];

	trace_init(&t, 1);
	CHECK_STR(copy_named(&t, RF_GPU_ACT_MEMCPY, 1, 1, 3),
		  "Memcpy HtoD (Pageable -> Device)");
	CHECK_STR(copy_named(&t, RF_GPU_ACT_MEMCPY, 2, 3, 2),
		  "Memcpy DtoH (Device -> Pinned)");
	CHECK_STR(copy_named(&t, RF_GPU_ACT_MEMSET, 0, 0, 3),
		  "Memset (Device)");
	for (uint8_t k = 0; k < 8; k++) {
		snprintf(want, sizeof(want), "Memset (%s)", memory[k]);
		CHECK_STR(copy_named(&t, RF_GPU_ACT_MEMSET, 0, 0, k), want);
		snprintf(want, sizeof(want), "Memcpy DtoD (%s -> %s)",
			 memory[k], memory[7 - k]);
		CHECK_STR(copy_named(&t, RF_GPU_ACT_MEMCPY, 8, k, 7 - k),
			  want);
	}
	for (uint8_t k = 0; k < 11; k++) {
		snprintf(want, sizeof(want), "Memcpy %s (Pinned -> Managed)",
			 copies[k]);
		CHECK_STR(copy_named(&t, RF_GPU_ACT_MEMCPY, k, 2, 5), want);
	}
	/* Values this CUPTI does not have. */
	CHECK_STR(copy_named(&t, RF_GPU_ACT_MEMCPY, 11, 8, 200),
		  "Memcpy <unknown> (Unrecognized -> Unrecognized)");
	trace_free(&t);
}

/* The op profile's row with this stack (names outermost first). */
static const struct stack_row *stack_row_of(const struct trace *t,
					     const struct stack_profile *p,
					     const char *const *frames,
					     uint32_t depth)
{
	for (size_t i = 0; i < p->nr; i++) {
		const struct stack_row *r = &p->rows[i];
		uint32_t k = 0;

		if (r->depth != depth)
			continue;
		while (k < depth &&
		       !strcmp(names_get(&t->names, r->frames[k]), frames[k]))
			k++;
		if (k == depth)
			return r;
	}
	return NULL;
}

static void count_sync_records(void *ctx, struct trace *t,
			       const struct gpu_done *g)
{
	struct gpu_rec *r = ctx;

	(void)t;
	r->act = *g->act;
	r->launch_at = g->launch;
	if (g->launch)
		r->launch = *g->launch;
	r->pid++;		/* how many came */
}

/* With sync records, a sync call waits for its record like a launch:
 * the record goes to gpu_sync (not gpu: it is no GPU work) joined to
 * the call and its op, on its context's device; a call whose record
 * never comes is a sync without record, not a launch without one. */
TEST(sync_records_join_their_call)
{
	struct gpu_rec got = { 0 };
	struct gpu_log log;
	struct trace t;
	struct rf_gpu_activity_event e = {
		.hdr = { .kind = RF_EV_GPU_ACTIVITY },
		.act = { .abi_version = RF_GPU_ABI_VERSION,
			 .size = sizeof(struct rf_gpu_activity),
			 .kind = RF_GPU_ACT_KERNEL, .correlation_id = 1,
			 .start_ns = 1500, .end_ns = 1600, .device_id = 2,
			 .context_id = 5, .stream_id = 7 },
	};
	struct trace_sink s = { .gpu_sync = count_sync_records, .ctx = &got };

	trace_init(&t, 1);
	gpu_log_attach(&t, &log);
	CHECK(trace_add_sink(&t, &s));
	t.gpu.sync_records = true;
	op_begin(&t, 1, 0xa0, 1000, "scope");
	launch(&t, 1, 0xa0, 1100, 1, ONE);
	api_call(&t, 1, 0xa0, 2000, 3000, 2, RF_GPU_LAUNCH_F_SYNC,
		 "cudaStreamSynchronize");
	api_call(&t, 1, 0xa0, 3100, 3200, 3, RF_GPU_LAUNCH_F_SYNC,
		 "cudaDeviceSynchronize");
	op_end(&t, 1, 0xa0, 4000);
	CHECK_EQ_U64(t.gpu.counts.syncs, 2);
	CHECK_EQ_U64(t.gpu.counts.launches, 1);
	CHECK_EQ_U64(gpu_pending(&t.gpu), 3);
	e.hdr.pid = t.pid;
	trace_gpu_activity(&t, &e);		/* the kernel: context 5 is GPU 2 */
	e.act.kind = RF_GPU_ACT_SYNC;
	e.act.correlation_id = 2;
	e.act.device_id = 0;			/* sync records name none */
	e.act.sync_type = RF_GPU_SYNC_STREAM;
	e.act.start_ns = 2100;
	e.act.end_ns = 2900;
	trace_gpu_activity(&t, &e);
	CHECK_EQ_U64(got.pid, 1);
	CHECK(got.launch_at != NULL);
	CHECK_EQ_U64(got.launch.correlation_id, 2);
	CHECK_STR(names_get(&t.names, got.launch.op_name), "scope");
	CHECK_EQ_U64(got.act.device_id, 2);
	CHECK_STR(names_get(&t.names, got.act.name), "Stream Sync");
	CHECK_EQ_U64(log.nr, 1);		/* the kernel only */
	CHECK_EQ_U64(t.gpu.counts.sync_records, 1);
	CHECK_EQ_U64(t.gpu.counts.activities, 2);
	CHECK_EQ_U64(gpu_pending(&t.gpu), 1);	/* it left with its record */
	gpu_detach(&t.gpu);
	CHECK_EQ_U64(t.gpu.counts.syncs_without_record, 1);
	CHECK_EQ_U64(t.gpu.counts.launches_unmatched_at_end, 0);
	CHECK_EQ_U64(t.gpu.counts.activities_unmatched, 0);
	gpu_log_free(&log);
	trace_free(&t);
}

TEST(gpu_time_per_op)
{
	struct fixture x;
	const struct aggregate *a = &x.agg;
	static const char *const inner[] = { "outer", "inner" };
	static const char *const outer[] = { "outer" };
	const struct stack_row *row;
	struct op_stats *sorted;
	size_t nr;

	build_gpu_trace(&x);
	for (size_t i = 0; i < a->nr; i++) {
		const struct op_stats *r = &a->rows[i];
		const char *n = names_get(&x.t.names, r->name);

		if (!strcmp(n, "inner")) {
			CHECK_EQ_U64(r->gpu_self_ns, 400);
			CHECK_EQ_U64(r->gpu_total_ns, 400);
			CHECK_EQ_U64(r->kernels, 1);
		} else if (!strcmp(n, "outer")) {
			CHECK_EQ_U64(r->gpu_self_ns, 350);
			CHECK_EQ_U64(r->gpu_total_ns, 750);
			CHECK_EQ_U64(r->kernels, 2);	/* the copy is no kernel */
		} else {
			CHECK_EQ_U64(r->calls, 0);	/* kernel names */
		}
	}
	CHECK_EQ_U64(a->gpu_self_ns, 750);
	CHECK_EQ_U64(a->nr_called, 2);
	sorted = aggregate_sorted(a, &x.t, SORT_CUDA, &nr);
	CHECK(sorted != NULL);
	CHECK_EQ_U64(nr, 2);
	if (sorted && nr == 2) {
		CHECK_STR(names_get(&x.t.names, sorted[0].name), "outer");
		CHECK_STR(names_get(&x.t.names, sorted[1].name), "inner");
	}
	free(sorted);
	/* New: the op profile has the same GPU self time on each op's
	 * stack, on the row its calls went to (same thread and name). */
	row = stack_row_of(&x.t, &x.ops, inner, 2);
	CHECK(row && row->v.gpu_ns == 400 && row->v.calls == 1 &&
	      row->v.self_ns == 3000 && row->tid == 10);
	row = stack_row_of(&x.t, &x.ops, outer, 1);
	CHECK(row && row->v.gpu_ns == 350 && row->v.calls == 1 &&
	      row->v.self_ns == 5000 && row->tid == 10);
	CHECK_EQ_U64(x.ops.nr, 2);
	fixture_free(&x);
}

static uint64_t us_to_ns(const char *s)
{
	return (uint64_t)(strtod(s, NULL) * 1000.0 + 0.5);
}

/* The trace's events, parsed; the helpers below read them. */
struct chrome_doc {
	struct jv root;
	const struct jv *evs;
};

static bool chrome_parse(struct fixture *x, struct chrome_doc *d)
{
	const char *text = finish_chrome(x);

	memset(d, 0, sizeof(*d));
	CHECK(!json_parse(text, x->cap.len, &d->root));
	d->evs = jget(&d->root, "traceEvents");
	CHECK(d->evs && d->evs->type == J_ARR);
	return d->evs && d->evs->type == J_ARR;
}

static long num_of(const struct jv *e, const char *key)
{
	const char *v = jnum(e, key);

	return v ? atol(v) : -1;
}

static bool is(const struct jv *e, const char *key, const char *want)
{
	const char *v = jstr(e, key);

	return v && !strcmp(v, want);
}

/* The metadata event `name` for pid (and tid, unless -1): how many. */
static int metadata(const struct chrome_doc *d, const char *name, long pid,
		    long tid, const char *arg, const char *want)
{
	int n = 0;

	for (size_t i = 0; i < d->evs->nr; i++) {
		const struct jv *e = &d->evs->items[i];
		const struct jv *v = jget(jget(e, "args"), arg);

		/* A string's text or a number's digits. */
		if (!is(e, "ph", "M") || !is(e, "name", name) ||
		    num_of(e, "pid") != pid ||
		    (tid >= 0 && num_of(e, "tid") != tid) || !v || !v->str)
			continue;
		n += !strcmp(v->str, want);
	}
	return n;
}

/* As Kineto: the device is the process (pid = its ordinal), named, sorted
 * after the CPU, its streams named and sorted; CPU events keep the real
 * pid. */
TEST(chrome_gpu_processes_and_streams)
{
	struct fixture x;
	struct chrome_doc d;
	size_t on_gpu = 0;

	build_gpu_trace(&x);
	if (!chrome_parse(&x, &d)) {
		fixture_free(&x);
		return;
	}
	CHECK_EQ_U64(metadata(&d, "process_name", 0, 0, "name", "GPU 0"), 1);
	CHECK_EQ_U64(metadata(&d, "process_labels", 0, 0, "labels", "GPU 0"),
		     1);
	CHECK_EQ_U64(metadata(&d, "process_sort_index", 0, 0, "sort_index",
			      "5000000"), 1);
	CHECK_EQ_U64(metadata(&d, "thread_name", 0, 7, "name", "stream 7"), 1);
	CHECK_EQ_U64(metadata(&d, "thread_name", 0, 9, "name", "stream 9"), 1);
	CHECK_EQ_U64(metadata(&d, "thread_sort_index", 0, 7, "sort_index",
			      "7"), 1);
	CHECK_EQ_U64(metadata(&d, "thread_sort_index", 0, 9, "sort_index",
			      "9"), 1);
	CHECK_EQ_U64(metadata(&d, "process_name", 4242, 0, "name", "python3"),
		     1);
	for (size_t i = 0; i < d.evs->nr; i++) {
		const struct jv *e = &d.evs->items[i];
		bool gpu = is(e, "cat", "kernel") || is(e, "cat", "gpu_memcpy");

		if (!is(e, "ph", "X"))
			continue;
		on_gpu += gpu;
		if (gpu) {
			CHECK_EQ_U64(num_of(e, "pid"), 0);
			CHECK_EQ_U64(num_of(e, "tid"),
				     num_of(jget(e, "args"), "stream"));
			CHECK(jget(jget(e, "args"), "correlation") != NULL);
		} else {
			CHECK_EQ_U64(num_of(e, "pid"), 4242);
		}
	}
	CHECK_EQ_U64(on_gpu, 7);
	jv_free(&d.root);
	fixture_free(&x);
}

/* The cuda_runtime slice of correlation id corr, or NULL. */
static const struct jv *runtime_slice(const struct chrome_doc *d,
				      long corr, size_t *at)
{
	const struct jv *found = NULL;

	for (size_t i = 0; i < d->evs->nr; i++) {
		const struct jv *e = &d->evs->items[i];

		if (!is(e, "ph", "X") || !is(e, "cat", "cuda_runtime") ||
		    num_of(jget(e, "args"), "correlation") != corr)
			continue;
		CHECK(found == NULL);		/* one slice per call */
		found = e;
		if (at)
			*at = i;
	}
	return found;
}

/* Every call (a sync too) is a slice on its thread from its enter to its
 * exit, with its correlation id, cbid and the op's "External id" (op id
 * + 1: outer 0, inner 1), none outside a recorded op. */
TEST(chrome_cuda_runtime_slices)
{
	static const struct {
		long corr, tid, enter, exit, external;
		const char *name;
	} want[] = {
		{ 1, 10, 2900, 3000, 2, "cudaLaunchKernel" },
		{ 6, 10, 3500, 4500, 2, "cudaStreamSynchronize" },
		{ 2, 10, 5900, 6000, 1, "cudaGraphLaunch" },
		{ 3, 10, 6900, 7000, 1, "cudaLaunchKernel" },
		{ 4, 20, 9400, 9500, -1, "cudaLaunchKernel" },
		{ 5, 20, 9500, 9600, -1, "cudaLaunchKernel" },
	};
	struct fixture x;
	struct chrome_doc d;
	size_t slices = 0;

	build_gpu_trace(&x);
	if (!chrome_parse(&x, &d)) {
		fixture_free(&x);
		return;
	}
	for (size_t i = 0; i < d.evs->nr; i++)
		slices += is(&d.evs->items[i], "cat", "cuda_runtime");
	CHECK_EQ_U64(slices, 6);
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		const struct jv *e = runtime_slice(&d, want[k].corr, NULL);
		const struct jv *args = jget(e, "args");

		CHECK(e != NULL);
		if (!e)
			continue;
		CHECK(is(e, "name", want[k].name));
		CHECK_EQ_U64(num_of(e, "pid"), 4242);
		CHECK_EQ_U64(num_of(e, "tid"), want[k].tid);
		CHECK_EQ_U64(us_to_ns(jnum(e, "ts")), want[k].enter);
		CHECK_EQ_U64(us_to_ns(jnum(e, "dur")),
			     want[k].exit - want[k].enter);
		CHECK_EQ_U64(num_of(args, "cbid"), 211);
		CHECK_EQ_U64(num_of(args, "External id"), want[k].external);
		CHECK(!jget(args, "enter_unknown"));
	}
	jv_free(&d.root);
	fixture_free(&x);
}

/* One flow per record joined to a launch (none for the sync, none for
 * the stray record), from the launch's cuda_runtime slice: its "s" at
 * the call's enter on the calling thread, written after that slice, and
 * that slice the innermost enclosing it there; its "f" (bp e) where the
 * record starts on the record's track. Kernels carry the op's External
 * id, as their call does. */
TEST(chrome_flows_start_at_the_call)
{
	struct fixture x;
	struct chrome_doc d;
	size_t flows = 0;

	build_gpu_trace(&x);
	if (!chrome_parse(&x, &d)) {
		fixture_free(&x);
		return;
	}
	for (size_t i = 0; i < d.evs->nr; i++) {
		const struct jv *s = &d.evs->items[i], *f, *call, *rec = NULL;
		const struct jv *inner = NULL;
		long corr = num_of(jget(s, "args"), "correlation");
		size_t call_at = 0;
		uint64_t ts;

		if (!is(s, "cat", "ac2g") || !is(s, "ph", "s"))
			continue;
		flows++;
		CHECK(i + 1 < d.evs->nr);
		if (i + 1 >= d.evs->nr)
			break;
		f = &d.evs->items[i + 1];
		CHECK(is(f, "ph", "f") && is(f, "bp", "e"));
		CHECK_EQ_U64(num_of(f, "id"), num_of(s, "id"));
		CHECK_EQ_U64(num_of(jget(f, "args"), "correlation"), corr);
		CHECK(corr != 6 && corr != 77);
		call = runtime_slice(&d, corr, &call_at);
		CHECK(call != NULL);
		if (!call)
			continue;
		ts = us_to_ns(jnum(s, "ts"));
		CHECK_EQ_U64(ts, us_to_ns(jnum(call, "ts")));
		CHECK_EQ_U64(num_of(s, "pid"), 4242);
		CHECK_EQ_U64(num_of(s, "tid"), num_of(call, "tid"));
		CHECK(call_at < i);
		/* What a viewer binds "s" to: the X slice on its thread that
		 * encloses it and began last. */
		for (size_t k = 0; k < i; k++) {
			const struct jv *e = &d.evs->items[k];
			uint64_t b, dur;

			if (!is(e, "ph", "X") ||
			    num_of(e, "tid") != num_of(s, "tid") ||
			    num_of(e, "pid") != 4242)
				continue;
			b = us_to_ns(jnum(e, "ts"));
			dur = us_to_ns(jnum(e, "dur"));
			if (b <= ts && ts <= b + dur &&
			    (!inner || b >= us_to_ns(jnum(inner, "ts"))))
				inner = e;
		}
		CHECK(inner == call);
		/* The record the flow ends on. */
		for (size_t k = 0; k < d.evs->nr; k++) {
			const struct jv *e = &d.evs->items[k];

			if (is(e, "ph", "X") && num_of(e, "pid") == 0 &&
			    num_of(e, "tid") == num_of(f, "tid") &&
			    !strcmp(jnum(e, "ts"), jnum(f, "ts")))
				rec = e;
		}
		CHECK(rec != NULL);
		if (rec) {
			CHECK_EQ_U64(num_of(jget(rec, "args"), "correlation"),
				     corr);
			CHECK_EQ_U64(num_of(jget(rec, "args"), "External id"),
				     num_of(jget(call, "args"),
					    "External id"));
		}
	}
	/* corr 1, 2 (two kernels), 3, 4 and 5. */
	CHECK_EQ_U64(flows, 6);
	jv_free(&d.root);
	fixture_free(&x);
}

/* Kernels: shown demangled with the mangled name and the cut in args;
 * copies with Kineto's name, bytes and bandwidth; a call whose enter the
 * agent did not give starts (and its flow) at its exit, flagged. */
TEST(chrome_kernel_and_copy_args)
{
	struct fixture x;
	struct chrome_doc d;
	struct rf_gpu_activity_event e = {
		.hdr = { .kind = RF_EV_GPU_ACTIVITY,
			 .flags = RF_F_NAME_TRUNCATED },
		.act = { .abi_version = RF_GPU_ABI_VERSION,
			 .size = sizeof(struct rf_gpu_activity),
			 .kind = RF_GPU_ACT_KERNEL, .correlation_id = 3,
			 .start_ns = 5000, .end_ns = 6000, .stream_id = 7,
			 .name_len = 300, .name = "_Z3fooPfi" },
	};
	const struct jv *kernel = NULL, *copy = NULL, *call, *s = NULL;

	fixture_init(&x, 4242);
	op_begin(&x.t, 10, 0xa0, 1000, "outer");
	api_call(&x.t, 10, 0xa0, 0, 2000, 3, ONE, "cudaLaunchKernel");
	api_call(&x.t, 10, 0xa0, 2100, 2200, 4, ONE, "cudaMemcpyAsync");
	op_end(&x.t, 10, 0xa0, 3000);
	trace_gpu_activity(&x.t, &e);
	activity(&x.t, RF_GPU_ACT_MEMCPY, 4, 7000, 7050, 9, NULL);
	gpu_detach(&x.t.gpu);
	if (!chrome_parse(&x, &d)) {
		fixture_free(&x);
		return;
	}
	for (size_t i = 0; i < d.evs->nr; i++) {
		const struct jv *ev = &d.evs->items[i];

		if (is(ev, "cat", "kernel"))
			kernel = ev;
		if (is(ev, "cat", "gpu_memcpy"))
			copy = ev;
		if (is(ev, "ph", "s") &&
		    num_of(jget(ev, "args"), "correlation") == 3)
			s = ev;
	}
	CHECK(kernel && copy && s);
	if (kernel) {
		const struct jv *a = jget(kernel, "args");

		CHECK(is(kernel, "name", "foo(float*, int)"));
		CHECK(is(a, "mangled name", "_Z3fooPfi"));
		CHECK(jget(a, "name_truncated") &&
		      jget(a, "name_truncated")->type == J_BOOL);
		CHECK_EQ_U64(num_of(a, "External id"), 1);
		CHECK(is(a, "launched by", "outer"));
	}
	if (copy) {
		const struct jv *a = jget(copy, "args");

		CHECK(is(copy, "name", "Memcpy HtoD (Pageable -> Device)"));
		CHECK_EQ_U64(num_of(a, "bytes"), 4096);
		/* 4096 bytes in 50 ns: 81.92 bytes/ns, i.e. GB/s. */
		CHECK_STR(jnum(a, "memory bandwidth (GB/s)"), "81.92");
		CHECK(!jget(a, "mangled name"));
	}
	call = runtime_slice(&d, 3, NULL);
	CHECK(call != NULL);
	if (call && s) {
		CHECK_EQ_U64(us_to_ns(jnum(call, "ts")), 2000);
		CHECK_EQ_U64(us_to_ns(jnum(call, "dur")), 0);
		CHECK(jget(jget(call, "args"), "enter_unknown") != NULL);
		CHECK_EQ_U64(us_to_ns(jnum(s, "ts")), 2000);
	}
	jv_free(&d.root);
	fixture_free(&x);
}

/* Devices are processes by ordinal: a record on GPU 1 is on pid 1, named
 * "GPU 1", sorted right after GPU 0's place. */
TEST(chrome_second_device)
{
	struct fixture x;
	struct chrome_doc d;
	struct rf_gpu_activity_event e = {
		.hdr = { .kind = RF_EV_GPU_ACTIVITY },
		.act = { .abi_version = RF_GPU_ABI_VERSION,
			 .size = sizeof(struct rf_gpu_activity),
			 .kind = RF_GPU_ACT_KERNEL, .correlation_id = 1,
			 .start_ns = 10, .end_ns = 20, .device_id = 1,
			 .stream_id = 3, .name = "k" },
	};
	size_t found = 0;

	fixture_init(&x, 4242);
	trace_gpu_activity(&x.t, &e);
	if (!chrome_parse(&x, &d)) {
		fixture_free(&x);
		return;
	}
	CHECK_EQ_U64(metadata(&d, "process_name", 1, 0, "name", "GPU 1"), 1);
	CHECK_EQ_U64(metadata(&d, "process_sort_index", 1, 0, "sort_index",
			      "5000001"), 1);
	CHECK_EQ_U64(metadata(&d, "thread_name", 1, 3, "name", "stream 3"), 1);
	CHECK_EQ_U64(metadata(&d, "process_name", 0, 0, "name", "GPU 0"), 0);
	for (size_t i = 0; i < d.evs->nr; i++) {
		const struct jv *ev = &d.evs->items[i];

		if (is(ev, "cat", "kernel")) {
			found++;
			CHECK_EQ_U64(num_of(ev, "pid"), 1);
			CHECK_EQ_U64(num_of(ev, "tid"), 3);
			/* No launch seen: no External id, no flow. */
			CHECK(!jget(jget(ev, "args"), "External id"));
		}
		CHECK(!is(ev, "cat", "ac2g"));
	}
	CHECK_EQ_U64(found, 1);
	jv_free(&d.root);
	fixture_free(&x);
}

/* otherData: every GPU counter, and op_stats (from the aggregate) with
 * the GPU columns. */
TEST(chrome_gpu_counters)
{
	struct fixture x;
	struct chrome_doc d;
	const struct jv *gpu, *stats;

	build_gpu_trace(&x);
	if (!chrome_parse(&x, &d)) {
		fixture_free(&x);
		return;
	}
	gpu = jget(jget(&d.root, "otherData"), "gpu");
	CHECK(gpu != NULL);
	CHECK_STR(jnum(gpu, "launches"), "5");
	CHECK_STR(jnum(gpu, "syncs"), "1");
	CHECK_STR(jnum(gpu, "records_without_launch"), "1");
	CHECK_STR(jnum(gpu, "launches_outside_ops"), "1");
	CHECK_STR(jnum(gpu, "launches_in_unrecorded_ops"), "1");
	stats = jget(jget(&d.root, "otherData"), "op_stats");
	CHECK(stats && stats->type == J_ARR && stats->nr == 2);
	for (size_t i = 0; stats && i < stats->nr; i++) {
		const struct jv *st = &stats->items[i];
		const char *name = jstr(st, "name");

		CHECK(name && (!strcmp(name, "outer") ||
			       !strcmp(name, "inner")));
		if (!name)
			continue;
		CHECK_STR(jnum(st, "self_cuda_ns"),
			  !strcmp(name, "outer") ? "350" : "400");
		CHECK_STR(jnum(st, "cuda_total_ns"),
			  !strcmp(name, "outer") ? "750" : "400");
		CHECK_STR(jnum(st, "kernels"),
			  !strcmp(name, "outer") ? "2" : "1");
		/* The sync (3500 to 4500) in inner, so in outer too. */
		CHECK_STR(jnum(st, "gpu_wait_ns"), "1000");
	}
	jv_free(&d.root);
	fixture_free(&x);
}

/* Under --sample which op launched a kernel is not known: the GPU columns
 * say so; under --tree-sample they are estimates scaled by 1/p. */
TEST(table_gpu_columns_under_sampling)
{
	struct fixture x;
	char *text = NULL;
	size_t len;
	FILE *f;

	build_gpu_trace(&x);
	x.t.sample_prob = 0.1;
	f = open_memstream(&text, &len);
	print_table(f, &x.t, &x.agg, SORT_TOTAL, 0);
	fclose(f);
	const char *outer = strstr(text, "\nouter ");
	CHECK(outer && strstr(outer, "       n/a         n/a      n/a         "
			      "n/a\n"));
	CHECK(strstr(text, "GPU columns: not available under --sample"));
	free(text);
	x.t.sample_prob = 1.0;
	x.t.tree_prob = 0.5;
	f = open_memstream(&text, &len);
	print_table(f, &x.t, &x.agg, SORT_TOTAL, 0);
	fclose(f);
	outer = strstr(text, "\nouter ");
	/* 350 ns and 750 ns of GPU time, 2 kernels, 1000 ns waiting in a
	 * sync: twice that. */
	CHECK(outer && strstr(outer, "   0.700us     1.500us        4     "
			      "2.000us\n"));
	CHECK(strstr(text, "GPU columns: estimates, scaled by 1/p"));
	free(text);
	fixture_free(&x);
}

/* A session whose setup failed before its trace was made frees a zeroed
 * trace (the fleet daemon does, for a process gone mid-attach). */
TEST(freeing_a_zeroed_trace)
{
	struct trace t;

	memset(&t, 0, sizeof(t));
	trace_free(&t);
	CHECK(t.gpu.slots == NULL);
}

TEST(gpu_folded_keeps_every_nanosecond)
{
	struct fixture x;
	char *text = NULL;
	size_t len;
	uint64_t sum = 0;
	FILE *f;

	build_gpu_trace(&x);
	f = open_memstream(&text, &len);
	CHECK(f != NULL);
	if (!f) {
		fixture_free(&x);
		return;
	}
	CHECK(!write_gpu_folded(f, &x.t, &x.kernels));
	fclose(f);
	CHECK(strstr(text, "python3;main [10];outer;inner;[gpu] k1 400\n"));
	CHECK(strstr(text, "python3;main [10];outer;[gpu] k2 100\n"));
	CHECK(strstr(text, "python3;main [10];outer;[gpu] k3 200\n"));
	CHECK(strstr(text, "python3;main [10];outer;[gpu] Memcpy HtoD "
		      "(Pageable -> Device) 50\n"));
	CHECK(strstr(text, "python3;[outside any op];[gpu] k1 10\n"));
	CHECK(strstr(text, "python3;[no op recorded];[gpu] k4 20\n"));
	CHECK(strstr(text, "python3;[no launch seen];[gpu] k5 5\n"));
	/* The weight is what follows a line's last space. */
	int lines = 0;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		sum += strtoull(strrchr(line, ' ') + 1, NULL, 10);
		lines++;
	}
	CHECK_EQ_U64(sum, 400 + 100 + 200 + 50 + 10 + 20 + 5);
	CHECK_EQ_U64(lines, 7);
	free(text);
	fixture_free(&x);
}

/* RF_EV_CUPTI_CALL's index comes from the record: the first call is
 * noted with its function's name (or "?" past the table), later ones
 * change nothing, and every output says which thread took CUPTI. */
TEST(first_watched_cupti_call_is_noted)
{
	struct gpu_counts c = { 0 };
	char line[512];

	CHECK(!strcmp(gpu_note_cupti_taken(&c, 4, 77) ?: "",
		      "cuptiActivityEnable"));
	CHECK(c.cupti_taken && c.cupti_taken_tid == 77);
	CHECK(!gpu_note_cupti_taken(&c, 0, 78));
	CHECK(c.cupti_taken_tid == 77 &&
	      !strcmp(c.cupti_taken_by, "cuptiActivityEnable"));
	gpu_format_cupti(&c, line, sizeof(line));
	CHECK(strstr(line, "thread 77 called cuptiActivityEnable") != NULL);
	memset(&c, 0, sizeof(c));
	CHECK(!strcmp(gpu_note_cupti_taken(&c, 4000000000u, 5) ?: "", "?"));
	CHECK(!strcmp(gpu_cupti_state(&c), "taken by another tool"));
}

RUN_TESTS()

/* What the status line says of the job's CUPTI, by what the agent found. */
TEST(cupti_state_names_the_version_and_the_holder)
{
	struct gpu_counts c = { .cupti_known = true, .clock_source = 1,
				.cupti_version = 130001 };
	char line[256];

	gpu_format_cupti(&c, line, sizeof(line));
	CHECK(strstr(line, "CUPTI 13 (API 130001): subscribed; GPU times in "
		      "CLOCK_MONOTONIC") == line);
	CHECK_STR(gpu_cupti_state(&c), "subscribed");
	c.cupti_version = 22;
	c.cupti_result = 39;
	strcpy(c.cupti_holder, "Kineto");
	gpu_format_cupti(&c, line, sizeof(line));
	CHECK(strstr(line, "CUPTI 12 (API 22): held by Kineto") == line);
	CHECK_STR(gpu_cupti_state(&c), "held by another tool");
	c.cupti_holder[0] = 0;
	gpu_format_cupti(&c, line, sizeof(line));
	CHECK(strstr(line, "held by another tool") != NULL);
	/* A CUPTI the agent does not read, and none at all. */
	c.cupti_result = 15;
	c.cupti_version = 18;
	gpu_format_cupti(&c, line, sizeof(line));
	CHECK(strstr(line, "CUPTI (API 18): not one the agent reads") == line);
	c.cupti_version = 0;
	gpu_format_cupti(&c, line, sizeof(line));
	CHECK(strstr(line, "CUPTI: the agent found no usable libcupti") ==
	      line);
	CHECK_STR(gpu_cupti_state(&c), "failed");
	c.cupti_known = false;
	gpu_format_cupti(&c, line, sizeof(line));
	CHECK(strstr(line, "CUPTI: unknown") == line);
}
