/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Thread exits (bpf/thread_exits.bpf.c): one program per rfbpf process
 * however many processes it traces, so that a fleet daemon's jobs cost a
 * thread exit anywhere on the machine one hash lookup, not one program
 * each. Loaded with the first session's object and freed with the last.
 *
 * Each session (a BPF object of probes.c) gets a slot: its ring buffer,
 * where its processes' exits go in order among their op events, and its
 * drop count. A process is routed to a slot by its tgid as rfbpf sees
 * it. Not thread-safe: rfbpf sets up and ends sessions on one thread.
 */
#ifndef RFBPF_EXIT_HOOKS_H
#define RFBPF_EXIT_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EXIT_HOOKS_NO_JOB UINT32_MAX

/* A new slot, loading the programs first if none are loaded: they see
 * ids in the PID namespace (pidns_dev, pidns_ino), or the kernel's if
 * pidns_ino is 0. *routes_fd and *bits_fd are the routes map and the
 * bitmap of routed tgids (owned here), which the session's object shares
 * before it loads (its fork program routes new children). 0 or -errno,
 * with one line in err. */
int exit_hooks_new_job(uint64_t pidns_dev, uint64_t pidns_ino,
		       uint32_t *job, int *routes_fd, int *bits_fd,
		       char *err, size_t errlen);
/* Slot job's exits go to ring_fd (its reader woken as the backlog crosses
 * wakeup_bytes), and tgid is routed there. 0 or -errno. */
int exit_hooks_start(uint32_t job, pid_t tgid, int ring_fd,
		     uint64_t wakeup_bytes, char *err, size_t errlen);
/* Routes tgid (a child the session adopts) to slot job, or lets it go. */
int exit_hooks_route(uint32_t job, pid_t tgid, bool on);
/* Exits of slot job that found its ring full, so far. */
uint64_t exit_hooks_drops(uint32_t job);
/* The comm thread tid had as it exited, if it was traced and is still
 * remembered. */
bool exit_hooks_comm(uint32_t tid, char *buf, size_t len);
/* Ends slot job (EXIT_HOOKS_NO_JOB: a session that never got one): its
 * routes and ring go, and the programs with the last slot. */
void exit_hooks_remove(uint32_t job);
/* Slots in use (0: nothing loaded). */
int exit_hooks_count(void);

#endif /* RFBPF_EXIT_HOOKS_H */
