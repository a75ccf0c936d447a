// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "export/flight_recorder.h"
#include "fleet/job_recorder.h"
#include "fleet/job_state.h"

int job_recorder_start(struct job *j)
{
	struct trace_sink s;

	if (!j->opt.flight_s)
		return 0;
	j->recorder = malloc(sizeof(*j->recorder));
	if (!j->recorder)
		return -1;
	if (flight_recorder_init(j->recorder, j->opt.flight_s,
				 j->opt.flight_mb)) {
		free(j->recorder);
		j->recorder = NULL;
		return -1;
	}
	j->recorder->holds = "the daemon's bursts (a few ms each, at random, "
			     "inside the budget) and on-demand captures: not "
			     "every op";
	s = flight_recorder_sink(j->recorder);
	if (!trace_add_sink(&j->s.trace, &s)) {
		job_recorder_free(j);
		errno = ENOSPC;
		return -1;
	}
	return 0;
}

int job_recorder_dump(struct job *j, const char *tag, const char *why)
{
	char path[4096];

	if (!j->recorder)
		return 0;
	snprintf(path, sizeof(path), "%s/rfbpf-%d.%s.json.gz",
		 j->opt.trace_dir, j->proc.pid, tag);
	return flight_recorder_dump(j->recorder, path, &j->s.trace, NULL,
				    why);
}

void job_recorder_free(struct job *j)
{
	if (!j->recorder)
		return;
	flight_recorder_free(j->recorder);
	free(j->recorder);
	j->recorder = NULL;
}
