// SPDX-License-Identifier: BSD-2-Clause
/*
 * API callbacks -> rfbpf_probe_gpu_launch() (rfbpf_probe_gpu_sync() for
 * synchronize calls), on the calling thread, at the exit of the call (the
 * correlation id is known from the entry on, but the exit is where a
 * failed call would be visible and where the probe cost lands after the
 * launch itself). The report carries the time of the call's ENTER, read
 * there only while a tracer holds the lease, so rfbpf can draw the call
 * as a slice on its thread, as Kineto draws cuda_runtime events.
 *
 * One launch, one report. A runtime launch (cudaLaunchKernel) calls the
 * driver (cuLaunchKernel) inside it, and CUPTI calls us for both. Each
 * thread keeps the depth of the runtime calls of ours it is inside: on a
 * runtime ENTER the depth goes up, driver callbacks at depth > 0 are
 * ignored, and the runtime EXIT reports. A driver call made directly (by
 * Triton, cuBLAS, ...) is at depth 0 and reports at its own EXIT. The
 * depth is kept whether or not a tracer holds the lease, so a lease that
 * starts in the middle of a call still sees consistent nesting (and
 * reports that call with its enter time unknown).
 *
 * Synchronize calls launch nothing; they are reported so that the time a
 * thread stalls on the GPU is visible, through a probe of their own (an
 * rfbpf that predates them never attaches to it).
 *
 * The launching thread takes no lock and does no I/O here: a thread-local
 * counter, an atomic load of the lease, and, when traced, a clock read at
 * ENTER and a probe call at EXIT.
 */
#include <stddef.h>
#include <string.h>
#include "callbacks.h"
#include "control.h"
#include "probes.h"

/* Every cbid of the installed headers that launches work on a GPU. */
static const CUpti_CallbackId runtime_launches[] = {
	CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
	CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
	CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
	CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
#if CUPTI_API_VERSION >= 130000	/* an enum, not a macro: test the version */
	CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
	CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
#endif
};
static const CUpti_CallbackId runtime_graphs[] = {
	CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
	CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
};
static const CUpti_CallbackId driver_launches[] = {
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
};
static const CUpti_CallbackId driver_graphs[] = {
	CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
	CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};
/* Calls that wait for the GPU. The driver's are reported only when made
 * directly (the runtime's nest them). */
static const CUpti_CallbackId runtime_syncs[] = {
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
};
static const CUpti_CallbackId driver_syncs[] = {
	CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
	CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
	CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,
#if CUPTI_API_VERSION >= 130000
	CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
#endif
};
/* Copies and sets, so their records can be attributed to an op too.
 * Runtime only: the driver copies the runtime makes are nested in these. */
static const CUpti_CallbackId runtime_copies[] = {
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_v4000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_v4000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_ptds_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_ptds_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_ptds_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_ptds_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_ptds_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_ptds_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_ptds_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_ptds_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_ptds_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_ptds_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_ptds_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_ptds_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_ptds_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_ptsz_v7000,
};
/* One call, one copy record per copy in the batch. */
static const CUpti_CallbackId runtime_batch_copies[] = {
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v12080,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v12080,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v12080,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v12080,
#if CUPTI_API_VERSION >= 130000
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v13000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v13000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v13000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v13000,
#endif
};

/* The driver's copies and sets: enabled only to learn the id of the one
 * a runtime copy makes inside it (its record carries that id, not the
 * runtime call's); never reported themselves. Every one the installed
 * headers name, so that no other driver call (a lazy module load, a
 * pointer query) can be taken for it. */
static const CUpti_CallbackId driver_copies[] = {
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync_v2_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync_v2_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpy_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD16,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD32,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2_ptds,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD8,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds,
};

struct api_table {
	CUpti_CallbackDomain domain;
	enum rf_api_class class;
	const CUpti_CallbackId *ids;
	size_t n;
};
#define TABLE(d, c, a) { d, c, a, sizeof(a) / sizeof(a[0]) }
static const struct api_table tables[] = {
	TABLE(CUPTI_CB_DOMAIN_RUNTIME_API, RF_API_LAUNCH, runtime_launches),
	TABLE(CUPTI_CB_DOMAIN_RUNTIME_API, RF_API_GRAPH, runtime_graphs),
	TABLE(CUPTI_CB_DOMAIN_RUNTIME_API, RF_API_COPY, runtime_copies),
	TABLE(CUPTI_CB_DOMAIN_RUNTIME_API, RF_API_COPY_BATCH,
	      runtime_batch_copies),
	TABLE(CUPTI_CB_DOMAIN_RUNTIME_API, RF_API_SYNC, runtime_syncs),
	TABLE(CUPTI_CB_DOMAIN_DRIVER_API, RF_API_LAUNCH, driver_launches),
	TABLE(CUPTI_CB_DOMAIN_DRIVER_API, RF_API_GRAPH, driver_graphs),
	TABLE(CUPTI_CB_DOMAIN_DRIVER_API, RF_API_SYNC, driver_syncs),
	TABLE(CUPTI_CB_DOMAIN_DRIVER_API, RF_API_DRIVER_COPY, driver_copies),
};
#define NR_TABLES (sizeof(tables) / sizeof(tables[0]))

/* A linear scan of ~200 ids, but only for the cbids we enabled: calls
 * that are reported, or copies and sets. */
enum rf_api_class rf_api_classify(CUpti_CallbackDomain domain,
				  CUpti_CallbackId cbid)
{
	for (size_t t = 0; t < NR_TABLES; t++) {
		if (tables[t].domain != domain)
			continue;
		for (size_t i = 0; i < tables[t].n; i++)
			if (tables[t].ids[i] == cbid)
				return tables[t].class;
	}
	return RF_API_OTHER;
}

/* Bumped each time the agent subscribes: a thread whose call was cut in
 * half by the last unsubscribe (an ENTER with no EXIT) starts clean. */
static uint32_t generation;

void rf_api_new_generation(void)
{
	__atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
}

bool rf_api_step(struct rf_api_nesting *n, CUpti_CallbackDomain domain,
		 CUpti_ApiCallbackSite site, uint32_t correlation_id,
		 uint64_t now_ns, uint64_t *enter_ns)
{
	uint32_t gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);

	if (n->generation != gen)
		*n = (struct rf_api_nesting){ .generation = gen };
	*enter_ns = 0;
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
		if (site == CUPTI_API_ENTER) {
			if (!n->runtime_depth) {
				n->nested_correlation_id = 0;
				n->captured = false;
			}
			if (n->runtime_depth < RF_API_MAX_NESTING)
				n->runtime_enter_ns[n->runtime_depth] = now_ns;
			n->runtime_depth++;
			return false;
		}
		if (n->runtime_depth && --n->runtime_depth <
					RF_API_MAX_NESTING) {
			*enter_ns = n->runtime_enter_ns[n->runtime_depth];
			n->runtime_enter_ns[n->runtime_depth] = 0;
		}
		return true;
	}
	rf_api_note_driver(n, site, correlation_id);
	/* Driver: only a call made outside our runtime calls counts. */
	if (n->runtime_depth)
		return false;
	if (site == CUPTI_API_ENTER) {
		n->driver_enter_ns = now_ns;
		n->driver_in_call = true;
		n->captured = false;
		return false;
	}
	*enter_ns = n->driver_enter_ns;
	n->driver_enter_ns = 0;
	n->driver_in_call = false;
	return true;
}

void rf_api_note_graph_node(struct rf_api_nesting *n)
{
	uint32_t gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);

	if (n->generation == gen && (n->runtime_depth || n->driver_in_call))
		n->captured = true;
}

void rf_api_note_driver(struct rf_api_nesting *n, CUpti_ApiCallbackSite site,
			uint32_t correlation_id)
{
	/* The first driver call inside a runtime call: copies and sets
	 * carry its id in their records, not the runtime call's. */
	if (site == CUPTI_API_ENTER && n->runtime_depth &&
	    !n->nested_correlation_id)
		n->nested_correlation_id = correlation_id;
}

int rf_api_enable_callbacks(CUpti_SubscriberHandle sub)
{
	int failed = 0;

	/* Graph nodes made inside a launch or copy of ours: stream capture
	 * (rf_api_note_graph_node). Made when graphs are built, not run. */
	if (!RF_CUPTI_CHECK(rf_cupti.EnableCallback(
		    1, sub, CUPTI_CB_DOMAIN_RESOURCE,
		    CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED)))
		failed++;
	/* One by one, as Kineto does: a whole domain would make every
	 * cuStreamQuery and cuEventRecord pay a callback pair. */
	for (size_t t = 0; t < NR_TABLES; t++)
		for (size_t i = 0; i < tables[t].n; i++) {
			static int once;
			CUptiResult r = rf_cupti.EnableCallback(
				1, sub, tables[t].domain, tables[t].ids[i]);

			/* The tables are CUDA 13's: a CUDA 12 CUPTI does not
			 * know its newest ids (__cudaLaunchKernel, ...), which
			 * its callers then never make either. */
			if (r == CUPTI_ERROR_INVALID_PARAMETER &&
			    rf_cupti.version < RF_CUPTI_VERSION_MIN)
				continue;
			if (r != CUPTI_SUCCESS) {
				rf_cupti_failed(r, "cuptiEnableCallback", &once);
				failed++;
			}
		}
	return failed ? -1 : 0;
}

/* The flags a call is reported with: what the loader can expect of it. */
static uint8_t class_flags(enum rf_api_class class)
{
	switch (class) {
	case RF_API_LAUNCH:
	case RF_API_COPY:
		return RF_GPU_LAUNCH_F_ONE_RECORD;
	case RF_API_GRAPH:
		return RF_GPU_LAUNCH_F_GRAPH;
	case RF_API_SYNC:
		return RF_GPU_LAUNCH_F_SYNC;
	default:
		return 0;
	}
}

void rf_launch_fill(struct rf_gpu_launch *l, CUpti_CallbackDomain domain,
		    CUpti_CallbackId cbid, enum rf_api_class class,
		    const CUpti_CallbackData *cd, uint64_t enter_ns)
{
	*l = (struct rf_gpu_launch){
		.abi_version = RF_GPU_ABI_VERSION,
		.size = sizeof(*l),
		.correlation_id = cd->correlationId,
		.cbid = cbid,
		.domain = domain == CUPTI_CB_DOMAIN_RUNTIME_API ?
				  RF_GPU_API_RUNTIME : RF_GPU_API_DRIVER,
		.flags = class_flags(class),
		.enter_ns = enter_ns,
	};
	if (cd->functionName)
		strncpy(l->api_name, cd->functionName,
			sizeof(l->api_name) - 1);
}

static __thread struct rf_api_nesting nesting;

void CUPTIAPI rfbpf_cupti_api_callback(void *userdata,
				       CUpti_CallbackDomain domain,
				       CUpti_CallbackId cbid,
				       const void *cbdata)
{
	const CUpti_CallbackData *cd = cbdata;
	enum rf_api_class class = rf_api_classify(domain, cbid);
	struct rf_gpu_launch l;
	uint64_t enter_ns;

	(void)userdata;
	if (!cd)
		return;
	/* cbdata is a CUpti_ResourceData here, not read. */
	if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
		if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED)
			rf_api_note_graph_node(&nesting);
		return;
	}
	if (class == RF_API_OTHER)
		return;
	if (class == RF_API_DRIVER_COPY) {
		rf_api_note_driver(&nesting, cd->callbackSite,
				   cd->correlationId);
		return;
	}
	if (!rf_api_step(&nesting, domain, cd->callbackSite,
			 cd->correlationId,
			 cd->callbackSite == CUPTI_API_ENTER ? rf_lease_now() : 0,
			 &enter_ns))
		return;
	if (!rf_lease_active(0))
		return;
	/* A launch that failed launched nothing: no record will come, so
	 * it is counted apart instead of waiting as one with no record.
	 * (cudaError_t and CUresult are both ints; 0 is success.) */
	if (class != RF_API_SYNC && cd->functionReturnValue &&
	    *(const int *)cd->functionReturnValue != 0) {
		rf_count(&rfbpf_gpu_control.launches_failed, 1);
		return;
	}
	/* Made a graph node: its stream is being captured, so it ran
	 * nothing and no record of its own will come (the graph's launch
	 * reports the kernels when it runs). Counted apart, as above. */
	if (class != RF_API_SYNC && nesting.captured) {
		rf_count(&rfbpf_gpu_control.launches_captured, 1);
		return;
	}
	rf_launch_fill(&l, domain, cbid, class, cd, enter_ns);
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
		l.driver_correlation_id = nesting.nested_correlation_id;
	if (class == RF_API_SYNC)
		rf_probe_gpu_sync(&l);
	else
		rf_probe_gpu_launch(&l);
	rf_count(&rfbpf_gpu_control.launches, 1);
}
