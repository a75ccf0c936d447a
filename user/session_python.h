/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * --python-stacks for one session: finds the target's interpreter, tells
 * the BPF walk where it keeps its threads and frames, and names the
 * frames BPF sends (user/python/ reads the target's memory; the model
 * keeps what it named, model/py_frames.h).
 *
 * A target that is not CPython 3.11 (a C++ libtorch program, another
 * version) gets one warning and is traced without Python frames. Forked
 * children (--children) share their parent's layout, so the walk needs
 * nothing new for them; their frames are read from their own memory.
 */
#ifndef RFBPF_SESSION_PYTHON_H
#define RFBPF_SESSION_PYTHON_H

#include <stdbool.h>
#include "rfbpf.h"

struct session;

/* Once per session, before RecordFunction is switched on (so the first
 * op already has its stack); nothing without --python-stacks. */
void session_python_start(struct session *s);
/* A Python stack record from the ring buffer. */
void session_python_event(struct session *s,
			  const struct rf_py_stack_event *e, size_t size);
void session_python_free(struct session *s);

#endif
