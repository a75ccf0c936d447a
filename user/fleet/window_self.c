// SPDX-License-Identifier: BSD-2-Clause
/* Self time counted by time inside a window (see window_self.h). */
#include <stdlib.h>
#include "fleet/window_self.h"

static uint64_t max_u64(uint64_t x, uint64_t y)
{
	return x > y ? x : y;
}

static uint64_t min_u64(uint64_t x, uint64_t y)
{
	return x < y ? x : y;
}

static bool in_span(const struct window_self *w, uint64_t ts)
{
	return ts >= w->a && ts <= w->b;
}

/* The time of [from, to] inside [a, b]. */
static uint64_t inside(const struct window_self *w, uint64_t from,
		       uint64_t to)
{
	uint64_t lo = max_u64(from, w->a), hi = min_u64(to, w->b);

	return hi > lo ? hi - lo : 0;
}

/* Takes what op_id's children left (and forgets it). */
static void take_children(struct window_self *w, uint64_t op_id,
			  uint64_t *ns, uint64_t *n)
{
	uint64_t *v = u64map_get(&w->child_ns, op_id + 1);

	*ns = v ? *v : 0;
	v = u64map_get(&w->children, op_id + 1);
	*n = v ? *v : 0;
	u64map_del(&w->child_ns, op_id + 1);
	u64map_del(&w->children, op_id + 1);
}

static void give_parent(struct window_self *w, int64_t parent_id,
			uint64_t ns)
{
	uint64_t *v;

	if (parent_id < 0 || !ns)
		return;
	v = u64map_get(&w->child_ns, (uint64_t)parent_id + 1);
	u64map_put(&w->child_ns, (uint64_t)parent_id + 1, (v ? *v : 0) + ns);
	v = u64map_get(&w->children, (uint64_t)parent_id + 1);
	u64map_put(&w->children, (uint64_t)parent_id + 1, (v ? *v : 0) + 1);
}

/* An op's self time in [a, b] from its time there (ns) and its
 * children's (kids, n of them), less the probe cost it holds there: its
 * own probes' (half at each end) and each child's outside the child. */
static uint64_t self_in_span(const struct window_self *w,
			     const struct trace *t, const struct op *o,
			     uint64_t end, uint64_t ns, uint64_t kids,
			     uint64_t n)
{
	uint64_t in = t->probe_cost.inside_ns, out = t->probe_cost.outside_ns;
	uint64_t cost = n * out + (in_span(w, o->start_ns) ? in / 2 : 0) +
			(in_span(w, end) ? in - in / 2 : 0);

	return ns > kids + cost ? ns - kids - cost : 0;
}

/* An op of the span: counted (its calls, and its probes and thread for
 * window_self_length). */
static void count(struct window_self *w, const struct trace *t,
		  const struct op *o, uint64_t ns, uint64_t self,
		  uint64_t *calls)
{
	*calls = in_span(w, o->start_ns);
	if (*calls)
		w->probe_ns += t->probe_cost.inside_ns +
			       t->probe_cost.outside_ns;
	if (*calls || ns)
		u64map_put(&w->threads, (uint64_t)o->tid, 1);
	w->self_ns += self;
}

void window_self_open(struct window_self *w, uint64_t seen_from, uint64_t a,
		      uint64_t b)
{
	w->seen_from = seen_from;
	w->a = a;
	w->b = b < a ? a : b;
	w->open = true;
}

void window_self_end_at(struct window_self *w, uint64_t b)
{
	if (w->open)
		w->b = b < w->a ? w->a : b;
}

void window_self_op(struct window_self *w, const struct trace *t,
		    const struct closed_op *c, uint64_t *self_ns,
		    uint64_t *calls)
{
	const struct op *o = c->op;
	uint64_t ns, kids, n;

	*self_ns = *calls = 0;
	take_children(w, o->id, &kids, &n);
	if (!w->open || o->start_ns < w->seen_from || o->start_ns > w->b)
		return;
	ns = inside(w, o->start_ns, o->end_ns);
	/* Ended on another thread: no self time, and no child of its
	 * parent (as stacks.c counts it). */
	if (o->flags & OP_ASYNC_END) {
		count(w, t, o, ns, 0, calls);
		return;
	}
	give_parent(w, c->parent_id, ns);
	/* Whole in the span: the trace's own figure, the same sum. */
	*self_ns = o->start_ns >= w->a && o->end_ns <= w->b ? c->self_ns :
		   self_in_span(w, t, o, o->end_ns, ns, kids, n);
	count(w, t, o, ns, *self_ns, calls);
}

void window_self_forget(struct window_self *w, uint64_t op_id)
{
	uint64_t kids, n;

	take_children(w, op_id, &kids, &n);
}

/* One thread's ops open at the cut, innermost first: each one's time to b
 * less its closed children's and the open child's. */
static void cut_thread(struct window_self *w, struct trace *t,
		       const struct thread *th, window_self_add_fn add,
		       void *ctx)
{
	uint64_t open_child = 0;

	for (uint32_t d = th->depth; d-- > 0;) {
		uint32_t slot = th->stack[d];
		const struct op *o = &t->ops[slot];
		uint64_t ns, kids, n, self, calls;
		struct closed_op c = {
			.op = o, .thread = th,
			.parent_id = o->parent >= 0 ?
				(int64_t)t->ops[o->parent].id : -1,
			.pid = trace_pid_of(t, o->tid),
			.self_off_cpu_ns = o->off_cpu_ns,
		};

		take_children(w, o->id, &kids, &n);
		if (o->start_ns < w->seen_from || o->start_ns > w->b) {
			open_child = 0;
			continue;
		}
		ns = inside(w, o->start_ns, w->b);
		kids += open_child;
		n += open_child > 0;
		self = self_in_span(w, t, o, UINT64_MAX, ns, kids, n);
		count(w, t, o, ns, self, &calls);
		c.dur_ns = ns;
		c.self_ns = self;
		c.frames = trace_frames(t, slot, &c.depth);
		if (self || calls)
			add(ctx, t, &c, self, calls);
		open_child = ns;
	}
}

void window_self_cut(struct window_self *w, struct trace *t,
		     window_self_add_fn add, void *ctx)
{
	if (!w->open)
		return;
	for (size_t i = 0; i < t->nr_threads; i++)
		cut_thread(w, t, &t->threads[i], add, ctx);
	u64map_free(&w->child_ns);
	u64map_free(&w->children);
	w->open = false;
}

double window_self_length(const struct window_self *w, double length_s,
			  bool traced_whole)
{
	double n = w->threads.len ? (double)w->threads.len : 1;
	double l = traced_whole ? length_s :
		   length_s - w->probe_ns * 1e-9 / n;
	double least = w->self_ns * 1e-9 / n;

	return l > least ? l : least;
}

void window_self_reset(struct window_self *w)
{
	u64map_free(&w->threads);
	w->probe_ns = 0;
	w->self_ns = 0;
}

void window_self_free(struct window_self *w)
{
	u64map_free(&w->child_ns);
	u64map_free(&w->children);
	u64map_free(&w->threads);
}
