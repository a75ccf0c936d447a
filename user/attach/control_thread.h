/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rfbpf's side of the control thread (control_block.h says what it is and
 * why): starting it once, at an attach stop; writing the bursts it is to
 * switch rfbpf's callback on for; renewing its lease; reading what it
 * did; and stopping it. Apart from the start, nothing here stops a thread
 * of the job: the block is read and written with process_vm_readv/writev.
 */
#ifndef RFBPF_CONTROL_THREAD_H
#define RFBPF_CONTROL_THREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "control_block.h"
#include "record_function_abi.h"
#include "remote_call.h"
#include "stub_page.h"

/* How long the thread goes on without hearing from rfbpf: a killed rfbpf
 * leaves the job's callback registered this long at most. */
#define CONTROL_LEASE_NS	2000000000ull

struct control_thread {
	pid_t pid;
	uint64_t block;		/* its address in the target; 0: none */
	uint64_t written;	/* bursts written */
	uint64_t done;		/* results read */
	uint64_t lease_ns;	/* as last written */
};

/* Stops a control thread an earlier rfbpf (killed) left running in pid's
 * page, waiting for it to remove its callback and exit: 1 (stopped), 0
 * (none ran), or -ETIMEDOUT. Holds no thread of the job. */
int control_thread_reap(pid_t pid, const struct stub_page *page,
			int wait_ms);
/* On h, a thread rfbpf holds (activation_begin), in pid whose page is
 * page: registers the job's fork and exit handlers (once per page) and
 * starts the thread, which will register cb for each burst, with the
 * functions at add_fn and remove_fn. 0 or -errno with a reason in err. */
int control_thread_start(struct control_thread *ct, struct held_thread *h,
			 const struct stub_page *page,
			 const struct rf_callback_abi *cb, uint64_t add_fn,
			 uint64_t remove_fn, char *err, size_t len);
/* Has the thread ended on its own, its lease having run out (removed
 * the callback and exited)? Not one the job's exit parked, nor a block
 * that cannot be read (the job gone). */
bool control_thread_lapsed(const struct control_thread *ct);
/* Renews the lease up to now + CONTROL_LEASE_NS, when half of it is
 * gone. */
int control_thread_renew(struct control_thread *ct, uint64_t now_ns);
/* How many more bursts may be written now. */
size_t control_thread_room(struct control_thread *ct);
/* Adds a burst [on_ns, off_ns) (CLOCK_MONOTONIC, after the last one);
 * count_only: the callback registered counts ops and probes nothing. */
int control_thread_add_burst(struct control_thread *ct, uint64_t on_ns,
			     uint64_t off_ns, bool count_only);
/* Brings the end of burst seq (1: the first written), which is on,
 * forward to off_ns: the thread reads its burst afresh at each wakeup (at
 * most CONTROL_MAX_SLEEP_NS apart) and switches off then (one not on
 * yet is skipped at its on_ns). 0 (also when the burst is over
 * already), or -errno. */
int control_thread_end_burst(struct control_thread *ct, uint64_t seq,
			     uint64_t off_ns);
/* The bursts finished since the last call, up to max, into out (seq is
 * the burst's index + 1). Returns how many, or -errno. */
int control_thread_results(struct control_thread *ct,
			   struct control_result *out, size_t max);
/* The thread's CPU time so far (ns, /proc's schedstat) and its switches
 * (registrations and removals): what each switch costs it. 0 and -errno
 * if unknown. */
int control_thread_cpu(struct control_thread *ct, uint64_t *cpu_ns,
		       uint64_t *switches);
/* Asks the thread to remove the callback and exit, and waits up to
 * wait_ms for it. 0, or -ETIMEDOUT. */
int control_thread_stop(struct control_thread *ct, int wait_ms);

#endif
