/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The one-shot outputs of a tracing run (-p PID or a command): the table,
 * the Chrome trace, folded stacks. Each is fed by a trace sink as ops
 * close, so memory holds aggregates and distinct stacks, never every op;
 * the Chrome trace streams to its file.
 */
#ifndef RFBPF_OUTPUTS_H
#define RFBPF_OUTPUTS_H

#include "cli.h"
#include "export/chrome.h"
#include "export/flight_recorder.h"
#include "export/perfetto.h"
#include "model/aggregate.h"
#include "model/collectives.h"
#include "model/per_step.h"
#include "model/steps.h"
#include "model/stack_profile.h"
#include "model/trace.h"

struct outputs {
	struct aggregate agg;		/* the table, Chrome's op_stats */
	struct aggregate grouped;	/* the table with --group-by */
	struct stack_profile stacks;	/* --folded */
	struct stack_profile gpu_stacks;/* --gpu-folded */
	struct steps steps;		/* --steps and the rest */
	struct per_step per_step;	/* --per-step */
	struct collectives coll;	/* the table's collectives block */
	struct chrome_writer chrome;	/* -o */
	struct perfetto_writer perfetto;/* -o FILE.perfetto-trace */
	bool perfetto_open;
	struct flight_recorder flight;	/* -o with --flight-recorder */
	bool flight_on;
	int64_t slow_step;		/* --slow-step: a step to dump for
					 * (-1: none) */
	uint64_t slow_steps;		/* steps past --slow-step */
	uint64_t slow_ns, slow_dur_ns;
	unsigned sigusr1_dumps;
	bool chrome_open;
	bool published;			/* outputs_publish was done */
	const char *bad_path;		/* the one outputs_start could not make */
};

/* Registers the sinks the options ask for; opens the Chrome file and
 * checks the others can be written. 0, or -1 with errno and bad_path set
 * (a file cannot be created). */
int outputs_start(struct outputs *o, struct trace *t,
		  const struct options *opt);
/* The first op came: the Chrome trace replaces the file at its path
 * (until now it was a hidden temporary beside it). Once; later calls do
 * nothing. 0, or 1 if it could not (said on stderr). */
int outputs_publish(struct outputs *o, const struct options *opt);
/* Nothing was traced (setup failed or a signal came first): the Chrome
 * trace's temporary is removed, leaving what was at its path. True if
 * there was one. */
bool outputs_discard(struct outputs *o);
/* Tracing stopped (every op closed): prints the table and finishes the
 * files. Returns 0, or 1 if a file could not be written (said on
 * stderr). */
int outputs_finish(struct outputs *o, const struct trace *t,
		   const struct options *opt);
/* --flight-recorder: writes the window now if asked (dump_requests
 * SIGUSR1s came since the last call) or if a step was slower than
 * --slow-step; says so on stderr. */
void outputs_poll(struct outputs *o, const struct trace *t,
		  const struct options *opt, unsigned dump_requests);
void outputs_free(struct outputs *o);

#endif
