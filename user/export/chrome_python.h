/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * --python-stacks in the Chrome trace (chrome_python.c): each thread's
 * Python frames as "python_function" slices, as Kineto writes them with
 * with_stack=True, built from the stacks seen at ops' starts.
 */
#ifndef RFBPF_EXPORT_CHROME_PYTHON_H
#define RFBPF_EXPORT_CHROME_PYTHON_H

#include "chrome_events.h"

/* An op's Python stack is known (it has just opened). */
void chrome_py_opened(struct chrome_writer *w, const struct trace *t,
		      const struct op *o, uint32_t pid);
/* An op closed (after its own event is written). */
void chrome_py_closed(struct chrome_writer *w, const struct trace *t,
		      const struct op *o);
/* A thread exited: its frames end with its last op. */
void chrome_py_thread_exit(struct chrome_writer *w, const struct trace *t,
			   uint32_t tid);
/* Tracing stopped: every frame still open is written. */
void chrome_py_finish(struct chrome_writer *w, const struct trace *t);

#endif
