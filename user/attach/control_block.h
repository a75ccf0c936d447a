/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The control thread's block: what rfbpf and the thread it starts in the
 * job (control_loop.c) say to each other, in the data page of rfbpf's
 * page (stub_page.h), at STUB_CONTROL. Shared by the loop, which runs in
 * the job and includes nothing else, and by rfbpf (control_thread.c),
 * which reads and writes it with process_vm_readv/writev.
 *
 * Why a thread at all: PyTorch's callback API (addGlobalCallback,
 * removeCallback) takes its own lock, so only code running in the job may
 * call it without racing the job's own registrations; a start stub can
 * switch rfbpf's callback off, but nothing of rfbpf's runs in the job
 * while it is off. The thread sleeps between deadlines rfbpf writes here,
 * and switches the callback on and off at them: no job thread is stopped.
 *
 * Protocol (one writer per field):
 *   rfbpf writes burst[k % CONTROL_BURSTS] and then `written` = k + 1;
 *   it never writes more than CONTROL_BURSTS ahead of `done`. It may
 *   bring the off_ns of the burst that is on forward (an on-demand
 *   capture that ended early): the thread copies its burst from the
 *   block at each wakeup, so it switches off at its next one. (A burst
 *   not on yet still waits for its on_ns, and is then skipped.)
 *   The thread runs bursts in order: at on_ns it registers `cb` (or
 *   `cb_count` for a burst that only counts), at off_ns it removes it,
 *   then writes result[k % CONTROL_BURSTS] and `done` = k + 1. A burst
 *   it reaches after its off_ns is skipped.
 *   `ops`: every call of rfbpf's start callbacks adds one (stub_page.S,
 *   a locked add). The thread reads it and the job's CPU clock at each
 *   switch: a burst's CPU per op, probed or only counted, is what a
 *   traced op costs the job, measured in the job (job_bursts.c).
 *   `lease_ns`: rfbpf renews it; once CLOCK_MONOTONIC passes it (or it
 *   is 0) the thread removes the callback and exits.
 *   `gate`: taken by the thread around each PyTorch call, and by the
 *   job's fork (atfork prepare..parent) and exit (an atexit handler,
 *   never given back), so that a fork never copies PyTorch's lock held
 *   and no call runs into PyTorch's destructors.
 */
#ifndef RFBPF_CONTROL_BLOCK_H
#define RFBPF_CONTROL_BLOCK_H

#include <stdint.h>
#include "record_function_abi.h"

#define CONTROL_BURSTS		32	/* ahead of the thread; a burst
					 * is 40 ms apart at the least */
#define CONTROL_THREAD_NAME	"rfbpf-control"	/* ps -L, top -H */
#define CONTROL_STACK_SIZE	(256 * 1024)
/* The longest the thread sleeps without looking at the block again:
 * how soon it sees a new burst or a lease set to 0. */
#define CONTROL_MAX_SLEEP_NS	100000000ull

/* state */
#define CONTROL_NONE		0	/* never started (or a wiped child) */
#define CONTROL_RUNNING		1
#define CONTROL_EXITED		2	/* callback removed, thread gone */
#define CONTROL_PARKED		3	/* the job is exiting: it waits for
					 * exit_group, calling nothing */
/* gate: a lock between the thread's PyTorch calls (one at a time) and
 * the job's forks (any number at once: the fork handlers may be
 * registered twice, in a forked child that rfbpf traces in turn) */
#define GATE_CALLING		0x80000000u	/* the thread is in PyTorch */
#define GATE_CLOSED		0x40000000u	/* the job is exiting */
#define GATE_WAITER		0x20000000u	/* a fork or exit waits */
#define GATE_FORKS		0x0000ffffu	/* forks under way */

struct control_burst {
	uint64_t on_ns, off_ns;		/* CLOCK_MONOTONIC */
	uint64_t count_only;		/* 1: register cb_count */
};

struct control_result {
	uint64_t seq;			/* burst index + 1 */
	uint64_t on_ns;			/* just before the registration */
	uint64_t off_ns;		/* just before the removal (0:
					 * skipped, never switched on) */
	uint64_t cpu_ns;		/* the job's CPU clock, and ops, */
	uint64_t ops;			/* from on_ns to off_ns */
};

struct control_block {
	/* the job's calls of the start callbacks (STUB_OPS: first) */
	uint64_t ops;
	/* rfbpf -> thread */
	uint64_t lease_ns;
	uint64_t written;
	uint64_t add_fn, remove_fn;	/* at::addGlobalCallback,
					 * at::removeCallback */
	struct rf_callback_abi cb;	/* what a burst registers */
	struct rf_callback_abi cb_count;	/* ...one that counts only */
	struct control_burst burst[CONTROL_BURSTS];
	/* thread -> rfbpf */
	uint32_t state;
	uint32_t gate;
	uint64_t handle;		/* registered now; 0: none */
	uint64_t done;
	uint64_t tid;
	uint64_t switches;		/* registrations and removals */
	uint64_t gate_busy;		/* switches put off by a fork */
	struct control_result result[CONTROL_BURSTS];
	/* rfbpf's, while it starts the thread: pthread_attr_t (56 bytes
	 * in glibc) and pthread_create's thread id. */
	uint64_t attr[8];
	uint64_t pthread;
	uint32_t atfork_registered;	/* the fork and exit handlers are
					 * registered (once per page) */
	uint32_t pad;
};

#endif
