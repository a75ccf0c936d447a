// SPDX-License-Identifier: BSD-2-Clause
/*
 * What the CUPTI agent costs a job, per launch and per record, measured
 * against a plain function call, with no GPU: the agent's real entry
 * points (the callback CUPTI calls, the buffer-completed handler) are
 * called the way CUPTI calls them.
 *
 *   launch: the four callbacks CUPTI makes for one runtime launch
 *           (cudaLaunchKernel ENTER, nested cuLaunchKernel ENTER/EXIT,
 *           cudaLaunchKernel EXIT), with no tracer (no lease), with a
 *           lease but no uprobe attached (the probe is then a call), and
 *           during a lease as rfbpf traces it: rfbpf's own BPF programs
 *           (loaded and attached by rfbpf's code, user/attach/probes.c)
 *           on the agent's probes of this very process, a thread reading
 *           the ring buffer as the loader does;
 *   record: one kernel record through buffer-completed, the same ways
 *           (with no tracer, activity is off, so a real job gets no
 *           records at all; this is the worst case of a record arriving
 *           just after a tracer left).
 * Variants run interleaved, 7 repetitions, median and min-max.
 *
 *   build/cupti/agent_cost [--reps R]
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "attach/elf_symbols.h"
#include "attach/probes.h"
#include "stats.h"
#include "cupti_sim.h"

#define VARIANTS 4

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

/* rfbpf tracing this process: its BPF object, its ring read by a thread
 * (events counted, not decoded: the loader's cost is loader_throughput's). */
struct tracer {
	struct probes p;
	struct ring_buffer *rb;
	pthread_t reader;
	volatile bool stop;
	volatile uint64_t events;
	char agent[4096];
	uint64_t launch_off, activity_off;
};

static int count_event(void *ctx, void *data, size_t size)
{
	struct tracer *t = ctx;

	(void)data;
	(void)size;
	t->events++;
	return 0;
}

static void *read_ring(void *arg)
{
	struct tracer *t = arg;

	while (!t->stop)
		ring_buffer__poll(t->rb, 10);
	ring_buffer__consume(t->rb);
	return NULL;
}

static int tracer_open(struct tracer *t)
{
	static const char *const funcs[] = { "rfbpf_probe_gpu_launch",
					     "rfbpf_probe_gpu_activity" };
	uint64_t off[2];
	char err[256];
	Dl_info info;
	int ret;

	if (!dladdr((void *)rfbpf_cupti_api_callback, &info) ||
	    !realpath(info.dli_fname, t->agent))
		return fprintf(stderr, "agent_cost: cannot find the agent's "
			       "file\n"), -1;
	if (elf_find_functions(t->agent, funcs, 2, off) != 2)
		return fprintf(stderr, "agent_cost: no probes in %s\n",
			       t->agent), -1;
	t->launch_off = off[0];
	t->activity_off = off[1];
	ret = probes_load(&t->p, getpid(), 64, false, 1.0, err, sizeof(err));
	if (ret)
		return fprintf(stderr, "agent_cost: %s\n", err), ret;
	t->rb = ring_buffer__new(probes_events_fd(&t->p), count_event, t,
				 NULL);
	if (!t->rb)
		return -1;
	return -pthread_create(&t->reader, NULL, read_ring, t);
}

static int tracer_attach(struct tracer *t)
{
	struct gpu_probe_offsets off = {
		.launch = t->launch_off, .activity = t->activity_off,
	};

	return probes_attach_gpu(&t->p, getpid(), t->agent, &off, false);
}

static void tracer_close(struct tracer *t)
{
	t->stop = true;
	pthread_join(t->reader, NULL);
	ring_buffer__free(t->rb);
	probes_destroy(&t->p);
}

int main(int argc, char **argv)
{
	static const char *const names[VARIANTS] = {
		"a plain function call", "agent, no tracer (no lease)",
		"agent, lease held, probe not uprobed",
		"agent traced by rfbpf (lease, uprobe, ring read)",
	};
	double launch[VARIANTS][REPS_MAX], record[VARIANTS][REPS_MAX];
	double lo, hi, m;
	int reps = argc > 2 && !strcmp(argv[1], "--reps") ? atoi(argv[2]) : 7;
	struct tracer t = { 0 };
	int variants = VARIANTS;

	if (reps < 1 || reps > REPS_MAX)
		return fprintf(stderr, "usage: %s [--reps 1..%d]\n", argv[0],
			       REPS_MAX), 2;
	if (tracer_open(&t)) {
		fprintf(stderr, "agent_cost: without the traced variant (needs "
			"root for BPF)\n");
		variants = 3;
	}
	for (int r = 0; r < reps; r++)
		for (int v = 0; v < variants; v++) {
			if (v == 3 && tracer_attach(&t)) {
				fprintf(stderr, "agent_cost: cannot attach "
					"rfbpf's probes\n");
				return 1;
			}
			set_lease(v >= 2);
			launch[v][r] = per_launch(v ? 1 : 0);
			record[v][r] = per_record(v ? 1 : 0);
			if (v == 3)
				probes_detach_all(&t.p);
		}
	set_lease(0);
	if (variants == VARIANTS)
		tracer_close(&t);
	printf("| variant | ns per launch (4 CUPTI callbacks) | spread | "
	       "ns per kernel record | spread |\n|---|---|---|---|---|\n");
	for (int v = 0; v < variants; v++) {
		m = median_spread(launch[v], reps, &lo, &hi);
		printf("| %s | %.1f | %.1f-%.1f |", names[v], m, lo, hi);
		m = median_spread(record[v], reps, &lo, &hi);
		printf(" %.1f | %.1f-%.1f |\n", m, lo, hi);
	}
	printf("\n%d interleaved repetitions of %d launches and %d records; "
	       "the agent's launch and record counters: %llu, %llu; events "
	       "rfbpf's ring carried: %llu\n", reps, LAUNCHES,
	       BUFFERS * RECORDS,
	       (unsigned long long)rfbpf_gpu_control.launches,
	       (unsigned long long)rfbpf_gpu_control.records,
	       (unsigned long long)t.events);
	return 0;
}
