// SPDX-License-Identifier: BSD-2-Clause
/*
 * --python-stacks in the Chrome trace: Python frames as Kineto's
 * with_stack draws them, "python_function" slices on the thread's track
 * around the ops they called.
 *
 * A slice is a function's frame, named as Kineto names it by the line it
 * was at when first seen. rfbpf sees a thread's Python stack only when an
 * op starts, so a frame's slice spans the ops seen under it: it opens at
 * the start of the first op whose stack holds it and closes when an op
 * starts outside it (a sibling call, a return), when an op whose context
 * it is beyond ends (the frames deeper than an op's own end with it), or
 * when the thread exits; it ends just after the last op it held. Calls
 * of one function from one line with no op outside them in between are
 * one slice: without a frame's identity the two cannot be told apart.
 *
 * Viewers need every slice of a thread to nest. An op that outlives
 * frames it began in (a record_function scope opened inside
 * record_function.__enter__, an op ended after its caller returned) is
 * not inside them: its Python context is what stays of its begin stack
 * (trace.h, stacks_py_context). When an op begins outside frames that
 * were open at the start of an op still open, those frames returned
 * inside that op, and their slice is cut at its start: the part before
 * it (if it held ops there) stays outside, the part after it becomes a
 * slice inside it. Each open op keeps, for the frames open when it
 * began, how far each had got then (its snapshot), which is where the
 * part before it ends.
 *
 * Each thread keeps its open frames, outermost first, and its open ops
 * with their snapshots; a frame is written when it closes.
 */
#include <stdlib.h>
#include <string.h>
#include "chrome_python.h"

struct py_slice {
	uint32_t label;
	uint32_t held;		/* ops closed under it so far */
	bool inside;		/* opened inside the op whose stack it is
				 * in (past its context): left out if it
				 * holds nothing */
	uint64_t id;		/* "Python id" */
	uint64_t start_ns, end_ns;
};

/* How far an open frame had got when an op began. */
struct py_mark {
	uint32_t held;
	uint64_t end_ns;
};

/* An op open on the thread, with its Python stack. */
struct py_open_op {
	uint64_t id;		/* op.id */
	uint64_t start_ns;
	uint32_t k;		/* open frames that are its context */
	uint32_t nr_marks;	/* frames open before it began ... */
	size_t at;		/* ... and their marks, in the thread's */
};

struct py_thread_slices {
	uint32_t tid, pid;
	struct py_slice *open;	/* outermost first */
	uint32_t n, cap;
	struct py_open_op *ops;	/* outermost first; k never falls inward */
	uint32_t nr_ops, cap_ops;
	struct py_mark *marks;
	size_t cap_marks;
	uint64_t *ids;		/* scratch for close_from */
	size_t cap_ids;
};

/* Makes *a (capacity *cap elements of size sz) hold n; false on ENOMEM. */
static bool fit(void **a, size_t *cap, size_t n, size_t sz)
{
	void *p;

	if (n <= *cap)
		return true;
	if (!(p = realloc(*a, n * 2 * sz)))
		return false;
	*a = p;
	*cap = n * 2;
	return true;
}

/* The thread's open frames, created on first use (NULL on ENOMEM). */
static struct py_thread_slices *slices_of(struct chrome_py *py, uint32_t tid,
					  uint32_t pid, bool create)
{
	uint64_t *at = u64map_get(&py->index, tid);

	if (at)
		return &py->threads[*at];
	if (!create)
		return NULL;
	if (py->nr == py->cap) {
		size_t cap = py->cap ? py->cap * 2 : 16;
		void *p = realloc(py->threads, cap * sizeof(*py->threads));

		if (!p)
			return NULL;
		py->threads = p;
		py->cap = cap;
	}
	if (!u64map_put(&py->index, tid, py->nr))
		return NULL;
	py->threads[py->nr] = (struct py_thread_slices){ .tid = tid,
							 .pid = pid };
	return &py->threads[py->nr++];
}

/* "FILE(LINE): FUNCTION", as Kineto names python_function slices. */
static void write_name(FILE *f, const struct trace *t, uint32_t label)
{
	const struct py_loc *l = py_frames_loc(&t->py, label);
	char name[1024];

	if (!l || !*names_get(&t->names, l->file)) {	/* a marker */
		json_string(f, names_get(&t->names, label));
		return;
	}
	snprintf(name, sizeof(name), "%s(%d): %s",
		 names_get(&t->names, l->file), l->line,
		 names_get(&t->names, l->func));
	json_string(f, name);
}

/* One slice of a frame; parent 0: none. */
static void write_slice(struct chrome_writer *w, const struct trace *t,
			const struct py_thread_slices *th, uint32_t label,
			uint64_t id, uint64_t parent, uint64_t start_ns,
			uint64_t end_ns)
{
	FILE *f = w->f;

	fprintf(f, "%s{\"ph\":\"X\",\"cat\":\"python_function\","
		"\"name\":", chrome_next(w));
	write_name(f, t, label);
	fprintf(f, ",\"pid\":%u,\"tid\":%u,\"ts\":", th->pid, th->tid);
	chrome_ts(w, start_ns);
	fputs(",\"dur\":", f);
	json_us(f, end_ns > start_ns ? end_ns - start_ns : 0);
	fprintf(f, ",\"args\":{\"Python id\":%llu,", (unsigned long long)id);
	if (parent)
		fprintf(f, "\"Python parent id\":%llu,",
			(unsigned long long)parent);
	fprintf(f, "\"Python thread\":%u}}", th->tid);
}

/* Frame i's mark at open op j (j < nr_ops), as it was when j began;
 * nothing held when j opened it. */
static struct py_mark mark_at(const struct py_thread_slices *th, uint32_t j,
			      uint32_t i)
{
	const struct py_open_op *o = &th->ops[j];

	if (i < o->nr_marks)
		return th->marks[o->at + i];
	return (struct py_mark){ 0, 0 };
}

/*
 * Where a slice of frame i (closing from depth keep on) ends, when the
 * last op it held ended at end_ns and what comes next begins at
 * before_ns: a nanosecond per frame it is below the deepest possible
 * after that op, so that nested slices never share an end (speedscope
 * computes each end as ts + dur in floating point, and ends that tie in
 * the file but not in its sums close in the wrong order: a staircase),
 * and a nanosecond per frame it is above keep before what comes next.
 */
static uint64_t end_of(uint32_t i, uint32_t keep, uint64_t end_ns,
		       uint64_t before_ns)
{
	uint64_t pad = RF_PY_MAX_FRAMES + 1 - i, room = 1 + (i - keep);
	uint64_t end = end_ns + pad;

	if (before_ns > room && end > before_ns - room)
		end = before_ns - room;
	return end > end_ns ? end : end_ns;
}

/*
 * How frames from depth keep on are cut when they close: the open ops
 * whose context reaches past keep (the innermost ones, from first on)
 * outlive them, and frame i is cut at the start of each op j it was open
 * for (k > i), the first of them f(i): one segment before op f(i), and
 * one from each such op's start on. Segment (i, j) lies inside op j
 * (j = f(i) - 1: the one before op f(i)) and inside segment (i - 1, j),
 * its parent. th->ids holds width ids a frame, segment j at j + 1 - first
 * (0: it held no op, and is left out).
 */
struct py_cut {
	uint32_t keep, first, width;
	uint64_t before_ns;	/* what comes next begins then */
};

static uint32_t first_cut(const struct py_thread_slices *th, uint32_t i,
			  uint32_t first)
{
	while (first < th->nr_ops && th->ops[first].k <= i)
		first++;
	return first;
}

/* Ids, outermost first, so that each segment knows its parent's. */
static void segment_ids(struct chrome_writer *w, struct py_thread_slices *th,
			const struct py_cut *c)
{
	for (uint32_t i = c->keep; i < th->n; i++) {
		uint64_t *ids = th->ids + (size_t)(i - c->keep) * c->width;
		uint32_t f = first_cut(th, i, c->first), held;

		for (uint32_t j = c->first; j <= th->nr_ops; j++) {
			if (j <= f) {	/* none, or the one before op f */
				ids[j - c->first] = j == f ? th->open[i].id : 0;
				continue;
			}
			held = j < th->nr_ops ? mark_at(th, j, i).held :
				th->open[i].held;
			ids[j - c->first] = held > mark_at(th, j - 1, i).held ?
				++w->py.next_id : 0;
		}
	}
}

/* Writes frame i, the innermost open, in its segments. */
static void write_frame(struct chrome_writer *w, const struct trace *t,
			const struct py_thread_slices *th, uint32_t i,
			const struct py_cut *c)
{
	const struct py_slice *s = &th->open[i];
	const uint64_t *ids = th->ids + (size_t)(i - c->keep) * c->width;
	const uint64_t *up = i > c->keep ? ids - c->width : NULL; /* i - 1 */
	uint32_t f = first_cut(th, i, c->first), keep = c->keep;
	uint64_t parent = i ? th->open[i - 1].id : 0, start, end;

	if (f == th->nr_ops || !c->width) {	/* no cut */
		if (s->inside && !s->held)
			return;
		if (up && c->width)
			parent = up[c->width - 1];
		write_slice(w, t, th, s->label, s->id, parent, s->start_ns,
			    end_of(i, keep, s->end_ns, c->before_ns));
		return;
	}
	for (uint32_t j = f; j <= th->nr_ops; j++) {
		if (j == f) {	/* before op f */
			struct py_mark m = mark_at(th, f, i);

			if (!m.held)
				continue;
			start = s->start_ns;
			end = end_of(i, keep, m.end_ns, th->ops[f].start_ns);
		} else if (!ids[j - c->first]) {
			continue;
		} else {	/* inside op j - 1 */
			start = th->ops[j - 1].start_ns + (i - keep + 1);
			end = j < th->nr_ops ?
				end_of(i, keep, mark_at(th, j, i).end_ns,
				       th->ops[j].start_ns) :
				end_of(i, keep, s->end_ns, c->before_ns);
		}
		if (up)
			parent = up[j - c->first];
		write_slice(w, t, th, s->label, ids[j - c->first], parent,
			    start < end ? start : end, end);
	}
}

/* Writes and drops the thread's open frames from depth keep on; what
 * comes next begins at before_ns (UINT64_MAX: nothing). A frame with no
 * cut is written whole as always (unless it began inside its op and held
 * nothing). */
static void close_from(struct chrome_writer *w, const struct trace *t,
		       struct py_thread_slices *th, uint32_t keep,
		       uint64_t before_ns)
{
	struct py_cut c = { .keep = keep, .first = th->nr_ops,
			    .before_ns = before_ns };

	while (c.first > 0 && th->ops[c.first - 1].k > keep)
		c.first--;
	c.width = th->nr_ops - c.first + 1;
	if (th->n <= keep)
		return;
	if (!fit((void **)&th->ids, &th->cap_ids,
		 (size_t)(th->n - keep) * c.width, sizeof(*th->ids)))
		c.width = 0;	/* ENOMEM: written whole, as before */
	if (c.width)
		segment_ids(w, th, &c);
	while (th->n > keep)
		write_frame(w, t, th, --th->n, &c);
	for (uint32_t j = c.first; j < th->nr_ops; j++)
		th->ops[j].k = keep;
}

/* How many of the open frames the stack l[0..n) starts with. */
static uint32_t shared(const struct trace *t,
		       const struct py_thread_slices *th, const uint32_t *l,
		       uint32_t n)
{
	uint32_t k = 0;

	while (k < th->n && k < n &&
	       py_frames_same_function(&t->py, th->open[k].label, l[k]))
		k++;
	return k;
}

/* Notes an op that began with frames [0, k) open, and its context. */
static bool push_op(struct py_thread_slices *th, const struct op *o,
		    uint32_t k, uint32_t live)
{
	size_t at = 0, cap = th->cap_ops;

	if (th->nr_ops)
		at = th->ops[th->nr_ops - 1].at + th->ops[th->nr_ops - 1].nr_marks;
	if (!fit((void **)&th->ops, &cap, th->nr_ops + 1, sizeof(*th->ops)) ||
	    !fit((void **)&th->marks, &th->cap_marks, at + k,
		 sizeof(*th->marks)))
		return false;
	th->cap_ops = cap;
	for (uint32_t i = 0; i < k; i++)
		th->marks[at + i] = (struct py_mark){ th->open[i].held,
						      th->open[i].end_ns };
	th->ops[th->nr_ops++] = (struct py_open_op){
		.id = o->id, .start_ns = o->start_ns, .k = live, .nr_marks = k,
		.at = at,
	};
	return true;
}

void chrome_py_opened(struct chrome_writer *w, const struct trace *t,
		      const struct op *o, uint32_t pid)
{
	struct py_thread_slices *th;
	const uint32_t *l;
	uint32_t n, k, live;

	l = py_frames_get(&t->py, o->py_stack, &n);
	th = l ? slices_of(&w->py, o->tid, pid, true) : NULL;
	if (!th)
		return;
	live = o->py_live < n ? o->py_live : n;
	k = shared(t, th, l, n);
	if (k > live)	/* frames past its context begin anew inside it */
		k = live;
	close_from(w, t, th, k, o->start_ns - (live - k));
	if (n > th->cap) {
		struct py_slice *s = realloc(th->open, n * sizeof(*s));

		if (!s)
			return;
		th->open = s;
		th->cap = n;
	}
	if (!push_op(th, o, k, live))
		return;
	/* The frame was called before the op began: its slice starts a
	 * nanosecond per frame it is above the op earlier, so that viewers
	 * nest the op in it (with equal starts the order of the file, where
	 * ops come first, would decide). Frames past the op's context (a
	 * scope's __enter__) start a nanosecond per frame after it, inside
	 * it. */
	for (; k < n; k++) {
		uint64_t at = k < live ? o->start_ns - (live - k) :
			o->start_ns + (k - live + 1);

		th->open[th->n++] = (struct py_slice){
			.label = l[k], .id = ++w->py.next_id,
			.start_ns = at, .end_ns = k < live ? o->start_ns : at,
			.inside = k >= live,
		};
	}
}

void chrome_py_closed(struct chrome_writer *w, const struct trace *t,
		      const struct op *o)
{
	struct py_thread_slices *th = slices_of(&w->py, o->tid, 0, false);
	uint32_t j, k;

	if (!th || !o->py_stack)
		return;
	for (j = th->nr_ops; j > 0 && th->ops[j - 1].id != o->id; j--)
		;
	if (!j)		/* its open was not seen (ENOMEM) */
		return;
	k = th->ops[--j].k;
	if (o->flags & OP_ASYNC_END) {	/* drawn apart: holds nothing */
		memmove(&th->ops[j], &th->ops[j + 1],
			(th->nr_ops - j - 1) * sizeof(*th->ops));
		th->nr_ops--;
		return;
	}
	close_from(w, t, th, k, o->end_ns);	/* opened inside it */
	th->nr_ops = j;
	for (uint32_t i = 0; i < k; i++) {
		if (th->open[i].end_ns < o->end_ns)
			th->open[i].end_ns = o->end_ns;
		th->open[i].held++;
	}
}

void chrome_py_thread_exit(struct chrome_writer *w, const struct trace *t,
			   uint32_t tid)
{
	struct py_thread_slices *th = slices_of(&w->py, tid, 0, false);
	size_t last = w->py.nr - 1;
	uint64_t i;

	if (!th)
		return;
	close_from(w, t, th, 0, UINT64_MAX);
	free(th->open);
	free(th->ops);
	free(th->marks);
	free(th->ids);
	i = th - w->py.threads;
	u64map_del(&w->py.index, tid);
	if (i != last) {
		w->py.threads[i] = w->py.threads[last];
		u64map_put(&w->py.index, w->py.threads[i].tid, i);
	}
	w->py.nr--;
}

void chrome_py_finish(struct chrome_writer *w, const struct trace *t)
{
	for (size_t i = 0; i < w->py.nr; i++) {
		close_from(w, t, &w->py.threads[i], 0, UINT64_MAX);
		free(w->py.threads[i].open);
		free(w->py.threads[i].ops);
		free(w->py.threads[i].marks);
		free(w->py.threads[i].ids);
	}
	free(w->py.threads);
	u64map_free(&w->py.index);
	memset(&w->py, 0, sizeof(w->py));
}
