// SPDX-License-Identifier: BSD-2-Clause
/*
 * API callbacks -> rfbpf_probe_gpu_launch(), on the launching thread, at
 * the exit of the call (the correlation id is known from the entry on,
 * but the exit is where a failed call would be visible and where the
 * probe cost lands after the launch itself).
 *
 * One launch, one report. A runtime launch (cudaLaunchKernel) calls the
 * driver (cuLaunchKernel) inside it, and CUPTI calls us for both. Each
 * thread keeps the depth of the runtime calls of ours it is inside: on a
 * runtime ENTER the depth goes up, driver callbacks at depth > 0 are
 * ignored, and the runtime EXIT reports. A driver call made directly (by
 * Triton, cuBLAS, ...) is at depth 0 and reports at its own EXIT. The
 * depth is kept whether or not a tracer holds the lease, so a lease that
 * starts in the middle of a call still sees consistent nesting.
 *
 * The launching thread takes no lock and does no I/O here: a thread-local
 * counter, an atomic load of the lease, and, when traced, a probe call.
 */
#include <stddef.h>
#include <string.h>
#include "agent.h"

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
	TABLE(CUPTI_CB_DOMAIN_DRIVER_API, RF_API_LAUNCH, driver_launches),
	TABLE(CUPTI_CB_DOMAIN_DRIVER_API, RF_API_GRAPH, driver_graphs),
};
#define NR_TABLES (sizeof(tables) / sizeof(tables[0]))

/* A linear scan of ~90 ids, but only for the cbids we enabled, i.e. for
 * calls that are launches or copies anyway. */
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
		 CUpti_ApiCallbackSite site, uint32_t correlation_id)
{
	uint32_t gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);

	if (n->generation != gen) {
		n->runtime_depth = 0;
		n->nested_correlation_id = 0;
		n->generation = gen;
	}
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
		if (site == CUPTI_API_ENTER) {
			if (!n->runtime_depth)
				n->nested_correlation_id = 0;
			n->runtime_depth++;
			return false;
		}
		if (n->runtime_depth)
			n->runtime_depth--;
		return true;
	}
	rf_api_note_driver(n, site, correlation_id);
	/* Driver: only a call made outside our runtime calls counts. */
	return !n->runtime_depth && site == CUPTI_API_EXIT;
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

	/* Every driver call, to learn the ids of those nested in our runtime
	 * calls (see rf_api_note_driver); runtime calls one by one. */
	if (!RF_CUPTI_CHECK(cuptiEnableDomain(1, sub,
					      CUPTI_CB_DOMAIN_DRIVER_API)))
		failed++;
	for (size_t t = 0; t < NR_TABLES; t++)
		for (size_t i = 0; i < tables[t].n; i++)
			if (!RF_CUPTI_CHECK(cuptiEnableCallback(
				    1, sub, tables[t].domain, tables[t].ids[i])))
				failed++;
	return failed ? -1 : 0;
}

void rf_launch_fill(struct rf_gpu_launch *l, CUpti_CallbackDomain domain,
		    CUpti_CallbackId cbid, enum rf_api_class class,
		    const CUpti_CallbackData *cd)
{
	*l = (struct rf_gpu_launch){
		.abi_version = RF_GPU_ABI_VERSION,
		.size = sizeof(*l),
		.correlation_id = cd->correlationId,
		.cbid = cbid,
		.domain = domain == CUPTI_CB_DOMAIN_RUNTIME_API ?
				  RF_GPU_API_RUNTIME : RF_GPU_API_DRIVER,
		.flags = class == RF_API_GRAPH ? RF_GPU_LAUNCH_F_GRAPH : 0,
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

	(void)userdata;
	if (!cd)
		return;
	if (class == RF_API_OTHER) {
		/* The whole driver domain is on, for the ids of the driver
		 * calls our runtime calls make. */
		if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
			rf_api_note_driver(&nesting, cd->callbackSite,
					   cd->correlationId);
		return;
	}
	if (!rf_api_step(&nesting, domain, cd->callbackSite,
			 cd->correlationId))
		return;
	if (!rf_lease_active(0))
		return;
	rf_launch_fill(&l, domain, cbid, class, cd);
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
		l.driver_correlation_id = nesting.nested_correlation_id;
	rf_probe_gpu_launch(&l);
	rf_count(&rfbpf_gpu_control.launches, 1);
}
