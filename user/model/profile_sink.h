/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Trace sinks that feed stack profiles: one with every closed op's self
 * time, GPU time and (--memory) the blocks it made by op stack (folded
 * stacks, pprof), one with GPU time
 * by op stack and kernel (--gpu-folded), where the last frame is the
 * kernel (or copy) and a stack with no op names why there is none.
 */
#ifndef RFBPF_PROFILE_SINK_H
#define RFBPF_PROFILE_SINK_H

#include "stack_profile.h"
#include "trace.h"

struct trace_sink profile_sink_ops(struct stack_profile *p);
/* What that sink does, for a consumer that picks which ops to add. */
void profile_add_op(struct stack_profile *p, struct trace *t,
		    const struct closed_op *c);
/* The same with c's self time and the calls it counts for given (an op
 * counted in part: the fleet's windows). */
void profile_add_op_part(struct stack_profile *p, struct trace *t,
			 const struct closed_op *c, uint64_t calls);
void profile_add_gpu(struct stack_profile *p, struct trace *t,
		     const struct gpu_done *g);
/* --memory: a block made, to its op stack's alloc_blocks/alloc_bytes
 * (what the ops sink does with each allocation). */
void profile_add_alloc(struct stack_profile *p, struct trace *t,
		       const struct mem_change *c);
/* --memory: the live blocks that kept their stack (memory.stack_weight),
 * to their stacks' inuse_blocks/inuse_bytes, weighed. */
void profile_add_inuse(struct stack_profile *p, struct trace *t);
struct trace_sink profile_sink_gpu_kernels(struct stack_profile *p);

#endif
