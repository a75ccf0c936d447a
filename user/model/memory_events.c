// SPDX-License-Identifier: BSD-2-Clause
/*
 * --memory's records into the trace (memory.h says how blocks are
 * charged): each allocation and free charged to the op open on its
 * thread, with what made a block kept beside it (its op, the
 * record_function scope around it, its Python line, and in fleet mode its
 * op stack), then handed to the sinks. memory.c keeps the blocks; this
 * file knows the ops.
 */
#include <math.h>
#include <stdlib.h>
#include "memory.h"
#include "trace.h"

/* The record_function scope around op slot (itself included), or
 * UINT32_MAX. */
static uint32_t enclosing_scope(const struct trace *t, int32_t slot)
{
	for (int d = 0; slot >= 0 && d < 4096; d++) {
		const struct op *o = &t->ops[slot];

		if (o->scope == RF_SCOPE_USER)
			return o->name;
		slot = o->parent;
	}
	return UINT32_MAX;
}

/* The innermost frame of an op's Python context (stacks.c keeps how
 * many of its frames are: a record_function scope's end before
 * __enter__), UINT32_MAX without one. */
static uint32_t context_frame(const struct trace *t, const struct op *o)
{
	uint32_t n = 0;
	const uint32_t *l = py_frames_get(&t->py, o->py_stack, &n);

	if (o->py_live && o->py_live < n)
		n = o->py_live;
	return n ? l[n - 1] : UINT32_MAX;
}

/* Its op stack, interned, where memory.stack_weight wants it kept. */
static void keep_stack(struct trace *t, struct mem_block *b, int32_t slot)
{
	struct memory *m = &t->mem;
	const uint32_t *frames;
	uint32_t depth = 0;
	double w = m->stack_weight ?
		   m->stack_weight(m->stack_weight_ctx, b->ts_ns) : 0;

	if (w <= 0)
		return;
	frames = trace_frames(t, (uint32_t)slot, &depth);
	b->stack = depth ? py_frames_intern(&t->py, frames, depth) : 0;
	b->stack_w = b->stack ? w : 0;
}

/* A block made: noted live, with what made it. */
static void made(struct trace *t, const struct mem_change *c, int32_t slot)
{
	struct mem_block *b = memory_add_block(&t->mem, c->pid,
					       c->device_type,
					       c->device_index, c->addr);

	if (!b) {
		t->counts.oom++;
		return;
	}
	*b = (struct mem_block){
		.bytes = (uint64_t)c->bytes, .ts_ns = c->ts_ns,
		.op_name = UINT32_MAX, .scope_name = enclosing_scope(t, slot),
		.py_frame = UINT32_MAX, .tid = c->tid,
		.device_type = c->device_type,
		.device_index = c->device_index, .weight = c->weight,
	};
	if (slot >= 0) {
		b->op_name = t->ops[slot].name;
		b->py_frame = context_frame(t, &t->ops[slot]);
		keep_stack(t, b, slot);
	}
}

/* A block freed: its size and weight from its record (CPU frees carry no
 * size); false for a block made before tracing began. */
static bool freed(struct trace *t, struct mem_change *c)
{
	struct mem_block b;

	if (!memory_remove_block(&t->mem, c->pid, c->device_type, c->addr,
				 &b))
		return false;
	if (!c->bytes)
		c->bytes = -(int64_t)b.bytes;
	c->weight = b.weight;
	return true;
}

static void charge(struct trace *t, const struct mem_change *c, int32_t slot)
{
	struct memory *m = &t->mem;
	int where = c->device_type == RF_DEVICE_CPU ? MEM_CPU : MEM_DEVICE;
	int64_t b = memory_weighed(c);

	if (b > 0) {
		m->counts.allocs++;
		m->counts.alloc_bytes += (uint64_t)b;
	} else {
		m->counts.frees++;
		m->counts.free_bytes += (uint64_t)-b;
	}
	if (slot >= 0)
		t->ops[slot].mem[where] += b;
	else if (b > 0) {
		m->counts.outside_ops++;
		m->counts.outside_ops_bytes += (uint64_t)b;
	}
}

void memory_event(struct trace *t, const struct rf_mem_event *e)
{
	int32_t slot = stacks_innermost_op(t, e->hdr.tid);
	struct mem_change c = {
		.pid = e->hdr.pid, .tid = e->hdr.tid, .ts_ns = e->hdr.ts_ns,
		.addr = e->hdr.rf_addr, .bytes = e->bytes,
		.device_type = e->device_type,
		.device_index = e->device_index, .op_id = -1,
		.op_name = UINT32_MAX, .slot = slot, .weight = 1,
	};

	t->counts.events++;
	if (!t->mem.on || !c.addr)
		return;
	if (e->hdr.flags & RF_F_MEM_SAMPLED)
		c.weight = memory_sample_weight((uint64_t)llabs(e->bytes),
						t->mem.sample_bytes);
	if (c.bytes > 0)
		made(t, &c, slot);
	else if (!freed(t, &c) || !c.bytes) {
		t->mem.counts.frees_unknown++;
		return;
	}
	charge(t, &c, slot);
	memory_account(&t->mem, &c, e->hdr.variant, e->total_allocated,
		       e->total_reserved);
	if (slot >= 0) {
		c.op_id = (int64_t)t->ops[slot].id;
		c.op_name = t->ops[slot].name;
	}
	for (int k = 0; k < t->nr_sinks && trace_passes(t, c.ts_ns); k++)
		if (t->sinks[k].memory)
			t->sinks[k].memory(t->sinks[k].ctx, t, &c);
}
