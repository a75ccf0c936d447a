// SPDX-License-Identifier: BSD-2-Clause
/*
 * Prints where each record field the agent reads sits in CUDA 12's record
 * versions (Kernel9, Memcpy5, MemcpyPtoP4, Memset4). Built twice by
 * check_cupti12_layouts.sh: against CUDA 12.4's own headers, and against
 * CUDA 13's, which keep those versions in cupti_activity_deprecated.h;
 * the two outputs must be equal, since the agent and its CUDA 12 test
 * (cupti12_records.c) take the layouts from CUDA 13's headers.
 */
#include <stddef.h>
#include <stdio.h>
#include <cupti.h>
#if CUPTI_API_VERSION >= 130000
#include <cupti_activity_deprecated.h>
#endif

#define AT(T, f) printf("%s.%s %zu %zu\n", #T, #f, offsetof(T, f), \
			sizeof(((T *)0)->f))
#define SIZE(T) printf("sizeof %s %zu\n", #T, sizeof(T))

int main(void)
{
#define K(f) AT(CUpti_ActivityKernel9, f)
	K(kind); K(correlationId); K(start); K(end); K(deviceId);
	K(contextId); K(streamId); K(registersPerThread); K(gridX); K(gridY);
	K(gridZ); K(blockX); K(blockY); K(blockZ); K(staticSharedMemory);
	K(dynamicSharedMemory); K(name); K(graphId);
	SIZE(CUpti_ActivityKernel9);
#define M(T, f) AT(T, f)
#define COPY(T) M(T, kind); M(T, copyKind); M(T, srcKind); M(T, dstKind); \
	M(T, bytes); M(T, start); M(T, end); M(T, deviceId); \
	M(T, contextId); M(T, streamId); M(T, correlationId); \
	M(T, graphId); SIZE(T)
	COPY(CUpti_ActivityMemcpy5);
	AT(CUpti_ActivityMemcpy5, runtimeCorrelationId);
	COPY(CUpti_ActivityMemcpyPtoP4);
#define S(f) AT(CUpti_ActivityMemset4, f)
	S(kind); S(value); S(bytes); S(start); S(end); S(deviceId);
	S(contextId); S(streamId); S(correlationId); S(memoryKind);
	S(graphId);
	SIZE(CUpti_ActivityMemset4);
	/* The kinds' numbers, which both read. */
	printf("kinds %d %d %d %d\n", CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	       CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
	       CUPTI_ACTIVITY_KIND_MEMCPY2);
	return 0;
}
