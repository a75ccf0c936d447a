/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Folded stacks ("process;thread;op;child;... weight") for flamegraph.pl,
 * speedscope and inferno, written from a stack profile. Weights are self
 * time in ns, so every line's weight sums to the traced self time. ';' in
 * a name becomes ':'.
 */
#ifndef RFBPF_EXPORT_FOLDED_H
#define RFBPF_EXPORT_FOLDED_H

#include <stdio.h>
#include "model/stack_profile.h"
#include "model/trace.h"

/* --folded: p is fed by profile_sink_ops(). */
int export_folded(const struct trace *t, const struct stack_profile *p,
		  const char *path);
/* Returns 0, or -1 on ENOMEM. */
int write_folded(FILE *f, const struct trace *t, const struct stack_profile *p);

/* --gpu-folded: p is fed by profile_sink_gpu_kernels(): op stacks ending
 * in "[gpu] name" frames, weighted by GPU time in ns. Kernels with no op
 * hang under "[outside any op]", "[no op recorded]" or "[no launch seen]",
 * so every nanosecond of GPU time the agent reported is in the file. */
int export_gpu_folded(const struct trace *t, const struct stack_profile *p,
		      const char *path);
int write_gpu_folded(FILE *f, const struct trace *t,
		     const struct stack_profile *p);

/* --off-cpu-folded: p is fed by profile_sink_ops(), weighted by the time
 * the threads were off CPU with the stack's last op innermost, in ns. */
/* --memory-folded: op stacks weighted by the bytes they allocated. */
int export_memory_folded(const struct trace *t,
			 const struct stack_profile *p, const char *path);
int write_memory_folded(FILE *f, const struct trace *t,
			const struct stack_profile *p);
int export_off_cpu_folded(const struct trace *t,
			  const struct stack_profile *p, const char *path);
int write_off_cpu_folded(FILE *f, const struct trace *t,
			 const struct stack_profile *p);

/* Appends a frame to buf[0..used), with ';' (the separator) replaced. */
size_t folded_put_frame(char *buf, size_t used, size_t cap, const char *s);

#endif
