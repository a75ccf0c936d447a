/* SPDX-License-Identifier: BSD-2-Clause */
/* A job's full-trace windows, --bursts' included: what an op gave the
 * window, and how long the window lasted (job_window.c). */
#ifndef RFBPF_FLEET_JOB_WINDOW_H
#define RFBPF_FLEET_JOB_WINDOW_H

#include "fleet/job_state.h"

/* An op's part of the window: its self time there to its name and its
 * stack (window_self.h), and its call if it began there (a
 * window_self_cut callback; ctx is the job). */
void job_window_add(void *ctx, struct trace *t, const struct closed_op *c,
		    uint64_t self_ns, uint64_t calls);
/* The window's seconds from `from` to `to`, into the span's and the
 * interval's totals. */
void job_window_count(struct job *j, uint64_t from, uint64_t to);

#endif
