/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The control threads' leases (attach/control_thread.h), renewed by a
 * thread of the daemon's own rather than by its loop. The loop can be
 * held up for seconds by work it cannot cut short: another job's attach
 * stop, loading its BPF object, a detach. A lease that ran out then ends
 * every other job's control thread, and the jobs re-attached in turn
 * would hold the loop up again. The keeper only renews: it never plans a
 * burst, so a daemon whose loop hangs switches nothing on, while one that
 * is stopped or killed (every thread of it) still lets the leases run out,
 * which is what they are for.
 *
 * The daemon changes its array of jobs (adds, removes, reallocates) only
 * with the keeper's lock held, and stops a job's control thread only once
 * the job is out of the array.
 */
#ifndef RFBPF_FLEET_LEASE_KEEPER_H
#define RFBPF_FLEET_LEASE_KEEPER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

struct job;

struct lease_keeper {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool started, stop;
	struct job ***jobs;	/* the daemon's array and its length */
	size_t *nr_jobs;
};

/* Starts the thread (every signal blocked in it). 0 or -errno. */
int lease_keeper_start(struct lease_keeper *k, struct job ***jobs,
		       size_t *nr_jobs);
void lease_keeper_lock(struct lease_keeper *k);
void lease_keeper_unlock(struct lease_keeper *k);
/* Stops and joins the thread; nothing if it was not started. */
void lease_keeper_stop(struct lease_keeper *k);

#endif
