// SPDX-License-Identifier: BSD-2-Clause
/*
 * The start-up calibration (user/attach/calibrate.c) on this host, three
 * times in a row: it loads BPF and attaches uprobes, so it is checked here
 * rather than among the unit tests. `make calibrate-check` (root).
 *
 * Checked: each run gives a positive cost, says the kernel optimized the
 * probes (when this kernel can), read back two well-formed records per
 * timed op, left nothing behind (no BPF or perf-event descriptor, no
 * uprobe of this process in `bpftool perf`, the probe sites are nop5s
 * again) and took under a second, the three under two. The figures are
 * printed, not judged: compare them with build/bench/uprobe_cost's.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "attach/probes.h"
#include "attach/calibrate.h"

/* user/attach/calibrate_target.S */
extern const unsigned char calibrate_probed_start_probe[];
extern const unsigned char calibrate_probed_end_probe[];

#define RUNS 3

static int failures;

#define CHECK(cond, ...)						\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "  FAILED: %s: ", #cond);	\
			fprintf(stderr, __VA_ARGS__);			\
			fputc('\n', stderr);				\
			failures++;					\
		}							\
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* This process's descriptors of BPF objects (maps, programs, links) and
 * perf events (a uprobe is one). */
static int bpf_and_perf_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char target[128];
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		ssize_t len = readlinkat(dirfd(d), e->d_name, target,
					 sizeof(target) - 1);

		if (len <= 0)
			continue;
		target[len] = 0;
		n += !strncmp(target, "anon_inode:bpf", 14) ||
		     !strcmp(target, "anon_inode:[perf_event]");
	}
	closedir(d);
	return n;
}

/* Whether bpftool sees a BPF program on a perf event (uprobe) of this
 * process: -1 if bpftool could not be run. */
static int bpftool_sees_probes(void)
{
	char line[4096], needle[32];
	int found = 0;
	FILE *f = popen("bpftool -j perf show 2>/dev/null", "r");

	if (!f)
		return -1;
	snprintf(needle, sizeof(needle), "\"pid\":%d,", (int)getpid());
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, needle) != NULL;
	return pclose(f) ? -1 : found;
}

static bool is_nop5(const unsigned char *p)
{
	static const unsigned char nop5[] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

	return !memcmp((const void *)p, nop5, sizeof(nop5));
}

static void check_nothing_left(int fds_before)
{
	int fds = bpf_and_perf_fds(), seen = bpftool_sees_probes();

	CHECK(fds == fds_before, "%d BPF/perf descriptors open, %d before",
	      fds, fds_before);
	CHECK(seen != 1, "bpftool perf lists a probe of pid %d",
	      (int)getpid());
	if (seen < 0)
		printf("  (bpftool perf could not be run: not checked)\n");
	CHECK(is_nop5(calibrate_probed_start_probe) &&
	      is_nop5(calibrate_probed_end_probe),
	      "the probe sites are not nop5s again");
}

static void check_run(const struct calibration *c, double took_s,
		      bool can_optimize)
{
	uint64_t expected = 2ull * c->iterations;

	printf("  %.1f ns per sampled op (start + end hit; rounds %.1f-%.1f), "
	       "%.1f ns inside the op (rounds %.1f-%.1f), %.1f ns per "
	       "unprobed call pair, %u ops timed, %llu/%llu records, "
	       "optimized: %s, %.0f ms\n", c->ns_per_sampled_op, c->op_lo,
	       c->op_hi, c->ns_inside_op, c->inside_lo, c->inside_hi,
	       c->ns_per_call_no_probe, c->iterations,
	       (unsigned long long)c->events, (unsigned long long)expected,
	       c->optimized ? "yes" : "no", took_s * 1e3);
	CHECK(c->ns_per_sampled_op > 0, "%.1f ns", c->ns_per_sampled_op);
	CHECK(c->op_lo <= c->ns_per_sampled_op &&
	      c->ns_per_sampled_op <= c->op_hi &&
	      c->inside_lo <= c->ns_inside_op &&
	      c->ns_inside_op <= c->inside_hi, "the median is not inside "
	      "the rounds' range");
	CHECK(c->optimized == can_optimize, "the kernel %s optimize nop5 "
	      "uprobes", can_optimize ? "can" : "cannot");
	CHECK(c->iterations > 0 && c->events == expected, "%llu records",
	      (unsigned long long)c->events);
	CHECK(took_s < 1.0, "took %.3f s", took_s);
}

int main(void)
{
	bool can_optimize = probes_kernel_optimizes_nop();
	int fds_before = bpf_and_perf_fds();
	double t0 = now_s(), total = 0;
	char err[256];

	if (geteuid()) {
		fprintf(stderr, "calibrate_check: needs root (BPF)\n");
		return 2;
	}
	for (int r = 0; r < RUNS; r++) {
		struct calibration c;
		double t = now_s();
		int ret = calibrate_sampled_op_cost(&c, err, sizeof(err));

		t = now_s() - t;
		total += t;
		printf("run %d:\n", r + 1);
		CHECK(ret == 0, "%s", err);
		if (!ret)
			check_run(&c, t, can_optimize);
		check_nothing_left(fds_before);
	}
	CHECK(total < 2.0, "%d runs took %.3f s", RUNS, total);
	printf("calibrate_check: %d runs took %.0f ms (%.0f ms with the "
	       "checks), %s\n", RUNS, total * 1e3, (now_s() - t0) * 1e3,
	       failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
