/* SPDX-License-Identifier: BSD-2-Clause */
/* A job's counters per op name, with their standard errors (job_ops.c). */
#ifndef RFBPF_FLEET_JOB_OPS_H
#define RFBPF_FLEET_JOB_OPS_H

#include "fleet/job_state.h"

/* The name of op series i ("[other]" for i == max_ops). */
const char *job_op_name(const struct job *j, size_t i);
/* The counters of op name id (a new series, or "[other]" once the job
 * has --max-ops); NULL on ENOMEM. */
struct job_op *job_op_row(struct job *j, uint32_t name);
/* Adds one closed op of dur_ns weighed w = 1/p (1 inside a window),
 * with its share of the variance (independent sampling). */
void job_op_add(struct job_op *r, double w, uint64_t dur_ns);
/* The same without the variance (--bursts: ops come in clusters, whose
 * variance job_ops_bursts_variance estimates), its calls and latency
 * counts weighed w_calls, its time w_time. */
void job_op_count(struct job_op *r, double w_calls, double w_time,
		  uint64_t dur_ns);
/* Standard errors of calls and total_s (total_s's in seconds). */
double job_op_calls_se(const struct job_op *r);
double job_op_seconds_se(const struct job_op *r);
/* ...and of self_s: NaN where there is no estimate (the window of the
 * default mode: one cluster per span). */
double job_op_self_se(const struct job *j, const struct job_op *r);
/* --bursts: an op's share of the burst being read (unscaled: 1 call and
 * its duration when it began in the burst, its self seconds there). */
void job_op_burst_add(struct job *j, struct job_op *r, int what,
		      double v);
/* A burst is read: its shares go into the interval's sums. */
void job_ops_burst_fold(struct job *j);
/* The interval's end: the variance of its estimates (calls scaled by
 * w_calls, total by w_time, self by w_self) from the spread between its
 * bursts, added to each op's. */
void job_ops_bursts_variance(struct job *j, double w_calls, double w_time,
			     double w_self);


#endif
