/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What one rank's run says about it for the straggler table of --all:
 * its rank, its steps' times and the time its collectives took in each,
 * as a few lines of text that each traced process writes (its
 * --rank-summary file) and the --all parent reads back. Then, across
 * ranks: which rank the others waited for.
 *
 * A late rank waits little in its collectives and its peers wait long
 * for it, so the straggler is the rank whose collectives took least,
 * and how much the others waited for it is their mean collective time
 * per step less its own.
 */
#ifndef RFBPF_MODEL_RANK_SUMMARY_H
#define RFBPF_MODEL_RANK_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "collectives.h"
#include "trace.h"

struct rank_summary {
	pid_t pid;
	char comm[16];
	struct dist_info dist;
	uint64_t span_ns;	/* first to last event traced */
	uint64_t coll_ns;	/* all its collectives' time */
	uint64_t coll_calls;
	uint64_t steps;		/* whole steps traced */
	uint64_t step_ns;	/* their time, summed */
	uint64_t step_coll_ns;	/* the collectives' time in them */
	uint64_t max_step_ns;
};

/* Writes t's summary (its collectives c) to f. */
void rank_summary_write(FILE *f, const struct trace *t,
			const struct collectives *c);
/* Reads one back; false if the text is not one (a run that failed
 * before its end). */
bool rank_summary_parse(const char *text, struct rank_summary *r);

/* Whether two ranks are of one job: the same run id and master (every
 * rank of a torchrun job has them; two jobs on one host differ in one at
 * least). */
bool rank_summary_same_job(const struct rank_summary *a,
			   const struct rank_summary *b);

/* Per step if every rank has whole steps, else over the traced span. */
struct straggler {
	bool per_step;
	int index;		/* in the array given, -1: none found */
	double others_wait_ns;	/* the others' mean collective time per
				 * step (or in all) less its own */
};

/* The rank the others waited for most, of nr summaries of one job (2 at
 * least, all with collectives); index -1 if none can be told. */
struct straggler rank_summary_straggler(const struct rank_summary *r,
					size_t nr);
/* A rank's collective time per step (or in all, if not per_step). */
double rank_summary_wait(const struct rank_summary *r, bool per_step);

#endif
