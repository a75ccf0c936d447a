// SPDX-License-Identifier: BSD-2-Clause
#include <math.h>
#include <string.h>
#include "profile_sink.h"

/* by_shapes: the Input Dims of input set id, as the key has them. */
static uint32_t shapes_of(const struct stack_profile *p,
			  const struct trace *t, uint32_t id)
{
	const struct input_set *in = op_inputs_get(&t->inputs, id);

	return p->by_shapes && in ? in->dims + 1 : 0;
}

void profile_add_op(struct stack_profile *p, struct trace *t,
		    const struct closed_op *c)
{
	profile_add_op_part(p, t, c, 1);
}

void profile_add_op_part(struct stack_profile *p, struct trace *t,
			 const struct closed_op *c, uint64_t calls)
{
	struct stack_key key = {
		.pid = c->pid, .tid = c->op->tid,
		.thread_name = c->thread ? c->thread->comm_name : UINT32_MAX,
		.frames = c->frames, .depth = c->depth,
		.shapes = shapes_of(p, t, c->op->inputs),
	};
	struct stack_values v = { .calls = calls, .self_ns = c->self_ns,
				  .off_cpu_ns = c->self_off_cpu_ns };

	if (stack_profile_add(p, &key, &v))
		t->counts.oom++;
}

/* GPU time is the launching op's own: its stack gets it. */
void profile_add_gpu(struct stack_profile *p, struct trace *t,
		     const struct gpu_done *g)
{
	const struct gpu_launch *l = g->launch;
	struct stack_values v = { .gpu_ns = gpu_duration(g->act) };
	struct stack_key key;

	if (!l || !l->depth)
		return;
	key = (struct stack_key){
		.pid = l->pid, .tid = l->tid, .thread_name = l->thread_name,
		.frames = l->frames, .depth = l->depth,
		.shapes = shapes_of(p, t, l->op_inputs),
	};
	if (stack_profile_add(p, &key, &v))
		t->counts.oom++;
}

static void ops_on_op(void *ctx, struct trace *t, const struct closed_op *c)
{
	profile_add_op(ctx, t, c);
}

static void ops_on_gpu(void *ctx, struct trace *t, const struct gpu_done *g)
{
	profile_add_gpu(ctx, t, g);
}

/* --memory: a block made goes to the stack of the op that made it (or
 * under "[no op]"), weighed as the blocks it stands for. */
void profile_add_alloc(struct stack_profile *p, struct trace *t,
		       const struct mem_change *c)
{
	static const char none[] = "[no op]";
	uint32_t depth = 1, marker;
	const uint32_t *frames = &marker;
	long th = trace_thread_index(t, c->tid);
	struct stack_values v = {
		.alloc_blocks = (uint64_t)llround(c->weight),
		.alloc_bytes = (uint64_t)llround(c->weight * (double)c->bytes),
	};
	struct stack_key key = {
		.pid = c->pid, .tid = c->tid,
		.thread_name = th >= 0 ? t->threads[th].comm_name : UINT32_MAX,
	};

	if (c->bytes <= 0)
		return;
	if (c->slot >= 0)
		frames = trace_frames(t, (uint32_t)c->slot, &depth);
	else
		marker = names_intern(&t->names, none, sizeof(none) - 1);
	key.frames = frames;
	key.depth = depth;
	if (stack_profile_add(p, &key, &v))
		t->counts.oom++;
}

void profile_add_inuse(struct stack_profile *p, struct trace *t)
{
	const struct memory *m = &t->mem;

	for (size_t i = 0; i < m->nr_blocks; i++) {
		const struct mem_block *b = &m->blocks[i];
		double w = b->weight * b->stack_w;
		long th;
		struct stack_values v;
		struct stack_key key;

		if (!b->bytes || !b->stack)
			continue;
		th = trace_thread_index(t, b->tid);
		v = (struct stack_values){
			.inuse_blocks = (uint64_t)llround(w),
			.inuse_bytes = (uint64_t)llround(w * (double)b->bytes),
		};
		key = (struct stack_key){
			.pid = trace_pid_of(t, b->tid), .tid = b->tid,
			.thread_name = th >= 0 ? t->threads[th].comm_name :
				       UINT32_MAX,
		};
		key.frames = py_frames_get(&t->py, b->stack, &key.depth);
		if (stack_profile_add(p, &key, &v))
			t->counts.oom++;
	}
}

static void ops_on_memory(void *ctx, struct trace *t,
			  const struct mem_change *c)
{
	profile_add_alloc(ctx, t, c);
}

struct trace_sink profile_sink_ops(struct stack_profile *p)
{
	return (struct trace_sink){ .op = ops_on_op, .gpu = ops_on_gpu,
				    .memory = ops_on_memory, .ctx = p };
}

/* Why a record hangs under no op: its launch was never seen, it ran
 * outside any op, or its op was not recorded (sampled out, or opened
 * before rfbpf attached). */
static uint32_t marker(struct trace *t, const struct gpu_launch *l)
{
	const char *m = !l ? "[no launch seen]" : l->outside_ops ?
			"[outside any op]" : "[no op recorded]";

	return names_intern(&t->names, m, strlen(m));
}

static void kernels_on_gpu(void *ctx, struct trace *t,
			   const struct gpu_done *g)
{
	const struct gpu_launch *l = g->launch;
	uint32_t depth = l && l->depth ? l->depth : 1;
	uint32_t frames[depth + 1];
	struct stack_values v = { .calls = 1, .gpu_ns = gpu_duration(g->act) };
	struct stack_key key = {
		.pid = g->pid, .frames = frames, .depth = depth + 1,
		.thread_name = UINT32_MAX,
	};

	if (l && l->depth) {
		memcpy(frames, l->frames, depth * sizeof(*frames));
		key.tid = l->tid;
		key.thread_name = l->thread_name;
	} else {
		frames[0] = marker(t, l);
	}
	frames[depth] = g->act->name;
	if (stack_profile_add(ctx, &key, &v))
		t->counts.oom++;
}

struct trace_sink profile_sink_gpu_kernels(struct stack_profile *p)
{
	return (struct trace_sink){ .gpu = kernels_on_gpu, .ctx = p };
}
