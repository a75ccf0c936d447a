/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An output file that keeps the reason a write failed. stdio keeps only a
 * flag (ferror), and errno after a failed fputs is whatever the last call
 * left: the exporters said "Input/output error" for a full disk
 * (-o /dev/full). Writes go through a stdio cookie that records the errno
 * of the first failed write(2), and closing returns it.
 */
#ifndef RFBPF_OUT_FILE_H
#define RFBPF_OUT_FILE_H

#include <stdio.h>

struct z_stream_s;

struct out_file {
	FILE *f;	/* write through this */
	int fd;
	int err;	/* errno of the first failed write or close */
	struct z_stream_s *z;	/* gzip: the compressor, else NULL */
};

/* Creates (truncates) path: 0, or -1 with errno. */
int out_file_open(struct out_file *o, const char *path);
/* The same over a duplicate of fd (standard output: closing the
 * out_file leaves fd open). */
int out_file_dup(struct out_file *o, int fd);
/* The same, gzipped (what is written is compressed as it comes). */
int out_file_dup_gzip(struct out_file *o, int fd);
/* Flushes and closes: 0, or -1 with errno set to the first failure's. */
int out_file_close(struct out_file *o);

#endif
