/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * --flight-recorder SECONDS[,MB]: the Chrome trace of the last SECONDS,
 * kept in rfbpf (never in the job) and written on demand. The Chrome
 * writer writes each event into memory as it comes; the recorder keeps
 * those bytes in a ring, oldest first, and lets go of what is older than
 * the window or past the memory bound, counting it. A dump is a whole
 * Chrome file: the header, every thread's name, the ring's events, and
 * the run's counters with what the ring let go.
 *
 * What a window's edge cuts: a flow (forward to backward, launch to
 * kernel) whose start was let go ends nowhere, which viewers ignore; a
 * GPU track named only in a record let go shows by its number.
 */
#ifndef RFBPF_EXPORT_FLIGHT_RECORDER_H
#define RFBPF_EXPORT_FLIGHT_RECORDER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "chrome_events.h"
#include "model/aggregate.h"
#include "model/trace.h"

struct flight_record;

struct flight_recorder {
	struct chrome_writer w;		/* writes into mem */
	FILE *memf;
	char *mem;
	size_t mem_len;
	struct flight_record **ring;	/* oldest at head */
	size_t head, nr, cap;
	size_t bytes;			/* held, with each record's overhead */
	uint64_t window_ns;
	size_t max_bytes;
	uint64_t events_kept_total;	/* records taken in all along */
	uint64_t dropped_old, dropped_full;	/* let go: past the window,
						 * past the memory bound */
	size_t peak_bytes;
	uint64_t base_ns, base_wall_ns;
	unsigned dumps;
	const char *holds;		/* what it is fed, in words */
	bool oom;			/* a record could not be kept */
};

/* 0, or -1 with errno. */
int flight_recorder_init(struct flight_recorder *r, double seconds,
			 double mb);
/* The sink: the Chrome writer's, into the ring. */
struct trace_sink flight_recorder_sink(struct flight_recorder *r);
/* Writes the window to path (replacing a file there whole): 0, or -1
 * with errno. why says what made the dump, in the file. */
int flight_recorder_dump(struct flight_recorder *r, const char *path,
			 const struct trace *t, const struct aggregate *a,
			 const char *why);
void flight_recorder_free(struct flight_recorder *r);

#endif
