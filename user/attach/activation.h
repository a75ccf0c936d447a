/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Switching RecordFunction on inside a live target: one global
 * at::RecordFunctionCallback, registered with at::addGlobalCallback
 * through a call rfbpf makes on a thread it holds at a safe point
 * (safe_point.h, remote_call.h), and removed with at::removeCallback on
 * every way out. RecordFunction then calls before()/end() (and the
 * callback's start/end, rfbpf's probed stubs) for the ops its own
 * geometric sampler picks (probability sample_prob).
 *
 * The first attach to a process also maps rfbpf's page into it
 * (stub_page.h), in the same stop; later ones find it there.
 *
 * What was registered is recorded in PID.state in rfbpf's state
 * directory (state_dir.h: /run/rfbpf by default), with the page's
 * address, so that a later rfbpf finds a callback left by one that
 * was killed (and replaces it, or removes it with --deactivate), even one
 * killed while the registration itself ran. PID.lock there, held
 * while tracing, refuses a second rfbpf on the same process.
 */
#ifndef RFBPF_ACTIVATION_H
#define RFBPF_ACTIVATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "record_function_abi.h"
#include "remote_call.h"
#include "safe_point.h"
#include "stub_page.h"

struct activation {
	pid_t pid;
	char lib[4096];		/* the library, rfbpf's view of the path */
	uint64_t add_off, remove_off;	/* file offsets of the two functions */
	uint64_t entry_off;	/* getStepCallbacksUnlessEmpty, 0 if absent */
	uint64_t handle;	/* CallbackHandle; 0 = none registered */
	bool needs_inputs;	/* register the callback asking for ops'
				 * inputs (--shapes) */
	int lock_fd;
	struct stub_page page;	/* rfbpf's page in the target */
	/* The process (pid and start time) whose addresses below, and whose
	 * page above, were read from its maps: a library and the page do not
	 * move while mapped, and a torch process's maps (thousands of lines)
	 * took a fleet daemon more CPU to read at every hold than the
	 * job's events did. */
	pid_t resolved_pid;
	unsigned long long resolved_start;
	uint64_t add_addr, remove_addr, entry_addr;	/* 0: not mapped */
	struct safe_point_probe *probe;	/* the op-entry probe, or NULL */
	/* rfbpf's start-callback probe, when its stubs are probed: once
	 * rfbpf's callback is in, later holds (a new p, the removal) stop a
	 * thread there, inside the callback, instead (safe_point.h). */
	struct safe_point_probe *callback_probe;
	struct safe_point_opts find;	/* how to look for a safe point */
	bool verbose;
	bool holding;		/* a thread is held (begin .. finish) */
	double held_since_ms;
	double released_ms;	/* when the last hold ended */
	struct held_thread held;
};

/* Takes the per-process lock. Returns 0, or -EBUSY if another rfbpf holds
 * it (err says which). */
int activation_lock(struct activation *a, pid_t pid, char *err, size_t len);
/* Finds addGlobalCallback/removeCallback in lib and checks the build is
 * one whose RecordFunctionCallback layout rfbpf knows. */
int activation_prepare(struct activation *a, const char *lib, char *err,
		       size_t len);
/* Holds a thread of the target at a safe point and makes sure rfbpf's page
 * is mapped (mapping it on a first attach). Refuses a target under a
 * seccomp filter that would have to be given new system calls. */
int activation_begin(struct activation *a, char *err, size_t len);
/* On the held thread: removes a callback a killed rfbpf left, then
 * registers ours. scopes is a bit mask of at::RecordScope values;
 * start_fn/end_fn are the callback functions in the target (0: NULL). */
int activation_register(struct activation *a, double sample_prob,
			unsigned scopes, uint64_t start_fn, uint64_t end_fn,
			char *err, size_t len);
/* Puts the held thread back and lets it go. */
void activation_finish(struct activation *a);
/* Swaps the registered callback for one with another sampling
 * probability, in one hold of one thread (begin..finish inside).
 * 0 or -errno with a reason in err. */
struct replace_times {	/* CLOCK_MONOTONIC ns */
	pid_t tid;		/* the thread held */
	uint64_t held;		/* the thread was stopped */
	uint64_t removed;	/* the old callback was gone */
	uint64_t adding;	/* the new one was about to be added */
	uint64_t released;	/* the thread ran again */
};
int activation_replace(struct activation *a, double sample_prob,
		       unsigned scopes, uint64_t start_fn, uint64_t end_fn,
		       struct replace_times *times, char *err, size_t len);
/* Removes our callback: holds a thread, calls removeCallback, lets it go
 * (no-op when none is registered or the target is gone). */
int activation_stop(struct activation *a, char *err, size_t len);
/* --deactivate: removes what a killed rfbpf left in pid. Returns 0 and
 * sets *found, or -errno. */
int activation_remove_leftover(struct activation *a, bool *found, char *err,
			       size_t len);
void activation_unlock(struct activation *a);
/* Seccomp mode of a process: 0 none, 1 strict, 2 filter. */
int activation_seccomp_mode(pid_t pid);
/* Stops a control thread a killed rfbpf left running in a->pid
 * (control_thread.h), holding no thread: true if there was one. */
bool activation_reap_control(struct activation *a);

#endif
