// SPDX-License-Identifier: BSD-2-Clause
/*
 * Rebuilding what each thread was doing from before()/end() events.
 *
 * Ops are paired by the RecordFunction's address, not by thread: an async
 * RecordFunction (futures, RPC) may end on another thread than the one it
 * began on, and it is closed on the thread where it began. end() also runs
 * from ~RecordFunction for objects that never called before() (unsampled,
 * or built while nothing was active), and a RecordFunction may see end()
 * twice (explicitly, then from its destructor); those ends are counted and
 * otherwise ignored. Every op that does not close cleanly still closes,
 * with its end time set to the moment we learnt it was over and a flag
 * saying why, so nothing disappears silently.
 *
 * An open op lives in a slot of trace.ops; when it closes it goes to the
 * sinks with its stack and self time and its slot is reused. Its parent
 * is always still open then: an enclosing op closes its children first.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "trace.h"

static int push(struct thread *th, uint32_t op)
{
	if (th->depth == th->cap) {
		uint32_t cap = th->cap ? th->cap * 2 : 16;
		uint32_t *s = realloc(th->stack, cap * sizeof(*s));

		if (!s)
			return -1;
		th->stack = s;
		th->cap = cap;
	}
	th->stack[th->depth++] = op;
	return 0;
}

/*
 * The key of an open op: its RecordFunction's address, which is unique
 * only within one process. A parent and the children it forked
 * (--children) share their address space's layout, so the process goes
 * into the key's top bits, which user addresses (below 2^47) leave free.
 */
static uint64_t op_key(uint32_t pid, uint64_t rf_addr)
{
	return rf_addr ^ ((uint64_t)(pid & 0xffff) << 48);
}

static uint64_t minus(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* An op that ended with its own end() may end a step: the sinks hear of
 * the step before the op (a step slice drawn for a --step-op then
 * encloses that op's own, which has the same span). */
static void close_step(struct trace *t, const struct op *o)
{
	struct step done;

	if (o->flags & (OP_TRUNCATED | OP_ASYNC_END))
		return;
	if (!steps_op_close(t->steps, names_get(&t->names, o->name), o->tid,
			    o->start_ns, o->end_ns, &done))
		return;
	for (int s = 0; s < t->nr_sinks; s++)
		if (t->sinks[s].step)
			t->sinks[s].step(t->sinks[s].ctx, t, &done);
}

/* Hands a closed op to every sink, then frees its slot. Its own probes
 * put probe_cost.inside_ns in its interval; each op below it put all of
 * its cost there; and each direct child's cost outside the child's own
 * interval fell in this op's self time. */
static void emit(struct trace *t, uint32_t i)
{
	struct op *o = &t->ops[i];
	uint64_t d = op_duration(o);
	uint64_t in = t->probe_cost.inside_ns, out = t->probe_cost.outside_ns;
	struct closed_op c = {
		.op = o,
		.dur_ns = minus(d, in + o->descendants * (in + out)),
		.self_ns = minus(minus(d, o->child_ns), in + o->children * out),
		.parent_id = o->parent >= 0 ? (int64_t)t->ops[o->parent].id : -1,
		.pid = trace_pid_of(t, o->tid),
	};
	long th = trace_thread_index(t, o->tid);

	/* An op that ended on another thread ran on no single thread's
	 * stack: what its thread did meanwhile is not its own, and the work
	 * it waited for (TorchScript forks) ran on other threads. It has no
	 * self time (as torch.profiler gives async ops none), and is no
	 * child of its parent, whose thread went on with other children
	 * meanwhile: adding its time too would count that span twice. */
	c.self_off_cpu_ns = o->off_cpu_ns;
	c.off_cpu_ns = o->off_cpu_ns + o->child_off_cpu_ns;
	for (int w = 0; w < MEM_WHERE_NR; w++) {
		c.self_mem[w] = o->mem[w];
		c.mem[w] = o->mem[w] + o->child_mem[w];
	}
	if (o->flags & OP_ASYNC_END) {
		c.self_ns = 0;
	} else if (o->parent >= 0) {
		struct op *p = &t->ops[o->parent];

		p->child_off_cpu_ns += c.off_cpu_ns;
		for (int w = 0; w < MEM_WHERE_NR; w++)
			p->child_mem[w] += c.mem[w];
		p->child_ns += t->child_weight ?
			(uint64_t)llround(d * t->child_weight(
				t->child_weight_ctx, o)) : d;
		p->children++;
		p->descendants += 1 + o->descendants;
	}
	c.thread = th >= 0 ? &t->threads[th] : NULL;
	c.frames = trace_frames(t, i, &c.depth);
	if (t->steps)
		close_step(t, o);
	if (!trace_passes(t, o->start_ns))
		t->counts.ops_outside_steps++;
	for (int s = 0; s < t->nr_sinks && trace_passes(t, o->start_ns); s++)
		if (t->sinks[s].op)
			t->sinks[s].op(t->sinks[s].ctx, t, &c);
	o->next_free = t->free_slot;
	t->free_slot = i;
	t->nr_open--;
}

static void close_op(struct trace *t, uint32_t i, uint64_t ts, uint32_t why)
{
	struct op *o = &t->ops[i];

	o->end_ns = ts < o->start_ns ? o->start_ns : ts;
	o->flags = (o->flags & ~OP_OPEN) | why;
	u64map_del(&t->open, o->rf_addr);
	emit(t, i);
}

/* A free slot (not yet taken off the free list), or UINT32_MAX. */
static uint32_t free_slot(struct trace *t)
{
	size_t cap;
	struct op *ops;

	if (t->free_slot != UINT32_MAX)
		return t->free_slot;
	cap = t->cap_ops ? t->cap_ops * 2 : 256;
	if (cap >= UINT32_MAX)
		return UINT32_MAX;
	ops = realloc(t->ops, cap * sizeof(*ops));
	if (!ops)
		return UINT32_MAX;
	/* New slots join the free list, lowest first. */
	for (size_t i = cap; i-- > t->cap_ops;) {
		ops[i].flags = 0;
		ops[i].next_free = t->free_slot;
		t->free_slot = i;
	}
	t->ops = ops;
	t->cap_ops = cap;
	return t->free_slot;
}

static void seen(struct trace *t, uint64_t ts)
{
	if (!t->first_ns || ts < t->first_ns)
		t->first_ns = ts;
	if (ts > t->last_ns)
		t->last_ns = ts;
}

/* Close ops above `keep` on th's stack (they were still open when an
 * enclosing op or the thread ended). */
static void unwind_to(struct trace *t, struct thread *th, uint32_t keep,
		      uint64_t ts, uint32_t why, uint64_t *counter)
{
	while (th->depth > keep) {
		close_op(t, th->stack[--th->depth], ts, why);
		(*counter)++;
	}
}

int32_t stacks_before(struct trace *t, const struct rf_event_hdr *h,
		      const char *name, int64_t seq)
{
	struct thread *th;
	struct op *o;
	uint64_t *prev, key;
	uint32_t id, slot;

	t->counts.events++;
	if (h->variant < RF_V_NR_BEFORE)
		t->counts.before[h->variant]++;
	seen(t, h->ts_ns);
	if (h->flags & RF_F_NAME_TRUNCATED)
		t->counts.names_truncated++;
	if (h->flags & RF_F_NAME_FAULT)
		t->counts.name_faults++;

	/* The address is still open: that object died without end() (it can
	 * only happen if an end event was lost). Close the old op. */
	key = op_key(h->pid, h->rf_addr);
	prev = u64map_get(&t->open, key);
	if (prev) {
		struct op *old = &t->ops[*prev];
		struct thread *oth = trace_thread(t, old->tid, NULL);
		uint32_t idx = *prev, d;

		for (d = 0; oth && d < oth->depth; d++)
			if (oth->stack[d] == idx)
				break;
		if (oth && d < oth->depth)
			unwind_to(t, oth, d, h->ts_ns, OP_REPLACED,
				  &t->counts.replaced);
		else {	/* an async op already off its stack */
			close_op(t, idx, h->ts_ns, OP_REPLACED);
			t->counts.replaced++;
		}
	}

	th = trace_thread(t, h->tid, NULL);
	id = names_intern(&t->names, name, h->name_len);
	slot = free_slot(t);
	if (!th || id == UINT32_MAX || slot == UINT32_MAX || push(th, slot)) {
		t->counts.oom++;
		return -1;
	}
	o = &t->ops[slot];
	if (!u64map_put(&t->open, key, slot)) {
		th->depth--;
		t->counts.oom++;
		return -1;
	}
	t->free_slot = o->next_free;
	memset(o, 0, sizeof(*o));
	o->start_ns = h->ts_ns;
	o->rf_addr = key;
	o->id = t->nr_ops++;
	o->seq = seq;
	o->tid = h->tid;
	o->name = id;
	o->scope = h->scope;
	o->variant = h->variant;
	o->depth = th->depth - 1;
	o->parent = th->depth > 1 ? (int32_t)th->stack[th->depth - 2] : -1;
	o->flags = OP_OPEN;
	if (h->flags & RF_F_NAME_TRUNCATED)
		o->flags |= OP_NAME_TRUNCATED;
	if (h->flags & RF_F_NAME_FAULT)
		o->flags |= OP_NAME_FAULT;
	t->nr_open++;
	t->counts.ops++;
	if (!th->ran_ops) {
		th->ran_ops = true;
		t->counts.threads_with_ops++;
	}
	if (th->started_traced)
		t->counts.ops_on_started_threads++;
	if (t->steps)
		steps_op_open(t->steps, names_get(&t->names, id), h->tid,
			      h->ts_ns);
	return (int32_t)slot;
}

void stacks_before_event(struct trace *t, const struct rf_event_hdr *h,
			 const struct rf_before_event *e)
{
	int32_t i = stacks_before(t, h, e->name, e->seq);

	if (i >= 0) {
		t->ops[i].rf_thread = e->thread_id;
		t->ops[i].fwd_thread = e->fwd_thread_id;
	}
}

const char *off_cpu_reason_name(unsigned reason)
{
	static const char *const names[RF_OFF_NR] = {
		[RF_OFF_PREEMPTED] = "preempted",
		[RF_OFF_SLEEP] = "sleeping",
		[RF_OFF_UNINTERRUPTIBLE] = "uninterruptible",
		[RF_OFF_BLOCK_IO] = "block I/O",
		[RF_OFF_GIL] = "GIL",
	};

	return reason < RF_OFF_NR && names[reason] ? names[reason] : "off CPU";
}

void stacks_wake(struct trace *t, const struct rf_wake_event *e)
{
	struct thread *woken = trace_thread(t, e->woken_tid, NULL);
	int32_t slot = stacks_innermost_op(t, e->hdr.tid);

	t->counts.events++;
	t->counts.wakes++;
	t->counts.wakes_in_ops += slot >= 0;
	if (!woken)
		return;
	woken->waker_op = slot >= 0 ? (int64_t)t->ops[slot].id : -1;
	woken->waker_op_name = slot >= 0 ? t->ops[slot].name : UINT32_MAX;
	woken->waker_op_tid = e->hdr.tid;
}

void stacks_off_cpu(struct trace *t, const struct rf_off_cpu_event *e)
{
	struct thread *th = trace_thread(t, e->hdr.tid, NULL);
	int32_t slot = stacks_innermost_op(t, e->hdr.tid);
	uint64_t start = e->start_ns, d;
	struct off_cpu_interval iv = {
		.pid = e->hdr.pid, .tid = e->hdr.tid, .start_ns = e->start_ns,
		.end_ns = e->hdr.ts_ns, .reason = e->reason, .op_id = -1,
		.op_name = UINT32_MAX, .waker_tid = e->waker_tid,
		.waker_pid = e->waker_pid, .waker_op_id = -1, .waker_op_name = UINT32_MAX,
		.wake_ns = e->wake_ns,
	};
	char comm[sizeof(e->waker_comm) + 1] = "";

	t->counts.events++;
	if (e->hdr.ts_ns < e->start_ns)
		return;
	memcpy(comm, e->waker_comm, sizeof(e->waker_comm));
	iv.waker_comm = comm;
	t->counts.off_cpu_intervals++;
	/* The op that was innermost when the thread left: it cannot have
	 * opened or closed one since. */
	if (slot >= 0) {
		struct op *o = &t->ops[slot];

		if (start < o->start_ns)
			start = o->start_ns;
		o->off_cpu_ns += e->hdr.ts_ns - start;
		iv.op_id = (int64_t)o->id;
		iv.op_name = o->name;
	}
	d = e->hdr.ts_ns - start;
	if (slot < 0) {
		t->counts.off_cpu_outside_ops++;
		t->counts.off_cpu_outside_ns += d;
	}
	if (e->reason < RF_OFF_NR)
		t->counts.off_cpu_by_reason_ns[e->reason] += d;
	if (th && e->wake_ns && e->waker_tid &&
	    th->waker_op_tid == e->waker_tid) {
		iv.waker_op_id = th->waker_op;
		iv.waker_op_name = th->waker_op_name;
	}
	if (th)
		th->waker_op_tid = 0;
	for (int k = 0; k < t->nr_sinks && trace_passes(t, iv.start_ns); k++)
		if (t->sinks[k].off_cpu)
			t->sinks[k].off_cpu(t->sinks[k].ctx, t, &iv);
}

void stacks_inputs(struct trace *t, const struct rf_inputs_event *e,
		   size_t size)
{
	int32_t slot = stacks_open_op(t, e->hdr.tid, e->hdr.rf_addr);
	uint32_t nw = e->nr_words, id;

	t->counts.events++;
	if (nw > RF_IN_MAX_WORDS || size < RF_INPUTS_SIZE(nw))
		return;
	t->counts.inputs_records++;
	if (slot < 0) {
		t->counts.inputs_orphans++;
		return;
	}
	id = op_inputs_add(&t->inputs, &t->names,
			   (const uint64_t *)e->w, nw);
	if (!id)
		t->counts.oom++;
	t->ops[slot].inputs = id;
}

/* A record_function scope just begun with stack l[0..n) on th: its
 * frames up to the innermost __enter__, but never fewer than the context
 * of the op around it, which it is inside (so an outer op's context
 * stays a prefix of an inner one's). */
static uint32_t user_scope_context(const struct trace *t,
				   const struct thread *th, uint32_t slot,
				   const uint32_t *l, uint32_t n)
{
	uint32_t live = py_frames_enter_caller(&t->py, &t->names, l, n);

	for (uint32_t d = th->depth; d-- > 0;) {
		const struct op *p = &t->ops[th->stack[d]];

		if (th->stack[d] == slot || !p->py_stack)
			continue;
		return live > p->py_live ? live :
			p->py_live < n ? p->py_live : n;
	}
	return live;
}

void stacks_py_stack(struct trace *t, const struct rf_py_stack_event *e,
		     size_t size)
{
	struct thread *th = trace_thread(t, e->hdr.tid, NULL);
	int32_t slot = stacks_open_op(t, e->hdr.tid, e->hdr.rf_addr);
	uint32_t n = e->nr_frames, id;
	const uint32_t *l;
	struct op *o;

	t->counts.events++;
	if (!th) {
		t->counts.oom++;
		return;
	}
	if (e->py_flags & RF_PY_F_SAME) {
		t->counts.py_same++;
		id = th->py_last;
	} else {
		if (n > RF_PY_MAX_FRAMES || size < RF_PY_STACK_SIZE(n))
			return;
		t->counts.py_stacks++;
		id = py_frames_stack(&t->py, &t->names, &t->py_resolver,
				     e->hdr.pid, e->frames, n, e->py_flags);
		th->py_last = id;
	}
	if (slot < 0) {
		t->counts.py_orphans++;
		return;
	}
	stacks_py_context(t, th, id);
	o = &t->ops[slot];
	o->py_stack = id;
	l = py_frames_get(&t->py, id, &o->py_live);
	if (o->scope == RF_SCOPE_USER)
		o->py_live = user_scope_context(t, th, slot, l, o->py_live);
	for (int k = 0; k < t->nr_sinks &&
	     trace_passes(t, t->ops[slot].start_ns); k++)
		if (t->sinks[k].py_stack)
			t->sinks[k].py_stack(t->sinks[k].ctx, t,
					     &t->ops[slot]);
}

void stacks_py_context(struct trace *t, const struct thread *th,
		       uint32_t stack_id)
{
	const uint32_t *now, *began;
	uint32_t n, nb;

	now = py_frames_get(&t->py, stack_id, &n);
	if (!now)	/* no frame at all: nothing known */
		return;
	for (uint32_t d = th->depth; d-- > 0;) {
		struct op *o = &t->ops[th->stack[d]];
		uint32_t live;

		began = py_frames_get(&t->py, o->py_stack, &nb);
		if (!began)	/* not begun under Python, or just begun */
			continue;
		live = py_frames_common(&t->py, began, o->py_live, now, n);
		if (live == o->py_live)
			break;
		o->py_live = live;
	}
}

static bool ended_recently(const struct thread *th, uint64_t addr)
{
	for (int i = 0; i < RECENT_ENDS; i++)
		if (th->recent_ends[i] == addr)
			return true;
	return false;
}

/* An async op ends while its own thread has opened more ops above it: take
 * it out of the middle of the stack and hand its children to its parent. */
static void remove_from_middle(struct trace *t, struct thread *th,
			       uint32_t d)
{
	int32_t parent = t->ops[th->stack[d]].parent;

	if (d + 1 < th->depth)
		t->ops[th->stack[d + 1]].parent = parent;
	for (uint32_t k = d + 1; k < th->depth; k++) {
		t->ops[th->stack[k]].depth--;
		th->stack[k - 1] = th->stack[k];
	}
	th->depth--;
}

void stacks_end(struct trace *t, const struct rf_event_hdr *h)
{
	struct thread *ender = trace_thread(t, h->tid, NULL);
	uint64_t key = op_key(h->pid, h->rf_addr);
	uint64_t *idx = u64map_get(&t->open, key);
	struct thread *owner;
	uint32_t i, d;

	t->counts.events++;
	t->counts.ends++;
	seen(t, h->ts_ns);
	if (!ender) {
		t->counts.oom++;
		return;
	}
	if (!idx) {
		if (ended_recently(ender, key))
			t->counts.repeated_ends++;
		else if (h->flags & RF_F_BEGAN)
			t->counts.ends_begun_untraced++;
		else
			t->counts.unmatched_ends++;
		return;
	}
	i = *idx;
	ender->recent_ends[ender->recent_next++ % RECENT_ENDS] = key;
	owner = trace_thread(t, t->ops[i].tid, NULL);
	for (d = 0; d < owner->depth && owner->stack[d] != i; d++)
		;
	if (t->ops[i].tid != h->tid) {
		t->counts.async_ends++;
		t->ops[i].flags |= OP_ASYNC_END;
		t->ops[i].end_tid = h->tid;
		if (d < owner->depth)
			remove_from_middle(t, owner, d);
		close_op(t, i, h->ts_ns, 0);
		return;
	}
	if (d == owner->depth) {	/* not on a stack: nothing to unwind */
		close_op(t, i, h->ts_ns, 0);
		return;
	}
	/* Same thread: anything opened above it and still open ends with it. */
	unwind_to(t, owner, d + 1, h->ts_ns, OP_CLOSED_BY_PARENT,
		  &t->counts.closed_by_parent);
	if (owner->depth)
		owner->depth--;
	close_op(t, i, h->ts_ns, 0);
}

void stacks_thread_exit(struct trace *t, uint32_t tid, uint64_t ts_ns)
{
	long i = trace_thread_index(t, tid);

	t->counts.events++;
	t->counts.thread_exits++;
	seen(t, ts_ns);
	if (i < 0)
		return;
	unwind_to(t, &t->threads[i], 0, ts_ns, OP_THREAD_EXITED,
		  &t->counts.open_at_thread_exit);
	t->threads[i].exited = true;
	for (int k = 0; k < t->nr_sinks; k++)
		if (t->sinks[k].thread_exit)
			t->sinks[k].thread_exit(t->sinks[k].ctx, t, tid);
	/* Nothing of it is open (an async op it began is off its stack and
	 * names it by tid only): forget it, or a job that churns threads
	 * grows the model for ever. */
	trace_forget_thread(t, tid);
}

void stacks_detach(struct trace *t, uint64_t ts_ns)
{
	for (size_t i = 0; i < t->nr_threads; i++)
		unwind_to(t, &t->threads[i], 0, ts_ns, OP_OPEN_AT_DETACH,
			  &t->counts.open_at_detach);
	/* Async ops already removed from their stack but not yet ended. */
	for (size_t i = 0; i < t->cap_ops && t->nr_open; i++)
		if (t->ops[i].flags & OP_OPEN && u64map_get(&t->open,
						t->ops[i].rf_addr)) {
			close_op(t, i, ts_ns, OP_OPEN_AT_DETACH);
			t->counts.open_at_detach++;
		}
}

void stacks_pause(struct trace *t, uint32_t tid, uint64_t from_ns,
		  uint64_t to_ns)
{
	long i = trace_thread_index(t, tid);
	const struct thread *th = i >= 0 ? &t->threads[i] : NULL;

	for (uint32_t d = 0; th && to_ns > from_ns && d < th->depth; d++)
		if (t->ops[th->stack[d]].start_ns <= from_ns)
			t->ops[th->stack[d]].paused_ns += to_ns - from_ns;
}

int32_t stacks_open_op(const struct trace *t, uint32_t tid, uint64_t rf_addr)
{
	const uint64_t *idx = rf_addr ? u64map_get(&t->open,
		op_key(trace_pid_of(t, tid), rf_addr)) : NULL;

	if (!idx || t->ops[*idx].tid != tid)
		return -1;
	return (int32_t)*idx;
}

int32_t stacks_innermost_op(const struct trace *t, uint32_t tid)
{
	long i = trace_thread_index(t, tid);
	const struct thread *th = i >= 0 ? &t->threads[i] : NULL;

	return th && th->depth ? (int32_t)th->stack[th->depth - 1] : -1;
}
