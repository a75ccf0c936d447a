// SPDX-License-Identifier: BSD-2-Clause
#include <stdlib.h>
#include <string.h>
#include "model/per_step.h"

void per_step_init(struct per_step *p)
{
	memset(p, 0, sizeof(*p));
}

/* The block of step number n, made on first sight (NULL past the cap or
 * on ENOMEM). Ops come in nearly step order: the search starts at the
 * newest block. */
static struct step_block *block_of(struct per_step *p, const struct trace *t,
				   int64_t n)
{
	struct step_block *b;

	for (size_t i = p->nr; i-- > 0;)
		if (p->blocks[i].step.number == n)
			return &p->blocks[i];
	if (p->nr == PER_STEP_MAX)
		return NULL;
	if (p->nr == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 16;
		void *m = realloc(p->blocks, cap * sizeof(*p->blocks));

		if (!m)
			return NULL;
		p->blocks = m;
		p->cap = cap;
	}
	b = &p->blocks[p->nr++];
	memset(b, 0, sizeof(*b));
	aggregate_init(&b->agg);
	b->step.number = n;
	b->step.tid = t->steps->tid;
	b->step.start_ns = t->steps->in_step &&
			   t->steps->cur.number == n ?
			   t->steps->cur.start_ns : 0;
	return b;
}

static void on_op(void *ctx, struct trace *t, const struct closed_op *c)
{
	struct per_step *p = ctx;
	int64_t n = steps_number_at(t->steps, c->op->start_ns);
	struct step_block *b;
	struct trace_sink k;

	if (n < 0) {
		p->ops_between++;
		return;
	}
	if (!(b = block_of(p, t, n))) {
		p->ops_past_max++;
		return;
	}
	k = aggregate_sink(&b->agg);
	k.op(k.ctx, t, c);
}

static void on_gpu(void *ctx, struct trace *t, const struct gpu_done *g)
{
	struct per_step *p = ctx;
	int64_t n = g->launch ? steps_number_at(t->steps, g->launch->ts_ns) :
		    -1;
	struct step_block *b = n >= 0 ? block_of(p, t, n) : NULL;
	struct trace_sink k;

	if (!b)
		return;
	k = aggregate_sink(&b->agg);
	if (k.gpu)
		k.gpu(k.ctx, t, g);
}

static void on_gpu_api(void *ctx, struct trace *t,
		       const struct gpu_launch *call)
{
	struct per_step *p = ctx;
	int64_t n = steps_number_at(t->steps, call->ts_ns);
	struct step_block *b = n >= 0 ? block_of(p, t, n) : NULL;
	struct trace_sink k;

	if (!b)
		return;
	k = aggregate_sink(&b->agg);
	if (k.gpu_api)
		k.gpu_api(k.ctx, t, call);
}

static void on_step(void *ctx, struct trace *t, const struct step *s)
{
	struct step_block *b = block_of(ctx, t, s->number);

	if (b)
		b->step = *s;
}

struct trace_sink per_step_sink(struct per_step *p)
{
	return (struct trace_sink){ .op = on_op, .gpu = on_gpu,
				    .gpu_api = on_gpu_api, .step = on_step,
				    .ctx = p };
}

void per_step_free(struct per_step *p)
{
	for (size_t i = 0; i < p->nr; i++)
		aggregate_free(&p->blocks[i].agg);
	free(p->blocks);
	memset(p, 0, sizeof(*p));
}
