/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Perfetto's own trace format (-o FILE.perfetto-trace or .pftrace): a
 * stream of TracePackets (user/export/perfetto_trace.proto, packed by
 * protobuf-c), written as ops close, so memory holds only what is
 * interned and which threads have a sequence, whatever the trace's
 * length.
 *
 * Layout, as Perfetto's own SDK lays out a process's trace:
 *  - sequence 1 holds the clock snapshot (MONOTONIC is the trace's clock),
 *    the process, thread and GPU track descriptors, GPU work (a track per
 *    device and stream, as the JSON's "GPU N" / "stream S"), ops that
 *    ended on another thread (a track of their own each), and at the end
 *    an instant "rfbpf counts" whose annotations are every loss counter;
 *  - each traced thread has a sequence of its own, whose default track is
 *    the thread's and whose timestamps are deltas on a sequence-local
 *    incremental clock, with names and categories interned per sequence;
 *    an event earlier than the last one on its sequence (an op whose
 *    children were written first) carries an absolute MONOTONIC time.
 * Slices are BEGIN/END pairs, written when the op closes (Perfetto sorts
 * by time on import). Flows: forward op to backward op (from an instant
 * at the forward op's start, as Kineto's "s"), CUDA call to what it
 * launched or waited for. --memory: each allocation and free is a
 * [memory] instant on its thread (Bytes, Addr, Total Allocated, Total
 * Reserved), and each device's live bytes a counter track of the process.
 *
 * Not carried over from the JSON: Python frame slices, and the ids that
 * only join JSON events (External id, Record function id), which the
 * flows replace.
 */
#ifndef RFBPF_EXPORT_PERFETTO_H
#define RFBPF_EXPORT_PERFETTO_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "chrome_fwdbwd.h"
#include "model/trace.h"
#include "model/u64map.h"
#include "output_file.h"

struct pf_seq;

struct perfetto_writer {
	FILE *f;
	bool own_file;
	struct output_file file;
	struct pf_seq *global;		/* sequence 1 */
	struct pf_seq **threads;	/* a sequence per thread */
	size_t nr_threads, cap_threads;
	struct u64map thread_seq;	/* tid -> index + 1 */
	struct u64map tracks;		/* uuids described */
	struct fwdbwd fwdbwd;
	uint64_t async_tracks;
	uint64_t packets, slices, flows, absolute_times;
	uint64_t counters;		/* --memory: counter values written */
	bool oom;
};

/* Makes the file beside path (published by perfetto_publish or at the
 * finish, as chrome_open's): 0, or -1 with errno. */
int perfetto_open(struct perfetto_writer *w, const char *path);
/* The same on a stream the caller owns (tests). */
void perfetto_begin(struct perfetto_writer *w, FILE *f);
int perfetto_publish(struct perfetto_writer *w);
bool perfetto_discard(struct perfetto_writer *w);
struct trace_sink perfetto_sink(struct perfetto_writer *w);
/* Names every thread (as last known) and writes the counters; 0, or -1
 * with errno. */
int perfetto_finish(struct perfetto_writer *w, const struct trace *t);

/* Whether path names a Perfetto trace (.perfetto-trace, .pftrace). */
bool perfetto_path(const char *path);

#endif
