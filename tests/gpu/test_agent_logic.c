// SPDX-License-Identifier: BSD-2-Clause
/*
 * The agent's logic without a GPU: launch nesting, graph flag, clock
 * conversion, record conversion, the lease gate, the agent thread's lease
 * handling, and RFBPF_SAMPLE activation against a fake libtorch_cpu.
 * Linked with the agent's objects. The probes are asm stubs that record
 * nothing, so calls are counted through the control block's `launches`
 * and `records`, which the agent increments exactly when it calls one.
 *
 * Usage: test_agent_logic PATH/TO/fake/libtorch_cpu.so
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cuda.h>
#include "agent.h"
#include "check.h"

static const char *fake_torch_path;

#define CTL rfbpf_gpu_control
#define LOAD(f) __atomic_load_n(&CTL.f, __ATOMIC_ACQUIRE)

static void set_lease(uint64_t from_now_ns)
{
	__atomic_store_n(&CTL.lease_until_ns,
			 from_now_ns ? rf_now_ns() + from_now_ns : 0,
			 __ATOMIC_RELEASE);
}

static void api(CUpti_CallbackDomain d, CUpti_CallbackId cbid,
		CUpti_ApiCallbackSite site, uint32_t corr)
{
	CUpti_CallbackData cd = {
		.callbackSite = site,
		.functionName = "testApi",
		.correlationId = corr,
	};

	rfbpf_cupti_api_callback(NULL, d, cbid, &cd);
}

#define RT CUPTI_CB_DOMAIN_RUNTIME_API
#define DRV CUPTI_CB_DOMAIN_DRIVER_API

static void runtime_launch_with_nested_driver(uint32_t corr)
{
	api(RT, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
	    CUPTI_API_ENTER, corr);
	api(DRV, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_ENTER, corr);
	api(DRV, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_EXIT, corr);
	api(RT, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
	    CUPTI_API_EXIT, corr);
}

TEST(classify)
{
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) == RF_API_LAUNCH);
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060) == RF_API_LAUNCH);
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000) == RF_API_GRAPH);
	/* CUDA 13's launch entry point (what nvcc-built code calls). */
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000) == RF_API_LAUNCH);
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000) == RF_API_LAUNCH);
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v13000) == RF_API_COPY_BATCH);
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v12080) == RF_API_COPY_BATCH);
	/* Synchronize calls, runtime and driver. */
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020) == RF_API_SYNC);
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000) == RF_API_SYNC);
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020) == RF_API_SYNC);
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020) == RF_API_SYNC);
	CHECK(rf_api_classify(DRV, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize) == RF_API_SYNC);
	CHECK(rf_api_classify(DRV, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2) == RF_API_SYNC);
	/* Waits that do not block are not syncs. */
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020) == RF_API_OTHER);
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020) == RF_API_OTHER);
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020) == RF_API_COPY);
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000) == RF_API_COPY);
	CHECK(rf_api_classify(DRV, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz) == RF_API_LAUNCH);
	CHECK(rf_api_classify(DRV, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch) == RF_API_GRAPH);
	/* Driver copies and sets are noted, other driver calls not seen. */
	CHECK(rf_api_classify(DRV, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async) == RF_API_DRIVER_COPY);
	CHECK(rf_api_classify(DRV, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2) == RF_API_DRIVER_COPY);
	CHECK(rf_api_classify(DRV, CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData) == RF_API_OTHER);
	CHECK(rf_api_classify(DRV, CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute) == RF_API_OTHER);
	/* Same number, other domain: 211 is cudaLaunchKernel in the runtime. */
	CHECK(rf_api_classify(DRV, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) == RF_API_OTHER);
	CHECK(rf_api_classify(RT, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020) == RF_API_OTHER);
}

/* rf_api_step with no clock: enter times are all 0. */
static bool step(struct rf_api_nesting *n, CUpti_CallbackDomain d,
		 CUpti_ApiCallbackSite site, uint32_t corr)
{
	uint64_t enter_ns;

	return rf_api_step(n, d, site, corr, 0, &enter_ns);
}

TEST(nesting_reports_once)
{
	struct rf_api_nesting n = { 0 };

	CHECK(!step(&n, RT, CUPTI_API_ENTER, 10));
	CHECK(!step(&n, DRV, CUPTI_API_ENTER, 11));
	CHECK(!step(&n, DRV, CUPTI_API_EXIT, 11));
	CHECK(step(&n, RT, CUPTI_API_EXIT, 10));
	CHECK_EQ_U64(n.runtime_depth, 0);
	/* The nested driver call's id is kept for the report. */
	CHECK_EQ_U64(n.nested_correlation_id, 11);
	/* A driver call on its own reports at its exit. */
	CHECK(!step(&n, DRV, CUPTI_API_ENTER, 12));
	CHECK(step(&n, DRV, CUPTI_API_EXIT, 12));
	/* An unmatched runtime exit does not underflow. */
	CHECK(step(&n, RT, CUPTI_API_EXIT, 13));
	CHECK_EQ_U64(n.runtime_depth, 0);
	/* A new runtime call forgets the last nested id; a driver copy or
	 * set inside it (a cuMemsetD8Async) is noted, once. */
	CHECK(!step(&n, RT, CUPTI_API_ENTER, 20));
	CHECK_EQ_U64(n.nested_correlation_id, 0);
	rf_api_note_driver(&n, CUPTI_API_ENTER, 21);
	rf_api_note_driver(&n, CUPTI_API_ENTER, 22);
	CHECK(step(&n, RT, CUPTI_API_EXIT, 20));
	CHECK_EQ_U64(n.nested_correlation_id, 21);
	/* A new subscription starts every thread clean. */
	CHECK(!step(&n, RT, CUPTI_API_ENTER, 30));
	rf_api_new_generation();
	CHECK(!step(&n, DRV, CUPTI_API_ENTER, 31));
	CHECK(step(&n, DRV, CUPTI_API_EXIT, 31));
}

/* Each report carries the time its own ENTER was fed with: nested
 * runtime calls each theirs, a direct driver call its own, a call whose
 * ENTER came before the lease (0) none, and a nesting deeper than the
 * agent keeps reports every call, the deep ones with none. */
TEST(nesting_keeps_enter_times)
{
	struct rf_api_nesting n = { 0 };
	uint64_t enter = 99;

	CHECK(!rf_api_step(&n, RT, CUPTI_API_ENTER, 1, 1000, &enter));
	CHECK(!rf_api_step(&n, RT, CUPTI_API_ENTER, 2, 1100, &enter));
	/* The nested driver call is not reported, and takes no time. */
	CHECK(!rf_api_step(&n, DRV, CUPTI_API_ENTER, 3, 1150, &enter));
	CHECK(!rf_api_step(&n, DRV, CUPTI_API_EXIT, 3, 0, &enter));
	CHECK(rf_api_step(&n, RT, CUPTI_API_EXIT, 2, 0, &enter));
	CHECK_EQ_U64(enter, 1100);
	CHECK(rf_api_step(&n, RT, CUPTI_API_EXIT, 1, 0, &enter));
	CHECK_EQ_U64(enter, 1000);
	CHECK(!rf_api_step(&n, DRV, CUPTI_API_ENTER, 4, 2000, &enter));
	CHECK(rf_api_step(&n, DRV, CUPTI_API_EXIT, 4, 0, &enter));
	CHECK_EQ_U64(enter, 2000);
	/* Its time is not reused by a driver call whose ENTER we missed. */
	CHECK(rf_api_step(&n, DRV, CUPTI_API_EXIT, 5, 0, &enter));
	CHECK_EQ_U64(enter, 0);
	/* Untraced at ENTER: unknown at EXIT. */
	CHECK(!rf_api_step(&n, RT, CUPTI_API_ENTER, 6, 0, &enter));
	CHECK(rf_api_step(&n, RT, CUPTI_API_EXIT, 6, 0, &enter));
	CHECK_EQ_U64(enter, 0);
	for (uint64_t i = 0; i < RF_API_MAX_NESTING + 2; i++)
		CHECK(!rf_api_step(&n, RT, CUPTI_API_ENTER, 10 + i,
				   3000 + i, &enter));
	for (uint64_t i = RF_API_MAX_NESTING + 2; i-- > 0;) {
		CHECK(rf_api_step(&n, RT, CUPTI_API_EXIT, 10 + i, 0, &enter));
		CHECK_EQ_U64(enter, i < RF_API_MAX_NESTING ? 3000 + i : 0);
	}
	CHECK_EQ_U64(n.runtime_depth, 0);
}

TEST(launch_fill_and_flags)
{
	CUpti_CallbackData cd = { .functionName = "cudaGraphLaunch",
				  .correlationId = 77 };
	struct rf_gpu_launch l;

	rf_launch_fill(&l, RT, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
		       RF_API_GRAPH, &cd, 12345);
	CHECK_EQ_U64(l.abi_version, RF_GPU_ABI_VERSION);
	CHECK_EQ_U64(l.size, sizeof(l));
	/* The appended field lies past the first layout, which old
	 * rfbpfs read. */
	CHECK(l.size > RF_GPU_LAUNCH_SIZE_V1);
	CHECK_EQ_U64(l.enter_ns, 12345);
	CHECK_EQ_U64(l.correlation_id, 77);
	CHECK_EQ_U64(l.domain, RF_GPU_API_RUNTIME);
	CHECK_EQ_U64(l.flags, RF_GPU_LAUNCH_F_GRAPH);
	CHECK_EQ_U64(l.cbid, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000);
	CHECK_STR(l.api_name, "cudaGraphLaunch");
	rf_launch_fill(&l, DRV, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
		       RF_API_LAUNCH, &cd, 0);
	CHECK_EQ_U64(l.domain, RF_GPU_API_DRIVER);
	CHECK_EQ_U64(l.flags, RF_GPU_LAUNCH_F_ONE_RECORD);
	CHECK_EQ_U64(l.enter_ns, 0);
	rf_launch_fill(&l, RT, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
		       RF_API_COPY, &cd, 0);
	CHECK_EQ_U64(l.flags, RF_GPU_LAUNCH_F_ONE_RECORD);
	/* A batch makes a record per copy: no promise of one. */
	rf_launch_fill(&l, RT,
		       CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v12080,
		       RF_API_COPY_BATCH, &cd, 0);
	CHECK_EQ_U64(l.flags, 0);
	rf_launch_fill(&l, RT,
		       CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
		       RF_API_SYNC, &cd, 0);
	CHECK_EQ_U64(l.flags, RF_GPU_LAUNCH_F_SYNC);
}

TEST(callback_counts_probe_calls_only_under_lease)
{
	uint64_t before = LOAD(launches);

	set_lease(0);
	runtime_launch_with_nested_driver(1);
	api(DRV, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_ENTER, 2);
	api(DRV, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_EXIT, 2);
	CHECK_EQ_U64(LOAD(launches), before);

	set_lease(60ull * 1000000000);
	runtime_launch_with_nested_driver(3);		/* 1 report */
	api(DRV, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_ENTER, 4);
	api(DRV, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_EXIT, 4);
	api(RT, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_API_ENTER, 5);
	api(RT, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_API_EXIT, 5);
	CHECK_EQ_U64(LOAD(launches), before + 2);
	/* A sync with its nested driver sync: one report (the sync probe). */
	api(RT, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
	    CUPTI_API_ENTER, 7);
	api(DRV, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, CUPTI_API_ENTER, 8);
	api(DRV, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, CUPTI_API_EXIT, 8);
	api(RT, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
	    CUPTI_API_EXIT, 7);
	CHECK_EQ_U64(LOAD(launches), before + 3);

	/* An expired lease is no lease. */
	__atomic_store_n(&CTL.lease_until_ns, rf_now_ns() - 1, __ATOMIC_RELEASE);
	runtime_launch_with_nested_driver(6);
	CHECK_EQ_U64(LOAD(launches), before + 3);
	CHECK_EQ_U64(rf_lease_now(), 0);
	/* A live lease: now, from the same clock. */
	set_lease(60ull * 1000000000);
	uint64_t t0 = rf_now_ns(), now = rf_lease_now();
	CHECK(now >= t0 && now <= rf_now_ns());
	set_lease(0);
	CHECK_EQ_U64(rf_lease_now(), 0);
}

TEST(clock_conversion)
{
	CHECK_EQ_U64(rf_clock_to_mono(0, 123), 0);
	CHECK_EQ_U64(rf_clock_to_mono(1000, 0), 1000);
	CHECK_EQ_U64(rf_clock_to_mono(1000, 100), 900);
	CHECK_EQ_U64(rf_clock_to_mono(1000, -100), 1100);
	CHECK_EQ_U64(rf_clock_to_mono(50, 100), 0);
	CHECK_EQ_U64(rf_clock_offset_from(100, 1050, 200), 900);
	CHECK(rf_clock_offset_from(1000, 500, 1000) == -500);
	/* A bracket of real clocks: the offset maps CUPTI time back. */
	uint64_t before = rf_now_ns(), ts = 0, after;
	/* No CUPTI in this process yet: the loader finds the toolkit's. */
	CHECK(rf_cupti_load());
	CHECK(rf_cupti.version >= RF_CUPTI_VERSION_MIN);
	CHECK(rf_cupti.GetTimestamp && rf_cupti.GetTimestamp(&ts) ==
	      CUPTI_SUCCESS);
	after = rf_now_ns();
	uint64_t mono = rf_clock_to_mono(ts, rf_clock_offset_from(before, ts, after));
	CHECK(mono >= before && mono <= after);
}

static CUpti_ActivityKernel10 make_kernel(uint32_t corr, uint64_t start)
{
	return (CUpti_ActivityKernel10){
		.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
		.registersPerThread = 32, .start = start, .end = start + 500,
		.deviceId = 1, .contextId = 2, .streamId = 7,
		.gridX = 4, .gridY = 5, .gridZ = 6,
		.blockX = 128, .blockY = 2, .blockZ = 1,
		.staticSharedMemory = 1024, .dynamicSharedMemory = 2048,
		.correlationId = corr, .name = "_Z6kernelPf", .graphId = 9,
		.graphNodeId = 90,
	};
}

TEST(convert_kernel)
{
	CUpti_ActivityKernel10 k = make_kernel(42, 10000);
	struct rf_gpu_activity a;

	CHECK(rf_activity_convert((CUpti_Activity *)&k, 1000, &a) == 0);
	CHECK_EQ_U64(a.abi_version, RF_GPU_ABI_VERSION);
	CHECK_EQ_U64(a.size, sizeof(a));
	CHECK_EQ_U64(a.kind, RF_GPU_ACT_KERNEL);
	CHECK_EQ_U64(a.correlation_id, 42);
	CHECK_EQ_U64(a.start_ns, 9000);
	CHECK_EQ_U64(a.end_ns, 9500);
	CHECK_EQ_U64(a.device_id, 1);
	CHECK_EQ_U64(a.context_id, 2);
	CHECK_EQ_U64(a.stream_id, 7);
	CHECK_EQ_U64(a.registers_per_thread, 32);
	CHECK(a.grid[0] == 4 && a.grid[1] == 5 && a.grid[2] == 6);
	CHECK(a.block[0] == 128 && a.block[1] == 2 && a.block[2] == 1);
	CHECK_EQ_U64(a.static_shared_bytes, 1024);
	CHECK_EQ_U64(a.dynamic_shared_bytes, 2048);
	CHECK_EQ_U64(a.graph_id, 9);
	CHECK_EQ_U64(a.graph_node_id, 90);
	CHECK_STR(a.name, "_Z6kernelPf");
	CHECK_EQ_U64(a.name_len, 11);
	CHECK_EQ_U64(a.bytes, 0);
	k.kind = CUPTI_ACTIVITY_KIND_KERNEL;		/* serialized kernels */
	CHECK(rf_activity_convert((CUpti_Activity *)&k, 0, &a) == 0);
	CHECK_EQ_U64(a.kind, RF_GPU_ACT_KERNEL);
	k.start = 0;			/* no timing: not drawn at the epoch */
	CHECK(rf_activity_convert((CUpti_Activity *)&k, 1000, &a) ==
	      RF_ACT_NO_TIME);
}

/* A sync record (CUDA 13's layout, and 12's first one, which it
 * extends) keeps its type, stream and event; a context sync has neither
 * stream nor event. */
TEST(convert_sync)
{
	CUpti_ActivitySynchronization2 s = {
		.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
		.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE,
		.start = 5000, .end = 9000, .correlationId = 12,
		.contextId = 3, .streamId = 14, .cudaEventId = 8,
	};
	CUpti_ActivitySynchronization old = {
		.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
		.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE,
		.start = 100, .end = 200, .correlationId = 13, .contextId = 3,
		.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE,
		.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE,
	};
	struct rf_gpu_activity a;

	CHECK(rf_activity_convert((CUpti_Activity *)&s, 1000, &a) == 0);
	CHECK_EQ_U64(a.kind, RF_GPU_ACT_SYNC);
	CHECK_EQ_U64(a.sync_type, RF_GPU_SYNC_EVENT);
	CHECK_EQ_U64(a.correlation_id, 12);
	CHECK_EQ_U64(a.start_ns, 4000);
	CHECK_EQ_U64(a.end_ns, 8000);
	CHECK_EQ_U64(a.context_id, 3);
	CHECK_EQ_U64(a.stream_id, 14);
	CHECK_EQ_U64(a.cuda_event_id, 8);
	CHECK(rf_activity_convert((CUpti_Activity *)&old, 0, &a) == 0);
	CHECK_EQ_U64(a.sync_type, RF_GPU_SYNC_CONTEXT);
	CHECK_EQ_U64(a.stream_id, RF_GPU_SYNC_NONE);
	CHECK_EQ_U64(a.cuda_event_id, RF_GPU_SYNC_NONE);
	CHECK_EQ_U64(a.correlation_id, 13);
}

/* Each attribute lands in its field: the answer is the attribute's
 * number, times 10 for device 1. */
static int attr_echo(int attribute, int ordinal, void *ctx)
{
	(void)ctx;
	return attribute * (ordinal ? 10 : 1);
}

TEST(device_fill)
{
	struct rf_gpu_device d;

	rf_device_fill(&d, 1, attr_echo, NULL);
	CHECK_EQ_U64(d.abi_version, RF_GPU_ABI_VERSION);
	CHECK_EQ_U64(d.size, sizeof(d));
	CHECK_EQ_U64(d.device_id, 1);
	CHECK_EQ_U64(d.sm_count, 10 * CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
	CHECK_EQ_U64(d.max_threads_per_sm,
		     10 * CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
	CHECK_EQ_U64(d.max_blocks_per_sm,
		     10 * CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
	CHECK_EQ_U64(d.regs_per_sm,
		     10 * CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
	CHECK_EQ_U64(d.shared_per_sm, 10 *
		     CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
	CHECK_EQ_U64(d.reserved_shared_per_block,
		     10 * CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
	CHECK_EQ_U64(d.warp_size, 10 * CU_DEVICE_ATTRIBUTE_WARP_SIZE);
	CHECK_EQ_U64(d.cc_major,
		     10 * CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
	CHECK_EQ_U64(d.total_memory, 0);	/* not an attribute */
	CHECK_STR(d.name, "");
}

/* A peer copy (MEMCPY2) is a copy on the device that ran it. */
TEST(convert_peer_copy)
{
	CUpti_ActivityMemcpyPtoP4 m = {
		.kind = CUPTI_ACTIVITY_KIND_MEMCPY2,
		.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP,
		.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
		.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
		.bytes = 4096, .start = 1000, .end = 3000, .deviceId = 1,
		.contextId = 2, .streamId = 9, .srcDeviceId = 1,
		.dstDeviceId = 0, .correlationId = 77, .graphId = 0,
	};
	struct rf_gpu_activity a;

	CHECK(rf_activity_convert((CUpti_Activity *)&m, 100, &a) == 0);
	CHECK_EQ_U64(a.kind, RF_GPU_ACT_MEMCPY);
	CHECK_EQ_U64(a.correlation_id, 77);
	CHECK_EQ_U64(a.start_ns, 900);
	CHECK_EQ_U64(a.end_ns, 2900);
	CHECK_EQ_U64(a.device_id, 1);
	CHECK_EQ_U64(a.stream_id, 9);
	CHECK_EQ_U64(a.bytes, 4096);
	CHECK_EQ_U64(a.copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
}

/* Templated kernel names run past RF_GPU_NAME_MAX: cut, NUL-terminated,
 * with the full length kept so the cut is visible downstream. */
TEST(convert_long_kernel_name)
{
	char name[400];
	CUpti_ActivityKernel10 k = make_kernel(1, 100);
	struct rf_gpu_activity a;

	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	k.name = name;
	CHECK(rf_activity_convert((CUpti_Activity *)&k, 0, &a) == 0);
	CHECK_EQ_U64(a.name_len, sizeof(name) - 1);
	CHECK_EQ_U64(strlen(a.name), RF_GPU_NAME_MAX - 1);
	CHECK(!memcmp(a.name, name, RF_GPU_NAME_MAX - 1));
}

TEST(convert_memcpy)
{
	CUpti_ActivityMemcpy6 m = {
		.kind = CUPTI_ACTIVITY_KIND_MEMCPY,
		.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
		.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
		.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
		.bytes = 1 << 20, .start = 5000, .end = 6000,
		.deviceId = 3, .contextId = 4, .streamId = 5,
		.correlationId = 100, .runtimeCorrelationId = 99, .graphId = 0,
	};
	struct rf_gpu_activity a;

	CHECK(rf_activity_convert((CUpti_Activity *)&m, -10, &a) == 0);
	CHECK_EQ_U64(a.kind, RF_GPU_ACT_MEMCPY);
	CHECK_EQ_U64(a.correlation_id, 99);	/* the runtime call's */
	CHECK_EQ_U64(a.start_ns, 5010);
	CHECK_EQ_U64(a.end_ns, 6010);
	CHECK_EQ_U64(a.bytes, 1 << 20);
	CHECK_EQ_U64(a.copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
	CHECK_EQ_U64(a.src_kind, CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
	CHECK_EQ_U64(a.dst_kind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
	CHECK_EQ_U64(a.device_id, 3);
	CHECK_EQ_U64(a.stream_id, 5);
	CHECK_EQ_U64(a.name_len, 0);
	CHECK_STR(a.name, "");
	m.runtimeCorrelationId = 0;		/* a driver copy */
	CHECK(rf_activity_convert((CUpti_Activity *)&m, 0, &a) == 0);
	CHECK_EQ_U64(a.correlation_id, 100);
}

TEST(convert_memset_and_unknown)
{
	CUpti_ActivityMemset4 s = {
		.kind = CUPTI_ACTIVITY_KIND_MEMSET, .value = 0xab,
		.bytes = 4096, .start = 7, .end = 9, .deviceId = 1,
		.streamId = 2, .correlationId = 55,
		.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, .graphId = 3,
	};
	CUpti_ActivityAPI api_rec = { .kind = CUPTI_ACTIVITY_KIND_DRIVER };
	struct rf_gpu_activity a;

	CHECK(rf_activity_convert((CUpti_Activity *)&s, 0, &a) == 0);
	CHECK_EQ_U64(a.kind, RF_GPU_ACT_MEMSET);
	CHECK_EQ_U64(a.correlation_id, 55);
	CHECK_EQ_U64(a.memset_value, 0xab);
	CHECK_EQ_U64(a.bytes, 4096);
	CHECK_EQ_U64(a.dst_kind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
	CHECK_EQ_U64(a.graph_id, 3);
	CHECK_EQ_U64(a.start_ns, 7);
	CHECK(rf_activity_convert((CUpti_Activity *)&api_rec, 0, &a) == -1);
}

/* A buffer as CUPTI hands it over: records back to back, walked by the
 * real cuptiActivityGetNextRecord (which needs no driver). */
static void complete_buffer(void)
{
	uint8_t *buf;
	size_t size, max, off = 0;
	CUpti_ActivityKernel10 k = make_kernel(1, 100);
	CUpti_ActivityMemcpy6 m = { .kind = CUPTI_ACTIVITY_KIND_MEMCPY,
				    .correlationId = 2, .start = 10,
				    .end = 20 };
	CUpti_ActivityMemset4 s = { .kind = CUPTI_ACTIVITY_KIND_MEMSET,
				    .correlationId = 3, .start = 30,
				    .end = 40 };
	CUpti_ActivityAPI other = { .kind = CUPTI_ACTIVITY_KIND_RUNTIME };

	rfbpf_cupti_buffer_requested(&buf, &size, &max);
	CHECK(buf && size >= 4096 && ((uintptr_t)buf & 7) == 0);
	memcpy(buf + off, &k, sizeof(k)), off += sizeof(k);
	memcpy(buf + off, &m, sizeof(m)), off += sizeof(m);
	memcpy(buf + off, &other, sizeof(other)), off += sizeof(other);
	memcpy(buf + off, &s, sizeof(s)), off += sizeof(s);
	rfbpf_cupti_buffer_completed(NULL, 0, buf, size, off);	/* frees */
}

TEST(buffer_completed_lease_gate)
{
	uint64_t rec = LOAD(records), untraced = LOAD(records_untraced);
	uint64_t unknown = LOAD(records_unknown);

	set_lease(60ull * 1000000000);
	complete_buffer();
	CHECK_EQ_U64(LOAD(records), rec + 3);
	CHECK_EQ_U64(LOAD(records_unknown), unknown + 1);
	CHECK_EQ_U64(LOAD(records_untraced), untraced);
	set_lease(0);
	complete_buffer();
	/* Without a lease every record is only counted, unknown kinds too:
	 * nothing is converted. */
	CHECK_EQ_U64(LOAD(records), rec + 3);
	CHECK_EQ_U64(LOAD(records_untraced), untraced + 4);
	CHECK_EQ_U64(LOAD(records_unknown), unknown + 1);
	/* An empty buffer is just freed. */
	uint8_t *buf; size_t size, max;
	rfbpf_cupti_buffer_requested(&buf, &size, &max);
	rfbpf_cupti_buffer_completed(NULL, 0, buf, size, 0);
}

/* What the agent loses, by why: a record with no time (drawn at the
 * epoch otherwise), a buffer whose walk stops at a record CUPTI cannot
 * read (its iterator never moves past one), buffers past the cap. */
TEST(losses_are_counted_by_why)
{
	uint64_t rec = LOAD(records), no_time = LOAD(records_no_time);
	uint64_t cut = LOAD(buffers_cut), refused = LOAD(buffers_refused);
	CUpti_ActivityKernel10 k = make_kernel(7, 100), untimed = k, bad = k;
	uint8_t *buf, *held[RF_ACTIVITY_BUFFERS_MAX];
	size_t size, max, off = 0;
	int n = 0;

	set_lease(60ull * 1000000000);
	untimed.start = 0;
	bad.kind = (CUpti_ActivityKind)0x7777;
	rfbpf_cupti_buffer_requested(&buf, &size, &max);
	CHECK(buf != NULL);
	if (!buf)
		return;
	memcpy(buf + off, &k, sizeof(k)), off += sizeof(k);
	memcpy(buf + off, &untimed, sizeof(k)), off += sizeof(k);
	memcpy(buf + off, &bad, sizeof(k)), off += sizeof(k);
	memcpy(buf + off, &k, sizeof(k)), off += sizeof(k);	/* lost */
	rfbpf_cupti_buffer_completed(NULL, 0, buf, size, off);
	CHECK_EQ_U64(LOAD(records), rec + 1);
	CHECK_EQ_U64(LOAD(records_no_time), no_time + 1);
	CHECK_EQ_U64(LOAD(buffers_cut), cut + 1);
	/* The cap: every buffer out, the next one is refused and counted;
	 * one back, and CUPTI gets one again. */
	while (n < RF_ACTIVITY_BUFFERS_MAX) {
		rfbpf_cupti_buffer_requested(&held[n], &size, &max);
		if (!held[n])
			break;
		n++;
	}
	CHECK_EQ_U64(n, RF_ACTIVITY_BUFFERS_MAX);
	rfbpf_cupti_buffer_requested(&buf, &size, &max);
	CHECK(buf == NULL && size == 0);
	CHECK_EQ_U64(LOAD(buffers_refused), refused + 1);
	rfbpf_cupti_buffer_completed(NULL, 0, held[--n], size, 0);
	rfbpf_cupti_buffer_requested(&buf, &size, &max);
	CHECK(buf != NULL);
	rfbpf_cupti_buffer_completed(NULL, 0, buf, size, 0);
	while (n > 0)
		rfbpf_cupti_buffer_completed(NULL, 0, held[--n], size, 0);
	set_lease(0);
}

/* A launch that returned an error is counted apart, not reported: it
 * will get no record. */
TEST(failed_launch_is_counted_apart)
{
	uint64_t launches = LOAD(launches), failed = LOAD(launches_failed);
	int ok = 0, err = 98;			/* cudaErrorInvalidDeviceFunction */
	CUpti_CallbackData cd = { .functionName = "cudaLaunchKernel",
				  .correlationId = 501 };

	set_lease(60ull * 1000000000);
	for (int i = 0; i < 2; i++) {
		cd.correlationId = 501 + i;
		cd.callbackSite = CUPTI_API_ENTER;
		cd.functionReturnValue = NULL;
		rfbpf_cupti_api_callback(NULL, RT,
			CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &cd);
		cd.callbackSite = CUPTI_API_EXIT;
		cd.functionReturnValue = i ? &err : &ok;
		rfbpf_cupti_api_callback(NULL, RT,
			CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &cd);
	}
	CHECK_EQ_U64(LOAD(launches), launches + 1);
	CHECK_EQ_U64(LOAD(launches_failed), failed + 1);
	set_lease(0);
}

static void graph_node_created(void)
{
	CUpti_ResourceData rd = { 0 };

	rfbpf_cupti_api_callback(NULL, CUPTI_CB_DOMAIN_RESOURCE,
				 CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &rd);
}

/* A launch or copy that makes a graph node (its stream is being captured)
 * ran nothing: counted apart, not reported. The next one, not captured,
 * is reported; a node made outside any call of ours (cudaGraphAddNode)
 * marks nothing. Direct driver launches are told apart the same way. */
TEST(captured_launch_is_counted_apart)
{
	uint64_t launches = LOAD(launches);
	uint64_t captured = LOAD(launches_captured);
	CUpti_CallbackData cd = { .functionName = "cudaLaunchKernel" };
	const CUpti_CallbackId rt = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
	const CUpti_CallbackId drv = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;

	set_lease(60ull * 1000000000);
	for (int i = 0; i < 4; i++) {
		bool direct = i >= 2;

		cd.correlationId = 601 + i;
		cd.callbackSite = CUPTI_API_ENTER;
		rfbpf_cupti_api_callback(NULL, direct ? DRV : RT,
					 direct ? drv : rt, &cd);
		if (!direct)	/* the runtime call's own driver call */
			api(DRV, drv, CUPTI_API_ENTER, cd.correlationId);
		if (i % 2 == 0)
			graph_node_created();
		if (!direct)
			api(DRV, drv, CUPTI_API_EXIT, cd.correlationId);
		cd.callbackSite = CUPTI_API_EXIT;
		rfbpf_cupti_api_callback(NULL, direct ? DRV : RT,
					 direct ? drv : rt, &cd);
		graph_node_created();	/* between calls: no effect */
	}
	CHECK_EQ_U64(LOAD(launches), launches + 2);
	CHECK_EQ_U64(LOAD(launches_captured), captured + 2);
	set_lease(0);
}

TEST(parse_sample)
{
	double p = 0;

	CHECK(rf_parse_sample(NULL, &p) == 0);
	CHECK(rf_parse_sample("0.5", &p) == 1 && p == 0.5);
	CHECK(rf_parse_sample("1", &p) == 1 && p == 1.0);
	CHECK(rf_parse_sample("1e-3", &p) == 1 && p == 0.001);
	CHECK(rf_parse_sample("0", &p) == -1);
	CHECK(rf_parse_sample("-0.5", &p) == -1);
	CHECK(rf_parse_sample("1.01", &p) == -1);
	CHECK(rf_parse_sample("", &p) == -1);
	CHECK(rf_parse_sample("abc", &p) == -1);
	CHECK(rf_parse_sample("0.5x", &p) == -1);
	CHECK(rf_parse_sample("nan", &p) == -1);
	CHECK(rf_parse_sample("inf", &p) == -1);
}

static bool wait_for(uint32_t *field, uint32_t value, int ms)
{
	struct timespec ten_ms = { 0, 10000000 };

	for (int i = 0; i < ms / 10; i++) {
		if (__atomic_load_n(field, __ATOMIC_ACQUIRE) == value)
			return true;
		nanosleep(&ten_ms, NULL);
	}
	return __atomic_load_n(field, __ATOMIC_ACQUIRE) == value;
}

/* Last: starts the real agent (its thread lives until exit). It takes
 * nothing from CUPTI until a tracer's lease starts; then, with no driver
 * here, cuptiSubscribe_v2 fails: cupti_ok stays 0, the result is kept,
 * errors are counted, and everything else must still work. */
TEST(lifecycle_lease_thread_and_torch_activation)
{
	void *torch = dlopen(fake_torch_path, RTLD_NOW | RTLD_GLOBAL);
	int (*fire)(void);
	double (*prob)(void);
	int (*flags_ok)(void);

	uint64_t errors0 = LOAD(errors);	/* earlier tests' */

	CHECK(torch != NULL);
	if (!torch)
		return;
	set_lease(0);
	setenv("RFBPF_SAMPLE", "0.25", 1);
	setenv("RFBPF_CUPTI_FLUSH_MS", "50", 1);
	CHECK(InitializeInjection() == 1);
	CHECK(InitializeInjection() == 1);		/* idempotent */
	CHECK_EQ_U64(LOAD(magic), RF_GPU_CONTROL_MAGIC);
	CHECK_EQ_U64(LOAD(flush_period_ns), 50000000);
	/* No tracer yet: no CUPTI call at all (Kineto can subscribe). */
	CHECK_EQ_U64(LOAD(cupti_ok), 0);
	CHECK_EQ_U64(LOAD(errors), errors0);
	CHECK_EQ_U64(LOAD(clock_source), RF_CLOCK_NONE);

	/* RFBPF_SAMPLE found the (fake) libtorch_cpu and registered. */
	CHECK_EQ_U64(LOAD(torch_callback_handle), 41);
	CHECK(CTL.sample_prob == 0.25);
	*(void **)&fire = dlsym(torch, "fake_torch_fire");
	*(void **)&prob = dlsym(torch, "fake_torch_prob");
	*(void **)&flags_ok = dlsym(torch, "fake_torch_flags_ok");
	CHECK(fire && fire() == 1);	/* stubs obey the C++ ABI */
	CHECK(prob && prob() == 0.25);
	CHECK(flags_ok && flags_ok());

	/* No lease: the thread enables nothing. */
	usleep(300000);
	CHECK_EQ_U64(LOAD(activity_starts), 0);
	CHECK_EQ_U64(LOAD(lease_seen), 0);
	/* A short lease: on within a tick, tried once, off after it. */
	set_lease(400000000);
	CHECK(wait_for(&CTL.lease_seen, 1, 1000));
	CHECK_EQ_U64(LOAD(cupti_ok), 0);		/* no driver here */
	CHECK_EQ_U64(LOAD(cupti_result), CUPTI_ERROR_UNKNOWN);
	CHECK(LOAD(errors) > errors0);
	/* Without a subscription nothing process-wide is touched: no
	 * activity kind, no clock (cupti_coexist.c checks it on CUPTI). */
	CHECK_EQ_U64(LOAD(activity_starts), 0);
	CHECK_EQ_U64(LOAD(clock_source), RF_CLOCK_NONE);
	CHECK(wait_for(&CTL.lease_seen, 0, 2000));
	CHECK_EQ_U64(LOAD(activity_starts), 0);
	CHECK_EQ_U64(LOAD(activity_enabled), 0);
}

int main(int argc, char **argv)
{
	fake_torch_path = argc > 1 ? argv[1] : "build/cupti/fake/libtorch_cpu.so";
	return check_run_all(__FILE__);
}
