// SPDX-License-Identifier: BSD-2-Clause
/*
 * The loader's GPU logic on hand-built events: joining launches with
 * activity records by correlation id (graphs fan out, strays and old
 * launches are counted), GPU time per op (self and with descendants), and
 * the GPU parts of the Chrome trace and of --gpu-folded. Every expected
 * number follows from the timestamps in build_gpu_trace().
 */
#include <stdint.h>
#include "model/aggregate.h"
#include "check.h"
#include "export/chrome.h"
#include "export/folded.h"
#include "json_parse.h"
#include "model/trace.h"

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

/* As session.c does: BPF tagged the launch with the open op's address. */
static void launch(struct trace *t, uint32_t tid, uint64_t op_addr,
		   uint64_t ts, uint32_t corr, uint8_t flags)
{
	struct rf_gpu_launch_event e = {
		.hdr = { .ts_ns = ts, .rf_addr = op_addr, .pid = t->pid,
			 .tid = tid, .kind = RF_EV_GPU_LAUNCH },
		.correlation_id = corr, .domain = RF_GPU_API_RUNTIME,
		.launch_flags = flags,
	};

	strcpy(e.api_name, flags & RF_GPU_LAUNCH_F_GRAPH ? "cudaGraphLaunch" :
	       "cudaLaunchKernel");
	CHECK(gpu_add_launch(&t->gpu, &t->names, ts, tid,
			     stacks_open_op(t, tid, op_addr), &e));
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
			 .copy_kind = 1 },
	};

	snprintf(e.act.name, sizeof(e.act.name), "%s", name ? name : "");
	CHECK(gpu_add_activity(&t->gpu, &t->names, &e));
}

/*
 * Thread 10: "outer" [1000, 9000] holds "inner" [2000, 5000].
 *   launch corr 1 in inner at 3000 -> kernel k1 [10000, 10400] stream 7
 *   launch corr 2 in outer at 6000 (graph) -> k2 [11000, 11100],
 *                                             k3 [11100, 11300] stream 7
 *   launch corr 3 in outer at 7000 -> memcpy HtoD [12000, 12050] stream 9
 * Thread 20: launch corr 4 with no op open -> k1 [13000, 13010] stream 7
 *            launch corr 5 in an op never recorded (addr 0x999): k4
 *            [14000, 14020]
 * A record with corr 77 that no launch had: k5 [15000, 15005].
 * GPU self: inner 400; outer 100+200+50 = 350. Total: outer 750.
 */
static void build_gpu_trace(struct trace *t)
{
	trace_init(t, 4242);
	strcpy(t->process_name, "python3");
	t->gpu.counts.agent_seen = true;
	op_begin(t, 10, 0xa0, 1000, "outer");
	strcpy(trace_thread(t, 10, NULL)->comm, "main");
	op_begin(t, 10, 0xb0, 2000, "inner");
	launch(t, 10, 0xb0, 3000, 1, 0);
	op_end(t, 10, 0xb0, 5000);
	launch(t, 10, 0xa0, 6000, 2, RF_GPU_LAUNCH_F_GRAPH);
	launch(t, 10, 0xa0, 7000, 3, 0);
	op_end(t, 10, 0xa0, 9000);
	launch(t, 20, 0, 9500, 4, 0);
	launch(t, 20, 0x999, 9600, 5, 0);
	activity(t, RF_GPU_ACT_KERNEL, 1, 10000, 10400, 7, "k1");
	activity(t, RF_GPU_ACT_KERNEL, 2, 11000, 11100, 7, "k2");
	activity(t, RF_GPU_ACT_KERNEL, 2, 11100, 11300, 7, "k3");
	activity(t, RF_GPU_ACT_MEMCPY, 3, 12000, 12050, 9, NULL);
	activity(t, RF_GPU_ACT_KERNEL, 4, 13000, 13010, 7, "k1");
	activity(t, RF_GPU_ACT_KERNEL, 5, 14000, 14020, 7, "k4");
	activity(t, RF_GPU_ACT_KERNEL, 77, 15000, 15005, 7, "k5");
	gpu_detach(&t->gpu);
}

static int32_t op_named(const struct trace *t, const char *name)
{
	for (size_t i = 0; i < t->nr_ops; i++)
		if (!strcmp(names_get(&t->names, t->ops[i].name), name))
			return (int32_t)i;
	return -1;
}

TEST(join_by_correlation)
{
	struct trace t;
	const struct gpu_counts *c = &t.gpu.counts;

	build_gpu_trace(&t);
	CHECK_EQ_U64(t.gpu.nr_launches, 5);
	CHECK_EQ_U64(t.gpu.nr_acts, 7);
	CHECK(gpu_activity_op(&t.gpu, &t.gpu.acts[0]) == op_named(&t, "inner"));
	/* The graph launch fans out to both of its kernels. */
	CHECK(gpu_activity_op(&t.gpu, &t.gpu.acts[1]) == op_named(&t, "outer"));
	CHECK(gpu_activity_op(&t.gpu, &t.gpu.acts[2]) == op_named(&t, "outer"));
	CHECK(t.gpu.acts[1].launch == t.gpu.acts[2].launch);
	CHECK_EQ_U64(t.gpu.launches[t.gpu.acts[1].launch].activities, 2);
	CHECK(gpu_activity_op(&t.gpu, &t.gpu.acts[3]) == op_named(&t, "outer"));
	CHECK_STR(names_get(&t.names, t.gpu.acts[3].name), "Memcpy HtoD");
	/* Joined to a launch, but no op. */
	CHECK(t.gpu.acts[4].launch >= 0);
	CHECK(gpu_activity_op(&t.gpu, &t.gpu.acts[4]) == -1);
	CHECK(gpu_activity_op(&t.gpu, &t.gpu.acts[5]) == -1);
	CHECK(t.gpu.acts[6].launch == -1);
	CHECK_EQ_U64(c->launches, 5);
	CHECK_EQ_U64(c->activities, 7);
	CHECK_EQ_U64(c->activities_unmatched, 1);
	CHECK_EQ_U64(c->launches_outside_ops, 1);
	CHECK_EQ_U64(c->launches_op_unknown, 1);
	CHECK_EQ_U64(c->launches_unmatched_at_end, 0);
	trace_free(&t);
}

/* A set's record carries the id of the driver call nested in the runtime
 * call; the launch waits under both ids and is counted once. */
TEST(join_by_nested_driver_id)
{
	struct trace t;
	struct rf_gpu_launch_event e = {
		.hdr = { .ts_ns = 100, .rf_addr = 0, .tid = 1,
			 .kind = RF_EV_GPU_LAUNCH },
		.correlation_id = 5, .driver_correlation_id = 6,
		.domain = RF_GPU_API_RUNTIME, .api_name = "cudaMemsetAsync",
	};

	trace_init(&t, 1);
	CHECK(gpu_add_launch(&t.gpu, &t.names, 100, 1, -1, &e));
	e.correlation_id = 7;		/* another, never matched */
	e.driver_correlation_id = 8;
	CHECK(gpu_add_launch(&t.gpu, &t.names, 200, 1, -1, &e));
	activity(&t, RF_GPU_ACT_MEMSET, 6, 300, 400, 1, NULL);
	CHECK(t.gpu.acts[0].launch == 0);
	CHECK_EQ_U64(t.gpu.counts.activities_unmatched, 0);
	gpu_detach(&t.gpu);
	CHECK_EQ_U64(t.gpu.counts.launches_unmatched_at_end, 1);
	trace_free(&t);
}

TEST(old_launches_are_evicted_and_counted)
{
	struct trace t;

	trace_init(&t, 1);
	launch(&t, 1, 0, 1000, 1, 0);			/* never matched */
	launch(&t, 1, 0, 2000, 2, 0);
	activity(&t, RF_GPU_ACT_KERNEL, 2, 3000, 3100, 1, "k");
	launch(&t, 1, 0, GPU_PENDING_NS + 5000, 3, 0);	/* recent */
	gpu_evict(&t.gpu, GPU_PENDING_NS + 5000);
	CHECK_EQ_U64(t.gpu.counts.launches_evicted_unmatched, 1);
	CHECK_EQ_U64(t.gpu.pending.len, 1);
	/* A record for an evicted launch no longer joins: counted. */
	activity(&t, RF_GPU_ACT_KERNEL, 2, 4000, 4100, 1, "k");
	CHECK_EQ_U64(t.gpu.counts.activities_unmatched, 1);
	/* At detach the recent one, still without records, is counted. */
	gpu_detach(&t.gpu);
	CHECK_EQ_U64(t.gpu.counts.launches_unmatched_at_end, 1);
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
	trace_free(&t);
}

/* A steady stream over twice the pending window: only the last window's
 * launches stay pending, and each launch is looked at once (a sweep of
 * the whole map per launch took minutes here). */
TEST(steady_launches_keep_a_bounded_window)
{
	const uint64_t step = 300000;		/* a launch every 300 us */
	const uint32_t n = 200000;		/* 60 s of trace time */
	struct trace t;
	uint64_t expect_pending = 0;

	trace_init(&t, 1);
	for (uint32_t i = 1; i <= n; i++) {
		launch(&t, 1, 0, i * step, i, 0);
		if (i % 2)		/* half of them get their record */
			activity(&t, RF_GPU_ACT_KERNEL, i, i * step + 10,
				 i * step + 20, 1, "k");
		gpu_evict(&t.gpu, i * step);
	}
	for (uint32_t i = 1; i <= n; i++)
		expect_pending += i * step >= n * step - GPU_PENDING_NS;
	CHECK_EQ_U64(t.gpu.pending.len, expect_pending);
	CHECK_EQ_U64(t.gpu.evict_next, n - expect_pending);
	/* Of the evicted, the ones without a record are counted. */
	CHECK_EQ_U64(t.gpu.counts.launches_evicted_unmatched,
		     (n - expect_pending) / 2);
	CHECK_EQ_U64(t.gpu.counts.activities_unmatched, 0);
	trace_free(&t);
}

TEST(gpu_time_per_op)
{
	struct trace t;
	struct aggregate a;

	build_gpu_trace(&t);
	CHECK(!aggregate_ops(&t, &a));
	for (size_t i = 0; i < a.nr; i++) {
		const struct op_stats *r = &a.rows[i];
		const char *n = names_get(&t.names, r->name);

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
	CHECK_EQ_U64(a.gpu_self_ns, 750);
	CHECK_EQ_U64(a.nr_called, 2);
	aggregate_sort(&a, SORT_CUDA);
	CHECK_STR(names_get(&t.names, a.rows[0].name), "outer");
	aggregate_free(&a);
	trace_free(&t);
}

static char *capture(const struct trace *t, size_t *len,
		     void (*write)(FILE *, const struct trace *))
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		abort();
	write(f, t);
	fclose(f);
	return buf;
}

static void write_chrome(FILE *f, const struct trace *t)
{
	write_chrome_trace(f, t);
}

static uint64_t us_to_ns(const char *s)
{
	return (uint64_t)(strtod(s, NULL) * 1000.0 + 0.5);
}

TEST(chrome_gpu_tracks_and_flows)
{
	struct trace t;
	struct jv root;
	const struct jv *evs, *gpu;
	size_t len, kernels = 0, flows_s = 0, flows_f = 0, gpu_names = 0;
	char *text;
	uint64_t s_ts[16] = {}, f_ts[16] = {};
	unsigned s_tid[16] = {};

	build_gpu_trace(&t);
	text = capture(&t, &len, write_chrome);
	CHECK(!json_parse(text, len, &root));
	evs = jget(&root, "traceEvents");
	CHECK(evs && evs->type == J_ARR);
	for (size_t i = 0; evs && i < evs->nr; i++) {
		const struct jv *e = &evs->items[i];
		const char *ph = jstr(e, "ph"), *cat = jstr(e, "cat");
		const struct jv *args = jget(e, "args");
		unsigned pid = jnum(e, "pid") ? atoi(jnum(e, "pid")) : 0;
		size_t id = jnum(e, "id") ? atoi(jnum(e, "id")) : 0;

		if (!strcmp(ph, "M") && pid == 0x7fff0000u)
			gpu_names++;
		if (!strcmp(ph, "X") && cat && (!strcmp(cat, "kernel") ||
						!strcmp(cat, "gpu_memcpy"))) {
			kernels++;
			CHECK(pid == 0x7fff0000u);
			CHECK(jget(args, "correlation") != NULL);
		}
		if (cat && !strcmp(cat, "ac2g") && id < 16) {
			CHECK(jget(args, "correlation") != NULL);
			if (!strcmp(ph, "s")) {
				flows_s++;
				s_ts[id] = us_to_ns(jnum(e, "ts"));
				s_tid[id] = atoi(jnum(e, "tid"));
				CHECK(pid == 4242);
			} else {
				CHECK_STR(ph, "f");
				CHECK_STR(jstr(e, "bp"), "e");
				flows_f++;
				f_ts[id] = us_to_ns(jnum(e, "ts"));
			}
		}
	}
	CHECK_EQ_U64(kernels, 7);
	/* process name + sort index, streams 7 and 9 */
	CHECK_EQ_U64(gpu_names, 4);
	/* Flows only from ops: corr 1, 2 (x2), 3. Ids are activity
	 * index + 1; each starts at its launch on the op's thread and ends
	 * where its record starts. */
	CHECK_EQ_U64(flows_s, 4);
	CHECK_EQ_U64(flows_f, 4);
	CHECK_EQ_U64(s_ts[1], 3000);
	CHECK_EQ_U64(f_ts[1], 10000);
	CHECK_EQ_U64(s_ts[2], 6000);
	CHECK_EQ_U64(s_ts[3], 6000);
	CHECK_EQ_U64(f_ts[3], 11100);
	CHECK_EQ_U64(s_tid[4], 10);
	CHECK_EQ_U64(f_ts[4], 12000);
	gpu = jget(jget(&root, "otherData"), "gpu");
	CHECK(gpu != NULL);
	CHECK_STR(jnum(gpu, "records_without_launch"), "1");
	CHECK_STR(jnum(gpu, "launches_outside_ops"), "1");
	CHECK_STR(jnum(gpu, "launches_in_unrecorded_ops"), "1");
	jv_free(&root);
	free(text);
	trace_free(&t);
}

static void write_gpu_folded_void(FILE *f, const struct trace *t)
{
	CHECK(!write_gpu_folded(f, t));
}

TEST(gpu_folded_keeps_every_nanosecond)
{
	struct trace t;
	size_t len;
	char *text;
	uint64_t sum = 0;

	build_gpu_trace(&t);
	text = capture(&t, &len, write_gpu_folded_void);
	CHECK(strstr(text, "python3;main [10];outer;inner;[gpu] k1 400\n"));
	CHECK(strstr(text, "python3;main [10];outer;[gpu] k2 100\n"));
	CHECK(strstr(text, "python3;main [10];outer;[gpu] k3 200\n"));
	CHECK(strstr(text, "python3;main [10];outer;[gpu] Memcpy HtoD 50\n"));
	CHECK(strstr(text, "python3;[outside any op];[gpu] k1 10\n"));
	CHECK(strstr(text, "python3;[no op recorded];[gpu] k4 20\n"));
	CHECK(strstr(text, "python3;[no launch seen];[gpu] k5 5\n"));
	/* The weight is what follows a line's last space. */
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
		sum += strtoull(strrchr(line, ' ') + 1, NULL, 10);
	CHECK_EQ_U64(sum, 400 + 100 + 200 + 50 + 10 + 20 + 5);
	free(text);
	trace_free(&t);
}

RUN_TESTS()
