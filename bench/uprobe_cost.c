// SPDX-License-Identifier: BSD-2-Clause
/*
 * Per-event cost of a uprobe with an empty BPF program against rfbpf's
 * programs on the same functions, on both probe paths rfbpf uses:
 *
 *   callback path: functions starting with a 5-byte NOP, like rfbpf's
 *                  callback stubs (the kernel's optimized, trap-free path);
 *   entry path:    functions starting with the first instructions of
 *                  RecordFunction::before/end (an int3 trap per hit).
 *
 * A child process calls each pair of functions in a loop (producer.c);
 * the variants run interleaved (A B C ... A B C ...) so that the machine's
 * drift hits them alike; each figure is the median of the repetitions,
 * with min-max, and each ratio is taken within a repetition first.
 *
 *   build/bench/uprobe_cost [--reps R] [--callback-iters N]
 *                           [--entry-iters N]
 */
#include <getopt.h>
#include <stdio.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <stdlib.h>
#include <string.h>
#include "bench_probes.h"
#include "stats.h"

#define MAX_REPS 64

static const struct variant {
	const char *name;
	enum bench_prog prog;
	enum probe_site site;
} variants[] = {
	{ "callback path (nop5): no uprobe", PROG_NONE, SITE_CALLBACK },
	{ "callback path: empty BPF program", PROG_EMPTY, SITE_CALLBACK },
	{ "callback path: rfbpf callback_start/callback_end", PROG_RFBPF,
	  SITE_CALLBACK },
	{ "entry path (int3): no uprobe", PROG_NONE, SITE_ENTRY },
	{ "entry path: empty BPF program", PROG_EMPTY, SITE_ENTRY },
	{ "entry path: rfbpf before_cstr/end", PROG_RFBPF, SITE_ENTRY },
	/* Last, outside the two groups of three the tables are built on. */
	{ "callback path: rfbpf's programs, GPU launch tagging on",
	  PROG_RFBPF_GPU, SITE_CALLBACK },
};
#define GPU_VARIANT 6
#define NR_VARIANTS (int)(sizeof(variants) / sizeof(*variants))

static int count_record(void *ctx, void *data, size_t size)
{
	(void)ctx, (void)data, (void)size;
	return 0;
}

/* ns per event of one variant, one repetition (two events per pair). */
static double run_variant(struct bench_probes *b, struct producer *p,
			  const struct variant *v, uint64_t iters)
{
	uint64_t before = b->consumed, dt;

	if (bench_probes_attach(b, v->prog, v->site)) {
		fprintf(stderr, "bench: cannot attach %s\n", v->name);
		exit(1);
	}
	if (producer_run(p, v->site, iters, 0, &dt)) {
		fprintf(stderr, "bench: the producer died\n");
		exit(1);
	}
	bench_probes_detach(b);
	if (v->prog == PROG_RFBPF || v->prog == PROG_RFBPF_GPU)
		bench_probes_wait_consumed(b, before + 2 * iters);
	return (double)dt / (2.0 * iters);
}

static void print_results(double ns[][MAX_REPS], int reps, uint64_t drops,
			  uint64_t consumed)
{
	double lo, hi, ratio[3][MAX_REPS];
	double med[NR_VARIANTS], min[NR_VARIANTS], max[NR_VARIANTS];

	printf("| variant | median ns/event | spread (min-max) | added by the "
	       "uprobe (ns) |\n|---|---|---|---|\n");
	for (int v = 0; v < NR_VARIANTS; v++) {
		double copy[MAX_REPS];

		memcpy(copy, ns[v], sizeof(copy));
		med[v] = median_spread(copy, reps, &min[v], &max[v]);
	}
	for (int v = 0; v < NR_VARIANTS; v++) {
		double base = med[v == GPU_VARIANT ? 0 : v - v % 3];

		printf("| %s | %.1f | %.1f-%.1f | %.1f |\n", variants[v].name,
		       med[v], min[v], max[v], med[v] - base);
	}
	for (int s = 0; s < 2; s++)
		for (int r = 0; r < reps; r++)
			ratio[s][r] = ns[3 * s + 2][r] / ns[3 * s + 1][r];
	for (int r = 0; r < reps; r++)
		ratio[2][r] = ns[GPU_VARIANT][r] / ns[1][r];
	printf("\n| path | rfbpf / empty program, per event (median of "
	       "per-repetition ratios) | spread | rfbpf / empty, added cost "
	       "only (medians) |\n|---|---|---|---|\n");
	for (int s = 0; s < 2; s++) {
		double m = median_spread(ratio[s], reps, &lo, &hi);

		printf("| %s | %.2f | %.2f-%.2f | %.2f |\n",
		       s ? "entry (int3)" : "callback (nop5)", m, lo, hi,
		       (med[3 * s + 2] - med[3 * s]) /
		       (med[3 * s + 1] - med[3 * s]));
	}
	{
		double m = median_spread(ratio[2], reps, &lo, &hi);

		printf("| callback (nop5), GPU launch tagging on | %.2f | "
		       "%.2f-%.2f | %.2f |\n", m, lo, hi,
		       (med[GPU_VARIANT] - med[0]) / (med[1] - med[0]));
	}
	printf("\n%d interleaved repetitions; rfbpf records read by the "
	       "loader: %llu, dropped: %llu\n", reps,
	       (unsigned long long)consumed, (unsigned long long)drops);
}

/* Time the kernel spends inside one program, over all its runs so far. */
static void prog_run_time(struct bpf_program *prog, uint64_t *ns,
			  uint64_t *cnt)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	*ns = *cnt = 0;
	if (!bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len)) {
		*ns = info.run_time_ns;
		*cnt = info.run_cnt;
	}
}

/*
 * A separate, untimed pass with the kernel's BPF run-time statistics on
 * (they add two clock reads per run, so they stay off in the timed
 * passes): how much of the per-event cost is spent inside each program,
 * as opposed to the uprobe machinery around it.
 */
static void print_program_times(struct bench_probes *b, struct producer *p,
				uint64_t iters)
{
	struct bpf_program *progs[] = {
		bench_probes_program(b, PROG_EMPTY, SITE_CALLBACK, 0),
		bench_probes_program(b, PROG_RFBPF, SITE_CALLBACK, 0),
		bench_probes_program(b, PROG_RFBPF, SITE_CALLBACK, 1),
		bench_probes_program(b, PROG_RFBPF, SITE_ENTRY, 0),
		bench_probes_program(b, PROG_RFBPF, SITE_ENTRY, 1),
	};
	int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);

	if (fd < 0) {
		printf("\n(BPF run-time statistics unavailable)\n");
		return;
	}
	for (int v = 0; v < NR_VARIANTS; v++)
		if (variants[v].prog == PROG_EMPTY ||
		    variants[v].prog == PROG_RFBPF)
			run_variant(b, p, &variants[v], variants[v].site ==
				    SITE_CALLBACK ? iters : iters / 10);
	printf("\nTime inside each BPF program (kernel run-time statistics, "
	       "one extra untimed pass):\n\n| program | runs | ns per run |\n"
	       "|---|---|---|\n");
	for (size_t i = 0; i < sizeof(progs) / sizeof(*progs); i++) {
		uint64_t ns, cnt;

		prog_run_time(progs[i], &ns, &cnt);
		printf("| %s | %llu | %.1f |\n", bpf_program__name(progs[i]),
		       (unsigned long long)cnt, cnt ? (double)ns / cnt : 0);
	}
	close(fd);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "reps", required_argument, NULL, 'r' },
		{ "callback-iters", required_argument, NULL, 'c' },
		{ "entry-iters", required_argument, NULL, 'e' },
		{ 0 },
	};
	uint64_t iters[2] = { 500000, 50000 };
	static double ns[NR_VARIANTS][MAX_REPS];
	struct bench_probes b;
	struct producer p;
	int reps = 7, c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 'r')
			reps = atoi(optarg);
		else if (c == 'c')
			iters[SITE_CALLBACK] = strtoull(optarg, NULL, 0);
		else if (c == 'e')
			iters[SITE_ENTRY] = strtoull(optarg, NULL, 0);
		else
			return 2;
	}
	if (reps < 1 || reps > MAX_REPS)
		return fprintf(stderr, "bench: --reps 1..%d\n", MAX_REPS), 2;
	if (producer_start(&p) ||
	    bench_probes_open(&b, p.pid, 16, count_record, NULL)) {
		fprintf(stderr, "bench: cannot set up (root needed)\n");
		return 1;
	}
	/* One untimed pass: the first hit of a nop5 probe rewrites it. */
	for (int v = 0; v < NR_VARIANTS; v++)
		run_variant(&b, &p, &variants[v], 1000);
	for (int r = 0; r < reps; r++)
		for (int v = 0; v < NR_VARIANTS; v++)
			ns[v][r] = run_variant(&b, &p, &variants[v],
					       iters[variants[v].site]);
	print_results(ns, reps, bench_probes_drops(&b), b.consumed);
	print_program_times(&b, &p, iters[SITE_CALLBACK]);
	producer_stop(&p);
	bench_probes_close(&b);
	return 0;
}
