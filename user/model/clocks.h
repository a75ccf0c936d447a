/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The clocks rfbpf reads, in the two units it keeps times in: every
 * module used to carry its own copy of these few lines.
 * - CLOCK_MONOTONIC: what BPF's bpf_ktime_get_ns() gives, so event times
 *   and deadlines rfbpf writes (bursts, leases) compare with it;
 * - the CPU clocks (a thread's, the process's): rfbpf's own cost.
 */
#ifndef RFBPF_CLOCKS_H
#define RFBPF_CLOCKS_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline uint64_t monotonic_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static inline double monotonic_s(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* rfbpf's own CPU: this thread's (what reading a job's events cost), and
 * the whole process's (the daemon's share of a job's budget). */
static inline uint64_t thread_cpu_ns(void)
{
	return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

static inline double thread_cpu_s(void)
{
	return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

static inline double process_cpu_s(void)
{
	return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

#endif
