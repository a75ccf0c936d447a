/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Switching RecordFunction on inside a live target: one global
 * at::RecordFunctionCallback whose start and end are NULL, registered with
 * at::addGlobalCallback through a ptrace call (remote_call.c) and removed
 * with at::removeCallback on every way out. RecordFunction then calls
 * before()/end() for the ops its own geometric sampler picks (probability
 * sample_prob), and nothing else runs per op inside the target.
 *
 * What was registered is recorded in /run/rfbpf/PID.state, so that a later
 * rfbpf finds a callback left by one that was killed (and replaces it, or
 * removes it with --deactivate). /run/rfbpf/PID.lock, held while tracing,
 * refuses a second rfbpf on the same process.
 */
#ifndef RFBPF_ACTIVATION_H
#define RFBPF_ACTIVATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "record_function_abi.h"
#define ACTIVATION_STATE_DIR "/run/rfbpf"

struct activation {
	pid_t pid;
	char lib[4096];		/* the library, rfbpf's view of the path */
	uint64_t add_off, remove_off;	/* file offsets of the two functions */
	uint64_t handle;	/* CallbackHandle; 0 = none registered */
	int lock_fd;
	void (*idle)(void *);	/* run while waiting on the target */
	bool verbose;
	pid_t traced_tid;	/* make calls on this traced thread (launch) */
	void *idle_ctx;
};

/* Takes the per-process lock. Returns 0, or -EBUSY if another rfbpf holds
 * it (err says which). */
int activation_lock(struct activation *a, pid_t pid, char *err, size_t len);
/* Finds addGlobalCallback/removeCallback in lib and checks the build is
 * one whose RecordFunctionCallback layout rfbpf knows. */
int activation_prepare(struct activation *a, const char *lib, char *err,
		       size_t len);
/* Registers the callback (replacing one a killed rfbpf left). scopes is a
 * bit mask of at::RecordScope values; start_fn/end_fn are the callback
 * functions in the target (0: NULL, RecordFunction runs before()/end()
 * with nothing to call). */
int activation_start(struct activation *a, double sample_prob,
		     unsigned scopes, uint64_t start_fn, uint64_t end_fn,
		     char *err, size_t len);
/* Removes it (no-op when none is registered or the target is gone). */
int activation_stop(struct activation *a, char *err, size_t len);
/* --deactivate: removes what a killed rfbpf left in pid. Returns 0 and
 * sets *found, or -errno. */
int activation_remove_leftover(struct activation *a, bool *found, char *err,
			       size_t len);
void activation_unlock(struct activation *a);

#endif
