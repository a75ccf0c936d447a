/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The fleet metrics of distributed jobs: each job's rank (an info series
 * to join on pid), its collectives' estimated seconds, calls and bytes,
 * and its steps, so that PromQL finds the straggler across hosts
 * (docs/distributed.md).
 */
#ifndef RFBPF_FLEET_COLLECTIVES_H
#define RFBPF_FLEET_COLLECTIVES_H

#include "export/prom_text.h"
#include "fleet/job_state.h"

/* Also notes each job's steps at this export (job.steps_exported): call
 * once per interval. */
void fleet_collectives_write(struct prom_buf *b, struct job *const *jobs,
			     size_t nr, double interval_s);

#endif
