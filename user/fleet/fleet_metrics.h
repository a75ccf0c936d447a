/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The daemon's Prometheus exposition: per-op estimates for every traced
 * job, the budget's choices per job, what was lost, and rfbpf's own cost.
 * Every name starts with rfbpf_ except the standard process_* ones.
 */
#ifndef RFBPF_FLEET_METRICS_H
#define RFBPF_FLEET_METRICS_H

#include "export/prom_text.h"
#include "fleet/job_ops.h"

/* The daemon-wide figures. */
struct fleet_stats {
	double interval_s, budget;
	double op_cost_s;		/* calibrated cost of one traced op */
	unsigned jobs;			/* traced now */
	uint64_t jobs_started, jobs_ended;
	uint64_t activation_failures;	/* attempts refused */
	uint64_t processes_refused;	/* processes refused (once each) */
	uint64_t jobs_gone_early;	/* exited while being switched on */
	uint64_t leases_lapsed;	/* control threads whose lease ran out */
	uint64_t not_yet;		/* young, no safe point yet: later */
	uint64_t intervals;
	uint64_t pprof_written, pprof_errors, prom_errors;
	double last_interval_cpu_s;	/* rfbpf's CPU in the last interval */
	double last_interval_rss;	/* its resident bytes at its end */
	/* rfbpf's own process_* figures, read by the caller just before
	 * (prom_process_read): an input like the rest, so that the writer
	 * reads nothing from /proc itself and can be fuzzed at speed. */
	struct prom_process process;
};

void fleet_metrics_write(struct prom_buf *b, struct job *const *jobs,
			 size_t nr, const struct fleet_stats *st);

#endif
