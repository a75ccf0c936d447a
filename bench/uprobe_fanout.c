// SPDX-License-Identifier: BSD-2-Clause
/*
 * What one more traced job on the same library costs every other job's
 * probe hits, on the entry path (uprobes on RecordFunction::before/end).
 *
 * The fleet daemon loads one BPF object per job and attaches its entry
 * programs for that job's pid. The kernel keeps one struct uprobe per
 * (inode, offset), so N jobs on one libtorch_cpu.so are one breakpoint
 * with N consumers, and a hit in any job walks all N (each consumer's pid
 * filter, then the BPF program of the one that matches). A daemon-wide
 * object attached once would leave one consumer. This measures the
 * difference: a producer process is probed as one job among K, the K-1
 * others being idle processes that map the same binary (as jobs would map
 * the same libtorch_cpu.so), each with rfbpf's own BPF object loaded and
 * attached for its pid by rfbpf's own code. K = 1 is what sharing would
 * give at best. Variants run interleaved; each figure is the median of the
 * repetitions, each ratio taken within a repetition first.
 *
 * On the callback path (the default where the kernel optimizes nop5
 * uprobes) there is nothing to share: each job's probes sit on its own
 * stub page, its own inode.
 *
 *   build/bench/uprobe_fanout [--reps R] [--iters N]
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "bench_probes.h"
#include "rfbpf.skel.h"
#include "stats.h"

#define MAX_REPS 64
static const int consumers[] = { 1, 2, 4, 8, 16 };
#define NR_K (int)(sizeof(consumers) / sizeof(*consumers))
#define MAX_OTHERS 15

/* An idle job: a child of this binary, so it maps the probed code. */
struct other_job {
	pid_t pid;
	struct probes rf;
	struct bpf_link *links[2];
};

static int count_record(void *ctx, void *data, size_t size)
{
	(void)ctx, (void)data, (void)size;
	return 0;
}

static pid_t start_idle_child(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		for (;;)
			pause();
	}
	return pid;
}

static int load_other(struct other_job *o, const char *exe)
{
	char err[256];

	o->pid = start_idle_child();
	if (o->pid < 0 ||
	    probes_load(&o->rf, o->pid, 1, false, 1.0, err, sizeof(err))) {
		fprintf(stderr, "bench: %s\n", o->pid < 0 ? "fork" : err);
		return -1;
	}
	for (int i = 0; i < 2; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, opts,
			    .func_name = site_symbols[SITE_ENTRY][i]);
		struct bpf_program *prog = i ? o->rf.skel->progs.end :
					   o->rf.skel->progs.before_cstr;

		o->links[i] = bpf_program__attach_uprobe_opts(prog, o->pid,
							      exe, 0, &opts);
		if (!o->links[i])
			return -1;
	}
	return 0;
}

static void detach_other(struct other_job *o)
{
	for (int i = 0; i < 2; i++) {
		bpf_link__destroy(o->links[i]);
		o->links[i] = NULL;
	}
}

static void close_other(struct other_job *o)
{
	detach_other(o);
	probes_destroy(&o->rf);
	if (o->pid > 0) {
		kill(o->pid, SIGKILL);
		waitpid(o->pid, NULL, 0);
	}
}

/* ns per event with the producer's consumer and k-1 others attached. */
static double run_k(struct bench_probes *b, struct producer *p,
		    struct other_job *others, int k, uint64_t iters)
{
	uint64_t before = b->consumed, dt;

	for (int i = 0; i < k - 1; i++)
		if (load_other(&others[i], b->exe))
			exit(1);
	if (bench_probes_attach(b, PROG_RFBPF, SITE_ENTRY) ||
	    producer_run(p, SITE_ENTRY, iters, 0, &dt)) {
		fprintf(stderr, "bench: cannot attach or run\n");
		exit(1);
	}
	bench_probes_detach(b);
	for (int i = 0; i < k - 1; i++)
		close_other(&others[i]);
	bench_probes_wait_consumed(b, before + 2 * iters);
	return (double)dt / (2.0 * iters);
}

static void print_results(double ns[][MAX_REPS], int reps,
			  const struct bench_probes *b)
{
	double med[NR_K], lo, hi;

	printf("| jobs with rfbpf's entry probes on the same library | "
	       "median ns per hit | spread (min-max) | over one job, per "
	       "hit (median of per-repetition ratios) |\n"
	       "|---|---|---|---|\n");
	for (int k = 0; k < NR_K; k++) {
		double copy[MAX_REPS], ratio[MAX_REPS], rmed, rlo, rhi;

		memcpy(copy, ns[k], sizeof(copy));
		med[k] = median_spread(copy, reps, &lo, &hi);
		for (int r = 0; r < reps; r++)
			ratio[r] = ns[k][r] / ns[0][r];
		rmed = median_spread(ratio, reps, &rlo, &rhi);
		printf("| %d | %.1f | %.1f-%.1f | %.3f (%.3f-%.3f) |\n",
		       consumers[k], med[k], lo, hi, rmed, rlo, rhi);
	}
	printf("\nAdded per other job on the library: %.1f ns per hit "
	       "(slope from 1 to %d jobs, medians).\n",
	       (med[NR_K - 1] - med[0]) / (consumers[NR_K - 1] - 1),
	       consumers[NR_K - 1]);
	printf("\n%d interleaved repetitions; producer records read: %llu, "
	       "dropped: %llu\n", reps, (unsigned long long)b->consumed,
	       (unsigned long long)bench_probes_drops(b));
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "reps", required_argument, NULL, 'r' },
		{ "iters", required_argument, NULL, 'i' },
		{ 0 },
	};
	static double ns[NR_K][MAX_REPS];
	static struct other_job others[MAX_OTHERS];
	uint64_t iters = 50000;
	struct bench_probes b;
	struct producer p;
	int reps = 5, c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 'r')
			reps = atoi(optarg);
		else if (c == 'i')
			iters = strtoull(optarg, NULL, 0);
		else
			return 2;
	}
	if (reps < 1 || reps > MAX_REPS || !iters)
		return fprintf(stderr, "bench: --reps 1..%d, --iters > 0\n",
			       MAX_REPS), 2;
	if (producer_start(&p) ||
	    bench_probes_open(&b, p.pid, 16, count_record, NULL)) {
		fprintf(stderr, "bench: cannot set up (root needed)\n");
		return 1;
	}
	run_k(&b, &p, others, 1, 1000);	/* untimed: first hits, caches */
	for (int r = 0; r < reps; r++)
		for (int k = 0; k < NR_K; k++)
			ns[k][r] = run_k(&b, &p, others, consumers[k], iters);
	print_results(ns, reps, &b);
	producer_stop(&p);
	bench_probes_close(&b);
	return 0;
}
