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

void aggregate_group_by_stack(struct aggregate *a, struct py_frames *py,
			      unsigned n)
{
	a->group_n = n;
	a->group_py = py;
}

void aggregate_group_by_shapes(struct aggregate *a,
			       const struct op_inputs *inputs)
{
	a->group_inputs = inputs;
}

/* The innermost group_n Python frames above the op that frames end with,
 * as a stack id (0: none): the op's own Python stack, whichever ops it
 * is nested in. */
static uint32_t group_of(const struct aggregate *a, const uint32_t *frames,
			 uint32_t depth)
{
	uint32_t picked[RF_PY_MAX_FRAMES + 1], n = 0;

	for (uint32_t i = depth > 0 ? depth - 1 : 0; i-- > 0 &&
	     n < a->group_n && n < RF_PY_MAX_FRAMES;)
		if (py_frames_loc(a->group_py, frames[i]))
			picked[n++] = frames[i];
	for (uint32_t i = 0; i < n / 2; i++) {	/* outermost first */
		uint32_t x = picked[i];

		picked[i] = picked[n - 1 - i];
		picked[n - 1 - i] = x;
	}
	return n ? py_frames_intern(a->group_py, picked, n) : 0;
}

/* One number per (stack group, shapes) pair, from 1; 0 on ENOMEM. */
static uint32_t pair_of(struct aggregate *a, uint32_t group, uint32_t shapes)
{
	uint64_t key = ((uint64_t)group << 32 | shapes) + 1, *at;

	if ((at = u64map_get(&a->group_pairs, key)))
		return (uint32_t)*at;
	if (!u64map_put(&a->group_pairs, key, a->group_pairs.len + 1))
		return 0;
	return (uint32_t)a->group_pairs.len;
}

/* Grouped rows: the row of (name, group, shapes), appended when new. */
static struct op_stats *group_row(struct aggregate *a, uint32_t name,
				  uint32_t group, uint32_t shapes)
{
	uint32_t sub = a->group_inputs ? pair_of(a, group, shapes) : group;
	uint64_t key = ((uint64_t)name << 32 | sub) + 1, *at;
	struct op_stats *r;

	if (a->group_inputs && !sub) {
		a->oom = true;
		return NULL;
	}
	if ((at = u64map_get(&a->group_index, key)))
		return &a->rows[*at];
	if (a->nr == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		struct op_stats *rows = realloc(a->rows, cap * sizeof(*rows));

		if (!rows) {
			a->oom = true;
			return NULL;
		}
		a->rows = rows;
		a->cap = cap;
	}
	if (!u64map_put(&a->group_index, key, a->nr)) {
		a->oom = true;
		return NULL;
	}
	r = &a->rows[a->nr++];
	memset(r, 0, sizeof(*r));
	r->name = name;
	r->group = group;
	r->shapes = shapes;
	return r;
}

/* The shapes an op with input set inputs is grouped by (0: none). */
static uint32_t shapes_of(const struct aggregate *a, uint32_t inputs)
{
	const struct input_set *in = op_inputs_get(a->group_inputs, inputs);

	return in ? in->dims + 1 : 0;
}

/* The row an op (frames ending with its name, with input set inputs)
 * adds to. */
static struct op_stats *row_of(struct aggregate *a, uint32_t name,
			       const uint32_t *frames, uint32_t depth,
			       uint32_t inputs)
{
	if (!a->group_n && !a->group_inputs)
		return row(a, name);
	return group_row(a, name, a->group_n ? group_of(a, frames, depth) : 0,
			 a->group_inputs ? shapes_of(a, inputs) : 0);
}

unsigned agg_latency_bucket(uint64_t ns)
{
	unsigned b = 0;

	while (b < AGG_LATENCY_BUCKETS - 1 &&
	       ns > agg_latency_bounds_s[b] * 1e9)
		b++;
	return b;
}

void aggregate_by_tree(struct aggregate *a)
{
	a->by_tree = true;
}

static struct open_tree *open_tree(struct aggregate *a, uint32_t tid)
{
	struct open_tree *tr;

	for (size_t i = 0; i < a->nr_trees; i++)
		if (a->trees[i].tid == tid)
			return &a->trees[i];
	if (a->nr_trees == a->cap_trees) {
		size_t cap = a->cap_trees ? a->cap_trees * 2 : 8;

		tr = realloc(a->trees, cap * sizeof(*tr));
		if (!tr)
			return NULL;
		a->trees = tr;
		a->cap_trees = cap;
	}
	tr = &a->trees[a->nr_trees++];
	memset(tr, 0, sizeof(*tr));
	tr->tid = tid;
	return tr;
}

/* Adds an op's share to its thread's open tree (returned; NULL on
 * ENOMEM). */
static struct open_tree *tree_add(struct aggregate *a, uint32_t tid,
				  uint32_t row, uint64_t d, uint64_t self)
{
	struct open_tree *tr = open_tree(a, tid);
	struct tree_part *p = NULL;

	if (!tr)
		return NULL;
	for (size_t i = 0; i < tr->nr && !p; i++)
		if (tr->parts[i].row == row)
			p = &tr->parts[i];
	if (!p) {
		if (tr->nr == tr->cap) {
			size_t cap = tr->cap ? tr->cap * 2 : 16;
			struct tree_part *parts = realloc(tr->parts,
							  cap * sizeof(*parts));

			if (!parts)
				return NULL;
			tr->parts = parts;
			tr->cap = cap;
		}
		p = &tr->parts[tr->nr++];
		*p = (struct tree_part){ .row = row };
	}
	p->calls++;
	p->total_ns += d;
	p->self_ns += self;
	return tr;
}

/* A tree ended: its shares are one unit of each row's sums. */
static void tree_close(struct aggregate *a, struct open_tree *tr)
{
	for (size_t i = 0; i < tr->nr; i++) {
		const struct tree_part *p = &tr->parts[i];
		struct op_stats *r = &a->rows[p->row];

		r->calls_sq += (double)p->calls * p->calls;
		r->total_sq += (double)p->total_ns * p->total_ns;
		r->self_sq += (double)p->self_ns * p->self_ns;
	}
	tr->nr = 0;
}

void aggregate_add(struct aggregate *a, const struct closed_op *c)
{
	const struct op *o = c->op;
	struct op_stats *r = row_of(a, o->name, c->frames, c->depth,
				    o->inputs);
	uint64_t d = c->dur_ns;

	if (!r)
		return;
	if (!(o->flags & OP_TRUNCATED)) {
		if (!r->ended || d < r->min_ns)
			r->min_ns = d;
		if (d > r->max_ns)
			r->max_ns = d;
		r->ended++;
		r->ended_ns += d;
	}
	if (!r->calls) {
		r->scope = o->scope;
		a->nr_called++;
	}
	r->calls++;
	r->total_ns += d;
	r->self_ns += c->self_ns;
	if (!a->by_tree) {
		r->calls_sq += 1;
		r->total_sq += (double)d * d;
		r->self_sq += (double)c->self_ns * c->self_ns;
	} else {
		struct open_tree *tr = tree_add(a, o->tid, r - a->rows, d,
						c->self_ns);

		if (!tr)
			a->oom = true;
		else if (c->parent_id < 0)
			tree_close(a, tr);
	}
	r->truncated += (o->flags & OP_TRUNCATED) != 0;
	r->self_off_cpu_ns += c->self_off_cpu_ns;
	r->off_cpu_ns += c->off_cpu_ns;
	for (int w = 0; w < MEM_WHERE_NR; w++) {
		r->self_mem[w] += c->self_mem[w];
		r->mem[w] += c->mem[w];
	}
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

	if (!l || !l->depth)
		return;
	r = row_of(a, l->op_name, l->frames, l->depth, l->op_inputs);
	if (!r)
		return;
	r->gpu_self_ns += d;
	r->kernels += g->act->kind == RF_GPU_ACT_KERNEL;
	a->gpu_self_ns += d;
	for (uint32_t i = 0; i < l->depth; i++)	/* ops, not Python frames */
		if (!py_frames_loc(&t->py, l->frames[i]) &&
		    (r = row_of(a, l->frames[i], l->frames, i + 1,
				l->frame_inputs ? l->frame_inputs[i] : 0)))
			r->gpu_total_ns += d;
}

/* A synchronize call's time (enter to exit, when the agent gave its
 * enter) is waiting on the GPU for the op it ran in and every op around
 * it. */
static void on_gpu_api(void *ctx, struct trace *t,
		       const struct gpu_launch *call)
{
	struct aggregate *a = ctx;
	uint64_t d = gpu_sync_wait_ns(call);
	struct op_stats *r;

	if (!d)
		return;
	for (uint32_t i = 0; i < call->depth; i++)
		if (!py_frames_loc(&t->py, call->frames[i]) &&
		    (r = row_of(a, call->frames[i], call->frames, i + 1,
				call->frame_inputs ?
				call->frame_inputs[i] : 0)))
			r->gpu_wait_ns += d;
}

/* items (nr used of *cap, elements of size bytes) with room for one
 * more, moved if it had to grow (doubling from 16); NULL and a->oom set
 * when there is none, items then unchanged. */
static void *room_for_one(struct aggregate *a, void *items, size_t nr,
			  size_t *cap, size_t size)
{
	size_t grown = *cap ? 2 * *cap : 16;
	void *p;

	if (nr < *cap)
		return items;
	if (!(p = realloc(items, grown * size))) {
		a->oom = true;
		return NULL;
	}
	*cap = grown;
	return p;
}

/* An interval with no op open counts for its thread's idle row. */
static void add_idle(struct aggregate *a, struct trace *t,
		     const struct off_cpu_interval *iv)
{
	uint64_t *at = u64map_get(&a->idle_index, (uint64_t)iv->tid + 1);
	uint64_t d = iv->end_ns - iv->start_ns;
	long th = trace_thread_index(t, iv->tid);
	struct idle_thread *r;

	if (at) {
		r = &a->idle[*at];
	} else {
		struct idle_thread *p = room_for_one(a, a->idle, a->nr_idle,
						     &a->cap_idle, sizeof(*p));

		if (!p)
			return;
		a->idle = p;
		if (!u64map_put(&a->idle_index, (uint64_t)iv->tid + 1,
				a->nr_idle)) {
			a->oom = true;
			return;
		}
		r = &a->idle[a->nr_idle++];
		*r = (struct idle_thread){ .pid = iv->pid, .tid = iv->tid,
					   .name = UINT32_MAX };
	}
	if (th >= 0)
		r->name = t->threads[th].comm_name;
	r->intervals++;
	if (iv->reason < RF_OFF_NR)
		r->ns[iv->reason] += d;
	r->total_ns += d;
}

/* --off-cpu: a woken interval with a traced waker's op counts for the
 * pair; one with no op open, for its thread's idle row. */
static void on_off_cpu(void *ctx, struct trace *t,
		       const struct off_cpu_interval *iv)
{
	struct aggregate *a = ctx;
	uint64_t key, *at;
	struct waker_pair *w;

	if (iv->op_name == UINT32_MAX && iv->end_ns >= iv->start_ns)
		add_idle(a, t, iv);
	if (iv->waker_op_name == UINT32_MAX || iv->op_name == UINT32_MAX)
		return;
	key = ((uint64_t)iv->waker_op_name << 32 | iv->op_name) + 1;
	if ((at = u64map_get(&a->waker_index, key))) {
		w = &a->wakers[*at];
	} else {
		struct waker_pair *p = room_for_one(a, a->wakers,
						    a->nr_wakers,
						    &a->cap_wakers, sizeof(*p));

		if (!p)
			return;
		a->wakers = p;
		if (!u64map_put(&a->waker_index, key, a->nr_wakers)) {
			a->oom = true;
			return;
		}
		w = &a->wakers[a->nr_wakers++];
		*w = (struct waker_pair){ .waker = iv->waker_op_name,
					  .woken = iv->op_name };
	}
	w->wakes++;
	w->off_cpu_ns += iv->end_ns - iv->start_ns;
}

struct trace_sink aggregate_sink(struct aggregate *a)
{
	return (struct trace_sink){ .op = on_op, .gpu = on_gpu,
				    .gpu_api = on_gpu_api,
				    .off_cpu = on_off_cpu, .ctx = a };
}

static int by_self(const void *x, const void *y)
{
	const struct op_stats *a = x, *b = y;

	return a->self_ns < b->self_ns ? 1 : a->self_ns > b->self_ns ? -1 :
	       (a->name > b->name) - (a->name < b->name);
}

/* Heaviest first; ties by self time, then name id, so the order is
 * stable. */
#define DESCENDING(fn, field)						\
static int fn(const void *x, const void *y)				\
{									\
	const struct op_stats *a = x, *b = y;				\
									\
	return a->field < b->field ? 1 : a->field > b->field ? -1 :	\
	       by_self(x, y);						\
}
DESCENDING(by_total, total_ns)
DESCENDING(by_calls, calls)
DESCENDING(by_cuda, gpu_total_ns)
DESCENDING(by_self_cuda, gpu_self_ns)
DESCENDING(by_kernels, kernels)
DESCENDING(by_gpu_wait, gpu_wait_ns)
DESCENDING(by_min, min_ns)
DESCENDING(by_max, max_ns)

static double avg_of(const struct op_stats *r)
{
	return r->ended ? (double)r->ended_ns / r->ended : 0;
}

static int by_avg(const void *x, const void *y)
{
	double a = avg_of(x), b = avg_of(y);

	return a < b ? 1 : a > b ? -1 : by_self(x, y);
}

static const struct names *sort_names;	/* for by_name, during qsort */

static int by_name(const void *x, const void *y)
{
	const struct op_stats *a = x, *b = y;
	int c = strcmp(names_get(sort_names, a->name),
		       names_get(sort_names, b->name));

	return c ? c : by_self(x, y);
}

struct op_stats *aggregate_sorted(const struct aggregate *a,
				  const struct trace *t, enum sort_key key,
				  size_t *nr)
{
	static int (*const cmp[])(const void *, const void *) = {
		[SORT_SELF] = by_self, [SORT_TOTAL] = by_total,
		[SORT_CALLS] = by_calls, [SORT_CUDA] = by_cuda,
		[SORT_AVG] = by_avg, [SORT_MIN] = by_min, [SORT_MAX] = by_max,
		[SORT_SELF_CUDA] = by_self_cuda, [SORT_KERNELS] = by_kernels,
		[SORT_NAME] = by_name, [SORT_GPU_WAIT] = by_gpu_wait,
	};
	struct op_stats *rows = malloc((a->nr ? a->nr : 1) * sizeof(*rows));

	*nr = 0;
	if (!rows)
		return NULL;
	for (size_t i = 0; i < a->nr; i++)
		if (a->rows[i].calls || a->rows[i].gpu_total_ns)
			rows[(*nr)++] = a->rows[i];
	sort_names = &t->names;
	qsort(rows, *nr, sizeof(*rows),
	      key < sizeof(cmp) / sizeof(cmp[0]) && cmp[key] ? cmp[key] :
	      by_self);
	return rows;
}

void aggregate_reset(struct aggregate *a)
{
	for (size_t i = 0; i < a->nr_trees; i++)
		a->trees[i].nr = 0;
	a->nr = 0;
	u64map_free(&a->group_index);
	u64map_free(&a->group_pairs);
	u64map_free(&a->waker_index);
	a->nr_wakers = 0;
	u64map_free(&a->idle_index);
	a->nr_idle = 0;
	a->self_ns = a->gpu_self_ns = 0;
	a->nr_called = 0;
}

void aggregate_free(struct aggregate *a)
{
	for (size_t i = 0; i < a->nr_trees; i++)
		free(a->trees[i].parts);
	free(a->trees);
	free(a->rows);
	free(a->wakers);
	free(a->idle);
	u64map_free(&a->group_index);
	u64map_free(&a->group_pairs);
	u64map_free(&a->waker_index);
	u64map_free(&a->idle_index);
	memset(a, 0, sizeof(*a));
}

/* Var(sum/p) = sum over all units of y^2 (1-p)/p, estimated from the
 * kept units by sum of y^2 (1-p)/p^2, y being what a unit added to the
 * row (for counts, its number of calls). */
void estimate_op(const struct op_stats *r, double p, struct op_estimate *e)
{
	double q = 1.0 - p;

	e->calls = r->calls / p;
	e->calls_se = sqrt(r->calls_sq * q) / p;
	e->total_ns = r->total_ns / p;
	e->total_se = sqrt(r->total_sq * q) / p;
	e->self_ns = r->self_ns / p;
	e->self_se = sqrt(r->self_sq * q) / p;
}
