/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The target's child processes (a DataLoader's forked workers).
 *
 * Every child forked while the callback is registered inherits it: its
 * ops run RecordFunction and call rfbpf's stubs. The stubs skip their
 * probes there (stub_page.h), so the child is safe whether traced or not.
 *
 * --children traces them too: BPF wakes the loader when a traced process
 * forks; the loader finds the new process in /proc (with the ids it sees),
 * tells BPF to keep its events, probes it for its pid only (the page's
 * child probe, or the library's entry probes), and sets the child's own
 * `child_on`. Its ops before that (milliseconds) are not traced.
 *
 * At detach, the callback is removed from every child still running that
 * was forked after it was registered, so no child keeps paying for
 * RecordFunction after rfbpf is gone.
 */
#ifndef RFBPF_SESSION_CHILDREN_H
#define RFBPF_SESSION_CHILDREN_H

#include <stdint.h>

struct session;

/* --children: start following forks (after the probes are loaded). */
void session_children_start(struct session *s);
/* BPF saw a traced process fork child (0: a pid rfbpf cannot see as
 * is, inside a PID namespace): probe it at once, or look in /proc. */
void session_children_forked(struct session *s, pid_t child);
/* Looks for new children in /proc after a fork event it could not name,
 * and every half second (for forks BPF missed). */
void session_children_poll(struct session *s, double now);
/* Removes the callback (handle) from the children that inherited it and
 * stops tracing them. */
void session_children_detach(struct session *s, uint64_t handle);

#endif
