/* SPDX-License-Identifier: BSD-2-Clause */
/* A traced job's life (job.c): started, polled, its intervals ended and
 * planned, stopped. Its state: job_state.h. */
#ifndef RFBPF_FLEET_JOB_H
#define RFBPF_FLEET_JOB_H

#include "fleet/job_state.h"

struct budget_plan;

/* Traces proc: claims it, probes it, registers the callback at p. 0, or
 * -1 with a one-line reason in err (the process is left as it was). */
int job_start(struct job *j, const struct torch_process *proc,
	      const struct options *opt, double p, double now, char *err,
	      size_t len);
/* Reads its events (non-blocking); switches a window on or off when due. */
void job_poll(struct job *j, double now);
/* Has the process exited (or been replaced by another with its pid)? */
bool job_gone(const struct job *j);
/* When job_poll has something to do next (a window to open or close),
 * CLOCK_MONOTONIC seconds; INFINITY if nothing. */
double job_next_wakeup(const struct job *j);
/* The end of an interval of length T: window sums scaled into the
 * counters, rates measured. Then the caller plans the next interval. */
void job_end_interval(struct job *j, double now);
/* The next interval: sampling p (re-registered if it changed by more than
 * 2x), and once the current span is over a new one with its window at a
 * random moment. */
void job_plan(struct job *j, const struct budget_plan *plan,
	      double interval_s, double now);
/* Switches RecordFunction off and lets the process go. */
void job_stop(struct job *j);

#endif
