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

int aggregate_ops(const struct trace *t, struct aggregate *a)
{
	uint64_t *self = op_self_times(t);

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
	}
	free(self);
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

void aggregate_sort(struct aggregate *a, enum sort_key key)
{
	qsort(a->rows, a->nr, sizeof(*a->rows), key == SORT_TOTAL ? by_total :
	      key == SORT_CALLS ? by_calls : by_self);
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
