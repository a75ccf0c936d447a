// SPDX-License-Identifier: BSD-2-Clause
/*
 * How many events per second the loader sustains with 0 drops, end to end
 * through a real BPF ring buffer: a synthetic in-kernel producer
 * (bench/ring_producer.bpf.c, run with BPF_PROG_TEST_RUN in batches,
 * paced to a target rate) writes rfbpf-format before/end pairs into a
 * 16 MiB ring (rfbpf's default) with rfbpf's wakeup rule, while a reader
 * thread runs libbpf's ring-buffer reader and pairs every event into op
 * stacks with user/model/stacks.c, as rfbpf's loader does. Target rates double
 * until the ring drops events; each rate runs for --seconds.
 *
 *   build/bench/ring_rate [--seconds S] [--max-rate M_EVENTS_PER_S]
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "pair_event.h"
#include "ring_producer.skel.h"
#include "model/trace.h"

#define BATCH_PAIRS 1000
#define RING_MB 16

struct reader {
	struct ring_buffer *rb;
	struct trace trace;	/* trace.counts.events: records read */
	volatile int stop;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	/* rfbpf's loop: poll with a 100 ms timeout. */
	while (!r->stop)
		ring_buffer__poll(r->rb, 100);
	while (ring_buffer__consume(r->rb) > 0)
		;
	return NULL;
}

struct result {
	double target, produced, consumed;
	uint64_t drops, open_ops;
};

static int run_rate(struct ring_producer_bpf *skel, double rate, double secs,
		    struct result *res)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts);
	int fd = bpf_program__fd(skel->progs.produce);
	struct reader r = { 0 };
	uint64_t t0, batch_ns, end, p0, d0;
	pthread_t th;
	uint64_t batches = 0;

	trace_init(&r.trace, 1);
	r.rb = ring_buffer__new(bpf_map__fd(skel->maps.events),
				bench_pair_event, &r.trace, NULL);
	if (!r.rb || pthread_create(&th, NULL, reader_main, &r))
		return -1;
	skel->bss->pairs = BATCH_PAIRS;
	p0 = skel->bss->produced;
	d0 = skel->bss->drops;
	batch_ns = (uint64_t)(2e9 * BATCH_PAIRS / rate);
	t0 = now_ns();
	end = t0 + (uint64_t)(secs * 1e9);
	for (;;) {
		uint64_t next = t0 + batches * batch_ns;

		while (now_ns() < next)
			;		/* pace by spinning, not sleeping */
		if (next >= end)
			break;
		if (bpf_prog_test_run_opts(fd, &opts))
			return -1;
		batches++;
	}
	res->produced = (skel->bss->produced - p0) * 1e9 / (now_ns() - t0);
	res->drops = skel->bss->drops - d0;
	r.stop = 1;
	pthread_join(th, NULL);
	res->target = rate;
	res->consumed = r.trace.counts.events * 1e9 / (now_ns() - t0);
	/* Every pair must have paired: nothing left open, no stray end. */
	res->open_ops = r.trace.open.len + r.trace.counts.unmatched_ends;
	ring_buffer__free(r.rb);
	trace_free(&r.trace);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "max-rate", required_argument, NULL, 'm' },
		{ 0 },
	};
	struct ring_producer_bpf *skel;
	double secs = 2, max_rate = 64, best = 0;
	int c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 's')
			secs = atof(optarg);
		else if (c == 'm')
			max_rate = atof(optarg);
		else
			return 2;
	}
	skel = ring_producer_bpf__open();
	if (!skel)
		return fprintf(stderr, "bench: cannot open the producer\n"), 1;
	bpf_map__set_max_entries(skel->maps.events, RING_MB << 20);
	skel->data->wakeup_bytes = (RING_MB << 20) / 8;
	skel->data->threads = 4;
	if (ring_producer_bpf__load(skel))
		return fprintf(stderr, "bench: cannot load the producer (root "
			       "needed): %s\n", strerror(errno)), 1;
	printf("| target (M events/s) | produced (M events/s) | loader read "
	       "(M events/s) | drops | unpaired |\n|---|---|---|---|---|\n");
	for (double rate = 1e6; rate <= max_rate * 1e6; rate *= 2) {
		struct result r;

		if (run_rate(skel, rate, secs, &r))
			return fprintf(stderr, "bench: run failed\n"), 1;
		printf("| %.0f | %.2f | %.2f | %llu | %llu |\n", r.target / 1e6,
		       r.produced / 1e6, r.consumed / 1e6,
		       (unsigned long long)r.drops,
		       (unsigned long long)r.open_ops);
		fflush(stdout);
		if (r.drops || r.open_ops)
			break;
		best = r.produced;
	}
	printf("\nHighest rate sustained with 0 drops: %.2f M events/s "
	       "(%g s per rate, batches of %d pairs, %d MiB ring, 4 "
	       "threads' stacks)\n", best / 1e6, secs, BATCH_PAIRS, RING_MB);
	ring_producer_bpf__destroy(skel);
	return 0;
}
