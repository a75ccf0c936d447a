/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Chrome Trace Event JSON (the format Perfetto UI, chrome://tracing and
 * Kineto's traces share): one complete ("X") event per op, in microseconds
 * with nanosecond digits, metadata events naming the process and threads,
 * and rfbpf's own record (version, library, counters) under "otherData".
 */
#ifndef RFBPF_EXPORT_CHROME_H
#define RFBPF_EXPORT_CHROME_H

#include <stdio.h>
#include "model/trace.h"

int export_chrome_trace(const struct trace *t, const char *path);
/* The same to an open stream (used by tests). */
void write_chrome_trace(FILE *f, const struct trace *t);
/* The GPU processes, their activity and the op-to-kernel flows (one
 * ",\n"-led event each), from export_chrome_gpu.c. */
void write_chrome_gpu_events(FILE *f, const struct trace *t);

#endif
