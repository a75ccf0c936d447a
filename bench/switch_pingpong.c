// SPDX-License-Identifier: BSD-2-Clause
/*
 * Context switches, as many as two threads pinned to one CPU can make:
 * they hand a byte back and forth through two pipes, so each hand-over is
 * one switch. Prints the median ns per switch over R runs of N
 * hand-overs, for bench/off_cpu_cost.py to compare with and without
 * rfbpf --off-cpu tracing another process.
 *   switch_pingpong [N] [R] [CPU]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int ping[2], pong[2];
static long rounds;
static int cpu;

static void pin(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void *echo(void *arg)
{
	char c;

	(void)arg;
	pin();
	for (long i = 0; i < rounds; i++)
		if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1)
			exit(1);
	return NULL;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	double per[64];
	char c = 'x';

	cpu = argc > 3 ? atoi(argv[3]) : 0;
	if (reps < 1 || reps > 64 || n < 1 || pipe(ping) || pipe(pong))
		return 2;
	pin();
	for (int r = 0; r < reps; r++) {
		pthread_t t;
		double t0;

		rounds = n;
		pthread_create(&t, NULL, echo, NULL);
		t0 = now_ns();
		for (long i = 0; i < n; i++)
			if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
				return 1;
		per[r] = (now_ns() - t0) / (2.0 * n);
		pthread_join(t, NULL);
	}
	qsort(per, reps, sizeof(per[0]), cmp);
	printf("%.1f\n", per[reps / 2]);
	return 0;
}
