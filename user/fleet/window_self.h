/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A full-trace window's self time, counted by time: what each op spent as
 * the innermost op of its thread inside the span measured, [a, b], and
 * nothing outside it.
 *
 * Why by time, not by the ops that began in the window. Scaling the
 * window's sums by span/L is unbiased when every instant of self time has
 * the same chance L/span of being counted, and a thread's self time in
 * [a, b] can never pass b - a: scaled, a thread can never show more than
 * the span. Counting whole ops that began in the window broke both under
 * contention (a 1-thread job beside a 3-thread one on 2 CPUs got 113%
 * to 421% of an interval):
 * - an op that outlasts the window brought its whole self time, and its
 *   children after the window are sampled at p: one left unsampled put
 *   its time in the parent's self, one sampled took 1/p times its own
 *   out, and a negative self was cut to 0, so the sum was biased up;
 * - other threads ran ops while the switching thread was held (the stops
 *   last tens of ms on a loaded host), outside L.
 * Here an op's self time is clipped to [a, b]: its time in [a, b] less
 * its children's time in [a, b] (closed children are summed as they
 * close, by op id; the open ones at b are taken from the thread's stack
 * by window_self_cut). The ops begun between the callback's switch to
 * p = 1 and a are seen whole (they began under it) and give their time
 * after a. An op begun before the switch and not sampled is not seen:
 * its self time in the window is lost (a thread's outer scopes, as
 * before), which holds the estimate down, never up.
 *
 * Calls count an op once, in the span where it began; the probe cost of
 * those ops is summed, to take the window's slowdown out of L (see
 * window_self_length).
 */
#ifndef RFBPF_FLEET_WINDOW_SELF_H
#define RFBPF_FLEET_WINDOW_SELF_H

#include <stdbool.h>
#include <stdint.h>
#include "model/trace.h"
#include "model/u64map.h"

struct window_self {
	uint64_t seen_from;	/* ops that began from here on are seen
				 * whole (the p = 1 callback's) */
	uint64_t a, b;		/* the span measured, CLOCK_MONOTONIC ns
				 * (b: UINT64_MAX until window_self_end_at,
				 * where the end was not planned) */
	bool open;		/* closed ops are counted into it */
	struct u64map child_ns;	/* op id + 1 -> its closed children's time
				 * in [a, b] */
	struct u64map children;	/* op id + 1 -> how many of them */
	/* Summed over the spans since window_self_reset. */
	struct u64map threads;	/* tids that ran an op in a span */
	double probe_ns;	/* probe cost of the ops begun in them */
	double self_ns;		/* self time counted */
};

/* What an op added: its self time in the span, and 1 call if it began
 * in it. */
typedef void (*window_self_add_fn)(void *ctx, struct trace *t,
				   const struct closed_op *c,
				   uint64_t self_ns, uint64_t calls);

/* Measures [a, b], ops seen whole from seen_from (<= a). b: UINT64_MAX
 * where the end is not known yet (window_self_end_at gives it), else
 * the end planned. A span whose end is planned must say so here: ops that
 * close between b and the cut (read later) would otherwise count their
 * time after b, and a parent its children's after the callback went off
 * (not seen) as its own self time. */
void window_self_open(struct window_self *w, uint64_t seen_from,
		      uint64_t a, uint64_t b);
/* The span ends at b: ops closing from now on count up to b. */
void window_self_end_at(struct window_self *w, uint64_t b);
/* A closed op: its share, to add (0 self and 0 calls: nothing to add). */
void window_self_op(struct window_self *w, const struct trace *t,
		    const struct closed_op *c, uint64_t *self_ns,
		    uint64_t *calls);
/* An op closed that is no window op: what its children left goes. */
void window_self_forget(struct window_self *w, uint64_t op_id);
/* The span ended (window_self_end_at): the ops still open in it add their
 * part up to b, and closed ops add nothing more. */
void window_self_cut(struct window_self *w, struct trace *t,
		     window_self_add_fn add, void *ctx);
/* The length L to scale the spans' sums by: their length, less the probe
 * time their ops spent (spread over the threads that ran; a window slows
 * the job, and self times are without that cost), never below what the
 * self time counted needs (so a job's scaled self time cannot pass the
 * span times its threads). traced_whole: the job was traced all along,
 * its times are its own: L is the length. */
double window_self_length(const struct window_self *w, double length_s,
			  bool traced_whole);
/* A new span of spans (sums to zero); what is open stays open. */
void window_self_reset(struct window_self *w);
void window_self_free(struct window_self *w);

#endif
