/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * --python-stacks for one traced process: finds its interpreter, tells
 * the BPF walk where it keeps its threads and frames, and names the
 * frames BPF sends (py_stack.h reads the target's memory; the model keeps
 * what it named, model/py_frames.h).
 *
 * A target that is not CPython 3.11 (a C++ libtorch program, another
 * version) gets one warning and is traced without Python frames. Forked
 * children (--children) share their parent's layout, so the walk needs
 * nothing new for them; their frames are read from their own memory.
 */
#ifndef RFBPF_PY_SESSION_H
#define RFBPF_PY_SESSION_H

#include <stdbool.h>
#include <sys/types.h>
#include "rfbpf.h"

struct probes;
struct py_reader;
struct trace;

struct py_thread_name;

struct py_session {
	struct py_reader *readers;	/* one per process, opened on use */
	int nr, cap;
	bool started;
	double epoch_s;		/* when code objects were last re-checked */
	/* The Python thread names last read, and when (threads that start
	 * in a burst are named from one read). */
	struct py_thread_name *names;
	int nr_names;
	uint32_t names_pid;
	double names_s;
};

/* Once: finds pid's interpreter and switches the BPF walk on (depth
 * frames at most), names frames for t. false, with a one-line reason in
 * why, when pid runs no interpreter rfbpf reads; false and why empty when
 * it was done before. */
bool py_session_start(struct py_session *ps, pid_t pid, unsigned depth,
		      struct probes *probes, struct trace *t, char *why,
		      size_t len);
/* A whole Python stack record is about to be named for t (by
 * model/events.c): code objects are re-checked once an epoch has passed,
 * and its thread is labelled with its Python name
 * (threading.Thread(name=...)) the first time it can be read. */
void py_session_note(struct py_session *ps, struct trace *t,
		     const struct rf_py_stack_event *e);
void py_session_free(struct py_session *ps);

#endif
