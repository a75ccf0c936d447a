// SPDX-License-Identifier: BSD-2-Clause
/*
 * The rows live in one array in order of first sight; an open-addressing
 * index (linear probing, at most half full) maps a key to its row, so an
 * add costs one hash of the stack and, for a known stack, no allocation.
 *
 * A fleet daemon resets the profile every interval and then sees mostly
 * the same stacks again, so a reset only clears the index and the row
 * count: the row array, the index and every row's frame buffer stay
 * allocated and are reused by the next interval's rows. Every slot of the
 * row array, including those past nr that an earlier interval filled,
 * owns a buffer of frames_cap frames (NULL when 0). A buffer only grows,
 * to the deepest stack its slot has held, so once the recurring stacks
 * have each passed through, an interval allocates nothing.
 */
#include <stdlib.h>
#include <string.h>
#include "stack_profile.h"

#define MIN_ROWS 64

static uint64_t mix(uint64_t h, uint64_t word)
{
	/* One multiply-xorshift round per word: cheap and spreads the small
	 * ids (pids, name ids) that make up a key over all 64 bits. */
	h = (h ^ word) * 0x9E3779B97F4A7C15ull;
	return h ^ (h >> 29);
}

static uint64_t hash_key(const struct stack_key *k)
{
	uint64_t h = 0;

	h = mix(h, (uint64_t)k->pid << 32 | k->tid);
	h = mix(h, (uint64_t)k->thread_name << 32 | k->depth);
	h = mix(h, k->shapes);
	for (uint32_t i = 0; i < k->depth; i++)
		h = mix(h, k->frames[i]);
	return h;
}

static int row_is(const struct stack_row *r, const struct stack_key *k)
{
	return r->pid == k->pid && r->tid == k->tid &&
	       r->thread_name == k->thread_name && r->depth == k->depth &&
	       r->shapes == k->shapes &&
	       (!k->depth ||
		!memcmp(r->frames, k->frames, k->depth * sizeof(*k->frames)));
}

/* The index slot holding key's row, or the empty slot where it belongs. */
static uint32_t *find_slot(uint32_t *index, size_t cap,
			   const struct stack_row *rows,
			   const struct stack_key *k)
{
	size_t i = hash_key(k) & (cap - 1);

	for (;; i = (i + 1) & (cap - 1))
		if (!index[i] || row_is(&rows[index[i] - 1], k))
			return &index[i];
}

static struct stack_key key_of(const struct stack_row *r)
{
	return (struct stack_key){
		.pid = r->pid, .tid = r->tid, .thread_name = r->thread_name,
		.frames = r->frames, .depth = r->depth, .shapes = r->shapes,
	};
}

static int grow_index(struct stack_profile *p)
{
	size_t cap = p->index_cap ? p->index_cap * 2 : 2 * MIN_ROWS;
	uint32_t *index = calloc(cap, sizeof(*index));

	if (!index)
		return -1;
	for (size_t i = 0; i < p->nr; i++) {
		struct stack_key k = key_of(&p->rows[i]);

		*find_slot(index, cap, p->rows, &k) = i + 1;
	}
	free(p->index);
	p->index = index;
	p->index_cap = cap;
	return 0;
}

static int grow_rows(struct stack_profile *p)
{
	size_t cap = p->cap ? p->cap * 2 : MIN_ROWS;
	struct stack_row *rows;

	/* Row numbers are stored as uint32_t + 1 in the index. */
	if (cap > UINT32_MAX - 1)
		return -1;
	rows = realloc(p->rows, cap * sizeof(*rows));
	if (!rows)
		return -1;
	/* New slots own no frame buffer yet. */
	memset(rows + p->cap, 0, (cap - p->cap) * sizeof(*rows));
	p->rows = rows;
	p->cap = cap;
	return 0;
}

/* Makes row r's buffer hold depth frames; its old contents are dead. */
static int fit_frames(struct stack_row *r, uint32_t depth)
{
	uint32_t *frames;

	if (depth <= r->frames_cap)
		return 0;
	frames = realloc(r->frames, depth * sizeof(*frames));
	if (!frames)
		return -1;
	r->frames = frames;
	r->frames_cap = depth;
	return 0;
}

static void add_values(struct stack_values *to, const struct stack_values *v)
{
	to->calls += v->calls;
	to->self_ns += v->self_ns;
	to->gpu_ns += v->gpu_ns;
	to->off_cpu_ns += v->off_cpu_ns;
	to->alloc_blocks += v->alloc_blocks;
	to->alloc_bytes += v->alloc_bytes;
	to->inuse_blocks += v->inuse_blocks;
	to->inuse_bytes += v->inuse_bytes;
}

void stack_profile_init(struct stack_profile *p)
{
	memset(p, 0, sizeof(*p));
}

int stack_profile_add(struct stack_profile *p, const struct stack_key *key,
		      const struct stack_values *v)
{
	struct stack_row *r;
	uint32_t *slot;

	if ((p->nr + 1) * 2 > p->index_cap && grow_index(p))
		return -1;
	slot = find_slot(p->index, p->index_cap, p->rows, key);
	if (*slot) {
		add_values(&p->rows[*slot - 1].v, v);
		return 0;
	}
	if (p->nr == p->cap && grow_rows(p))
		return -1;
	r = &p->rows[p->nr];
	/* Slot nr is not a row yet, so resizing its buffer changes nothing
	 * visible if a later step fails. */
	if (fit_frames(r, key->depth))
		return -1;
	if (key->depth)
		memcpy(r->frames, key->frames, key->depth * sizeof(*r->frames));
	r->depth = key->depth;
	r->pid = key->pid;
	r->tid = key->tid;
	r->thread_name = key->thread_name;
	r->shapes = key->shapes;
	r->v = *v;
	*slot = ++p->nr;
	return 0;
}

void stack_profile_reset(struct stack_profile *p)
{
	if (p->index)
		memset(p->index, 0, p->index_cap * sizeof(*p->index));
	p->nr = 0;
}

void stack_profile_free(struct stack_profile *p)
{
	for (size_t i = 0; i < p->cap; i++)
		free(p->rows[i].frames);
	free(p->rows);
	free(p->index);
	memset(p, 0, sizeof(*p));
}
