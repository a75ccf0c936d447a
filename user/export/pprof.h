/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A stack profile as a pprof profile (gzipped profile.proto), the format
 * `go tool pprof`, Pyroscope, Parca and most profile stores read. One
 * sample per stack row; each op name is one function and one location, so
 * flame graphs and `top` show op names. A Python frame (--python-stacks)
 * is a location with its function's name and file and its line, so
 * pprof's -lines view and `list` place model code. Processes and threads go in labels
 * (pid, process, tid, thread, container, cmdline), which is what pprof's
 * -tagfocus / -tagshow filter on.
 */
#ifndef RFBPF_EXPORT_PPROF_H
#define RFBPF_EXPORT_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "model/names.h"
#include "model/py_frames.h"
#include "model/stack_profile.h"

/* The labels of one process. */
struct pprof_process {
	const char *name;	/* comm */
	const char *container;	/* "" if none */
	const char *cmdline;	/* cut to PPROF_CMDLINE_MAX bytes */
	const char *torch_version;	/* "" if not known */
	bool has_rank;		/* a distributed job's rank is known */
	int rank;
};

/* A cmdline label longer than this is cut, on a UTF-8 character boundary:
 * long enough to tell jobs apart, short enough that a profile of a few
 * thousand stacks is not mostly argument lists. */
#define PPROF_CMDLINE_MAX 200

struct pprof_meta {
	int64_t time_nanos;	/* wall-clock start of the window (CLOCK_REALTIME) */
	int64_t duration_nanos;
	/* Every raw value is multiplied by this and rounded: the sampling
	 * estimator's factor, 1.0 for a full trace (0 would zero them all,
	 * and all-zero samples are left out). */
	double scale;
	bool gpu;		/* add the "gpu" sample type */
	bool off_cpu;		/* add "off_cpu" (--off-cpu) */
	bool memory;		/* add alloc_objects, alloc_space,
				 * inuse_objects, inuse_space (--memory) */
	const char *comment;	/* which estimator fed the values; may be NULL */
	/* The labels of pid. NULL, or returning NULL: a pid label only. */
	const struct pprof_process *(*process)(void *ctx, uint32_t pid);
	void *ctx;
	/* --python-stacks: which frames are Python frames, with their
	 * function, file and line (ids in the same names); may be NULL. */
	const struct py_frames *py;
};

/* Encodes p (names resolves its frame and thread name ids) as a gzipped
 * profile.proto; *out is malloc'd, the caller frees it. 0 or -errno. */
int pprof_encode(const struct stack_profile *p, const struct names *names,
		 const struct pprof_meta *m, uint8_t **out, size_t *len);

/* pprof_encode, written to path atomically: a temporary file in the same
 * directory, fsync'd, then renamed over path. 0 or -errno. */
int pprof_write_file(const char *path, const struct stack_profile *p,
		     const struct names *names, const struct pprof_meta *m);

/* In dir, keeps the `keep` newest (by modification time) regular files
 * named profile-*.pb.gz and removes the others. 0 or the first -errno. */
int pprof_prune(const char *dir, unsigned keep);

#endif
