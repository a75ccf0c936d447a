// SPDX-License-Identifier: BSD-2-Clause
/* Allocations and frees charged to ops: see memory.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memory.h"

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

struct mem_block *memory_add_block(struct memory *m, uint32_t pid,
				   int8_t type, int8_t index, uint64_t addr)
{
	uint64_t key = block_key(pid, type, addr);
	uint64_t *old = u64map_get(&m->live, key);
	uint32_t i;

	if (old) {		/* its free was lost */
		struct mem_device *d = memory_device(m, type, index);
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
		return NULL;
	}
	memset(&m->blocks[i], 0, sizeof(m->blocks[i]));
	return &m->blocks[i];
}

bool memory_remove_block(struct memory *m, uint32_t pid, int8_t type,
			 uint64_t addr, struct mem_block *out)
{
	uint64_t key = block_key(pid, type, addr);
	uint64_t *at = u64map_get(&m->live, key);
	uint32_t i;

	if (!at)
		return false;
	i = (uint32_t)(*at - 1);
	*out = m->blocks[i];
	drop_block(m, i);
	u64map_del(&m->live, key);
	return true;
}

int64_t memory_weighed(const struct mem_change *c)
{
	return c->weight == 1 ? c->bytes :
	       (int64_t)llround(c->weight * (double)c->bytes);
}

void memory_account(struct memory *m, struct mem_change *c, uint8_t source,
		    uint64_t total_allocated, uint64_t total_reserved)
{
	struct mem_device *d = memory_device(m, c->device_type,
					     c->device_index);

	if (!d)
		return;
	d->live += (uint64_t)memory_weighed(c);	/* wraps back for a free */
	if (d->live > d->peak)
		d->peak = d->live;
	if (source == RF_MEM_DEVICE) {
		if (total_reserved > d->total_reserved && d->total_reserved)
			d->segments_reserved += total_reserved -
						d->total_reserved;
		else if (total_reserved < d->total_reserved)
			d->segments_released += d->total_reserved -
						total_reserved;
		d->total_allocated = total_allocated;
		d->total_reserved = total_reserved;
	} else {
		d->total_allocated = d->live;
	}
	c->live = d->live;
	c->total_allocated = d->total_allocated;
	c->total_reserved = d->total_reserved;
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

long memory_leaks(const struct memory *m, struct mem_leak **out)
{
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

bool memory_note(const struct memory *m, uint64_t sampled_full, char *buf,
		 size_t len)
{
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
			     "full); ", mean, (unsigned long long)sampled_full);
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
