// SPDX-License-Identifier: BSD-2-Clause
/*
 * What the CUPTI agent costs a job, per launch and per record, measured
 * against a plain function call, with no GPU: the agent's real entry
 * points (the callback CUPTI calls, the buffer-completed handler) are
 * called the way CUPTI calls them.
 *
 *   launch: the four callbacks CUPTI makes for one runtime launch
 *           (cudaLaunchKernel ENTER, nested cuLaunchKernel ENTER/EXIT,
 *           cudaLaunchKernel EXIT), with no tracer (no lease) and with a
 *           lease but no uprobe attached (the probe is then a call);
 *   record: one kernel record through buffer-completed, the same two ways
 *           (with no tracer, activity is off, so a real job gets no
 *           records at all; this is the worst case of a record arriving
 *           just after a tracer left).
 * Variants run interleaved, 7 repetitions, median and min-max.
 *
 *   build/cupti/agent_cost [--reps R]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "stats.h"
#include "cupti_sim.h"

#define LAUNCHES 1000000
#define RECORDS 4000		/* per buffer */
#define BUFFERS 100
#define REPS_MAX 32

/* The baseline: one call the compiler cannot remove. */
__attribute__((noinline)) static void plain_call(const void *arg)
{
	__asm__ volatile("" : : "r"(arg) : "memory");
}

static void set_lease(int on)
{
	__atomic_store_n(&rfbpf_gpu_control.lease_until_ns,
			 on ? sim_mono_ns() + 600000000000ull : 0,
			 __ATOMIC_RELEASE);
}

static double per_launch(int kind)
{
	CUpti_CallbackData rt = { .functionName = "cudaLaunchKernel",
				  .symbolName = "k" };
	CUpti_CallbackData drv = { .functionName = "cuLaunchKernel",
				   .symbolName = "k" };
	uint64_t t0 = sim_mono_ns();

	for (uint32_t i = 0; i < LAUNCHES; i++) {
		if (kind == 0) {
			plain_call(&rt);
			continue;
		}
		rt.correlationId = i;
		drv.correlationId = i + 1;
		rt.callbackSite = drv.callbackSite = CUPTI_API_ENTER;
		rfbpf_cupti_api_callback(NULL, CUPTI_CB_DOMAIN_RUNTIME_API,
			CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &rt);
		rfbpf_cupti_api_callback(NULL, CUPTI_CB_DOMAIN_DRIVER_API,
			CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &drv);
		rt.callbackSite = drv.callbackSite = CUPTI_API_EXIT;
		rfbpf_cupti_api_callback(NULL, CUPTI_CB_DOMAIN_DRIVER_API,
			CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &drv);
		rfbpf_cupti_api_callback(NULL, CUPTI_CB_DOMAIN_RUNTIME_API,
			CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &rt);
	}
	return (double)(sim_mono_ns() - t0) / LAUNCHES;
}

static double per_record(int kind)
{
	static const char name[] =
		"_ZN2at6native29vectorized_elementwise_kernelILi4EEEvi";
	uint64_t total = 0;

	for (int b = 0; b < BUFFERS; b++) {
		CUpti_ActivityKernel10 k = {
			.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
			.start = 1000, .end = 2000, .name = name,
		};
		uint8_t *buf;
		size_t size, max, used = 0;
		uint64_t t0;

		/* The plain calls' buffer never goes back to the agent: it
		 * must not count against the agent's cap on buffers out. */
		if (kind == 0) {
			size = 4u << 20;	/* the agent's size */
			buf = malloc(size);
			max = 0;
		} else {
			rfbpf_cupti_buffer_requested(&buf, &size, &max);
		}
		(void)max;
		for (int i = 0; i < RECORDS &&
		     used + sizeof(k) <= size; i++, used += sizeof(k)) {
			k.correlationId = (uint32_t)i;
			memcpy(buf + used, &k, sizeof(k));
		}
		t0 = sim_mono_ns();
		if (kind == 0) {
			for (size_t off = 0; off < used; off += sizeof(k))
				plain_call(buf + off);
			free(buf);
		} else {
			rfbpf_cupti_buffer_completed(NULL, 0, buf, size, used);
		}
		total += sim_mono_ns() - t0;
	}
	return (double)total / (BUFFERS * (double)RECORDS);
}

int main(int argc, char **argv)
{
	static const char *const names[] = {
		"a plain function call", "agent, no tracer (no lease)",
		"agent, lease held, probe not uprobed",
	};
	double launch[3][REPS_MAX], record[3][REPS_MAX], lo, hi, m;
	int reps = argc > 2 && !strcmp(argv[1], "--reps") ? atoi(argv[2]) : 7;

	if (reps < 1 || reps > REPS_MAX)
		return fprintf(stderr, "usage: %s [--reps 1..%d]\n", argv[0],
			       REPS_MAX), 2;
	for (int r = 0; r < reps; r++)
		for (int v = 0; v < 3; v++) {
			set_lease(v == 2);
			launch[v][r] = per_launch(v ? 1 : 0);
			record[v][r] = per_record(v ? 1 : 0);
		}
	set_lease(0);
	printf("| variant | ns per launch (4 CUPTI callbacks) | spread | "
	       "ns per kernel record | spread |\n|---|---|---|---|---|\n");
	for (int v = 0; v < 3; v++) {
		m = median_spread(launch[v], reps, &lo, &hi);
		printf("| %s | %.1f | %.1f-%.1f |", names[v], m, lo, hi);
		m = median_spread(record[v], reps, &lo, &hi);
		printf(" %.1f | %.1f-%.1f |\n", m, lo, hi);
	}
	printf("\n%d interleaved repetitions of %d launches and %d records; "
	       "the agent's launch and record counters: %llu, %llu\n", reps,
	       LAUNCHES, BUFFERS * RECORDS,
	       (unsigned long long)rfbpf_gpu_control.launches,
	       (unsigned long long)rfbpf_gpu_control.records);
	return 0;
}
