/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --off-cpu's scheduler programs (bpf/off_cpu.bpf.c), one set per rfbpf
 * process however many processes it traces: loaded and attached when the
 * first process is added, detached and freed when the last one goes, so
 * that a fleet daemon's context switches cost one program run, not one
 * per job, and a daemon with no such job holds none of it.
 *
 * A process is added with the ring buffer its op events go to: its
 * off-CPU records go there too, in order among them. Ids are the
 * kernel's (the caller refuses --off-cpu in another pid namespace).
 * Not thread-safe: rfbpf sets up and ends sessions on one thread.
 */
#ifndef RFBPF_OFF_CPU_HOOKS_H
#define RFBPF_OFF_CPU_HOOKS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "rfbpf.h"

/* Traces tgid's context switches into ring_fd (a BPF ring buffer, of the
 * size every ring of this process has), waking its reader as the backlog
 * crosses wakeup_bytes. Returns 0 or -errno, with a reason in err. */
int off_cpu_hooks_add(pid_t tgid, int ring_fd, uint64_t wakeup_bytes,
		      char *err, size_t errlen);
/* Where tgid's GIL state is (see RF_GIL_STATE_SIZE), so that its waits
 * for the GIL are told from other sleeps. */
int off_cpu_hooks_set_gil(pid_t tgid, uint64_t gil_addr);
/* Adds tgid's switches and drops so far to *sum. */
void off_cpu_hooks_read(pid_t tgid, struct rf_off_cpu_counts *sum);
/* Stops tracing tgid, adding its last counts to *sum. */
void off_cpu_hooks_remove(pid_t tgid, struct rf_off_cpu_counts *sum);
/* How many processes are traced now (0: nothing loaded). */
int off_cpu_hooks_count(void);

#endif /* RFBPF_OFF_CPU_HOOKS_H */
