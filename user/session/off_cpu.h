/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * --off-cpu for one session: the processes it traces (the target and,
 * with --children, each child it adopts) added to the rfbpf process's
 * one set of scheduler programs (attach/off_cpu_hooks.h), their records
 * in the session's own ring, and their counts kept when they leave.
 */
#ifndef RFBPF_SESSION_OFF_CPU_H
#define RFBPF_SESSION_OFF_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "rfbpf.h"

#define OFF_CPU_MAX_PROCS 257	/* the target and SESSION_MAX_CHILDREN */

struct off_cpu_procs {
	pid_t pids[OFF_CPU_MAX_PROCS];	/* pids[0]: the target */
	int nr;
	int ring_fd;
	uint64_t wakeup_bytes;
	struct rf_off_cpu_counts gone;	/* of the processes let go */
	bool said_missed;	/* a child not added was warned of */
};

/* Starts with the target (nothing traced before). 0 or -errno, with one
 * line in err. */
int off_cpu_procs_start(struct off_cpu_procs *o, pid_t target, int ring_fd,
			uint64_t wakeup_bytes, char *err, size_t errlen);
/* A child adopted (on) or let go (off). */
void off_cpu_procs_child(struct off_cpu_procs *o, pid_t child, bool on);
/* The target's GIL state, whose futexes mean "waiting for the GIL"
 * (RF_OFF_GIL). */
void off_cpu_procs_set_gil(struct off_cpu_procs *o, uint64_t addr);
/* Adds the switches and drops of every process, gone or not, to *sum. */
void off_cpu_procs_read(const struct off_cpu_procs *o,
			struct rf_off_cpu_counts *sum);
/* Lets every process go (at detach; again is harmless). */
void off_cpu_procs_stop(struct off_cpu_procs *o);

#endif
