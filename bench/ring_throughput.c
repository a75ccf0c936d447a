// SPDX-License-Identifier: BSD-2-Clause
/*
 * The loader's throughput end to end: events made by rfbpf's real BPF
 * programs (callback_start/callback_end on a nop5 pair, as rfbpf attaches
 * them), carried by the real BPF ring buffer, read by libbpf's ring-buffer
 * reader and paired into op stacks by user/model/stacks.c, the per-event work
 * rfbpf's loader does. Two measurements:
 *
 *   sustained: one producer thread, then two (each with its own
 *              RecordFunction, as ops on two threads), call the pair as
 *              fast as they can for a few seconds while the loader reads
 *              concurrently from a ring of rfbpf's default size; reports
 *              both rates, the loader's CPU time per event, and BPF's
 *              drop counter. The producers cannot outrun the loader on
 *              this machine's two CPUs, so the loader's capacity is also
 *              given as 1 / (CPU per event).
 *   drain:     the loader is paused while the producer fills a ring big
 *              enough to hold everything, then reads it all flat out:
 *              events per second the loader consumes from the ring when
 *              it never has to wait for the producer.
 *
 *   build/bench/ring_throughput [--reps R] [--pairs N]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include "bench_probes.h"
#include "pair_event.h"
#include "stats.h"
#include "model/trace.h"

#define MAX_REPS 32
#define DRAIN_RING_MB 256
/* 150000 pairs of 176 + 40 bytes (records with their headers) fill
 * 32.4 MB of the 256 MiB ring: nothing is dropped while the loader is
 * paused. */
#define DRAIN_PAIRS 150000

struct result {
	double produced, consumed, cpu_ns;	/* per second, per event */
	uint64_t drops;
};

static int sustained(struct producer *p, uint64_t pairs, int threads,
		     struct result *r)
{
	static struct trace t;
	struct bench_probes b;
	uint64_t dt;
	double cpu0;

	trace_init(&t, p->pid);
	if (bench_probes_open(&b, p->pid, 16, bench_pair_event, &t) ||
	    bench_probes_attach(&b, PROG_RFBPF, SITE_CALLBACK))
		return -1;
	cpu0 = bench_probes_reader_cpu(&b);
	if (producer_run_threads(p, SITE_CALLBACK, pairs, threads, &dt, 0))
		return -1;
	pairs = pairs / threads * threads;	/* what the threads ran */
	bench_probes_detach(&b);
	r->drops = bench_probes_drops(&b);
	bench_probes_wait_consumed(&b, 2 * pairs - r->drops);
	r->produced = 2e9 * pairs / dt;
	/* Consumed over the producer's run plus the final catch-up. */
	r->cpu_ns = (bench_probes_reader_cpu(&b) - cpu0) * 1e9 / b.consumed;
	r->consumed = r->produced * b.consumed / (2.0 * pairs);
	bench_probes_close(&b);
	trace_free(&t);
	return 0;
}

static int drain(struct producer *p, uint64_t pairs, struct result *r)
{
	static struct trace t;
	struct bench_probes b;
	uint64_t dt;
	double s;

	trace_init(&t, p->pid);
	if (bench_probes_open(&b, p->pid, DRAIN_RING_MB, bench_pair_event, &t))
		return -1;
	b.paused = true;
	if (bench_probes_attach(&b, PROG_RFBPF, SITE_CALLBACK) ||
	    producer_run(p, SITE_CALLBACK, pairs, 0, &dt))
		return -1;
	bench_probes_detach(&b);
	r->drops = bench_probes_drops(&b);
	s = bench_probes_drain(&b, 2 * pairs - r->drops);
	r->produced = 2e9 * pairs / dt;
	r->consumed = b.consumed / s;
	r->cpu_ns = 0;
	bench_probes_close(&b);
	trace_free(&t);
	return 0;
}

static void print_row(const char *name, struct result *r, int reps)
{
	double prod[MAX_REPS], cons[MAX_REPS], cpu[MAX_REPS], lo, hi, m;
	uint64_t drops = 0;

	for (int i = 0; i < reps; i++) {
		prod[i] = r[i].produced / 1e6;
		cons[i] = r[i].consumed / 1e6;
		cpu[i] = r[i].cpu_ns;
		drops += r[i].drops;
	}
	m = median_spread(prod, reps, &lo, &hi);
	printf("| %s | %.2f (%.2f-%.2f) |", name, m, lo, hi);
	m = median_spread(cons, reps, &lo, &hi);
	printf(" %.2f (%.2f-%.2f) |", m, lo, hi);
	m = median_spread(cpu, reps, &lo, &hi);
	if (m > 0)
		printf(" %.0f (%.0f-%.0f) | %.2f |", m, lo, hi, 1e3 / m);
	else
		printf(" - | - |");
	printf(" %llu |\n", (unsigned long long)drops);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "reps", required_argument, NULL, 'r' },
		{ "pairs", required_argument, NULL, 'n' },
		{ 0 },
	};
	static struct result sus[MAX_REPS], sus2[MAX_REPS], dr[MAX_REPS];
	uint64_t pairs = 2000000;
	struct producer p;
	int reps = 3, c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 'r')
			reps = atoi(optarg);
		else if (c == 'n')
			pairs = strtoull(optarg, NULL, 0);
		else
			return 2;
	}
	if (reps < 1 || reps > MAX_REPS)
		return fprintf(stderr, "bench: --reps 1..%d\n", MAX_REPS), 2;
	if (producer_start(&p))
		return 1;
	for (int i = 0; i < reps; i++)
		if (sustained(&p, pairs, 1, &sus[i]) ||
		    sustained(&p, pairs, 2, &sus2[i]) ||
		    drain(&p, DRAIN_PAIRS, &dr[i]))
			return fprintf(stderr, "bench: setup failed (root "
				       "needed)\n"), 1;
	printf("| measurement | producer (M events/s) | loader read "
	       "(M events/s) | loader CPU per event (ns) | loader capacity "
	       "1/CPU (M events/s) | drops |\n|---|---|---|---|---|---|\n");
	print_row("sustained, 1 producer thread, 16 MiB ring, read "
		  "concurrently", sus, reps);
	print_row("sustained, 2 producer threads, 16 MiB ring, read "
		  "concurrently", sus2, reps);
	print_row("drain: 300000 events waiting in a 256 MiB ring", dr, reps);
	printf("\n%d repetitions, median (min-max); sustained: %llu "
	       "start/end pairs (%llu events) each, drain: %d pairs\n", reps,
	       (unsigned long long)pairs, (unsigned long long)(2 * pairs),
	       DRAIN_PAIRS);
	producer_stop(&p);
	return 0;
}
