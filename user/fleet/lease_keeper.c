// SPDX-License-Identifier: BSD-2-Clause
/* The daemon's lease-renewing thread: see lease_keeper.h. */
#include <errno.h>
#include <signal.h>
#include <time.h>
#include "model/clocks.h"
#include "attach/control_thread.h"
#include "fleet/job_state.h"
#include "fleet/lease_keeper.h"

/* How often the leases are looked at: control_thread_renew writes one
 * once half of it is gone, so each is renewed every second and is always
 * half a second ahead at least. Each wakeup on a small host preempts a
 * job thread: no more often than this. */
#define EVERY_NS 500000000ull

static void *keep(void *arg)
{
	struct lease_keeper *k = arg;
	struct timespec due;

	pthread_mutex_lock(&k->lock);
	while (!k->stop) {
		uint64_t now = monotonic_ns();

		for (size_t i = 0; i < *k->nr_jobs; i++) {
			struct job *j = (*k->jobs)[i];

			if (j->bursts)
				control_thread_renew(&j->s.control, now);
		}
		clock_gettime(CLOCK_MONOTONIC, &due);
		due.tv_nsec += EVERY_NS;
		if (due.tv_nsec >= 1000000000) {
			due.tv_sec++;
			due.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&k->wake, &k->lock, &due);
	}
	pthread_mutex_unlock(&k->lock);
	return NULL;
}

int lease_keeper_start(struct lease_keeper *k, struct job ***jobs,
		       size_t *nr_jobs)
{
	pthread_condattr_t ca;
	sigset_t all, old;
	int err;

	k->jobs = jobs;
	k->nr_jobs = nr_jobs;
	k->stop = false;
	pthread_mutex_init(&k->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->wake, &ca);
	pthread_condattr_destroy(&ca);
	/* The daemon's signals (SIGTERM, SIGINT, SIGHUP) stay its loop's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&k->thread, NULL, keep, k);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	k->started = !err;
	return -err;
}

void lease_keeper_lock(struct lease_keeper *k)
{
	if (k->started)
		pthread_mutex_lock(&k->lock);
}

void lease_keeper_unlock(struct lease_keeper *k)
{
	if (k->started)
		pthread_mutex_unlock(&k->lock);
}

void lease_keeper_stop(struct lease_keeper *k)
{
	if (!k->started)
		return;
	pthread_mutex_lock(&k->lock);
	k->stop = true;
	pthread_cond_signal(&k->wake);
	pthread_mutex_unlock(&k->lock);
	pthread_join(k->thread, NULL);
	k->started = false;
}
