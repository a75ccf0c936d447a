// SPDX-License-Identifier: BSD-2-Clause
/* Ops' inputs (user/model/op_inputs.c): BPF's word records written as
 * Kineto writes record_shapes (the expected strings are what torch 2.14's
 * Kineto wrote for the same inputs), interned once per distinct record,
 * and grouped in the table by their dims (aggregate.c). */
#include <string.h>
#include "check.h"
#include "model/aggregate.h"
#include "model/op_inputs.h"
#include "model/trace.h"

#define FLOAT 6
#define LONG 4
#define HALF 5
#define NR_DTYPES_2_14 47
#define NR_DTYPES_1_13 18
#define KIND_TENSOR 3	/* c10::TypeKind::TensorType */
#define KIND_OPTIONAL 20	/* ... OptionalType (2.6, 2.14) */

/* A record being built the way BPF lays it out. */
struct rec {
	uint64_t w[RF_IN_MAX_WORDS];
	uint32_t n;
};

static void tensor(struct rec *r, unsigned dtype, unsigned ndim,
		   const int64_t *sizes, const int64_t *strides)
{
	r->w[r->n++] = RF_IN_HDR(RF_IN_TENSOR, 0, dtype, ndim, ndim);
	for (unsigned i = 0; i < ndim; i++)
		r->w[r->n++] = (uint64_t)sizes[i];
	for (unsigned i = 0; i < ndim; i++)
		r->w[r->n++] = (uint64_t)strides[i];
}

static void scalar(struct rec *r, unsigned kind, uint64_t v)
{
	r->w[r->n++] = RF_IN_HDR(kind, 0, 0, 0, 0);
	r->w[r->n++] = v;
}

static void dbl(struct rec *r, double d)
{
	uint64_t v;

	memcpy(&v, &d, sizeof(v));
	scalar(r, RF_IN_DOUBLE, v);
}

static void none(struct rec *r)
{
	r->w[r->n++] = RF_IN_HDR(RF_IN_NONE, 0, 0, 0, 0);
}

static void list(struct rec *r, unsigned elem_kind, unsigned count,
		 unsigned kept)
{
	r->w[r->n++] = RF_IN_HDR(RF_IN_LIST, kept < count ? RF_IN_F_CUT : 0,
				 elem_kind, count, kept);
}

struct lists {
	char dims[1024], types[1024], strides[1024], concrete[1024];
};

static void format(const struct rec *r, unsigned nr_dtypes, struct lists *l)
{
	struct input_lists out = { l->dims, l->types, l->strides, l->concrete,
				   sizeof(l->dims) };

	op_inputs_format(r->w, r->n, nr_dtypes, &out);
}

TEST(addmm_as_kineto_writes_it)
{
	struct rec r = { .n = 0 };
	struct lists l;

	tensor(&r, FLOAT, 2, (int64_t[]){ 2, 4 }, (int64_t[]){ 4, 1 });
	tensor(&r, FLOAT, 2, (int64_t[]){ 2, 3 }, (int64_t[]){ 3, 1 });
	tensor(&r, FLOAT, 2, (int64_t[]){ 3, 4 }, (int64_t[]){ 4, 1 });
	dbl(&r, 0.5);
	scalar(&r, RF_IN_INT, 2);
	format(&r, NR_DTYPES_2_14, &l);
	CHECK_STR(l.dims, "[[2, 4], [2, 3], [3, 4], [], []]");
	CHECK_STR(l.types,
		  "[\"float\", \"float\", \"float\", \"Scalar\", \"Scalar\"]");
	CHECK_STR(l.strides, "[[4, 1], [3, 1], [4, 1], [], []]");
	CHECK_STR(l.concrete, "[\"\", \"\", \"\", \"0.5\", \"2\"]");
}

TEST(tensor_lists_scalar_lists_and_neither)
{
	struct rec r = { .n = 0 };
	struct lists l;

	/* cat([a, a], 1) */
	list(&r, KIND_TENSOR, 2, 2);
	tensor(&r, FLOAT, 2, (int64_t[]){ 2, 3 }, (int64_t[]){ 3, 1 });
	tensor(&r, FLOAT, 2, (int64_t[]){ 2, 3 }, (int64_t[]){ 3, 1 });
	scalar(&r, RF_IN_INT, 1);
	format(&r, NR_DTYPES_2_14, &l);
	CHECK_STR(l.dims, "[[[2, 3], [2, 3]], []]");
	CHECK_STR(l.types, "[\"TensorList\", \"Scalar\"]");
	CHECK_STR(l.strides, "[[[3, 1], [3, 1]], []]");
	CHECK_STR(l.concrete, "[\"\", \"1\"]");

	/* upsample(x, None, [2., 2.]); sum(x, []); index(x, [t]) */
	r.n = 0;
	tensor(&r, FLOAT, 4, (int64_t[]){ 1, 1, 4, 4 },
	       (int64_t[]){ 16, 16, 4, 1 });
	none(&r);
	list(&r, 9, 2, 2);
	dbl(&r, 2.0);
	dbl(&r, 2.0);
	list(&r, 14, 0, 0);
	list(&r, KIND_OPTIONAL, 1, 1);
	tensor(&r, LONG, 1, (int64_t[]){ 2 }, (int64_t[]){ 1 });
	format(&r, NR_DTYPES_2_14, &l);
	CHECK_STR(l.dims, "[[1, 1, 4, 4], [], [], [], []]");
	CHECK_STR(l.types, "[\"float\", \"\", \"ScalarList\", \"ScalarList\", "
		  "\"\"]");
	CHECK_STR(l.concrete, "[\"\", \"\", \"[2., 2.]\", \"[]\", \"\"]");
}

TEST(scalars_printed_as_ivalue_prints_them)
{
	struct rec r = { .n = 0 };
	struct lists l;

	dbl(&r, 0.1);
	dbl(&r, -0.0);
	dbl(&r, 3.0);
	dbl(&r, 1e20);
	dbl(&r, -2.5);
	scalar(&r, RF_IN_BOOL, 1);
	scalar(&r, RF_IN_BOOL, 0);
	scalar(&r, RF_IN_INT, (uint64_t)-7);
	format(&r, NR_DTYPES_2_14, &l);
	CHECK_STR(l.concrete, "[\"0.10000000000000001\", \"-0.\", \"3.\", "
		  "\"1e+20\", \"-2.5\", \"True\", \"False\", \"-7\"]");
}

TEST(dtypes_by_build_and_undefined_tensors)
{
	struct rec r = { .n = 0 };
	struct lists l;

	tensor(&r, HALF, 2, (int64_t[]){ 2, 2 }, (int64_t[]){ 2, 1 });
	tensor(&r, 18, 0, NULL, NULL);	/* 1.13's Undefined, 2.x's bits1x8 */
	tensor(&r, 0, 0, NULL, NULL);	/* a 0-dim uint8 tensor */
	format(&r, NR_DTYPES_1_13, &l);
	CHECK_STR(l.types, "[\"c10::Half\", \"\", \"unsigned char\"]");
	CHECK_STR(l.dims, "[[2, 2], [], []]");
	/* An undefined tensor's impl has one dim of 0: written as None. */
	r.n = 0;
	tensor(&r, NR_DTYPES_1_13, 1, (int64_t[]){ 0 }, (int64_t[]){ 1 });
	tensor(&r, 0, 1, (int64_t[]){ 0 }, (int64_t[]){ 1 });
	format(&r, NR_DTYPES_1_13, &l);
	CHECK_STR(l.dims, "[[], [0]]");
	CHECK_STR(l.types, "[\"\", \"unsigned char\"]");
	CHECK_STR(l.strides, "[[], [1]]");
	r.n = 0;
	tensor(&r, HALF, 2, (int64_t[]){ 2, 2 }, (int64_t[]){ 2, 1 });
	tensor(&r, 18, 0, NULL, NULL);
	tensor(&r, 0, 0, NULL, NULL);
	format(&r, NR_DTYPES_2_14, &l);
	CHECK_STR(l.types,
		  "[\"c10::Half\", \"c10::bits1x8\", \"unsigned char\"]");
	CHECK_STR(op_inputs_dtype(46, NR_DTYPES_2_14),
		  "c10::complex<c10::BFloat16>");
	CHECK_STR(op_inputs_dtype(47, NR_DTYPES_2_14), "");
}

/* Cut records stay JSON: dims past the cap are not there, a list's kept
 * elements are, and a record that ends early ends its lists. */
TEST(cut_records_stay_valid)
{
	struct rec r = { .n = 0 };
	struct lists l;

	r.w[r.n++] = RF_IN_HDR(RF_IN_TENSOR, RF_IN_F_CUT, FLOAT, 20, 2);
	r.w[r.n++] = 1;
	r.w[r.n++] = 2;
	r.w[r.n++] = 20;
	r.w[r.n++] = 10;
	list(&r, KIND_TENSOR, 100, 1);
	tensor(&r, FLOAT, 1, (int64_t[]){ 5 }, (int64_t[]){ 1 });
	/* a tensor whose sizes were cut off by the end of the record */
	r.w[r.n++] = RF_IN_HDR(RF_IN_TENSOR, 0, FLOAT, 3, 3);
	r.w[r.n++] = 7;
	format(&r, NR_DTYPES_2_14, &l);
	CHECK_STR(l.dims, "[[1, 2], [[5]], [7]]");
	CHECK_STR(l.strides, "[[20, 10], [[1]], []]");
	CHECK_STR(l.types, "[\"float\", \"TensorList\", \"float\"]");
}

TEST(records_interned_once)
{
	struct op_inputs oi = { .nr_dtypes = NR_DTYPES_2_14 };
	struct names names = { 0 };
	struct rec a = { .n = 0 }, b = { .n = 0 };
	uint32_t ia, ib;

	tensor(&a, FLOAT, 2, (int64_t[]){ 2, 3 }, (int64_t[]){ 3, 1 });
	tensor(&b, FLOAT, 2, (int64_t[]){ 2, 3 }, (int64_t[]){ 1, 2 });
	ia = op_inputs_add(&oi, &names, a.w, a.n);
	ib = op_inputs_add(&oi, &names, b.w, b.n);
	CHECK(ia && ib && ia != ib);
	CHECK_EQ_U64(op_inputs_add(&oi, &names, a.w, a.n), ia);
	CHECK_EQ_U64(oi.nr, 2);
	/* Same dims, other strides: one dims string, two sets. */
	CHECK_EQ_U64(op_inputs_get(&oi, ia)->dims, op_inputs_get(&oi, ib)->dims);
	CHECK(op_inputs_get(&oi, ia)->strides !=
	      op_inputs_get(&oi, ib)->strides);
	CHECK(op_inputs_get(&oi, 0) == NULL);
	CHECK(op_inputs_get(&oi, 3) == NULL);
	op_inputs_free(&oi);
	names_free(&names);
}

/* The table's --group-by shapes: one row per op and dims, whatever the
 * strides; without grouping, one row per op. */
TEST(grouped_by_input_dims)
{
	struct trace t;
	struct aggregate flat, grouped;
	struct trace_sink s;
	struct rec small = { .n = 0 }, big = { .n = 0 }, big_t = { .n = 0 };
	uint32_t ids[3], name;
	struct op o = { 0 };
	struct closed_op c = { .op = &o, .depth = 1, .parent_id = -1 };
	int rows = 0;

	trace_init(&t, 1);
	t.inputs.nr_dtypes = NR_DTYPES_2_14;
	tensor(&small, FLOAT, 2, (int64_t[]){ 2, 3 }, (int64_t[]){ 3, 1 });
	tensor(&big, FLOAT, 2, (int64_t[]){ 64, 64 }, (int64_t[]){ 64, 1 });
	tensor(&big_t, FLOAT, 2, (int64_t[]){ 64, 64 }, (int64_t[]){ 1, 64 });
	ids[0] = op_inputs_add(&t.inputs, &t.names, small.w, small.n);
	ids[1] = op_inputs_add(&t.inputs, &t.names, big.w, big.n);
	ids[2] = op_inputs_add(&t.inputs, &t.names, big_t.w, big_t.n);
	name = names_intern(&t.names, "aten::mm", 8);
	aggregate_init(&flat);
	aggregate_init(&grouped);
	aggregate_group_by_shapes(&grouped, &t.inputs);
	o.name = name;
	c.frames = &name;
	for (int i = 0; i < 6; i++) {
		o.inputs = ids[i % 3];
		c.dur_ns = c.self_ns = i % 3 == 0 ? 10 : 1000;
		s = aggregate_sink(&flat);
		s.op(s.ctx, &t, &c);
		s = aggregate_sink(&grouped);
		s.op(s.ctx, &t, &c);
	}
	CHECK_EQ_U64(flat.rows[name].calls, 6);
	for (size_t i = 0; i < grouped.nr; i++) {
		const struct op_stats *r = &grouped.rows[i];

		if (!r->calls)
			continue;
		rows++;
		CHECK(r->shapes != 0);
		if (!strcmp(names_get(&t.names, r->shapes - 1),
			    "[[2, 3]]"))
			CHECK(r->calls == 2 && r->self_ns == 20);
		else
			CHECK(!strcmp(names_get(&t.names, r->shapes - 1),
				      "[[64, 64]]") &&
			      r->calls == 4 && r->self_ns == 4000);
	}
	CHECK_EQ_U64(rows, 2);
	aggregate_free(&flat);
	aggregate_free(&grouped);
	trace_free(&t);
}

RUN_TESTS()
