// SPDX-License-Identifier: BSD-2-Clause
/*
 * The agent with CUDA 12's CUPTI: Debian's libcupti.so.12 (CUDA 12.4,
 * unpacked by tools/fetch-cupti12.sh), the real library, not a stand-in.
 * The program is linked against it, so the agent finds it already mapped
 * as a pip torch's bundled CUPTI would be. It checks that the agent
 *   - takes that CUPTI (API version 22) rather than loading CUDA 13's,
 *     and falls back to cuptiSubscribe, which is all 12.4 has;
 *   - reads a buffer of records as CUDA 12.4 writes them (Kernel9,
 *     Memcpy5, MemcpyPtoP4, Memset4, laid out here with the deprecated
 *     structs of CUDA 13's headers), walked by 12.4's own
 *     cuptiActivityGetNextRecord, field by field.
 * No GPU is needed: the walk and the conversion are plain code.
 * Linked with the agent's objects, like test_agent_logic.
 */
#include <stdlib.h>
#include <string.h>
#include "agent.h"
#include "check.h"
#include <cupti_activity_deprecated.h>

#define CTL rfbpf_gpu_control
#define LOAD(f) __atomic_load_n(&CTL.f, __ATOMIC_ACQUIRE)

TEST(takes_the_mapped_cuda_12_cupti)
{
	CHECK(rf_cupti_load());
	CHECK_EQ_U64(rf_cupti.version, 22);	/* CUDA 12.4 */
	CHECK(strstr(rf_cupti.path, "libcupti.so.12") != NULL);
	CHECK(rf_cupti.Subscribe != NULL);
	CHECK(rf_cupti.Subscribe_v2 == NULL);
	CHECK(rf_cupti.ActivityGetNextRecord != NULL);
}

static const CUpti_ActivityKernel9 kernel = {
	.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	.registersPerThread = 40, .start = 1000, .end = 1700,
	.deviceId = 1, .contextId = 3, .streamId = 13,
	.gridX = 8, .gridY = 2, .gridZ = 1, .blockX = 256, .blockY = 1,
	.blockZ = 1, .staticSharedMemory = 512, .dynamicSharedMemory = 4096,
	.correlationId = 77, .name = "_Z4gemmPfS_", .graphId = 5,
};
static const CUpti_ActivityMemcpy5 copy = {
	.kind = CUPTI_ACTIVITY_KIND_MEMCPY,
	.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
	.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
	.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
	.bytes = 1 << 20, .start = 2000, .end = 2300, .deviceId = 1,
	.contextId = 3, .streamId = 14, .correlationId = 91,
	.runtimeCorrelationId = 78, .graphId = 0,
};
static const CUpti_ActivityMemcpyPtoP4 peer = {
	.kind = CUPTI_ACTIVITY_KIND_MEMCPY2,
	.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP,
	.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
	.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
	.bytes = 4096, .start = 3000, .end = 3100, .deviceId = 0,
	.contextId = 4, .streamId = 15, .correlationId = 79, .graphId = 6,
};
static const CUpti_ActivityMemset4 set = {
	.kind = CUPTI_ACTIVITY_KIND_MEMSET, .value = 0x5a, .bytes = 8192,
	.start = 4000, .end = 4050, .deviceId = 1, .contextId = 3,
	.streamId = 13, .correlationId = 80,
	.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, .graphId = 7,
};

/* The four records back to back, as CUPTI 12.4 fills a buffer. */
static size_t fill(uint8_t *buf)
{
	size_t off = 0;

	memcpy(buf + off, &kernel, sizeof(kernel)), off += sizeof(kernel);
	memcpy(buf + off, &copy, sizeof(copy)), off += sizeof(copy);
	memcpy(buf + off, &peer, sizeof(peer)), off += sizeof(peer);
	memcpy(buf + off, &set, sizeof(set)), off += sizeof(set);
	return off;
}

TEST(reads_cuda_12_records_walked_by_its_cupti)
{
	static _Alignas(8) uint8_t buf[1024];
	size_t len = fill(buf);
	struct rf_gpu_activity a[5];
	CUpti_Activity *rec = NULL;
	int n = 0;

	CHECK(rf_cupti_load());
	while (n < 5 && rf_cupti.ActivityGetNextRecord(buf, len, &rec) ==
	       CUPTI_SUCCESS)
		CHECK_EQ_U64(rf_activity_convert(rec, 100, &a[n++]), 0);
	CHECK_EQ_U64(n, 4);
	if (n != 4)
		return;
	/* The kernel: every field from its CUDA 12 place. */
	CHECK_EQ_U64(a[0].kind, RF_GPU_ACT_KERNEL);
	CHECK_EQ_U64(a[0].correlation_id, 77);
	CHECK_EQ_U64(a[0].start_ns, 900);
	CHECK_EQ_U64(a[0].end_ns, 1600);
	CHECK(a[0].device_id == 1 && a[0].context_id == 3 &&
	      a[0].stream_id == 13);
	CHECK_EQ_U64(a[0].registers_per_thread, 40);
	CHECK(a[0].grid[0] == 8 && a[0].grid[1] == 2 && a[0].grid[2] == 1);
	CHECK(a[0].block[0] == 256 && a[0].block[1] == 1 &&
	      a[0].block[2] == 1);
	CHECK_EQ_U64(a[0].static_shared_bytes, 512);
	CHECK_EQ_U64(a[0].dynamic_shared_bytes, 4096);
	CHECK_STR(a[0].name, "_Z4gemmPfS_");
	CHECK_EQ_U64(a[0].graph_id, 5);
	/* The copy: reported under the runtime call's id. */
	CHECK_EQ_U64(a[1].kind, RF_GPU_ACT_MEMCPY);
	CHECK_EQ_U64(a[1].correlation_id, 78);
	CHECK_EQ_U64(a[1].bytes, 1 << 20);
	CHECK_EQ_U64(a[1].copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
	CHECK_EQ_U64(a[1].src_kind, CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
	CHECK_EQ_U64(a[1].start_ns, 1900);
	CHECK(a[1].stream_id == 14 && a[1].context_id == 3);
	/* The peer copy. */
	CHECK_EQ_U64(a[2].kind, RF_GPU_ACT_MEMCPY);
	CHECK_EQ_U64(a[2].correlation_id, 79);
	CHECK_EQ_U64(a[2].copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
	CHECK(a[2].device_id == 0 && a[2].stream_id == 15 &&
	      a[2].graph_id == 6);
	/* The set. */
	CHECK_EQ_U64(a[3].kind, RF_GPU_ACT_MEMSET);
	CHECK_EQ_U64(a[3].correlation_id, 80);
	CHECK_EQ_U64(a[3].memset_value, 0x5a);
	CHECK_EQ_U64(a[3].bytes, 8192);
	CHECK_EQ_U64(a[3].end_ns, 3950);
	CHECK_EQ_U64(a[3].graph_id, 7);
}

/* Through the agent's completion callback, under a lease: all four are
 * forwarded, none unknown, no buffer cut short. */
TEST(completes_a_cuda_12_buffer)
{
	uint64_t rec = LOAD(records), unknown = LOAD(records_unknown);
	uint64_t cut = LOAD(buffers_cut);
	uint8_t *buf;
	size_t size, max;

	__atomic_store_n(&CTL.lease_until_ns, rf_now_ns() + 60000000000ull,
			 __ATOMIC_RELEASE);
	rfbpf_cupti_buffer_requested(&buf, &size, &max);
	CHECK(buf != NULL);
	if (!buf)
		return;
	rfbpf_cupti_buffer_completed(NULL, 0, buf, size, fill(buf));
	CHECK_EQ_U64(LOAD(records), rec + 4);
	CHECK_EQ_U64(LOAD(records_unknown), unknown);
	CHECK_EQ_U64(LOAD(buffers_cut), cut);
	__atomic_store_n(&CTL.lease_until_ns, 0, __ATOMIC_RELEASE);
}

int main(void)
{
	return check_run_all(__FILE__);
}
