/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One ring-buffer record (bpf/rfbpf.h) into the trace model: the size
 * checks and the dispatch on its kind. It is pure logic, so the fuzzer
 * feeds it arbitrary records (tests/fuzz/fuzz_events.c) and runs exactly
 * what rfbpf runs.
 *
 * What needs the live target stays with the session, behind hooks (any
 * may be NULL): naming a thread from /proc, probing a forked child,
 * reporting a CUPTI call, and what --python-stacks reads before a stack
 * is named (its thread's Python name, the code objects' epoch).
 */
#ifndef RFBPF_EVENTS_H
#define RFBPF_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include "trace.h"

struct event_hooks {
	/* A thread seen for the first time (th->pid is set): name it while
	 * it is alive. */
	void (*new_thread)(void *ctx, struct trace *t, struct thread *th);
	/* RF_EV_FORK: a traced process forked child. */
	void (*forked)(void *ctx, uint32_t child);
	/* RF_EV_CUPTI_CALL: thread tid called watched CUPTI function index. */
	void (*cupti_call)(void *ctx, unsigned index, int tid);
	/* RF_EV_PY_STACK with Python stacks on, before the stack is named. */
	void (*py_stack)(void *ctx, struct trace *t,
			 const struct rf_py_stack_event *e);
	void *ctx;
};

/* Applies the record of size bytes at data to t; records too short for
 * their kind, and kinds not known, are ignored. */
void events_dispatch(struct trace *t, const struct event_hooks *hooks,
		     const void *data, size_t size);

#endif
