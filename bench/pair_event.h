/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The loader's ring-buffer callback as the throughput benches run it:
 * rfbpf's session/session.c handle_event() minus thread naming (a /proc
 * read once per new thread): decode, then pair into the thread's stack
 * with user/model/stacks.c. ctx is the struct trace; trace.counts.events
 * counts the before and end records read.
 */
#ifndef BENCH_PAIR_EVENT_H
#define BENCH_PAIR_EVENT_H

#include <stddef.h>
#include "model/trace.h"

static inline int bench_pair_event(void *ctx, void *data, size_t size)
{
	struct trace *t = ctx;
	const struct rf_event_hdr *h = data;

	if (size < sizeof(*h))
		return 0;
	/* stacks_before()/stacks_end() count the event. */
	if (h->kind == RF_EV_BEFORE && size >= sizeof(struct rf_before_event)) {
		const struct rf_before_event *e = data;

		stacks_before(t, h, e->name, e->seq);
	} else if (h->kind == RF_EV_END) {
		stacks_end(t, h);
	}
	return 0;
}

#endif
