// SPDX-License-Identifier: BSD-2-Clause
/*
 * Distributed jobs (issue 30): a rank's place read from its environment
 * (model/distributed.h), the bytes of a collective's tensors
 * (op_inputs_bytes), collectives summed by name and step
 * (model/collectives.h), and the ranks' summaries and straggler
 * (model/rank_summary.h).
 */
#include <string.h>
#include "check.h"
#include "model/collectives.h"
#include "model/distributed.h"
#include "model/rank_summary.h"
#include "rfbpf.h"

#define FLOAT 6		/* c10::ScalarType::Float */
#define LONG 4

static const char env[] = "PATH=/usr/bin\0RANK=2\0LOCAL_RANK=0\0"
	"WORLD_SIZE=16\0MASTER_ADDR=10.1.2.3\0MASTER_PORT=29500\0"
	"TORCHELASTIC_RUN_ID=job-7\0RANKS=9\0";

TEST(a_ranks_environment_gives_its_place)
{
	struct dist_info d;
	char text[256];

	dist_info_init(&d);
	CHECK(!dist_info_known(&d));
	dist_info_from_environ(&d, env, sizeof(env) - 1);
	CHECK(dist_info_known(&d));
	CHECK_EQ_U64(d.rank, 2);		/* RANKS=9 is another name */
	CHECK_EQ_U64(d.local_rank, 0);
	CHECK_EQ_U64(d.world_size, 16);
	CHECK_STR(d.master_addr, "10.1.2.3");
	CHECK_STR(d.master_port, "29500");
	CHECK_STR(d.run_id, "job-7");
	dist_info_saw_collective(&d, "aten::mm");
	CHECK_STR(d.backend, "");
	dist_info_saw_collective(&d, "nccl:all_reduce");
	dist_info_saw_collective(&d, "gloo:all_reduce");  /* the first wins */
	CHECK_STR(d.backend, "nccl");
	dist_info_describe(&d, text, sizeof(text));
	CHECK_STR(text, "rank 2 of 16 (local rank 0), backend nccl, master "
		  "10.1.2.3:29500, run job-7");
}

TEST(bad_numbers_and_a_cut_environment_leave_fields_unknown)
{
	static const char bad[] = "RANK=x1\0WORLD_SIZE=-3\0LOCAL_RANK=\0"
		"MASTER_ADDR=h\0RANK";
	struct dist_info d;
	char text[64];

	dist_info_init(&d);
	/* The last entry has no NUL (the read was cut): it is skipped. */
	dist_info_from_environ(&d, bad, sizeof(bad) - 1);
	CHECK(d.rank == -1 && d.world_size == -1 && d.local_rank == -1);
	CHECK_STR(d.master_addr, "h");
	CHECK(!dist_info_known(&d));
	dist_info_describe(&d, text, sizeof(text));
	CHECK_STR(text, "rank unknown, master h");
}

/* A tensor's words: header, sizes, strides (contiguous). */
static uint32_t tensor(uint64_t *w, unsigned dtype, const uint64_t *sizes,
		       unsigned n, unsigned kept)
{
	uint64_t stride = 1;

	w[0] = RF_IN_HDR(RF_IN_TENSOR, 0, dtype, n, kept);
	for (unsigned k = 0; k < kept; k++)
		w[1 + k] = sizes[k];
	for (unsigned k = kept; k-- > 0;) {
		w[1 + kept + k] = stride;
		stride *= sizes[k];
	}
	return 1 + 2 * kept;
}

TEST(a_collectives_bytes_are_its_tensors_a_lists_too)
{
	static const uint64_t grad[] = { 256, 64 }, bias[] = { 10 };
	uint64_t w[64], elems, bytes;
	uint32_t n = 0;

	n += tensor(w + n, FLOAT, grad, 2, 2);
	CHECK(op_inputs_bytes(w, n, 18, &elems, &bytes));
	CHECK_EQ_U64(elems, 16384);
	CHECK_EQ_U64(bytes, 65536);
	/* A tensor list of a float [10] and a long [256, 64], then an int. */
	w[n++] = RF_IN_HDR(RF_IN_LIST, 0, 3 /* TensorType */, 2, 2);
	n += tensor(w + n, FLOAT, bias, 1, 1);
	n += tensor(w + n, LONG, grad, 2, 2);
	w[n++] = RF_IN_HDR(RF_IN_INT, 0, 0, 0, 0);
	w[n++] = 7;
	CHECK(op_inputs_bytes(w, n, 18, &elems, &bytes));
	CHECK_EQ_U64(elems, 16384 + 10 + 16384);
	CHECK_EQ_U64(bytes, 65536 + 40 + 16384 * 8);
	/* Dims cut short: the bytes are not known. */
	n = tensor(w, FLOAT, grad, 2, 1);
	CHECK(!op_inputs_bytes(w, n, 18, &elems, &bytes));
	/* An undefined tensor moves nothing, and is whole. */
	n = tensor(w, 18 /* Undefined in 1.13 */, grad, 0, 0);
	CHECK(op_inputs_bytes(w, n, 18, &elems, &bytes));
	CHECK_EQ_U64(bytes, 0);
}

TEST(collectives_are_told_by_name)
{
	CHECK(collective_name("gloo:all_reduce"));
	CHECK(collective_name("nccl:all_gather"));
	CHECK(collective_name("record_param_comms"));
	CHECK(!collective_name("c10d::allreduce_"));
	CHECK(!collective_name("record_param_commsX"));
	CHECK(!collective_name("gloo"));
}

/* Hands the sink a closed collective of dur ns, inputs w[0..n). */
static void close_collective(struct trace *t, struct trace_sink *k,
			     const char *name, uint64_t start, uint64_t dur,
			     const uint64_t *w, uint32_t n)
{
	struct op o = { .start_ns = start, .end_ns = start + dur };
	struct closed_op c = { .op = &o, .dur_ns = dur };

	o.name = names_intern(&t->names, name, strlen(name));
	o.inputs = n ? op_inputs_add(&t->inputs, &t->names, w, n) : 0;
	k->op(k->ctx, t, &c);
}

TEST(collectives_add_up_by_name_with_their_bytes)
{
	static const uint64_t grad[] = { 256, 64 };
	struct trace t;
	struct collectives c;
	struct trace_sink k;
	uint64_t w[8];
	uint32_t n;

	trace_init(&t, 1);
	t.inputs.nr_dtypes = 18;
	collectives_init(&c);
	k = collectives_sink(&c);
	n = tensor(w, FLOAT, grad, 2, 2);
	close_collective(&t, &k, "gloo:all_reduce", 0, 3000, w, n);
	close_collective(&t, &k, "gloo:all_reduce", 5000, 1000, w, n);
	close_collective(&t, &k, "gloo:barrier", 7000, 9000, NULL, 0);
	close_collective(&t, &k, "aten::mm", 9000, 50000, NULL, 0);
	CHECK_EQ_U64(c.nr, 2);
	collectives_sort(&c);
	CHECK_STR(names_get(&t.names, c.rows[0].name), "gloo:barrier");
	CHECK_EQ_U64(c.rows[0].unsized, 1);
	CHECK_EQ_U64(c.rows[1].calls, 2);
	CHECK_EQ_U64(c.rows[1].dur_ns, 4000);
	CHECK_EQ_U64(c.rows[1].bytes, 2 * 65536);
	CHECK_EQ_U64(c.rows[1].unsized, 0);
	CHECK_STR(t.dist.backend, "gloo");
	collectives_free(&c);
	trace_free(&t);
}

/* A rank's summary as its rfbpf writes it, read back. */
static struct rank_summary summary(int rank, uint64_t step_coll_ms,
				   uint64_t steps)
{
	struct trace t;
	struct collectives c;
	struct collective_step st[4];
	struct collective_row row = { .calls = 16, .dur_ns = 200000000 };
	struct rank_summary r;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	trace_init(&t, 100 + rank);
	snprintf(t.process_name, sizeof(t.process_name), "python3");
	t.dist.rank = rank;
	t.dist.world_size = 3;
	snprintf(t.dist.run_id, sizeof(t.dist.run_id), "job-7");
	snprintf(t.dist.master_addr, sizeof(t.dist.master_addr), "10.0.0.1");
	t.first_ns = 1000;
	t.last_ns = 2000001000;
	collectives_init(&c);
	c.rows = &row;
	c.nr = 1;
	for (uint64_t i = 0; i < steps; i++)
		st[i] = (struct collective_step){
			.number = 2 + i, .dur_ns = (50 + i) * 1000000,
			.coll_ns = step_coll_ms * 1000000 };
	st[steps] = (struct collective_step){ .number = 2 + steps };
	c.steps = st;
	c.nr_steps = steps + 1;		/* the last never ended */
	rank_summary_write(f, &t, &c);
	fclose(f);
	CHECK(rank_summary_parse(text, &r));
	free(text);
	trace_free(&t);
	return r;
}

TEST(a_summary_reads_back_and_the_straggler_waited_least)
{
	struct rank_summary r[3] = { summary(0, 48, 3), summary(1, 9, 3),
				     summary(2, 51, 3) };
	struct straggler s;

	CHECK_EQ_U64(r[1].pid, 101);
	CHECK_STR(r[1].comm, "python3");
	CHECK_EQ_U64(r[1].dist.rank, 1);
	CHECK_EQ_U64(r[1].dist.world_size, 3);
	CHECK_EQ_U64(r[1].span_ns, 2000000000);
	CHECK_EQ_U64(r[1].coll_calls, 16);
	CHECK_EQ_U64(r[1].steps, 3);		/* whole ones only */
	CHECK_EQ_U64(r[1].step_ns, 153000000);
	CHECK_EQ_U64(r[1].max_step_ns, 52000000);
	CHECK_EQ_U64(r[1].step_coll_ns, 27000000);
	CHECK_STR(r[1].dist.run_id, "job-7");
	CHECK_STR(r[1].dist.master_addr, "10.0.0.1");
	CHECK_STR(r[1].dist.master_port, "");	/* written "-" */
	CHECK(rank_summary_same_job(&r[0], &r[1]));
	snprintf(r[0].dist.run_id, sizeof(r[0].dist.run_id), "job-8");
	CHECK(!rank_summary_same_job(&r[0], &r[1]));
	r[0].dist.run_id[0] = 0;
	snprintf(r[0].dist.run_id, sizeof(r[0].dist.run_id), "job-7");
	s = rank_summary_straggler(r, 3);
	CHECK(s.per_step);
	CHECK_EQ_U64(s.index, 1);
	CHECK_EQ_U64((uint64_t)s.others_wait_ns, 40500000);  /* 49.5 - 9 ms */
	/* A rank with no whole step: over the whole trace instead. */
	r[2] = summary(2, 51, 0);
	s = rank_summary_straggler(r, 3);
	CHECK(!s.per_step);
	/* One rank, or one without collectives: none told. */
	CHECK_EQ_U64(rank_summary_straggler(r, 1).index, -1);
	r[0].coll_calls = 0;
	CHECK_EQ_U64(rank_summary_straggler(r, 3).index, -1);
	CHECK(!rank_summary_parse("rfbpf-rank-summary 1\npid x\n", &r[0]));
	CHECK(!rank_summary_parse("", &r[0]));
}

RUN_TESTS()
