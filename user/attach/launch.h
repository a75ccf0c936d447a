/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `rfbpf -- COMMAND`: the command is forked first and held before exec
 * until the probes are attached for its pid, so tracing covers it from its
 * very first op. The pid does not change across exec.
 */
#ifndef RFBPF_LAUNCH_H
#define RFBPF_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct launch {
	pid_t pid;
	int go_fd;	/* write a byte: exec now; close unwritten: give up */
	int err_fd;	/* the child writes errno here if exec fails */
};

/* Forks the child, which waits. Returns 0 or -errno. */
int launch_prepare(struct launch *l, char **argv);
/* Lets the child exec. Returns 0, or -errno of a failed exec. */
int launch_release(struct launch *l);
/* Setup failed: the child exits without running anything; reaped. */
void launch_abort(struct launch *l);
/* Non-blocking (block=false) or blocking wait; returns true once the child
 * has exited, with its exit code (128+signal when killed) in *code, or -1
 * if another wait of rfbpf's took its status. */
bool launch_reap(struct launch *l, bool block, int *code);

#endif
