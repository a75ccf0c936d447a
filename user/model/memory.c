// SPDX-License-Identifier: BSD-2-Clause
/* Allocations and frees charged to ops: see memory.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memory.h"
#include "trace.h"

/* A block's key: its address, with its process and whether it is device
 * memory in the bits user addresses leave free (a CUDA pointer and a
 * host pointer never share a value, but two processes' blocks may). */
static uint64_t block_key(uint32_t pid, int8_t type, uint64_t addr)
{
	return addr ^ ((uint64_t)(pid & 0x7fff) << 48) ^
	       ((uint64_t)(type != RF_DEVICE_CPU) << 63);
}

double memory_sample_weight(uint64_t size, uint64_t mean)
{
	double p;

	if (!mean || !size)
		return 1;
	p = -expm1(-(double)size / (double)mean);
	return p > 0 ? 1 / p : 1;
}

void memory_exp_table(uint32_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (uint32_t)llround(-log((i + 0.5) / (double)n) *
					 (double)(1u << RF_MEM_EXP_SHIFT));
}

const char *memory_device_name(int8_t type)
{
	return type == RF_DEVICE_CPU ? "CPU" :
	       type == RF_DEVICE_CUDA ? "CUDA" : "device";
}

void memory_format(int64_t bytes, char *buf, size_t len)
{
	double a = bytes < 0 ? -(double)bytes : (double)bytes;
	double kb = 1024.0, mb = kb * 1024, gb = mb * 1024;

	if (a >= gb)
		snprintf(buf, len, "%.2f Gb", bytes / gb);
	else if (a >= mb)
		snprintf(buf, len, "%.2f Mb", bytes / mb);
	else if (a >= kb)
		snprintf(buf, len, "%.2f Kb", bytes / kb);
	else
		snprintf(buf, len, "%lld b", (long long)bytes);
}

struct mem_device *memory_device(struct memory *m, int8_t type, int8_t index)
{
	for (int i = 0; i < m->nr_devices; i++)
		if (m->devices[i].type == type && m->devices[i].index == index)
			return &m->devices[i];
	if (m->nr_devices == MEM_MAX_DEVICES)
		return NULL;
	m->devices[m->nr_devices] = (struct mem_device){
		.type = type, .index = index,
	};
	return &m->devices[m->nr_devices++];
}

static uint32_t take_block(struct memory *m)
{
	uint32_t i = m->free_head;
	void *p;

	if (i != UINT32_MAX && m->nr_blocks) {
		m->free_head = m->blocks[i].next_free;
		return i;
	}
	if (m->nr_blocks == m->cap_blocks) {
		size_t cap = m->cap_blocks ? 2 * m->cap_blocks : 1024;

		p = realloc(m->blocks, cap * sizeof(*m->blocks));
		if (!p)
			return UINT32_MAX;
		m->blocks = p;
		m->cap_blocks = cap;
	}
	return (uint32_t)m->nr_blocks++;
}

static void drop_block(struct memory *m, uint32_t i)
{
	m->blocks[i].next_free = m->free_head;
	m->blocks[i].bytes = 0;
	m->free_head = i;
}

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
static void made(struct trace *t, struct mem_change *c, int32_t slot)
{
	struct memory *m = &t->mem;
	uint64_t key = block_key(c->pid, c->device_type, c->addr);
	uint64_t *old = u64map_get(&m->live, key);
	struct mem_block *b;
	uint32_t i;

	if (old) {		/* its free was lost */
		struct mem_device *d = memory_device(m, c->device_type,
						     c->device_index);
		const struct mem_block *lost = &m->blocks[*old - 1];

		m->counts.replaced++;
		if (d)
			d->live -= (uint64_t)llround(lost->weight *
						     (double)lost->bytes);
		drop_block(m, (uint32_t)(*old - 1));
		u64map_del(&m->live, key);
	}
	i = take_block(m);
	if (i == UINT32_MAX || !u64map_put(&m->live, key, (uint64_t)i + 1)) {
		if (i != UINT32_MAX)
			drop_block(m, i);
		t->counts.oom++;
		return;
	}
	b = &m->blocks[i];
	*b = (struct mem_block){
		.bytes = (uint64_t)c->bytes, .ts_ns = c->ts_ns,
		.op_name = UINT32_MAX, .scope_name = enclosing_scope(t, slot),
		.py_frame = UINT32_MAX, .tid = c->tid,
		.device_type = c->device_type, .weight = c->weight,
		.device_index = c->device_index,
	};
	if (slot >= 0) {
		b->op_name = t->ops[slot].name;
		b->py_frame = context_frame(t, &t->ops[slot]);
		keep_stack(t, b, slot);
	}
}

/* A block freed: its size from its record (CPU frees carry none); false
 * for a block made before tracing began. */
static bool freed(struct trace *t, struct mem_change *c)
{
	struct memory *m = &t->mem;
	uint64_t key = block_key(c->pid, c->device_type, c->addr);
	uint64_t *at = u64map_get(&m->live, key);
	uint32_t i;

	if (!at)
		return false;
	i = (uint32_t)(*at - 1);
	if (!c->bytes)
		c->bytes = -(int64_t)m->blocks[i].bytes;
	c->weight = m->blocks[i].weight;
	drop_block(m, i);
	u64map_del(&m->live, key);
	return true;
}

/* What a record stands for, in bytes (itself, or under byte sampling
 * the bytes of the blocks it stands for). */
static int64_t weighed(const struct mem_change *c)
{
	return c->weight == 1 ? c->bytes :
	       (int64_t)llround(c->weight * (double)c->bytes);
}

static void charge(struct trace *t, const struct mem_change *c, int32_t slot)
{
	struct memory *m = &t->mem;
	int where = c->device_type == RF_DEVICE_CPU ? MEM_CPU : MEM_DEVICE;
	int64_t b = weighed(c);

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

/* The device's live bytes, and the totals the record gives (a rise of
 * the allocator's reserved bytes is a segment it took from the driver). */
static void account(struct memory *m, struct mem_change *c,
		    const struct rf_mem_event *e)
{
	struct mem_device *d = memory_device(m, c->device_type,
					     c->device_index);

	if (!d)
		return;
	d->live += (uint64_t)weighed(c);	/* wraps back for a free */
	if (d->live > d->peak)
		d->peak = d->live;
	if (e->hdr.variant == RF_MEM_DEVICE) {
		if (e->total_reserved > d->total_reserved && d->total_reserved)
			d->segments_reserved += e->total_reserved -
						d->total_reserved;
		else if (e->total_reserved < d->total_reserved)
			d->segments_released += d->total_reserved -
						e->total_reserved;
		d->total_allocated = e->total_allocated;
		d->total_reserved = e->total_reserved;
	} else {
		d->total_allocated = d->live;
	}
	c->live = d->live;
	c->total_allocated = d->total_allocated;
	c->total_reserved = d->total_reserved;
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

	if (e->hdr.flags & RF_F_MEM_SAMPLED)
		c.weight = memory_sample_weight((uint64_t)llabs(e->bytes),
						t->mem.sample_bytes);

	t->counts.events++;
	if (!t->mem.on || !c.addr)
		return;
	if (c.bytes > 0)
		made(t, &c, slot);
	else if (!freed(t, &c) || !c.bytes) {
		t->mem.counts.frees_unknown++;
		return;
	}
	charge(t, &c, slot);
	account(&t->mem, &c, e);
	if (slot >= 0) {
		c.op_id = (int64_t)t->ops[slot].id;
		c.op_name = t->ops[slot].name;
	}
	for (int k = 0; k < t->nr_sinks && trace_passes(t, c.ts_ns); k++)
		if (t->sinks[k].memory)
			t->sinks[k].memory(t->sinks[k].ctx, t, &c);
}

static bool same_group(const struct mem_leak *g, const struct mem_leak *k)
{
	return g->op_name == k->op_name && g->scope_name == k->scope_name &&
	       g->py_frame == k->py_frame && g->device_type == k->device_type &&
	       g->device_index == k->device_index;
}

static int by_bytes(const void *a, const void *b)
{
	const struct mem_leak *x = a, *y = b;

	/* Ties: fewer blocks first (one block of the size is the likelier
	 * leak to look at). */
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return x->blocks > y->blocks ? 1 : x->blocks < y->blocks ? -1 : 0;
}

long memory_leaks(const struct trace *t, struct mem_leak **out)
{
	const struct memory *m = &t->mem;
	struct mem_leak *g = NULL;
	struct u64map at = { 0 };	/* group hash -> index + 1 */
	size_t n = 0, cap = 0;

	*out = NULL;
	for (size_t i = 0; i < m->nr_blocks; i++) {
		const struct mem_block *b = &m->blocks[i];
		struct mem_leak k;
		uint64_t h, *gi;

		if (!b->bytes)
			continue;	/* freed: on the free list */
		k = (struct mem_leak){
			.op_name = b->op_name, .scope_name = b->scope_name,
			.py_frame = b->py_frame,
			.device_type = b->device_type,
			.device_index = b->device_index,
			.oldest_ns = b->ts_ns,
		};
		/* Groups are few: a hash of the key finds one, and a clash
		 * (two keys, one hash) is told by comparing them. */
		h = ((uint64_t)k.op_name * 0x9e3779b97f4a7c15ull) ^
		    ((uint64_t)k.scope_name << 21) ^
		    ((uint64_t)k.py_frame * 0xff51afd7ed558ccdull) ^
		    ((uint64_t)(uint8_t)k.device_type << 8) ^
		    (uint8_t)k.device_index;
		for (; (gi = u64map_get(&at, h | 1)) &&
		       !same_group(&g[*gi - 1], &k); h += 2)
			;
		if (!gi) {
			if (n == cap) {
				void *p = realloc(g, (cap = cap ? 2 * cap : 64) *
						     sizeof(*g));

				if (!p)
					goto oom;
				g = p;
			}
			g[n++] = k;
			if (!u64map_put(&at, h | 1, n))
				goto oom;
			gi = u64map_get(&at, h | 1);
		}
		/* Under byte sampling, the blocks each one stands for. */
		g[*gi - 1].bytes += (uint64_t)llround(b->weight *
						      (double)b->bytes);
		g[*gi - 1].blocks += (uint64_t)llround(b->weight);
		if (b->ts_ns < g[*gi - 1].oldest_ns)
			g[*gi - 1].oldest_ns = b->ts_ns;
	}
	u64map_free(&at);
	if (n)
		qsort(g, n, sizeof(*g), by_bytes);
	*out = g;
	return (long)n;
oom:
	u64map_free(&at);
	free(g);
	return -1;
}

bool memory_note(const struct trace *t, char *buf, size_t len)
{
	const struct memory *m = &t->mem;
	const struct mem_counts *c = &m->counts;
	char made[32], gone[32], out[32], mean[32];
	int n = 0;

	if (!m->on)
		return false;
	if (m->sample_bytes) {
		memory_format((int64_t)m->sample_bytes, mean, sizeof(mean));
		n = snprintf(buf, len, "sampled by bytes, a point per %s on "
			     "average: records and estimated bytes; %llu "
			     "sampled blocks not sent (BPF's table of them "
			     "full); ", mean, (unsigned long long)
			     t->counts.mem_sampled_full);
		if (n < 0 || (size_t)n >= len)
			n = 0;
	}
	memory_format((int64_t)c->alloc_bytes, made, sizeof(made));
	memory_format((int64_t)c->free_bytes, gone, sizeof(gone));
	memory_format((int64_t)c->outside_ops_bytes, out, sizeof(out));
	snprintf(buf + n, len - n, "%llu allocations (%s) and %llu frees (%s) "
		 "charged; %llu frees of blocks made before tracing, not "
		 "charged; %llu allocations (%s) with no op open; %llu blocks "
		 "whose free was lost",
		 (unsigned long long)c->allocs, made,
		 (unsigned long long)c->frees, gone,
		 (unsigned long long)c->frees_unknown,
		 (unsigned long long)c->outside_ops, out,
		 (unsigned long long)c->replaced);
	return true;
}

void memory_free(struct memory *m)
{
	free(m->blocks);
	u64map_free(&m->live);
	memset(m, 0, sizeof(*m));
	m->free_head = UINT32_MAX;
}
