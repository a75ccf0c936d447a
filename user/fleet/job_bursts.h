/* SPDX-License-Identifier: BSD-2-Clause */
/* --bursts (job_bursts.c): the job traced in short random bursts that its
 * control thread switches. */
#ifndef RFBPF_FLEET_JOB_BURSTS_H
#define RFBPF_FLEET_JOB_BURSTS_H

#include "fleet/job_state.h"

struct budget_plan;
void job_bursts_plan(struct job *j, const struct budget_plan *plan,
		     double interval_s, double now);
void job_bursts_poll(struct job *j);
/* The interval's end: what the control thread's switches cost it. */
void job_bursts_measure(struct job *j);
double job_bursts_next_wakeup(const struct job *j);
/* The weight of an op begun at ts: burst_weight inside a measured part,
 * else 0 (it began in a part not measured). */
double job_bursts_weight(const struct job *j, uint64_t ts);
/* A burst's measured part begins (the window opens) and ends. */
void job_burst_open(struct job *j, const struct job_burst *b);
void job_burst_close(struct job *j, const struct job_burst *b);

#endif
