/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Op time keyed by where it was spent: the process, the thread and the op
 * stack (outermost op first). Every closed op adds its self time to its
 * stack's row, every GPU activity its duration to the stack of the op that
 * launched it. Its size is the number of distinct stacks, never the number
 * of ops, so it can run for as long as a fleet daemon does; folded stacks
 * and pprof profiles are written from it.
 */
#ifndef RFBPF_STACK_PROFILE_H
#define RFBPF_STACK_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where a sample happened. frames are ids in the trace's names table
 * (op names), outermost first; depth 0 is allowed (GPU work launched
 * outside any op). thread_name is an id in the same names table. */
struct stack_key {
	uint32_t pid, tid;
	uint32_t thread_name;
	const uint32_t *frames;
	uint32_t depth;
	uint32_t shapes;	/* by_shapes: the innermost op's Input Dims
				 * (an id in the names table) + 1, else 0 */
};

/* What was measured there; raw sums over the recorded ops (an exporter
 * scales them into estimates). */
struct stack_values {
	uint64_t calls;		/* ops that closed with this stack */
	uint64_t self_ns;	/* their self time */
	uint64_t gpu_ns;	/* GPU activity launched directly by them */
	uint64_t off_cpu_ns;	/* --off-cpu: their threads off CPU while
				 * they were the innermost op */
	/* --memory: blocks made while this was the innermost op stack, and
	 * their bytes (under byte sampling, each sample weighed as the
	 * blocks it stands for: memory.h). */
	uint64_t alloc_blocks, alloc_bytes;
	/* ... and those of them still live (fleet mode's in-use profile,
	 * already weighed). */
	uint64_t inuse_blocks, inuse_bytes;
};

struct stack_row {
	uint32_t pid, tid, thread_name;
	uint32_t depth;
	uint32_t shapes;	/* as stack_key's */
	uint32_t *frames;	/* owned copy */
	struct stack_values v;
	/* frames' allocated length. Row slots and their buffers outlive a
	 * reset, so a recurring stack fills its slot without allocating. */
	uint32_t frames_cap;
};

struct stack_profile {
	struct stack_row *rows;	/* in order of first sight */
	size_t nr, cap;
	uint32_t *index;	/* open addressing over rows: row + 1, 0 empty */
	size_t index_cap;
	bool by_shapes;		/* --shapes in fleet mode: rows per stack and
				 * input dims (pprof labels them) */
};

void stack_profile_init(struct stack_profile *p);
/* Adds v to key's row, creating it; -1 on ENOMEM (nothing changed). */
int stack_profile_add(struct stack_profile *p, const struct stack_key *key,
		      const struct stack_values *v);
/* Forgets every row (a new interval), keeping the allocations. */
void stack_profile_reset(struct stack_profile *p);
void stack_profile_free(struct stack_profile *p);

#endif
