// SPDX-License-Identifier: BSD-2-Clause
/*
 * Drives the real librfbpf_cupti.so without a GPU, the way the CUDA driver
 * and CUPTI would: InitializeInjection() (its subscribe fails here, there
 * being no driver, so it enables nothing process-wide; the callbacks and
 * buffers it is handed still run), then, from several
 * threads, the exact API callbacks CUPTI makes for launches
 * (rfbpf_cupti_api_callback: runtime ENTER, nested driver ENTER/EXIT,
 * runtime EXIT) and completed activity buffers built from the installed
 * headers' record structs (rfbpf_cupti_buffer_completed, whose
 * cuptiActivityGetNextRecord works on them without a driver).
 *
 * With --lease-ns X it plays rfbpf and writes the lease into the exported
 * control block; without, it checks that the agent called no probe and
 * enabled no activity. The agent's counters must match what was
 * simulated; the summary (one JSON line on stdout) says so and the exit
 * status is 1 if not.
 *
 * Record timestamps are CLOCK_MONOTONIC readings taken around each
 * simulated launch, shifted into CUPTI's clock by the agent's own offset
 * (control block clock_offset_ns), so after the agent's conversion a
 * tracer sees exactly the CLOCK_MONOTONIC values --records FILE lists.
 *
 * Each launch is wrapped in driver_op_begin()/driver_op_end(): hooks for
 * a tracer to see as the "op" the launch belongs to.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cupti_sim.h"

#define CTL rfbpf_gpu_control
#define LOAD(f) __atomic_load_n(&CTL.f, __ATOMIC_ACQUIRE)

/* Hooks for a tracer: the op a launch belongs to. Kept trivial. */
__attribute__((noinline, used, visibility("default")))
void driver_op_begin(const char *name)
{
	__asm__ volatile("" : : "r"(name) : "memory");
}

__attribute__((noinline, used, visibility("default")))
void driver_op_end(void)
{
	__asm__ volatile("" : : : "memory");
}

static struct {
	int threads, launches, graph_every, graph_kernels, copy_every;
	int driver_every;
	unsigned long long lease_ns;
	const char *records_path;
} opt = { 2, 100, 10, 3, 5, 13, 0, NULL };

static FILE *records_file;
static uint32_t next_corr;
static int64_t cupti_offset;

struct counts {
	uint64_t runtime_launch, graph_launch, driver_launch, memcpy, memset;
	uint64_t sync;
	uint64_t kernel_records, memcpy_records, memset_records;
	uint64_t corr_with_1_kernel, corr_with_n_kernels;
};

#define RT CUPTI_CB_DOMAIN_RUNTIME_API
#define DRV CUPTI_CB_DOMAIN_DRIVER_API

static void runtime_call(CUpti_CallbackId rt, const char *rt_name,
			 CUpti_CallbackId drv, const char *drv_name,
			 uint32_t corr)
{
	sim_api(RT, rt, CUPTI_API_ENTER, rt_name, corr, "fake_kernel");
	if (drv_name) {
		sim_api(DRV, drv, CUPTI_API_ENTER, drv_name, corr, "fake_kernel");
		sim_api(DRV, drv, CUPTI_API_EXIT, drv_name, corr, "fake_kernel");
	}
	sim_api(RT, rt, CUPTI_API_EXIT, rt_name, corr, "fake_kernel");
}

static void log_record(int tid, uint32_t corr, const char *api_name,
		       const char *kind, uint64_t start, uint64_t end,
		       uint32_t graph_id, uint64_t op_begin)
{
	if (!records_file)
		return;
	fprintf(records_file, "{\"tid\":%d,\"corr\":%u,\"api\":\"%s\","
		"\"kind\":\"%s\",\"start_ns\":%llu,\"end_ns\":%llu,"
		"\"graph_id\":%u,\"op_begin_ns\":%llu}\n",
		tid, corr, api_name, kind, (unsigned long long)start,
		(unsigned long long)end, graph_id,
		(unsigned long long)op_begin);
}

static const char kernel_name[] = "_Z11fake_kernelPfi";

static void kernel_record(struct sim_buffer *b, uint32_t corr, uint64_t start,
			  uint32_t graph_id, int stream)
{
	CUpti_ActivityKernel10 *k = sim_buffer_slot(b, sizeof(*k));

	k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k->start = start + (uint64_t)cupti_offset;
	k->end = start + 2000 + (uint64_t)cupti_offset;
	k->correlationId = corr;
	k->streamId = (uint32_t)stream;
	k->gridX = k->gridY = k->gridZ = 1;
	k->blockX = 256, k->blockY = k->blockZ = 1;
	k->registersPerThread = 16;
	k->graphId = graph_id;
	k->name = kernel_name;
}

struct worker {
	pthread_t thread;
	int id;
	struct counts c;
};

static void one_launch(struct worker *w, struct sim_buffer *b, int i)
{
	bool graph = opt.graph_every && i % opt.graph_every ==
					       opt.graph_every - 1;
	bool direct = !graph && opt.driver_every &&
		      i % opt.driver_every == opt.driver_every - 1;
	uint32_t corr = __atomic_add_fetch(&next_corr, 1, __ATOMIC_RELAXED);
	uint32_t graph_id = graph ? (uint32_t)(w->id + 1) : 0;
	const char *api_name;
	uint64_t op_begin, launched;
	int n = graph ? opt.graph_kernels : 1;

	driver_op_begin(graph ? "driver::graph_op" : "driver::op");
	op_begin = sim_mono_ns();
	if (graph) {
		api_name = "cudaGraphLaunch";
		runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
			     api_name, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
			     "cuGraphLaunch", corr);
		w->c.graph_launch++;
	} else if (direct) {	/* Triton/cuBLAS style: the driver only */
		api_name = "cuLaunchKernel";
		sim_api(DRV, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
		    CUPTI_API_ENTER, api_name, corr, "fake_kernel");
		sim_api(DRV, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
		    CUPTI_API_EXIT, api_name, corr, "fake_kernel");
		w->c.driver_launch++;
	} else {
		api_name = "cudaLaunchKernel";
		runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
			     api_name, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
			     "cuLaunchKernel", corr);
		w->c.runtime_launch++;
	}
	launched = sim_mono_ns();
	for (int k = 0; k < n; k++) {
		uint64_t start = launched + 1000 + (uint64_t)k * 3000;

		kernel_record(b, corr, start, graph_id, w->id);
		log_record(w->id, corr, api_name, "kernel", start,
			   start + 2000, graph_id, op_begin);
	}
	w->c.kernel_records += (uint64_t)n;
	if (n == 1)
		w->c.corr_with_1_kernel++;
	else
		w->c.corr_with_n_kernels++;
	driver_op_end();
}

static void one_copy_and_set(struct worker *w, struct sim_buffer *b)
{
	uint32_t corr = __atomic_add_fetch(&next_corr, 1, __ATOMIC_RELAXED);
	uint64_t t, op_begin;
	CUpti_ActivityMemcpy6 *m;
	CUpti_ActivityMemset4 *s;

	driver_op_begin("driver::copy_op");
	op_begin = sim_mono_ns();
	runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
		     "cudaMemcpyAsync", 0, NULL, corr);
	t = sim_mono_ns() + 500;
	m = sim_buffer_slot(b, sizeof(*m));
	m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
	m->bytes = 4096;
	m->start = t + (uint64_t)cupti_offset;
	m->end = t + 800 + (uint64_t)cupti_offset;
	m->correlationId = corr + 1000000;	/* the driver call's */
	m->runtimeCorrelationId = corr;
	log_record(w->id, corr, "cudaMemcpyAsync", "memcpy", t, t + 800, 0,
		   op_begin);
	w->c.memcpy++, w->c.memcpy_records++;

	corr = __atomic_add_fetch(&next_corr, 1, __ATOMIC_RELAXED);
	runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
		     "cudaMemsetAsync", 0, NULL, corr);
	t = sim_mono_ns() + 500;
	s = sim_buffer_slot(b, sizeof(*s));
	s->kind = CUPTI_ACTIVITY_KIND_MEMSET;
	s->bytes = 1024;
	s->value = 0;
	s->start = t + (uint64_t)cupti_offset;
	s->end = t + 300 + (uint64_t)cupti_offset;
	s->correlationId = corr;
	log_record(w->id, corr, "cudaMemsetAsync", "memset", t, t + 300, 0,
		   op_begin);
	w->c.memset++, w->c.memset_records++;
	/* Then wait for both: a sync, reported once, with no record. */
	corr = __atomic_add_fetch(&next_corr, 1, __ATOMIC_RELAXED);
	runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
		     "cudaStreamSynchronize",
		     CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
		     "cuStreamSynchronize", corr);
	w->c.sync++;
	driver_op_end();
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct sim_buffer b = { 0 };

	for (int i = 0; i < opt.launches; i++) {
		one_launch(w, &b, i);
		if (opt.copy_every && i % opt.copy_every == 0)
			one_copy_and_set(w, &b);
	}
	sim_buffer_complete(&b);
	return NULL;
}

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [--threads N] [--launches M] [--graph-every K]\n"
		"          [--graph-kernels G] [--copy-every C] [--driver-every D]\n"
		"          [--lease | --lease-ns X] [--records FILE]\n"
		"  Simulates CUDA launches through the real CUPTI agent without\n"
		"  a GPU. --lease-ns X sets the agent's lease to now + X ns\n"
		"  (--lease: 60 s); without it, checks the agent stays idle.\n"
		"  example: %s --threads 4 --launches 1000 --graph-every 10 "
		"--lease\n", prog, prog);
	exit(2);
}

static int parse_int(const char *s, const char *prog)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (end == s || *end || v < 0 || v > 10000000)
		usage(prog);
	return (int)v;
}

static void parse_args(int argc, char **argv)
{
	static const struct option longs[] = {
		{ "threads", 1, 0, 't' }, { "launches", 1, 0, 'm' },
		{ "graph-every", 1, 0, 'g' }, { "graph-kernels", 1, 0, 'G' },
		{ "copy-every", 1, 0, 'c' }, { "driver-every", 1, 0, 'd' },
		{ "lease", 0, 0, 'l' }, { "lease-ns", 1, 0, 'L' },
		{ "records", 1, 0, 'r' }, { "help", 0, 0, 'h' }, { 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		switch (c) {
		case 't': opt.threads = parse_int(optarg, argv[0]); break;
		case 'm': opt.launches = parse_int(optarg, argv[0]); break;
		case 'g': opt.graph_every = parse_int(optarg, argv[0]); break;
		case 'G': opt.graph_kernels = parse_int(optarg, argv[0]); break;
		case 'c': opt.copy_every = parse_int(optarg, argv[0]); break;
		case 'd': opt.driver_every = parse_int(optarg, argv[0]); break;
		case 'l': opt.lease_ns = 60000000000ull; break;
		case 'L': opt.lease_ns = strtoull(optarg, NULL, 10); break;
		case 'r': opt.records_path = optarg; break;
		default: usage(argv[0]);
		}
	}
	if (optind != argc || opt.threads < 1 || opt.threads > 256 ||
	    opt.graph_kernels < 1)
		usage(argv[0]);
}

static bool wait_lease_seen(uint32_t value, int ms)
{
	struct timespec ten_ms = { 0, 10000000 };

	for (int i = 0; i < ms / 10 && LOAD(lease_seen) != value; i++)
		nanosleep(&ten_ms, NULL);
	return LOAD(lease_seen) == value;
}

static void sum(struct counts *t, const struct counts *c)
{
	const uint64_t *src = (const uint64_t *)c;
	uint64_t *dst = (uint64_t *)t;

	for (size_t i = 0; i < sizeof(*c) / sizeof(uint64_t); i++)
		dst[i] += src[i];
}

#define EXPECT(cond)							\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "cupti_driver: check failed: %s\n", \
				#cond);					\
			failed++;					\
		}							\
	} while (0)

int main(int argc, char **argv)
{
	struct rf_gpu_control before;
	struct counts t = { 0 };
	struct worker *w;
	uint64_t reports, records;
	int failed = 0;

	parse_args(argc, argv);
	if (opt.records_path && !(records_file = fopen(opt.records_path, "w"))) {
		perror(opt.records_path);
		return 2;
	}
	InitializeInjection();
	if (opt.lease_ns) {	/* what rfbpf does through /proc/PID/mem */
		__atomic_store_n(&CTL.lease_until_ns, sim_mono_ns() + opt.lease_ns,
				 __ATOMIC_RELEASE);
		EXPECT(wait_lease_seen(1, 2000));
		/* Measured when the lease started. */
		cupti_offset = __atomic_load_n(&CTL.clock_offset_ns,
					       __ATOMIC_ACQUIRE);
	} else {
		/* Give the agent's thread a few ticks to misbehave. */
		struct timespec t300 = { 0, 300000000 };
		nanosleep(&t300, NULL);
	}
	before = CTL;

	w = calloc((size_t)opt.threads, sizeof(*w));
	for (int i = 0; i < opt.threads; i++) {
		w[i].id = i;
		pthread_create(&w[i].thread, NULL, worker_main, &w[i]);
	}
	for (int i = 0; i < opt.threads; i++) {
		pthread_join(w[i].thread, NULL);
		sum(&t, &w[i].c);
	}
	free(w);

	reports = t.runtime_launch + t.graph_launch + t.driver_launch +
		  t.memcpy + t.memset + t.sync;
	records = t.kernel_records + t.memcpy_records + t.memset_records;
	if (opt.lease_ns) {
		EXPECT(LOAD(launches) - before.launches == reports);
		EXPECT(LOAD(records) - before.records == records);
		EXPECT(LOAD(records_untraced) == before.records_untraced);
		/* Kinds are tried only with a subscription (none without a
		 * driver: then nothing process-wide is touched). */
		EXPECT(LOAD(cupti_result) != 0 || LOAD(activity_starts) >= 1);
		EXPECT(LOAD(cupti_result) == 0 || LOAD(activity_starts) == 0);
	} else {
		EXPECT(LOAD(launches) == 0);
		EXPECT(LOAD(records) == 0);
		EXPECT(LOAD(records_untraced) - before.records_untraced ==
		       records);
		EXPECT(LOAD(activity_starts) == 0);
		EXPECT(LOAD(activity_enabled) == 0);
	}
	EXPECT(LOAD(records_unknown) == 0);

	printf("{\"ok\":%s,\"threads\":%d,\"launches_per_thread\":%d,"
	       "\"lease\":%s,\"api_calls\":{\"runtime_launch\":%llu,"
	       "\"graph_launch\":%llu,\"driver_launch\":%llu,"
	       "\"memcpy\":%llu,\"memset\":%llu,\"sync\":%llu},"
	       "\"launch_reports_expected\":%llu,"
	       "\"records_built\":{\"kernel\":%llu,\"memcpy\":%llu,"
	       "\"memset\":%llu},\"kernels_per_correlation\":{\"1\":%llu,"
	       "\"%d\":%llu},\"correlation_ids\":{\"first\":1,\"last\":%u},",
	       failed ? "false" : "true", opt.threads, opt.launches,
	       opt.lease_ns ? "true" : "false",
	       (unsigned long long)t.runtime_launch,
	       (unsigned long long)t.graph_launch,
	       (unsigned long long)t.driver_launch,
	       (unsigned long long)t.memcpy, (unsigned long long)t.memset,
	       (unsigned long long)t.sync, (unsigned long long)reports,
	       (unsigned long long)t.kernel_records,
	       (unsigned long long)t.memcpy_records,
	       (unsigned long long)t.memset_records,
	       (unsigned long long)t.corr_with_1_kernel, opt.graph_kernels,
	       (unsigned long long)t.corr_with_n_kernels,
	       __atomic_load_n(&next_corr, __ATOMIC_RELAXED));
	printf("\"agent\":{\"launches\":%llu,\"records\":%llu,"
	       "\"records_untraced\":%llu,\"records_unknown\":%llu,"
	       "\"records_dropped\":%llu,\"errors\":%llu,\"cupti_ok\":%u,"
	       "\"activity_enabled\":%u,\"activity_starts\":%llu,"
	       "\"clock_source\":%u,\"clock_offset_ns\":%lld,"
	       "\"lease_seen\":%u},\"checks_failed\":%d}\n",
	       (unsigned long long)LOAD(launches),
	       (unsigned long long)LOAD(records),
	       (unsigned long long)LOAD(records_untraced),
	       (unsigned long long)LOAD(records_unknown),
	       (unsigned long long)LOAD(records_dropped),
	       (unsigned long long)LOAD(errors), LOAD(cupti_ok),
	       LOAD(activity_enabled), (unsigned long long)LOAD(activity_starts),
	       LOAD(clock_source), (long long)LOAD(clock_offset_ns),
	       LOAD(lease_seen), failed);
	if (records_file)
		fclose(records_file);
	return failed ? 1 : 0;
}
