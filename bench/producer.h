/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The process the per-event benchmarks probe: a child forked from the
 * bench binary that, on command, calls a pair of probed functions
 * (probe_target.S) in a loop and reports how long the loop took. It is a
 * separate process because uprobes are attached for one pid and the
 * loader's ring-buffer reading must not run on the timed thread.
 *
 * Each call gets a RecordFunction-shaped object: at the offsets rfbpf.h
 * names, a scope byte, a C++11 std::string name in fn_ (variant index 0)
 * and a sequence number, so rfbpf's programs do their full work (read the
 * scope, the index, the string header and its characters) as on a real op.
 */
#ifndef BENCH_PRODUCER_H
#define BENCH_PRODUCER_H

#include <stdint.h>
#include <sys/types.h>

/* Which pair of functions the loop calls. */
enum probe_site {
	SITE_CALLBACK,	/* bench_cb_start/end: nop5 first (optimized) */
	SITE_ENTRY,	/* bench_entry_before/end: int3 trap */
};

/* The probed functions' symbol names, for attaching by name. */
extern const char *const site_symbols[2][2];

struct producer {
	pid_t pid;
	int cmd_fd, res_fd;
};

/* Forks the child. Returns 0 or -errno. */
int producer_start(struct producer *p);
/* Runs iters start/end pairs (two events each) on site, one pair every
 * pace_ns (0: as fast as possible); sets *elapsed_ns. Returns 0 or -1. */
int producer_run(struct producer *p, enum probe_site site, uint64_t iters,
		 uint64_t pace_ns, uint64_t *elapsed_ns);
/* The same split over `threads` threads of the child (at most 8). */
int producer_run_threads(struct producer *p, enum probe_site site,
			 uint64_t iters, int threads, uint64_t *elapsed_ns,
			 uint64_t pace_ns);
void producer_stop(struct producer *p);

#endif
