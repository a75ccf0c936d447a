/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An output written as the trace runs: an out_file (errno kept, gzip if
 * asked) over an atomic_stream (a hidden temporary beside the path until
 * published, so that a run that traced nothing leaves what was there).
 * The Chrome and Perfetto writers both stream into one.
 */
#ifndef RFBPF_EXPORT_OUTPUT_FILE_H
#define RFBPF_EXPORT_OUTPUT_FILE_H

#include <stdbool.h>
#include <stdio.h>
#include "atomic_file.h"
#include "out_file.h"

struct output_file {
	struct out_file out;	/* out.f: where to write */
	struct atomic_stream file;
};

/* Starts path's temporary (gzipped if gzip): 0, or -1 with errno. */
int output_file_open(struct output_file *o, const char *path, bool gzip);
/* The temporary replaces the file at its path: 0, or -1 with errno. */
int output_file_publish(struct output_file *o);
/* Gives up: the temporary is removed; true if there was one. */
bool output_file_discard(struct output_file *o);
/* Flushes, closes and publishes: 0, or -1 with errno (that of the first
 * write that failed). */
int output_file_close(struct output_file *o);

#endif
