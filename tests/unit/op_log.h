/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A trace sink for tests: keeps every closed op, indexed by op.id (the
 * order ops began), with parent set to the parent's id and the self time
 * the model computed, so tests can check ops after they were handed on.
 */
#ifndef RFBPF_TEST_OP_LOG_H
#define RFBPF_TEST_OP_LOG_H

#include <stdlib.h>
#include "model/trace.h"

struct op_log {
	struct op *ops;		/* by id; .parent is the parent's id */
	uint64_t *self;		/* self time by id */
	size_t nr;		/* highest id closed + 1 */
	size_t closed;
	const struct trace *t;	/* the trace it is attached to */
};

static struct op_log L;

static void op_log_on_op(void *ctx, struct trace *t, const struct closed_op *c)
{
	struct op_log *l = ctx;
	size_t id = c->op->id;

	(void)t;
	if (id >= l->nr) {
		l->ops = realloc(l->ops, (id + 1) * sizeof(*l->ops));
		l->self = realloc(l->self, (id + 1) * sizeof(*l->self));
		if (!l->ops || !l->self)
			abort();
		memset(l->ops + l->nr, 0, (id + 1 - l->nr) * sizeof(*l->ops));
		l->nr = id + 1;
	}
	l->ops[id] = *c->op;
	l->ops[id].parent = (int32_t)c->parent_id;
	l->self[id] = c->self_ns;
	l->closed++;
}

/* trace_init, with the global log L emptied and attached. */
static inline void trace_init_logged(struct trace *t, uint32_t pid)
{
	struct trace_sink s = { .op = op_log_on_op, .ctx = &L };

	free(L.ops);
	free(L.self);
	memset(&L, 0, sizeof(L));
	trace_init(t, pid);
	trace_add_sink(t, &s);
	L.t = t;
}

/* Op number id, closed (from the log) or still open (from the trace's
 * slots, parent turned into an id as well); zeroed if neither. */
static inline struct op op_at(size_t id)
{
	const struct trace *t = L.t;
	struct op o = { 0 };

	for (size_t i = 0; t && i < t->cap_ops; i++) {
		const struct op *s = &t->ops[i];

		if (!(s->flags & OP_OPEN) || s->id != id ||
		    !u64map_get(&t->open, s->rf_addr))
			continue;
		o = *s;
		o.parent = s->parent >= 0 ? (int32_t)t->ops[s->parent].id : -1;
		return o;
	}
	return id < L.nr ? L.ops[id] : o;
}

#endif
