// SPDX-License-Identifier: BSD-2-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model/steps.h"

#define PROFILER_PREFIX		"ProfilerStep#"
#define OPTIMIZER_PREFIX	"Optimizer.step#"

static bool starts_with(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

void steps_init(struct steps *s, const char *op_name, int64_t from,
		uint64_t want, bool gate)
{
	memset(s, 0, sizeof(*s));
	s->op_name = op_name;
	s->from = from;
	s->want = want;
	s->gate = gate;
	s->to_ns = UINT64_MAX;
	if (op_name) {
		s->source = STEP_USER_OP;
		snprintf(s->marker, sizeof(s->marker), "%s", op_name);
	}
}

static void restart(struct steps *s, enum step_source source,
		    const char *marker, uint32_t tid)
{
	s->source = source;
	snprintf(s->marker, sizeof(s->marker), "%s", marker);
	s->tid = tid;
	s->seen = 0;
	s->started = false;
	s->in_step = false;
	s->from_ns = 0;
	s->to_ns = UINT64_MAX;
	s->done = 0;
	s->nr_recent = 0;
	s->longest_ns = 0;
}

/* A step begins at start_ns (if it is one the window wants). */
static void begin_step(struct steps *s, int64_t number, uint32_t tid,
		       uint64_t start_ns)
{
	if (steps_finished(s) || (s->from >= 0 && number < s->from))
		return;
	if (!s->started) {
		s->started = true;
		s->from_ns = start_ns;
		s->first = number;
	}
	s->in_step = true;
	s->cur = (struct step){ .number = number, .tid = tid,
				.start_ns = start_ns };
}

static bool end_step(struct steps *s, uint64_t end_ns, struct step *done)
{
	if (!s->in_step)
		return false;
	s->in_step = false;
	s->cur.end_ns = end_ns;
	s->recent[s->nr_recent++ % STEPS_RECENT] = s->cur;
	if (end_ns - s->cur.start_ns > s->longest_ns)
		s->longest_ns = end_ns - s->cur.start_ns;
	s->done++;
	if (steps_finished(s))
		s->to_ns = end_ns;
	*done = s->cur;
	return true;
}

/* ProfilerStep#N's N, or -1 if the name has none. */
static int64_t profiler_step_number(const char *name)
{
	char *end;
	long long n = strtoll(name + strlen(PROFILER_PREFIX), &end, 10);

	return end == name + strlen(PROFILER_PREFIX) || n < 0 ? -1 : n;
}

void steps_op_open(struct steps *s, const char *name, uint32_t tid,
		   uint64_t start_ns)
{
	if (s->source == STEP_USER_OP) {
		if (strcmp(name, s->marker) || (s->tid && tid != s->tid))
			return;
		s->tid = tid;
		begin_step(s, s->seen++, tid, start_ns);
		return;
	}
	if (!starts_with(name, PROFILER_PREFIX))
		return;
	/* ProfilerStep is the job's own step: it wins over the optimizer
	 * until the optimizer's window began (see steps_op_close). */
	if (s->source == STEP_NONE ||
	    (s->source == STEP_OPTIMIZER && !s->started)) {
		if (s->source == STEP_OPTIMIZER)
			s->switched++;
		restart(s, STEP_PROFILER, PROFILER_PREFIX "N", tid);
	}
	if (s->source != STEP_PROFILER || tid != s->tid)
		return;
	s->seen++;
	begin_step(s, profiler_step_number(name), tid, start_ns);
}

bool steps_op_close(struct steps *s, const char *name, uint32_t tid,
		    uint64_t start_ns, uint64_t end_ns, struct step *done)
{
	switch (s->source) {
	case STEP_PROFILER:
		return tid == s->tid && s->in_step &&
		       start_ns == s->cur.start_ns &&
		       starts_with(name, PROFILER_PREFIX) &&
		       end_step(s, end_ns, done);
	case STEP_USER_OP:
		return tid == s->tid && s->in_step &&
		       start_ns == s->cur.start_ns &&
		       !strcmp(name, s->marker) && end_step(s, end_ns, done);
	case STEP_NONE:
		if (!starts_with(name, OPTIMIZER_PREFIX))
			return false;
		restart(s, STEP_OPTIMIZER, name, tid);
		break;
	case STEP_OPTIMIZER:
		if (tid != s->tid || strcmp(name, s->marker))
			return false;
		break;
	}
	/* The optimizer's step ends step `seen` and begins the next. Not
	 * step 1, though: under torch.profiler's schedule its step() opens
	 * ProfilerStep#N a few µs after the optimizer's first end, and the
	 * ops between would already be in the outputs when it took over. */
	{
		bool ended = end_step(s, end_ns, done);

		s->seen++;
		if (s->seen >= 2)
			begin_step(s, s->seen, tid, end_ns);
		return ended;
	}
}

/* Steps that are an op's span (ProfilerStep, --step-op) leave gaps
 * between them (torch.profiler's step() runs ops there): what began in
 * a gap is in no step. */
bool steps_in_window(const struct steps *s, uint64_t ts)
{
	return s->started && ts >= s->from_ns && ts < s->to_ns &&
	       (s->source == STEP_OPTIMIZER || steps_number_at(s, ts) >= 0);
}

bool steps_pass(const struct steps *s, uint64_t ts)
{
	return !s->gate || steps_in_window(s, ts);
}

int64_t steps_number_at(const struct steps *s, uint64_t ts)
{
	uint64_t n = s->nr_recent < STEPS_RECENT ? s->nr_recent :
		     STEPS_RECENT;

	if (s->in_step && ts >= s->cur.start_ns)
		return s->cur.number;
	for (uint64_t i = 0; i < n; i++) {
		const struct step *r =
			&s->recent[(s->nr_recent - 1 - i) % STEPS_RECENT];

		if (ts >= r->start_ns && ts < r->end_ns)
			return r->number;
		if (ts >= r->end_ns)
			break;
	}
	return -1;
}

const char *steps_source_name(const struct steps *s)
{
	return s->source == STEP_NONE ? "none seen" : s->marker;
}
