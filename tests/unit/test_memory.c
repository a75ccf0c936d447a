// SPDX-License-Identifier: BSD-2-Clause
/* --memory's model (user/model/memory.c): allocations and frees charged to
 * the ops open on their threads, self and total as profile_memory=True
 * gives them, frees paired with their blocks, the leak view. Fed with
 * hand-built records as BPF sends them. */
#include <math.h>
#include "check.h"
#include "model/aggregate.h"
#include "model/profile_sink.h"
#include "model/trace.h"

static void before(struct trace *t, uint32_t tid, uint64_t addr, uint64_t ts,
		   const char *name, uint8_t scope)
{
	struct rf_event_hdr h = {
		.ts_ns = ts, .rf_addr = addr, .pid = 1, .tid = tid,
		.kind = RF_EV_BEFORE, .variant = RF_V_CSTR, .scope = scope,
		.name_len = strlen(name),
	};
	stacks_before(t, &h, name, -1);
}

static void end(struct trace *t, uint32_t tid, uint64_t addr, uint64_t ts)
{
	struct rf_event_hdr h = {
		.ts_ns = ts, .rf_addr = addr, .pid = 1, .tid = tid,
		.kind = RF_EV_END, .variant = RF_V_END,
	};
	stacks_end(t, &h);
}

/* An allocation (bytes > 0) or a CPU free (bytes 0), as the CPU probes
 * send them. */
static void mem(struct trace *t, uint32_t tid, uint64_t ts, uint64_t addr,
		int64_t bytes)
{
	struct rf_mem_event e = {
		.hdr = { .ts_ns = ts, .rf_addr = addr, .pid = 1, .tid = tid,
			 .kind = RF_EV_MEMORY,
			 .variant = bytes ? RF_MEM_CPU_ALLOC :
				    RF_MEM_CPU_FREE },
		.bytes = bytes, .device_type = RF_DEVICE_CPU,
		.device_index = -1,
	};
	memory_event(t, &e);
}

static void cuda(struct trace *t, uint32_t tid, uint64_t ts, uint64_t addr,
		 int64_t bytes, uint64_t allocated, uint64_t reserved)
{
	struct rf_mem_event e = {
		.hdr = { .ts_ns = ts, .rf_addr = addr, .pid = 1, .tid = tid,
			 .kind = RF_EV_MEMORY, .variant = RF_MEM_DEVICE },
		.bytes = bytes, .total_allocated = allocated,
		.total_reserved = reserved, .device_type = RF_DEVICE_CUDA,
		.device_index = 0,
	};
	memory_event(t, &e);
}

struct fixture {
	struct trace t;
	struct aggregate a;
};

static void setup(struct fixture *x)
{
	struct trace_sink s;

	trace_init(&x->t, 1);
	x->t.mem.on = true;
	aggregate_init(&x->a);
	s = aggregate_sink(&x->a);
	trace_add_sink(&x->t, &s);
}

static void teardown(struct fixture *x)
{
	aggregate_free(&x->a);
	trace_free(&x->t);
}

static const struct op_stats *row(struct fixture *x, const char *name)
{
	uint32_t id = names_intern(&x->t.names, name, strlen(name));

	return id < x->a.nr ? &x->a.rows[id] : NULL;
}

/* A scope keeps one block its child made and frees the 10 small ones
 * its other children made: profile_memory's numbers, exactly. */
TEST(self_and_total_as_profile_memory)
{
	struct fixture x;
	const struct op_stats *r;

	setup(&x);
	before(&x.t, 1, 0x100, 10, "scope", RF_SCOPE_USER);
	before(&x.t, 1, 0x200, 20, "aten::empty", 0);
	mem(&x.t, 1, 21, 0xa000, 4 << 20);
	end(&x.t, 1, 0x200, 30);
	for (int i = 0; i < 10; i++) {
		uint64_t ts = 100 + 10 * i;

		before(&x.t, 1, 0x300, ts, "aten::ones", 0);
		before(&x.t, 1, 0x400, ts + 1, "aten::empty", 0);
		mem(&x.t, 1, ts + 2, 0xb000, 256);
		end(&x.t, 1, 0x400, ts + 3);
		end(&x.t, 1, 0x300, ts + 4);
		mem(&x.t, 1, ts + 5, 0xb000, 0);	/* freed in scope */
	}
	end(&x.t, 1, 0x100, 300);
	r = row(&x, "scope");
	CHECK(r && r->self_mem[MEM_CPU] == -2560);
	CHECK(r && r->mem[MEM_CPU] == 4 << 20);
	r = row(&x, "aten::empty");
	CHECK(r && r->self_mem[MEM_CPU] == (4 << 20) + 2560);
	CHECK(r && r->mem[MEM_CPU] == r->self_mem[MEM_CPU]);
	r = row(&x, "aten::ones");
	CHECK(r && r->self_mem[MEM_CPU] == 0 && r->mem[MEM_CPU] == 2560);
	CHECK_EQ_U64(x.t.mem.counts.allocs, 11);
	CHECK_EQ_U64(x.t.mem.counts.frees, 10);
	CHECK_EQ_U64(x.t.mem.devices[0].live, 4 << 20);
	CHECK_EQ_U64(x.t.mem.devices[0].peak, (4 << 20) + 256);
	teardown(&x);
}

/* A block made on one thread and freed on another: the free is charged
 * to the op open on the freeing thread, with the block's size. */
TEST(free_on_another_thread_is_paired)
{
	struct fixture x;
	const struct op_stats *r;

	setup(&x);
	before(&x.t, 1, 0x100, 10, "make", RF_SCOPE_USER);
	mem(&x.t, 1, 11, 0xc000, 65536);
	end(&x.t, 1, 0x100, 20);
	before(&x.t, 2, 0x900, 30, "drop", RF_SCOPE_USER);
	mem(&x.t, 2, 31, 0xc000, 0);
	end(&x.t, 2, 0x900, 40);
	r = row(&x, "drop");
	CHECK(r && r->self_mem[MEM_CPU] == -65536);
	CHECK_EQ_U64(x.t.mem.counts.frees_unknown, 0);
	CHECK_EQ_U64(x.t.mem.live.len, 0);
	teardown(&x);
}

/* A block made before tracing and freed in it is counted as such, and
 * charged to no op: never a negative number it did not make. */
TEST(free_of_a_block_made_before_is_not_charged)
{
	struct fixture x;
	const struct op_stats *r;

	setup(&x);
	before(&x.t, 1, 0x100, 10, "free_old", RF_SCOPE_USER);
	mem(&x.t, 1, 11, 0xd000, 0);
	end(&x.t, 1, 0x100, 20);
	r = row(&x, "free_old");
	CHECK(r && r->self_mem[MEM_CPU] == 0 && r->mem[MEM_CPU] == 0);
	CHECK_EQ_U64(x.t.mem.counts.frees_unknown, 1);
	CHECK_EQ_U64(x.t.mem.counts.frees, 0);
	CHECK_EQ_U64(x.t.mem.devices[0].live, 0);
	teardown(&x);
}

/* A block made at a live block's address: the older one's free was lost
 * (a drop); it is forgotten and counted, and the new one pairs. */
TEST(a_reused_address_replaces_the_lost_block)
{
	struct fixture x;

	setup(&x);
	mem(&x.t, 1, 10, 0xe000, 100);
	mem(&x.t, 1, 20, 0xe000, 300);
	CHECK_EQ_U64(x.t.mem.counts.replaced, 1);
	CHECK_EQ_U64(x.t.mem.devices[0].live, 300);
	mem(&x.t, 1, 30, 0xe000, 0);
	CHECK_EQ_U64(x.t.mem.counts.free_bytes, 300);
	CHECK_EQ_U64(x.t.mem.devices[0].live, 0);
	CHECK_EQ_U64(x.t.mem.counts.outside_ops, 2);
	teardown(&x);
}

/* The live blocks, grouped by op, scope and Python frame, largest first;
 * freed ones are not among them. */
TEST(leak_view_groups_by_what_made_them)
{
	struct fixture x;
	struct mem_leak *g;
	long n;

	setup(&x);
	before(&x.t, 1, 0x100, 10, "leak_8mb", RF_SCOPE_USER);
	before(&x.t, 1, 0x200, 11, "aten::empty", 0);
	mem(&x.t, 1, 12, 0x10000, 8 << 20);
	end(&x.t, 1, 0x200, 13);
	end(&x.t, 1, 0x100, 14);
	before(&x.t, 1, 0x100, 20, "small", RF_SCOPE_USER);
	for (int i = 0; i < 5; i++) {
		before(&x.t, 1, 0x200, 21 + 2 * i, "aten::empty", 0);
		mem(&x.t, 1, 21 + 2 * i, 0x20000 + 0x1000 * i, 1024);
		end(&x.t, 1, 0x200, 22 + 2 * i);
	}
	end(&x.t, 1, 0x100, 40);
	mem(&x.t, 1, 41, 0x20000, 0);	/* one of the small ones freed */
	n = memory_leaks(&x.t.mem, &g);
	CHECK_EQ_U64(n, 2);
	if (n == 2) {
		CHECK_EQ_U64(g[0].bytes, 8 << 20);
		CHECK_STR(names_get(&x.t.names, g[0].scope_name), "leak_8mb");
		CHECK_STR(names_get(&x.t.names, g[0].op_name), "aten::empty");
		CHECK_EQ_U64(g[1].bytes, 4096);
		CHECK_EQ_U64(g[1].blocks, 4);
		CHECK_STR(names_get(&x.t.names, g[1].scope_name), "small");
	}
	free(g);
	teardown(&x);
}

/* The CUDA caching allocator's reports: sized frees, the allocator's
 * own totals, reserved growth as segments, charged apart from the CPU. */
TEST(device_reports_are_charged_to_the_device_columns)
{
	struct fixture x;
	const struct op_stats *r;
	struct mem_device *d;

	setup(&x);
	before(&x.t, 1, 0x100, 10, "cuda_op", 0);
	cuda(&x.t, 1, 11, 0x7f0000000000ull, 1 << 20, 1 << 20, 2 << 20);
	cuda(&x.t, 1, 12, 0x7f0000100000ull, 1 << 20, 2 << 20, 20 << 20);
	cuda(&x.t, 1, 13, 0x7f0000000000ull, -(1 << 20), 1 << 20, 20 << 20);
	end(&x.t, 1, 0x100, 20);
	r = row(&x, "cuda_op");
	CHECK(r && r->self_mem[MEM_DEVICE] == 1 << 20);
	CHECK(r && r->self_mem[MEM_CPU] == 0);
	d = memory_device(&x.t.mem, RF_DEVICE_CUDA, 0);
	CHECK(d && d->live == 1 << 20 && d->total_reserved == 20 << 20);
	CHECK(d && d->segments_reserved == 18 << 20);
	teardown(&x);
}

/* Byte sampling, run as BPF runs it (rfbpf.h's countdown, the loader's
 * table of gaps) on a mix of sizes: the estimator's totals per size are
 * within 4 standard errors of the truth, its bias under 0.5%, and a
 * block far above the mean is never missed. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rand16(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 20) & (RF_MEM_EXP_TABLE_SIZE - 1);
}

TEST(byte_sampling_is_unbiased)
{
	static uint32_t table[RF_MEM_EXP_TABLE_SIZE];
	static const uint64_t sizes[] = { 64, 4096, 100000, 524288, 4 << 20 };
	static const unsigned every[] = { 1, 4, 40, 200, 2000 };
	const uint64_t mean = 256 * 1024;
	double est[5] = { 0 }, var[5] = { 0 }, truth[5] = { 0 };
	uint64_t sent[5] = { 0 }, made[5] = { 0 };
	int64_t left = 0;
	double all_est = 0, all_truth = 0, all_var = 0;

	memory_exp_table(table, RF_MEM_EXP_TABLE_SIZE);
	for (unsigned long n = 0; n < 4000000; n++) {
		for (int k = 0; k < 5; k++) {
			uint64_t s = sizes[k];
			double w = memory_sample_weight(s, mean);

			if (n % every[k])
				continue;
			made[k]++;
			truth[k] += (double)s;
			var[k] += (double)s * s * (w - 1);	/* s^2 (1-p)/p */
			if (!left)
				left = RF_MEM_GAP(table[rand16()], mean);
			if (!RF_MEM_COUNTDOWN(left, s))
				continue;
			left = RF_MEM_GAP(table[rand16()], mean);
			sent[k]++;
			est[k] += w * (double)s;
		}
	}
	for (int k = 0; k < 5; k++) {
		double se = sqrt(var[k]);

		if (fabs(est[k] - truth[k]) > 4 * se + 1e-9 * truth[k])
			fprintf(stderr, "  size %llu: %.0f estimated, %.0f "
				"made (se %.0f)\n", (unsigned long long)sizes[k],
				est[k], truth[k], se);
		CHECK(fabs(est[k] - truth[k]) <= 4 * se + 1e-9 * truth[k]);
		all_est += est[k];
		all_truth += truth[k];
		all_var += var[k];
	}
	CHECK(fabs(all_est - all_truth) <= 4 * sqrt(all_var));
	CHECK(fabs(all_est / all_truth - 1) < 0.005);
	/* The largest gap is 11.8 means: a 16-mean block is always sent. */
	CHECK_EQ_U64(sent[4], made[4]);
	CHECK(sent[0] < made[0] / 1000);	/* small blocks rarely */
}

/* A sampled record is weighed as the blocks it stands for, and so is
 * its free, whatever its record says. */
TEST(sampled_records_are_weighed)
{
	struct fixture x;
	const struct op_stats *r;
	struct rf_mem_event e = {
		.hdr = { .ts_ns = 11, .rf_addr = 0xa000, .pid = 1, .tid = 1,
			 .kind = RF_EV_MEMORY, .variant = RF_MEM_CPU_ALLOC,
			 .flags = RF_F_MEM_SAMPLED },
		.bytes = 65536, .device_type = RF_DEVICE_CPU,
		.device_index = -1,
	};
	double w = memory_sample_weight(65536, 524288);

	setup(&x);
	x.t.mem.sample_bytes = 524288;
	before(&x.t, 1, 0x100, 10, "make", RF_SCOPE_USER);
	memory_event(&x.t, &e);
	end(&x.t, 1, 0x100, 20);
	r = row(&x, "make");
	CHECK(w > 8.5 && w < 8.6);
	CHECK(r && r->self_mem[MEM_CPU] == llround(w * 65536));
	CHECK_EQ_U64(x.t.mem.devices[0].live, llround(w * 65536));
	e.hdr.variant = RF_MEM_CPU_FREE;
	e.hdr.ts_ns = 30;
	e.bytes = 0;
	memory_event(&x.t, &e);
	CHECK_EQ_U64(x.t.mem.devices[0].live, 0);
	CHECK_EQ_U64(x.t.mem.counts.free_bytes, llround(w * 65536));
	teardown(&x);
}

static double half_weight(void *ctx, uint64_t ts)
{
	(void)ctx;
	return ts < 100 ? 2.0 : 0;	/* "measured parts": before 100 */
}

/* The fleet's in-use profile: live blocks made where stack_weight gives
 * a weight keep their op stack, and are weighed by it; freed ones and
 * those made elsewhere are not in it. */
TEST(inuse_profile_by_stack)
{
	struct fixture x;
	struct stack_profile p;

	setup(&x);
	stack_profile_init(&p);
	x.t.mem.stack_weight = half_weight;
	before(&x.t, 1, 0x100, 10, "grow", RF_SCOPE_USER);
	before(&x.t, 1, 0x200, 11, "aten::empty", 0);
	mem(&x.t, 1, 12, 0x1000, 65536);	/* kept, weight 2 */
	mem(&x.t, 1, 13, 0x2000, 4096);		/* freed below */
	end(&x.t, 1, 0x200, 14);
	end(&x.t, 1, 0x100, 15);
	mem(&x.t, 1, 20, 0x2000, 0);
	before(&x.t, 1, 0x100, 200, "grow", RF_SCOPE_USER);
	mem(&x.t, 1, 201, 0x3000, 65536);	/* outside: no stack */
	end(&x.t, 1, 0x100, 202);
	profile_add_inuse(&p, &x.t);
	CHECK_EQ_U64(p.nr, 1);
	if (p.nr == 1) {
		CHECK_EQ_U64(p.rows[0].v.inuse_bytes, 2 * 65536);
		CHECK_EQ_U64(p.rows[0].v.inuse_blocks, 2);
		CHECK_EQ_U64(p.rows[0].depth, 2);
		CHECK_STR(names_get(&x.t.names, p.rows[0].frames[0]), "grow");
	}
	stack_profile_free(&p);
	teardown(&x);
}

/* Memory as torch.profiler's tables write it. */
TEST(format_as_torch)
{
	char b[32];

	memory_format(4 << 20, b, sizeof(b));
	CHECK_STR(b, "4.00 Mb");
	memory_format(-768000, b, sizeof(b));
	CHECK_STR(b, "-750.00 Kb");
	memory_format(-876, b, sizeof(b));
	CHECK_STR(b, "-876 b");
	memory_format(3ll << 30, b, sizeof(b));
	CHECK_STR(b, "3.00 Gb");
}

RUN_TESTS()
