/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Folded stacks ("process;thread;op;child;... weight") for flamegraph.pl,
 * speedscope and inferno. Weights are self time in ns, so every line's
 * weight sums to the traced self time. ';' in a name becomes ':'.
 */
#ifndef RFBPF_EXPORT_FOLDED_H
#define RFBPF_EXPORT_FOLDED_H

#include <stdio.h>
#include "model/trace.h"

int export_folded(const struct trace *t, const char *path);
/* Returns 0, or -1 on ENOMEM. */
int write_folded(FILE *f, const struct trace *t);

/* --gpu-folded (export_gpu_folded.c): op stacks ending in "[gpu] name"
 * frames, weighted by GPU time in ns. Kernels with no op hang under
 * "[outside any op]", "[no op recorded]" or "[no launch seen]", so every
 * nanosecond of GPU time the agent reported is in the file. */
int export_gpu_folded(const struct trace *t, const char *path);
int write_gpu_folded(FILE *f, const struct trace *t);

/* Shared by both: stacks summed by their text. */
struct folded {
	struct names stacks;	/* stack text -> id */
	uint64_t *weight;	/* by id */
};
/* Returns 0, or -1 on ENOMEM. */
int folded_add(struct folded *fd, const char *stack, size_t len,
	       uint64_t weight);
void folded_write(FILE *f, const struct folded *fd);
void folded_free(struct folded *fd);
/* Appends a frame to buf[0..used), with ';' (the separator) replaced. */
size_t folded_put_frame(char *buf, size_t used, size_t cap, const char *s);
/* "process;thread [tid];root;...;op" for op i; returns its length. */
size_t folded_stack_of(const struct trace *t, size_t i, char *buf,
		       size_t cap);
/* Writes a file with write(); -1 with errno on failure. */
int folded_export(const struct trace *t, const char *path,
		  int (*write)(FILE *f, const struct trace *t));

#endif
