// SPDX-License-Identifier: BSD-2-Clause
#include <stdlib.h>
#include <string.h>
#include "collectives.h"
#include "steps.h"

bool collective_name(const char *name)
{
	return !strncmp(name, "gloo:", 5) || !strncmp(name, "nccl:", 5) ||
	       !strcmp(name, "record_param_comms");
}

void collectives_init(struct collectives *c)
{
	memset(c, 0, sizeof(*c));
}

static struct collective_row *row_of(struct collectives *c, uint32_t name)
{
	for (size_t i = 0; i < c->nr; i++)
		if (c->rows[i].name == name)
			return &c->rows[i];
	if (c->nr == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 8;
		void *m = realloc(c->rows, cap * sizeof(*c->rows));

		if (!m)
			return NULL;
		c->rows = m;
		c->cap = cap;
	}
	c->rows[c->nr] = (struct collective_row){ .name = name };
	return &c->rows[c->nr++];
}

static struct collective_step *step_of(struct collectives *c, int64_t n)
{
	/* Steps come in order: the one sought is nearly always the last. */
	for (size_t i = c->nr_steps; i-- > 0;)
		if (c->steps[i].number == n)
			return &c->steps[i];
	if (c->nr_steps == COLLECTIVE_STEPS_MAX) {
		c->steps_past_max++;
		return NULL;
	}
	if (c->nr_steps == c->cap_steps) {
		size_t cap = c->cap_steps ? 2 * c->cap_steps : 16;
		void *m = realloc(c->steps, cap * sizeof(*c->steps));

		if (!m)
			return NULL;
		c->steps = m;
		c->cap_steps = cap;
	}
	c->steps[c->nr_steps] = (struct collective_step){ .number = n };
	return &c->steps[c->nr_steps++];
}

static void on_op(void *ctx, struct trace *t, const struct closed_op *cl)
{
	struct collectives *c = ctx;
	const struct op *o = cl->op;
	const struct input_set *in;
	struct collective_row *r;
	int64_t n;

	const char *name = names_get(&t->names, o->name);

	if (!collective_name(name) || !(r = row_of(c, o->name)))
		return;
	dist_info_saw_collective(&t->dist, name);
	/* Its whole span: an async op (begun on the caller's thread, ended
	 * on the group's) has no self time, yet the ranks waited all of it. */
	r->calls++;
	r->dur_ns += cl->dur_ns;
	in = op_inputs_get(&t->inputs, o->inputs);
	if (in && in->sized) {
		r->bytes += in->bytes;
		r->elems += in->elems;
	} else {
		r->unsized++;
	}
	if (t->steps && (n = steps_number_at(t->steps, o->start_ns)) >= 0) {
		struct collective_step *s = step_of(c, n);

		if (s)
			s->coll_ns += cl->dur_ns;
	}
}

static void on_step(void *ctx, struct trace *t, const struct step *s)
{
	struct collective_step *cs = step_of(ctx, s->number);

	(void)t;
	if (cs)
		cs->dur_ns = s->end_ns - s->start_ns;
}

struct trace_sink collectives_sink(struct collectives *c)
{
	return (struct trace_sink){ .op = on_op, .step = on_step, .ctx = c };
}

static int by_time(const void *a, const void *b)
{
	const struct collective_row *x = a, *y = b;

	return x->dur_ns < y->dur_ns ? 1 : x->dur_ns > y->dur_ns ? -1 :
	       (x->name > y->name) - (x->name < y->name);
}

void collectives_sort(struct collectives *c)
{
	if (c->nr)
		qsort(c->rows, c->nr, sizeof(*c->rows), by_time);
}

void collectives_free(struct collectives *c)
{
	free(c->rows);
	free(c->steps);
	memset(c, 0, sizeof(*c));
}
