/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Chrome Trace Event JSON (the format Perfetto UI, chrome://tracing and
 * Kineto's traces share): one complete ("X") event per op, in microseconds
 * with nanosecond digits, metadata events naming the process and threads,
 * and rfbpf's own record (version, library, counters, per-op totals) under
 * "otherData".
 *
 * The file is written as the trace runs: a sink writes each op when it
 * closes (so events are in order of their end, which every viewer
 * accepts) and each thread's name before its first op; chrome_finish()
 * closes the event array and adds "otherData", which JSON allows after it.
 */
#ifndef RFBPF_EXPORT_CHROME_H
#define RFBPF_EXPORT_CHROME_H

#include <stdbool.h>
#include <stdio.h>
#include "model/aggregate.h"
#include "model/trace.h"
#include "chrome_events.h"

/* Starts the file (0, or -1 with errno), beside path: a file already
 * there stays as it was until chrome_publish (see atomic_stream). */
int chrome_open(struct chrome_writer *w, const char *path);
/* The same with a base chosen before (a flight recorder's dump, whose
 * events were written against it). */
int chrome_open_at(struct chrome_writer *w, const char *path,
		   uint64_t base_ns, uint64_t base_wall_ns);
/* The name of every thread the trace knows, as metadata events. */
void chrome_name_threads(struct chrome_writer *w, const struct trace *t);
/* Tracing began: the file replaces the one at its path and is written on
 * there. 0, or -1 with errno. */
int chrome_publish(struct chrome_writer *w);
/* Nothing was traced: the file is removed unpublished (what was at its
 * path is untouched). True if there was one to remove. */
bool chrome_discard(struct chrome_writer *w);
/* The same on an open stream (tests), times written relative to base_ns
 * (CLOCK_MONOTONIC), which was base_wall_ns on the wall clock; the caller
 * closes it. */
void chrome_begin(struct chrome_writer *w, FILE *f, uint64_t base_ns,
		  uint64_t base_wall_ns);
/* The sink that writes ops and GPU activity as they come. */
struct trace_sink chrome_sink(struct chrome_writer *w);
/* Ends the file (publishing it, if not yet): process names, "otherData" with t's counters and a's
 * per-op totals (a may be NULL). 0, or -1 with errno: that of the first
 * write that failed (EIO on a stream of chrome_begin's caller). */
int chrome_finish(struct chrome_writer *w, const struct trace *t,
		  const struct aggregate *a);

#endif
