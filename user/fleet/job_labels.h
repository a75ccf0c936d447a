/* SPDX-License-Identifier: BSD-2-Clause */
/* The labels every job series of the fleet metrics starts with. */
#ifndef RFBPF_FLEET_JOB_LABELS_H
#define RFBPF_FLEET_JOB_LABELS_H

#include <stdio.h>
#include "export/prom_text.h"
#include "fleet/job_state.h"

/* pid, process, container. */
#define JOB_LABELS 3

/* Fills l[0..JOB_LABELS); pid is room for the pid's text. */
static inline void job_labels(const struct job *j, struct prom_label *l,
			      char *pid, size_t len)
{
	snprintf(pid, len, "%d", j->proc.pid);
	l[0] = (struct prom_label){ "pid", pid };
	l[1] = (struct prom_label){ "process", j->proc.comm };
	l[2] = (struct prom_label){ "container", j->proc.container };
}

#endif
