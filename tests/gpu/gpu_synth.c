// SPDX-License-Identifier: BSD-2-Clause
/*
 * libgpu_synth.so: what the CUDA driver and CUPTI would do to the agent,
 * callable from a Python workload (ctypes) so that launches happen inside
 * real PyTorch ops on real threads. There is no GPU here; everything the
 * agent sees comes through its real entry points:
 *   - synth_launch() makes, on the calling thread, the API callbacks CUPTI
 *     makes for one launch (runtime ENTER, the nested driver call, runtime
 *     EXIT; or a driver-only launch), and appends the records that launch
 *     would complete with (CUpti_ActivityKernel10/Memcpy6/Memset4 of the
 *     installed headers) to the thread's buffer;
 *   - synth_flush() hands that buffer to rfbpf_cupti_buffer_completed(),
 *     which walks it with CUPTI's own cuptiActivityGetNextRecord().
 * A sync (cudaStreamSynchronize) makes its callbacks around a wait of
 * SYNC_WAIT_NS and no record. Each call's CLOCK_MONOTONIC bounds (read
 * just before its ENTER callback and just after its EXIT) are kept for
 * the test: a tracer's slice for the call must lie within them.
 * Record times are CLOCK_MONOTONIC readings shifted into "CUPTI's clock"
 * by the agent's calibrated offset, so after the agent converts them a
 * tracer must see exactly the times synth_record() reports.
 */
#include "cupti_sim.h"

#define EXPORT __attribute__((visibility("default")))

enum synth_kind {
	SYNTH_KERNEL = 0,	/* cudaLaunchKernel -> cuLaunchKernel */
	SYNTH_GRAPH = 1,	/* cudaGraphLaunch -> n kernels */
	SYNTH_DRIVER = 2,	/* cuLaunchKernel alone (Triton style) */
	SYNTH_MEMCPY = 3,	/* cudaMemcpyAsync HtoD */
	SYNTH_MEMSET = 4,	/* cudaMemsetAsync */
	SYNTH_SYNC = 5,		/* cudaStreamSynchronize: no record */
	SYNTH_CAPTURED = 6,	/* cudaLaunchKernel on a stream being
				 * captured: makes a graph node, runs
				 * nothing, no record */
};

#define SYNC_WAIT_NS 300000ull	/* what a sync waits for the "GPU" */

/* What one record will say once converted, for the test to compare. */
struct synth_record {
	uint32_t corr;
	int kind;
	uint64_t start_ns, end_ns;
};

#define MAX_RECORDS (1u << 20)
static struct synth_record records[MAX_RECORDS];
static uint32_t nr_records, next_corr;
/* Each call's bounds, by correlation id. */
#define MAX_CALLS (1u << 20)
static struct { uint64_t before, after; } calls[MAX_CALLS];

/* Kernel names live as long as CUPTI keeps them (the process's life
 * here): a fixed set, the last longer than RF_GPU_NAME_MAX as templated
 * kernels often are (293 bytes: the event cuts it, rfbpf reads it whole
 * from here and demangles it). */
#define LONG_NS(i) "17long_namespace_" #i
static const char *const kernel_names[] = {
	"_Z10gemm_tiledPKfS0_Pfiii",
	"_ZN2at6native29vectorized_elementwise_kernelILi4EEEvi",
	"_Z10reduce_sumPKfPfi",
	"_ZN2at6native" LONG_NS(00) LONG_NS(01) LONG_NS(02) LONG_NS(03)
	LONG_NS(04) LONG_NS(05) LONG_NS(06) LONG_NS(07) LONG_NS(08) LONG_NS(09)
	LONG_NS(10) LONG_NS(11) LONG_NS(12) LONG_NS(13) "6kernelEPKfPfi",
};
#define NR_KERNEL_NAMES (sizeof(kernel_names) / sizeof(kernel_names[0]))

static __thread struct sim_buffer tbuf;

static uint64_t cupti_clock(uint64_t mono)
{
	return mono + (uint64_t)__atomic_load_n(
		&rfbpf_gpu_control.clock_offset_ns, __ATOMIC_ACQUIRE);
}

EXPORT int synth_init(void)
{
	return InitializeInjection();
}

/* Has the agent's thread seen a live lease (a tracer attached)? */
EXPORT int synth_lease_seen(void)
{
	return (int)__atomic_load_n(&rfbpf_gpu_control.lease_seen,
				    __ATOMIC_ACQUIRE);
}

/* One of the agent's counters, by name, for the test's checks. */
EXPORT unsigned long long synth_counter(const char *name)
{
	const struct rf_gpu_control *c = &rfbpf_gpu_control;

#define FIELD(f) if (!strcmp(name, #f)) \
		return __atomic_load_n(&c->f, __ATOMIC_ACQUIRE)
	FIELD(launches);
	FIELD(records);
	FIELD(records_untraced);
	FIELD(records_unknown);
	FIELD(records_dropped);
	FIELD(activity_starts);
	FIELD(activity_enabled);
	FIELD(torch_callback_handle);
	FIELD(lease_until_ns);
	FIELD(flush_done);
	FIELD(launches_captured);
	FIELD(yielded);
	FIELD(yields_in_call);
	FIELD(yield_signal);
	FIELD(cupti_ok);
#undef FIELD
	return ~0ull;
}

EXPORT void synth_flush(void)
{
	sim_buffer_complete(&tbuf);
}

static void *slot(size_t len)
{
	return sim_buffer_slot(&tbuf, len);
}

static void note(uint32_t corr, int kind, uint64_t start, uint64_t end)
{
	uint32_t i = __atomic_fetch_add(&nr_records, 1, __ATOMIC_RELAXED);

	if (i < MAX_RECORDS)
		records[i] = (struct synth_record){ corr, kind, start, end };
}

static void api(CUpti_CallbackDomain d, CUpti_CallbackId cbid,
		CUpti_ApiCallbackSite site, const char *name, uint32_t corr)
{
	sim_api(d, cbid, site, name, corr, "synth");
}

static void runtime_call(CUpti_CallbackId rt, const char *rt_name,
			 CUpti_CallbackId drv, const char *drv_name,
			 uint32_t corr)
{
	api(CUPTI_CB_DOMAIN_RUNTIME_API, rt, CUPTI_API_ENTER, rt_name, corr);
	if (drv_name) {
		/* The driver call has its own id; the agent must report the
		 * runtime call only, once. */
		api(CUPTI_CB_DOMAIN_DRIVER_API, drv, CUPTI_API_ENTER, drv_name,
		    corr + 1000000);
		api(CUPTI_CB_DOMAIN_DRIVER_API, drv, CUPTI_API_EXIT, drv_name,
		    corr + 1000000);
	}
	api(CUPTI_CB_DOMAIN_RUNTIME_API, rt, CUPTI_API_EXIT, rt_name, corr);
}

static void kernel_record(uint32_t corr, uint64_t start, uint64_t dur,
			  uint32_t graph_id, uint32_t stream, unsigned which)
{
	CUpti_ActivityKernel10 *k = slot(sizeof(*k));

	k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k->start = cupti_clock(start);
	k->end = cupti_clock(start + dur);
	k->correlationId = corr;
	k->deviceId = 0;
	k->contextId = 1;
	k->streamId = stream;
	k->gridX = 64, k->gridY = k->gridZ = 1;
	k->blockX = 256, k->blockY = k->blockZ = 1;
	k->registersPerThread = 32;
	k->staticSharedMemory = 1024;
	k->graphId = graph_id;
	k->name = kernel_names[which % NR_KERNEL_NAMES];
	note(corr, SYNTH_KERNEL, start, start + dur);
}

/* The "GPU" is busy: the calling thread waits. */
static void wait_ns(uint64_t ns)
{
	uint64_t until = sim_mono_ns() + ns;

	while (sim_mono_ns() < until)
		;
}

/* Simulates one call on this thread (a launch, or a sync); returns its
 * correlation id. */
EXPORT unsigned synth_launch(int kind, int n_kernels, unsigned stream)
{
	uint32_t corr = __atomic_add_fetch(&next_corr, 1, __ATOMIC_RELAXED);
	uint64_t t, before = sim_mono_ns();

	switch (kind) {
	case SYNTH_GRAPH:
		runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
			     "cudaGraphLaunch",
			     CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
			     "cuGraphLaunch", corr);
		break;
	case SYNTH_DRIVER:
		api(CUPTI_CB_DOMAIN_DRIVER_API,
		    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_ENTER,
		    "cuLaunchKernel", corr);
		api(CUPTI_CB_DOMAIN_DRIVER_API,
		    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_EXIT,
		    "cuLaunchKernel", corr);
		break;
	case SYNTH_MEMCPY:
		runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
			     "cudaMemcpyAsync",
			     CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
			     "cuMemcpyHtoDAsync_v2", corr);
		break;
	case SYNTH_MEMSET:
		runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
			     "cudaMemsetAsync",
			     CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,
			     "cuMemsetD8Async", corr);
		break;
	case SYNTH_CAPTURED: {
		/* CUPTI's resource callback for the node the capture made,
		 * inside the launch, as the driver makes it. */
		CUpti_ResourceData rd = { 0 };

		api(CUPTI_CB_DOMAIN_RUNTIME_API,
		    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
		    CUPTI_API_ENTER, "cudaLaunchKernel", corr);
		rfbpf_cupti_api_callback(NULL, CUPTI_CB_DOMAIN_RESOURCE,
			CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &rd);
		api(CUPTI_CB_DOMAIN_RUNTIME_API,
		    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
		    CUPTI_API_EXIT, "cudaLaunchKernel", corr);
		break;
	}
	case SYNTH_SYNC:
		api(CUPTI_CB_DOMAIN_RUNTIME_API,
		    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
		    CUPTI_API_ENTER, "cudaStreamSynchronize", corr);
		api(CUPTI_CB_DOMAIN_DRIVER_API,
		    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
		    CUPTI_API_ENTER, "cuStreamSynchronize", corr + 1000000);
		wait_ns(SYNC_WAIT_NS);
		api(CUPTI_CB_DOMAIN_DRIVER_API,
		    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
		    CUPTI_API_EXIT, "cuStreamSynchronize", corr + 1000000);
		api(CUPTI_CB_DOMAIN_RUNTIME_API,
		    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
		    CUPTI_API_EXIT, "cudaStreamSynchronize", corr);
		break;
	default:
		runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
			     "cudaLaunchKernel",
			     CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
			     "cuLaunchKernel", corr);
	}
	if (corr < MAX_CALLS)
		calls[corr].before = before, calls[corr].after = sim_mono_ns();
	/* The GPU runs it a little after the launch returned. */
	t = sim_mono_ns() + 2000;
	if (kind == SYNTH_SYNC || kind == SYNTH_CAPTURED) {
		/* Nothing ran: nothing to record. */
	} else if (kind == SYNTH_MEMCPY) {
		CUpti_ActivityMemcpy6 *m = slot(sizeof(*m));

		m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
		m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
		m->srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
		m->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
		m->bytes = 1 << 20;
		m->start = cupti_clock(t);
		m->end = cupti_clock(t + 7000);
		m->correlationId = corr + 1000000;	/* the driver's */
		m->runtimeCorrelationId = corr;
		m->streamId = stream;
		m->contextId = 1;
		note(corr, kind, t, t + 7000);
	} else if (kind == SYNTH_MEMSET) {
		CUpti_ActivityMemset4 *s = slot(sizeof(*s));

		s->kind = CUPTI_ACTIVITY_KIND_MEMSET;
		s->bytes = 4096;
		s->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
		s->start = cupti_clock(t);
		s->end = cupti_clock(t + 900);
		/* A set's record carries its driver call's id only. */
		s->correlationId = corr + 1000000;
		s->streamId = stream;
		s->contextId = 1;
		note(corr, kind, t, t + 900);
	} else {
		int n = kind == SYNTH_GRAPH ? n_kernels : 1;

		for (int k = 0; k < n; k++)
			kernel_record(corr, t + (uint64_t)k * 6000, 5000 + k,
				      kind == SYNTH_GRAPH ? 7 : 0, stream,
				      (unsigned)(corr + k));
	}
	return corr;
}

EXPORT unsigned synth_nr_records(void)
{
	return __atomic_load_n(&nr_records, __ATOMIC_ACQUIRE);
}

/* Record i as "corr kind start_ns end_ns", for the test. */
EXPORT int synth_record(unsigned i, char *buf, int len)
{
	if (i >= synth_nr_records() || i >= MAX_RECORDS)
		return -1;
	return snprintf(buf, (size_t)len, "%u %d %llu %llu", records[i].corr,
			records[i].kind,
			(unsigned long long)records[i].start_ns,
			(unsigned long long)records[i].end_ns);
}

/* What an agent built before enter_ns was appended (rf_gpu_launch of
 * RF_GPU_LAUNCH_SIZE_V1 bytes, no flags but graph) passes for a kernel
 * launch: its probe called directly, as that agent called it at the
 * launch's exit, then the kernel's record. The bytes past the old layout
 * hold a decoy enter time a tracer must not read. Returns the id. */
void rfbpf_probe_gpu_launch(const struct rf_gpu_launch *);

EXPORT unsigned synth_launch_v1(unsigned stream)
{
	uint32_t corr = __atomic_add_fetch(&next_corr, 1, __ATOMIC_RELAXED);
	struct rf_gpu_launch l = {
		.abi_version = RF_GPU_ABI_VERSION,
		.size = RF_GPU_LAUNCH_SIZE_V1,
		.correlation_id = corr,
		.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
		.domain = RF_GPU_API_RUNTIME,
		.api_name = "cudaLaunchKernel",
		.enter_ns = 1,		/* the decoy */
	};
	uint64_t before = sim_mono_ns();

	rfbpf_probe_gpu_launch(&l);
	if (corr < MAX_CALLS)
		calls[corr].before = before, calls[corr].after = sim_mono_ns();
	kernel_record(corr, sim_mono_ns() + 2000, 5000, 0, stream, 0);
	return corr;
}

/* Call corr's bounds as "before_ns after_ns", for the test. */
EXPORT int synth_call_bounds(unsigned corr, char *buf, int len)
{
	if (!corr || corr >= MAX_CALLS || !calls[corr].after)
		return -1;
	return snprintf(buf, (size_t)len, "%llu %llu",
			(unsigned long long)calls[corr].before,
			(unsigned long long)calls[corr].after);
}
