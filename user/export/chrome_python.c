// SPDX-License-Identifier: BSD-2-Clause
/*
 * --python-stacks in the Chrome trace: Python frames as Kineto's
 * with_stack draws them, "python_function" slices on the thread's track
 * around the ops they called.
 *
 * A slice is a function's frame, named as Kineto names it by the line it
 * was at when first seen. rfbpf sees a thread's Python stack only when an
 * op starts, so a frame's slice spans the ops seen under it: it opens at the start of the first op
 * whose stack holds it and closes when an op starts outside it (a
 * sibling call, a return), when an op whose stack it is beyond ends (the
 * frames deeper than an op's own end with it), or when the thread exits;
 * it ends at the end of the last op it held. Calls of one function from
 * one line with no op outside them in between are one slice: without a
 * frame's identity the two cannot be told apart.
 *
 * Each thread keeps its open frames, outermost first; a frame is written
 * when it closes, so nothing is kept per op.
 */
#include <stdlib.h>
#include <string.h>
#include "chrome_python.h"

struct py_slice {
	uint32_t label;
	uint64_t id;		/* "Python id" */
	uint64_t start_ns, end_ns;
};

struct py_thread_slices {
	uint32_t tid, pid;
	struct py_slice *open;	/* outermost first */
	uint32_t n, cap;
};

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

/* Writes and drops the thread's open frames from depth keep on. */
static void close_from(struct chrome_writer *w, const struct trace *t,
		       struct py_thread_slices *th, uint32_t keep)
{
	while (th->n > keep) {
		const struct py_slice *s = &th->open[--th->n];
		FILE *f = w->f;

		fprintf(f, "%s{\"ph\":\"X\",\"cat\":\"python_function\","
			"\"name\":", chrome_next(w));
		write_name(f, t, s->label);
		fprintf(f, ",\"pid\":%u,\"tid\":%u,\"ts\":", th->pid, th->tid);
		chrome_ts(w, s->start_ns);
		fputs(",\"dur\":", f);
		json_us(f, s->end_ns > s->start_ns ? s->end_ns - s->start_ns :
			0);
		fprintf(f, ",\"args\":{\"Python id\":%llu,",
			(unsigned long long)s->id);
		if (th->n)
			fprintf(f, "\"Python parent id\":%llu,",
				(unsigned long long)th->open[th->n - 1].id);
		fprintf(f, "\"Python thread\":%u}}", th->tid);
	}
}

/* One function's frame whatever line it is at: its name and file. */
static bool same_function(const struct trace *t, uint32_t a, uint32_t b)
{
	const struct py_loc *x = py_frames_loc(&t->py, a);
	const struct py_loc *y = py_frames_loc(&t->py, b);

	if (a == b)
		return true;
	return x && y && x->func == y->func && x->file == y->file;
}

/* How many of the open frames the stack l[0..n) starts with. */
static uint32_t shared(const struct trace *t,
		       const struct py_thread_slices *th, const uint32_t *l,
		       uint32_t n)
{
	uint32_t k = 0;

	while (k < th->n && k < n && same_function(t, th->open[k].label, l[k]))
		k++;
	return k;
}

void chrome_py_opened(struct chrome_writer *w, const struct trace *t,
		      const struct op *o, uint32_t pid)
{
	struct py_thread_slices *th;
	const uint32_t *l;
	uint32_t n, k;

	l = py_frames_get(&t->py, o->py_stack, &n);
	th = l ? slices_of(&w->py, o->tid, pid, true) : NULL;
	if (!th)
		return;
	k = shared(t, th, l, n);
	close_from(w, t, th, k);
	if (n > th->cap) {
		struct py_slice *s = realloc(th->open, n * sizeof(*s));

		if (!s)
			return;
		th->open = s;
		th->cap = n;
	}
	/* The frame was called before the op began: its slice starts a
	 * nanosecond per frame it is above the op earlier, so that viewers
	 * nest the op in it (with equal starts the order of the file, where
	 * ops come first, would decide). */
	for (; k < n; k++)
		th->open[th->n++] = (struct py_slice){
			.label = l[k], .id = ++w->py.next_id,
			.start_ns = o->start_ns - (n - k),
			.end_ns = o->start_ns,
		};
}

void chrome_py_closed(struct chrome_writer *w, const struct trace *t,
		      const struct op *o)
{
	struct py_thread_slices *th = slices_of(&w->py, o->tid, 0, false);
	const uint32_t *l;
	uint32_t n, k;

	l = py_frames_get(&t->py, o->py_stack, &n);
	if (!th || !l || o->flags & OP_ASYNC_END)
		return;
	k = shared(t, th, l, n);
	close_from(w, t, th, k);	/* opened by ops inside it */
	for (uint32_t i = 0; i < k; i++)
		if (th->open[i].end_ns < o->end_ns)
			th->open[i].end_ns = o->end_ns;
}

void chrome_py_thread_exit(struct chrome_writer *w, const struct trace *t,
			   uint32_t tid)
{
	struct py_thread_slices *th = slices_of(&w->py, tid, 0, false);
	size_t last = w->py.nr - 1;
	uint64_t i;

	if (!th)
		return;
	close_from(w, t, th, 0);
	free(th->open);
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
		close_from(w, t, &w->py.threads[i], 0);
		free(w->py.threads[i].open);
	}
	free(w->py.threads);
	u64map_free(&w->py.index);
	memset(&w->py, 0, sizeof(w->py));
}
