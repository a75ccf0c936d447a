// SPDX-License-Identifier: BSD-2-Clause
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "aggregate.h"

uint64_t *op_self_times(const struct trace *t)
{
	uint64_t *self = calloc(t->nr_ops ? t->nr_ops : 1, sizeof(*self));

	if (!self)
		return NULL;
	for (size_t i = 0; i < t->nr_ops; i++)
		self[i] = op_duration(&t->ops[i]);
	/* Children follow their parent in t->ops (they began later). */
	for (size_t i = 0; i < t->nr_ops; i++) {
		int32_t p = t->ops[i].parent;
		uint64_t d = op_duration(&t->ops[i]);

		if (p >= 0)
			self[p] = self[p] > d ? self[p] - d : 0;
	}
	return self;
}

int op_gpu_times(const struct trace *t, uint64_t **self, uint64_t **total,
		 uint64_t **kernels)
{
	size_t n = t->nr_ops ? t->nr_ops : 1;

	*self = calloc(n, sizeof(**self));
	*total = calloc(n, sizeof(**total));
	*kernels = calloc(n, sizeof(**kernels));
	if (!*self || !*total || !*kernels) {
		free(*self);
		free(*total);
		free(*kernels);
		return -1;
	}
	for (size_t i = 0; i < t->gpu.nr_acts; i++) {
		const struct gpu_activity *g = &t->gpu.acts[i];
		int32_t op = gpu_activity_op(&t->gpu, g);
		uint64_t d = gpu_duration(g);

		if (op < 0 || (size_t)op >= t->nr_ops)
			continue;
		(*self)[op] += d;
		(*kernels)[op] += g->kind == RF_GPU_ACT_KERNEL;
		for (; op >= 0; op = t->ops[op].parent)
			(*total)[op] += d;
	}
	return 0;
}

static void add_gpu(const struct trace *t, struct aggregate *a,
		    const uint64_t *self, const uint64_t *total,
		    const uint64_t *kernels)
{
	for (size_t i = 0; i < t->nr_ops; i++) {
		struct op_stats *r = &a->rows[t->ops[i].name];

		r->gpu_self_ns += self[i];
		r->gpu_total_ns += total[i];
		r->kernels += kernels[i];
		a->gpu_self_ns += self[i];
	}
}

int aggregate_ops(const struct trace *t, struct aggregate *a)
{
	uint64_t *self = op_self_times(t);
	uint64_t *gself = NULL, *gtotal = NULL, *gkernels = NULL;

	memset(a, 0, sizeof(*a));
	a->rows = calloc(t->names.nr ? t->names.nr : 1, sizeof(*a->rows));
	if (!self || !a->rows) {
		free(self);
		free(a->rows);
		a->rows = NULL;
		return -1;
	}
	a->nr = t->names.nr;
	for (size_t n = 0; n < a->nr; n++)
		a->rows[n].name = n;
	for (size_t i = 0; i < t->nr_ops; i++) {
		const struct op *o = &t->ops[i];
		struct op_stats *r = &a->rows[o->name];
		uint64_t d = op_duration(o);

		if (!r->calls || d < r->min_ns)
			r->min_ns = d;
		if (d > r->max_ns)
			r->max_ns = d;
		if (!r->calls)
			r->scope = o->scope;
		r->calls++;
		r->total_ns += d;
		r->self_ns += self[i];
		r->total_sq += (double)d * d;
		r->self_sq += (double)self[i] * self[i];
		r->truncated += (o->flags & OP_TRUNCATED) != 0;
		a->self_ns += self[i];
		a->nr_called += r->calls == 1;
	}
	free(self);
	if (t->gpu.nr_acts) {
		if (op_gpu_times(t, &gself, &gtotal, &gkernels))
			return aggregate_free(a), -1;
		add_gpu(t, a, gself, gtotal, gkernels);
		free(gself);
		free(gtotal);
		free(gkernels);
	}
	return 0;
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

void aggregate_sort(struct aggregate *a, enum sort_key key)
{
	int (*cmp)(const void *, const void *) = by_self;

	if (key == SORT_TOTAL)
		cmp = by_total;
	else if (key == SORT_CALLS)
		cmp = by_calls;
	else if (key == SORT_CUDA)
		cmp = by_cuda;
	qsort(a->rows, a->nr, sizeof(*a->rows), cmp);
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
