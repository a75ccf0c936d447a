/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Catching one thread of the target at a point where running
 * at::addGlobalCallback or at::removeCallback on it cannot deadlock or
 * corrupt anything: the thread holds no allocator lock, no dynamic-loader
 * lock, and is not half-way through fork(). Two kinds of point qualify.
 *
 * 1. The entry of at::getStepCallbacksUnlessEmpty, which the dispatcher
 *    calls at the start of every op, before anything of the op runs. A
 *    thread there is running PyTorch's own code between two ops: no
 *    malloc frame is below it (malloc never dispatches an op), no loader
 *    frame (torch dispatches no op from a library constructor: checked on
 *    1.13, where `import torch` dispatches none at all), and whatever
 *    locks the caller holds are its own, never RecordFunction's (the
 *    callback registry's mutex is held only inside add/removeCallback,
 *    which dispatch nothing). Busy jobs pass there thousands of times a
 *    second, so attach and detach take milliseconds even when no thread
 *    ever makes a system call.
 *    How a thread is stopped there without a breakpoint in its text (a
 *    breakpoint left behind by a killed rfbpf would kill the job): a BPF
 *    uprobe on that entry sends the thread a signal whose default action
 *    is to ignore it (SIGURG, else SIGWINCH, else SIGCHLD, whichever the
 *    job does not catch), once, to one thread rfbpf has seized with
 *    ptrace. rfbpf sees the signal as a ptrace stop right after the
 *    function's first instruction and swallows it. If rfbpf dies first,
 *    the signal is ignored by the job.
 * 2. A thread blocked in a system call from an allow-list of waits: futex
 *    waits, poll/select/epoll waits, sleeps, waiting for a child, and
 *    reads or accepts on pipes, sockets and terminals. A thread waiting
 *    there is between two steps of its own work. Never clone or fork
 *    (glibc's fork holds every malloc arena lock across clone), never
 *    memory management, never a file read (it may come from the loader).
 *    Used when no thread passes point 1 within 100 ms: a job whose
 *    threads all wait (a server between requests, a script in sleep()).
 *
 * 3. Once rfbpf's callback is registered (every hold after the first: a
 *    new sampling probability, the removal), a variant of point 1 inside
 *    that callback: the same signal, sent by the BPF program already on
 *    rfbpf's start stub. The stub runs inside RecordFunction::before,
 *    which holds no lock while it runs callbacks (it runs a copy of the
 *    callback list it took for this op, so removing ours from the
 *    registry there is safe; the op's end still calls our end stub, which
 *    stays mapped). Nothing is attached for it: point 1's uprobe traps
 *    every op the job runs while rfbpf looks, and takes the kernel tens
 *    of ms to remove, which on a job of few-microsecond ops cost about
 *    0.1 s of its time per hold. Here only sampled ops are looked at, by
 *    the probe they pay for anyway; a job whose ops are too rare falls
 *    back to point 2 after 100 ms, as with point 1.
 *
 * Only the chosen thread stays stopped; the others are seized without
 * stopping them (so that the signal reaches rfbpf, not the job) and let go
 * as soon as one is held.
 */
#ifndef RFBPF_SAFE_POINT_H
#define RFBPF_SAFE_POINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "remote_call.h"

/* The BPF side of point 1 (user/attach/probes.c). */
struct safe_point_probe {
	/* Attach the uprobe on the op-entry function in pid and let it
	 * signal one of these threads once with sig. Returns 0 or -errno. */
	int (*arm)(void *ctx, pid_t pid, int sig, const pid_t *tids, int nr);
	/* Let it signal one more thread, seized since. */
	int (*allow)(void *ctx, pid_t tid);
	/* From now on, signal every seized thread that passes (once each),
	 * not only the first. */
	void (*stop_all)(void *ctx);
	void (*disarm)(void *ctx);
	/* Remove what disarm left (the kernel takes tens of ms to remove a
	 * uprobe): called once no thread is held. May be NULL. */
	void (*reap)(void *ctx);
	void *ctx;
	uint64_t addr;		/* the probed address in the target */
	const char *where;	/* for -v; NULL: the op-entry point */
};

struct safe_point_opts {
	int find_ms;		/* give up after this long (<= 0: never) */
	/* Stop looking (rfbpf was told to stop, the command exited). */
	bool (*cancel)(void *ctx);
	void *cancel_ctx;
	const struct safe_point_probe *probe;	/* NULL: point 2 only */
	/* Point 1 only (launch mode: a thread waiting during `import torch`
	 * may be waiting inside the dynamic loader). */
	bool ops_only;
	/* Stop every seized thread at its first op from the start of the
	 * search, hold the first and keep the others stopped there until
	 * safe_point_release (launch mode: the callback must be in place
	 * before any thread's first op, not only the held one's). Others
	 * are let go as soon as one is held otherwise. */
	bool park_others;
	bool verbose;
};

/* Finds a thread of pid at a safe point and holds it stopped, its state
 * saved (remote_save). A wait here that sees the process exit notes its
 * status (remote_reaped). Returns 0, or -errno with a one-line reason:
 * -ETIMEDOUT (none within find_ms), -ECANCELED, -ESRCH (it exited),
 * -EPERM (cannot ptrace it). */
int safe_point_hold(pid_t pid, struct safe_point_opts *o,
		    struct held_thread *h, char *err, size_t len);
/* Lets the held thread go (after remote_restore), with any signal it
 * received meanwhile, and the threads parked with it. */
void safe_point_release(struct held_thread *h);
/* After a call on the held thread that started threads
 * (pthread_create): they are traced by rfbpf too (PTRACE_O_TRACECLONE),
 * stopped at their start; lets them go. */
void safe_point_release_new_threads(struct held_thread *h);
/* After the release: removes the uprobe the hold disarmed (the kernel
 * takes tens of ms, which the job no longer waits for). */
void safe_point_reap(void);
/* Lets go the threads a release left seized because they had not
 * stopped within a second (in a wait no signal ends): those that have
 * stopped since. Cheap when there are none; the loaders call it as they
 * run. */
void safe_point_poll_late(void);

/* Is this system call, with these arguments, a wait the allow-list of
 * point 2 accepts? (fds are looked up in /proc/PID/fd.) */
bool safe_point_blocking_call_ok(pid_t pid, long nr, const uint64_t *args);

#endif
