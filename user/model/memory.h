/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * --memory: what PyTorch's allocators made and freed, charged to ops.
 *
 * Each allocation is charged (+bytes) to the innermost op open on the
 * thread that made it, each free (-bytes) to the innermost op open on the
 * thread that freed it, as torch.profiler(profile_memory=True) charges
 * the [memory] events that fall inside an op. An op's self memory is what
 * was charged to it; its total adds its children's totals (the trace's
 * closed_op carries both).
 *
 * A CPU free carries no size: the block's own record gives it. The table
 * of live blocks holds every block made while traced, with the op, the
 * user scope around it and the Python stack that made it, so the blocks
 * still live at the end are a leak view. A free of a block made before
 * tracing began has no record: it is counted apart, never charged, as
 * torch.profiler leaves out such frees too.
 */
#ifndef RFBPF_MEMORY_H
#define RFBPF_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "rfbpf.h"
#include "u64map.h"

/* An op's charges, by where the memory is: the CPU, or a device (the CUDA
 * caching allocator's GPU memory). */
enum mem_where { MEM_CPU = 0, MEM_DEVICE, MEM_WHERE_NR };

struct mem_block {		/* a live block made while traced */
	uint64_t bytes;
	uint64_t ts_ns;
	uint32_t op_name;	/* the innermost op that made it (a name id;
				 * UINT32_MAX: none was open) */
	uint32_t scope_name;	/* the record_function scope around it,
				 * UINT32_MAX: none */
	uint32_t py_frame;	/* the innermost frame of the op's Python
				 * context (a label id; UINT32_MAX: none) */
	uint32_t tid;
	int8_t device_type, device_index;
	uint32_t next_free;	/* free-list link while unused */
	double weight;		/* blocks it stands for (byte sampling) */
	/* Its op stack (a stack id interned in trace.py) and what the
	 * stack's share stands for, when memory.stack_weight gave one (the
	 * fleet's measured parts); 0: none kept. */
	uint32_t stack;
	double stack_w;
};

#define MEM_MAX_DEVICES 16

/* Live bytes on one device (CPU included), as rfbpf saw them. */
struct mem_device {
	int8_t type, index;
	uint64_t live, peak;
	/* The allocator's own totals from its last report (devices only). */
	uint64_t total_allocated, total_reserved;
	uint64_t segments_reserved, segments_released;	/* bytes */
};

struct mem_counts {
	uint64_t allocs, frees;		/* records charged */
	/* Their bytes (estimates under byte sampling: each record weighed
	 * as the blocks it stands for). */
	uint64_t alloc_bytes, free_bytes;
	/* Frees of blocks made before tracing began (or whose record was
	 * lost): not charged, as torch.profiler leaves them out. */
	uint64_t frees_unknown;
	uint64_t outside_ops;		/* allocations with no op open */
	uint64_t outside_ops_bytes;
	/* A block made at the address of one still live: the older one's
	 * free was lost (ring-buffer drop), so it is forgotten. */
	uint64_t replaced;
};

struct memory {
	bool on;			/* --memory */
	/* Byte sampling: one sample point per this many bytes on average
	 * (0: every block is recorded). */
	uint64_t sample_bytes;
	struct mem_block *blocks;
	size_t nr_blocks, cap_blocks;
	uint32_t free_head;		/* UINT32_MAX: none */
	struct u64map live;		/* block key -> index + 1 */
	struct mem_device devices[MEM_MAX_DEVICES];
	int nr_devices;
	struct mem_counts counts;
	/* Blocks made at ts keep their op stack, standing for this many
	 * (0: not kept), for in-use profiles by stack (fleet mode: the
	 * weight of the measured part they were made in). NULL: none. */
	double (*stack_weight)(void *ctx, uint64_t ts);
	void *stack_weight_ctx;
};

/* One allocation or free, as the sinks see it; valid during the call. */
struct mem_change {
	uint32_t pid, tid;
	uint64_t ts_ns, addr;
	int64_t bytes;			/* < 0: a free */
	int8_t device_type, device_index;
	/* The device's live bytes after it, and the allocator's totals
	 * (rfbpf's own live bytes for the CPU, which reports none). */
	uint64_t live, total_allocated, total_reserved;
	int64_t op_id;			/* the op charged, -1: none */
	uint32_t op_name;		/* UINT32_MAX: none */
	int32_t slot;			/* its slot in trace.ops, -1: none */
	/* The blocks it stands for: 1, or under byte sampling 1/p of its
	 * size (memory_sample_weight). */
	double weight;
};

/* Blocks still live at the end, grouped by what made them. */
struct mem_leak {
	uint32_t op_name, scope_name, py_frame;	/* UINT32_MAX: none */
	int8_t device_type, device_index;
	uint64_t bytes, blocks;
	uint64_t oldest_ns;
};

/* Byte sampling's estimator: a block of size bytes is sampled with
 * probability p = 1 - exp(-size/mean), so it stands for 1/p blocks and
 * size/p bytes (Horvitz-Thompson, as Go's pprof scales heap samples):
 * unbiased, whatever the mix of sizes. 1 without sampling. */
double memory_sample_weight(uint64_t size, uint64_t mean);
/* The table BPF draws its gaps from: -ln(U) in fixed point, U the
 * midpoint of each of n equal slices of (0, 1). */
void memory_exp_table(uint32_t *v, size_t n);

/* A block made at addr, noted live (zeroed: the caller fills it in); one
 * already live there is forgotten and counted as replaced. NULL on
 * ENOMEM. */
struct mem_block *memory_add_block(struct memory *m, uint32_t pid,
				   int8_t type, int8_t index, uint64_t addr);
/* The live block at addr, copied to *out and forgotten; false if none
 * (made before tracing, or its record lost). */
bool memory_remove_block(struct memory *m, uint32_t pid, int8_t type,
			 uint64_t addr, struct mem_block *out);
/* What a change stands for, in bytes: itself, or under byte sampling
 * the bytes of the blocks it stands for. */
int64_t memory_weighed(const struct mem_change *c);
/* The change to its device's live and peak bytes, and the totals its
 * record gives (source: enum rf_mem_source; a rise of a device
 * allocator's reserved bytes is a segment it took from the driver);
 * c's live and totals are set. */
void memory_account(struct memory *m, struct mem_change *c, uint8_t source,
		    uint64_t total_allocated, uint64_t total_reserved);

struct trace;
/* A --memory record: charged, paired, handed to the sinks
 * (memory_events.c). */
void memory_event(struct trace *t, const struct rf_mem_event *e);
/* The live blocks grouped as struct mem_leak, largest first (*out is
 * malloc'd; the caller frees it). Returns how many, or -1 on ENOMEM. */
long memory_leaks(const struct memory *m, struct mem_leak **out);
/* The device a record names, added on first sight (NULL if there are
 * MEM_MAX_DEVICES already). */
struct mem_device *memory_device(struct memory *m, int8_t type,
				 int8_t index);
/* "CPU", "CUDA", or "device N". */
const char *memory_device_name(int8_t type);
/* Bytes as torch.profiler's tables write them: "4.00 Mb", "-512 b". */
void memory_format(int64_t bytes, char *buf, size_t len);
/* A line on what was seen and what could not be paired (false when
 * --memory is off), with the same wording in every output; sampled_full:
 * BPF's count of sampled blocks not sent. */
bool memory_note(const struct memory *m, uint64_t sampled_full, char *buf,
		 size_t len);
void memory_free(struct memory *m);

#endif
