/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A job's training steps, told from its ops with no change to the job.
 * The marker is, in order of preference:
 *  - ProfilerStep#N, the scope torch.profiler's schedule opens around each
 *    step: a step is that scope's span, numbered N as the job numbers it;
 *  - Optimizer.step#<Class>.step, the scope every torch optimizer opens
 *    around its step(): a step runs from the end of one to the end of the
 *    next (forward, backward, then the update), numbered by the markers
 *    seen, so the step ending at the first is step 0 (the job's own count
 *    when rfbpf launched it) and is never whole, and step 1 is not
 *    traced either: it is when rfbpf learns whether ProfilerStep is there;
 *  - an op the user names (--step-op): a step is that op's span,
 *    numbered by the markers seen from 0.
 * Only the first marker's thread and (for optimizers) its exact name
 * count: a job with two optimizers would otherwise step twice a step.
 *
 * With --steps or --from-step the tracker is a gate too: only what began
 * inside the window of whole steps asked for reaches the outputs.
 */
#ifndef RFBPF_MODEL_STEPS_H
#define RFBPF_MODEL_STEPS_H

#include <stdbool.h>
#include <stdint.h>

enum step_source { STEP_NONE, STEP_PROFILER, STEP_OPTIMIZER, STEP_USER_OP };

struct step {
	int64_t number;
	uint32_t tid;		/* the thread of its marker */
	uint64_t start_ns, end_ns;
};

/* Completed steps kept to tell which step a late op began in. */
#define STEPS_RECENT 64

struct steps {
	/* What was asked. */
	const char *op_name;	/* --step-op, NULL: ProfilerStep, else the
				 * optimizer */
	int64_t from;		/* --from-step, -1: the first whole one */
	uint64_t want;		/* --steps, 0: no limit */
	bool gate;		/* only the window reaches the outputs */
	/* What was found. */
	enum step_source source;
	char marker[128];	/* the marker's name (the optimizer's own) */
	uint32_t tid;
	int64_t seen;		/* markers seen (ordinal of the next) */
	bool started;		/* the window began */
	int64_t first;		/* ... with this step (past from, if the
				 * job was past it when tracing began) */
	uint64_t from_ns, to_ns;/* the window: [from, to) */
	bool in_step;
	struct step cur;	/* the step running (in_step) */
	uint64_t done;		/* whole steps completed in the window */
	struct step recent[STEPS_RECENT];
	uint64_t nr_recent;	/* completed, all told */
	uint64_t longest_ns;
	uint64_t switched;	/* the optimizer gave way to ProfilerStep */
};

void steps_init(struct steps *s, const char *op_name, int64_t from,
		uint64_t want, bool gate);
/* An op began. */
void steps_op_open(struct steps *s, const char *name, uint32_t tid,
		   uint64_t start_ns);
/* An op ended; true when it completed a step in the window, which is
 * then in *done. */
bool steps_op_close(struct steps *s, const char *name, uint32_t tid,
		    uint64_t start_ns, uint64_t end_ns, struct step *done);
/* Whether something that began at ts reaches the outputs. */
bool steps_pass(const struct steps *s, uint64_t ts);
/* Whether ts is inside the window of whole steps (gate or not). */
bool steps_in_window(const struct steps *s, uint64_t ts);
/* --steps N: the N-th whole step completed. */
static inline bool steps_finished(const struct steps *s)
{
	return s->want && s->done >= s->want;
}
/* The number of the step that ts falls in (within the steps running or
 * recently completed in the window), or -1. */
int64_t steps_number_at(const struct steps *s, uint64_t ts);
/* The marker that defines steps, in words ("ProfilerStep#N", the
 * optimizer's scope, the user's op), or "none seen". */
const char *steps_source_name(const struct steps *s);
/* Whether the marker is a real op the outputs show already
 * (ProfilerStep#N), so no step slice needs to be drawn for it. */
static inline bool steps_marker_is_step(const struct steps *s)
{
	return s->source == STEP_PROFILER;
}

#endif
