// SPDX-License-Identifier: BSD-2-Clause
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "aggregate.h"

const double agg_latency_bounds_s[AGG_LATENCY_BUCKETS - 1] = {
	1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10,
};

void aggregate_init(struct aggregate *a)
{
	memset(a, 0, sizeof(*a));
}

/* The row of name id, created (zeroed) with every row below it. */
static struct op_stats *row(struct aggregate *a, uint32_t name)
{
	if (name >= a->cap) {
		size_t cap = a->cap ? a->cap : 64;
		struct op_stats *rows;

		while (cap <= name)
			cap *= 2;
		rows = realloc(a->rows, cap * sizeof(*rows));
		if (!rows) {
			a->oom = true;
			return NULL;
		}
		a->rows = rows;
		a->cap = cap;
	}
	while (a->nr <= name) {
		memset(&a->rows[a->nr], 0, sizeof(a->rows[0]));
		a->rows[a->nr].name = a->nr;
		a->nr++;
	}
	return &a->rows[name];
}

unsigned agg_latency_bucket(uint64_t ns)
{
	unsigned b = 0;

	while (b < AGG_LATENCY_BUCKETS - 1 &&
	       ns > agg_latency_bounds_s[b] * 1e9)
		b++;
	return b;
}

void aggregate_add(struct aggregate *a, const struct closed_op *c)
{
	const struct op *o = c->op;
	struct op_stats *r = row(a, o->name);
	uint64_t d = op_duration(o);

	if (!r)
		return;
	if (!r->calls || d < r->min_ns)
		r->min_ns = d;
	if (d > r->max_ns)
		r->max_ns = d;
	if (!r->calls) {
		r->scope = o->scope;
		a->nr_called++;
	}
	r->calls++;
	r->total_ns += d;
	r->self_ns += c->self_ns;
	r->total_sq += (double)d * d;
	r->self_sq += (double)c->self_ns * c->self_ns;
	r->truncated += (o->flags & OP_TRUNCATED) != 0;
	r->latency[agg_latency_bucket(d)]++;
	a->self_ns += c->self_ns;
}

static void on_op(void *ctx, struct trace *t, const struct closed_op *c)
{
	(void)t;
	aggregate_add(ctx, c);
}

/* A record's time is the launching op's own, and every op's around it. */
static void on_gpu(void *ctx, struct trace *t, const struct gpu_done *g)
{
	struct aggregate *a = ctx;
	const struct gpu_launch *l = g->launch;
	uint64_t d = gpu_duration(g->act);
	struct op_stats *r;

	(void)t;
	if (!l || !l->depth)
		return;
	r = row(a, l->op_name);
	if (!r)
		return;
	r->gpu_self_ns += d;
	r->kernels += g->act->kind == RF_GPU_ACT_KERNEL;
	a->gpu_self_ns += d;
	for (uint32_t i = 0; i < l->depth; i++)
		if ((r = row(a, l->frames[i])))
			r->gpu_total_ns += d;
}

struct trace_sink aggregate_sink(struct aggregate *a)
{
	return (struct trace_sink){ .op = on_op, .gpu = on_gpu, .ctx = a };
}

static int by_self(const void *x, const void *y)
{
	const struct op_stats *a = x, *b = y;

	return a->self_ns < b->self_ns ? 1 : a->self_ns > b->self_ns ? -1 :
	       (a->name > b->name) - (a->name < b->name);
}

static int by_total(const void *x, const void *y)
{
	const struct op_stats *a = x, *b = y;

	return a->total_ns < b->total_ns ? 1 : a->total_ns > b->total_ns ? -1 :
	       by_self(x, y);
}

static int by_calls(const void *x, const void *y)
{
	const struct op_stats *a = x, *b = y;

	return a->calls < b->calls ? 1 : a->calls > b->calls ? -1 :
	       by_self(x, y);
}

static int by_cuda(const void *x, const void *y)
{
	const struct op_stats *a = x, *b = y;

	return a->gpu_total_ns < b->gpu_total_ns ? 1 :
	       a->gpu_total_ns > b->gpu_total_ns ? -1 : by_self(x, y);
}

struct op_stats *aggregate_sorted(const struct aggregate *a,
				  enum sort_key key, size_t *nr)
{
	int (*cmp)(const void *, const void *) = by_self;
	struct op_stats *rows = malloc((a->nr ? a->nr : 1) * sizeof(*rows));

	*nr = 0;
	if (!rows)
		return NULL;
	for (size_t i = 0; i < a->nr; i++)
		if (a->rows[i].calls || a->rows[i].gpu_total_ns)
			rows[(*nr)++] = a->rows[i];
	if (key == SORT_TOTAL)
		cmp = by_total;
	else if (key == SORT_CALLS)
		cmp = by_calls;
	else if (key == SORT_CUDA)
		cmp = by_cuda;
	qsort(rows, *nr, sizeof(*rows), cmp);
	return rows;
}

void aggregate_reset(struct aggregate *a)
{
	a->nr = 0;
	a->self_ns = a->gpu_self_ns = 0;
	a->nr_called = 0;
}

void aggregate_free(struct aggregate *a)
{
	free(a->rows);
	memset(a, 0, sizeof(*a));
}

/* Var(sum/p) = sum over all ops of x^2 (1-p)/p, estimated from the sampled
 * ops by sum of x^2 (1-p)/p^2; for counts x = 1. */
void estimate_op(const struct op_stats *r, double p, struct op_estimate *e)
{
	double q = 1.0 - p;

	e->calls = r->calls / p;
	e->calls_se = sqrt(r->calls * q) / p;
	e->total_ns = r->total_ns / p;
	e->total_se = sqrt(r->total_sq * q) / p;
	e->self_ns = r->self_ns / p;
	e->self_se = sqrt(r->self_sq * q) / p;
}
