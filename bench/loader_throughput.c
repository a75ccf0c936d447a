// SPDX-License-Identifier: BSD-2-Clause
/*
 * How many events per second the loader's pairing and stack rebuilding
 * (user/model/stacks.c, the per-event work after the ring buffer) sustains:
 * a synthetic producer generates before/end pairs nested three deep on
 * four interleaved threads, with 24 distinct names, and the events are
 * fed straight to the stacks as the ring-buffer callback does. The ring
 * buffer itself and BPF are not in this figure.
 *
 *   build/bench/loader_throughput [events]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "model/aggregate.h"
#include "model/profile_sink.h"
#include "model/trace.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long events = argc > 1 ? atol(argv[1]) : 20000000;
	struct rf_event_hdr h = { .variant = RF_V_SCHEMA };
	char names[24][32];
	struct trace t;
	struct aggregate agg;
	struct stack_profile stacks;
	struct trace_sink sink;
	long n = 0;
	double t0;

	for (int i = 0; i < 24; i++)
		snprintf(names[i], sizeof(names[i]), "aten::synthetic_op_%d",
			 i);
	trace_init(&t, 1);
	/* What every run feeds: the table's aggregate, and the stacks that
	 * --folded and pprof are written from. */
	aggregate_init(&agg);
	stack_profile_init(&stacks);
	sink = aggregate_sink(&agg);
	trace_add_sink(&t, &sink);
	sink = profile_sink_ops(&stacks);
	trace_add_sink(&t, &sink);
	t0 = now_s();
	for (uint64_t step = 0; n < events; step++) {
		uint32_t tid = 100 + step % 4;
		uint64_t base = 0x10000 + tid * 0x1000;

		/* before x3 (nested), end x3: six events per step */
		for (int d = 0; d < 3; d++) {
			const char *name = names[(step + d) % 24];

			h.kind = RF_EV_BEFORE;
			h.ts_ns = step * 10 + d;
			h.tid = tid;
			h.rf_addr = base + d * 0x100;
			h.name_len = strlen(name);
			stacks_before(&t, &h, name, step);
		}
		for (int d = 2; d >= 0; d--) {
			h.kind = RF_EV_END;
			h.ts_ns = step * 10 + 6 - d;
			h.rf_addr = base + d * 0x100;
			stacks_end(&t, &h);
		}
		n += 6;
	}
	double dt = now_s() - t0;
	printf("loader: %ld events in %.3f s = %.2f million events/s "
	       "(%llu ops through the aggregate and stack sinks, %zu slots "
	       "open at most, %zu distinct stacks)\n", n, dt, n / dt / 1e6,
	       (unsigned long long)t.nr_ops, t.cap_ops, stacks.nr);
	trace_free(&t);
	aggregate_free(&agg);
	stack_profile_free(&stacks);
	return 0;
}
