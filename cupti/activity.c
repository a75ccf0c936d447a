// SPDX-License-Identifier: BSD-2-Clause
/*
 * Activity records -> rfbpf_probe_gpu_activity(), and the buffers CUPTI
 * fills them in.
 *
 * CUPTI asks for empty buffers (bufferRequested) and hands full ones back
 * (bufferCompleted) on its own threads, after a flush or when one fills.
 * We walk a completed buffer with cuptiActivityGetNextRecord, one record
 * at a time, translate each kernel, memcpy and memset record into the
 * fixed struct rf_gpu_activity of bpf/rfbpf_gpu.h (so BPF never needs
 * CUPTI's versioned layouts) and call the probe once per record. The
 * lease is read once per buffer: with no tracer the records that still
 * arrive (e.g. the forced flush after the lease ran out) are only counted.
 *
 * The record structs are CUDA 13's (Kernel10, Memcpy6, MemcpyPtoP4,
 * Memset4, Synchronization2). CUDA 12's CUPTI writes Kernel9 and Memcpy5
 * in their place (12.4's headers say so; MemcpyPtoP4 and Memset4 are the
 * same), older ones the first Synchronization, and the
 * newer versions only append: every field read here sits at the same
 * offset, with the same size, in both, which the checks below hold the
 * headers to. So one reading serves both, and cuptiActivityGetNextRecord
 * (the job's CUPTI's own) steps by the size its version wrote.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "activity.h"
#include "clock.h"
#include "control.h"
#include "probes.h"
#include <cupti_activity_deprecated.h>	/* CUDA 12's record versions */

/* Field f of CUDA 13's record `now` is where CUDA 12's `was` has it. */
#define SAME_FIELD(was, now, f)						\
	_Static_assert(offsetof(was, f) == offsetof(now, f) &&		\
		       sizeof(((was *)0)->f) == sizeof(((now *)0)->f),	\
		       #f " moved between " #was " and " #now)
#define K(f) SAME_FIELD(CUpti_ActivityKernel9, CUpti_ActivityKernel10, f)
K(kind); K(correlationId); K(start); K(end); K(deviceId); K(contextId);
K(streamId); K(registersPerThread); K(gridX); K(gridY); K(gridZ);
K(blockX); K(blockY); K(blockZ); K(staticSharedMemory);
K(dynamicSharedMemory); K(name); K(graphId); K(graphNodeId);
#undef K
#define M(f) SAME_FIELD(CUpti_ActivityMemcpy5, CUpti_ActivityMemcpy6, f)
M(kind); M(copyKind); M(srcKind); M(dstKind); M(bytes); M(start); M(end);
M(deviceId); M(contextId); M(streamId); M(correlationId);
M(runtimeCorrelationId); M(graphId); M(graphNodeId);
#undef M
#define S(f) SAME_FIELD(CUpti_ActivitySynchronization,			\
			CUpti_ActivitySynchronization2, f)
S(kind); S(type); S(start); S(end); S(correlationId); S(contextId);
S(streamId); S(cudaEventId);
#undef S

static void convert_kernel(const CUpti_ActivityKernel10 *k, int64_t off,
			   struct rf_gpu_activity *a)
{
	a->kind = RF_GPU_ACT_KERNEL;
	a->correlation_id = k->correlationId;
	a->start_ns = rf_clock_to_mono(k->start, off);
	a->end_ns = rf_clock_to_mono(k->end, off);
	a->device_id = k->deviceId;
	a->context_id = k->contextId;
	a->stream_id = k->streamId;
	a->registers_per_thread = k->registersPerThread;
	a->grid[0] = k->gridX;
	a->grid[1] = k->gridY;
	a->grid[2] = k->gridZ;
	a->block[0] = k->blockX;
	a->block[1] = k->blockY;
	a->block[2] = k->blockZ;
	a->static_shared_bytes = (uint32_t)k->staticSharedMemory;
	a->dynamic_shared_bytes = (uint32_t)k->dynamicSharedMemory;
	a->graph_id = k->graphId;
	a->graph_node_id = k->graphNodeId;
	/* Copied in: BPF must not chase a pointer into pages a uprobe may
	 * not be able to fault in. */
	if (k->name) {
		size_t n = strlen(k->name);

		a->name_len = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
		memcpy(a->name, k->name, n < sizeof(a->name) ? n :
		       sizeof(a->name) - 1);
		a->name_addr = (uintptr_t)k->name;	/* for a cut one */
	}
}

static void convert_memcpy(const CUpti_ActivityMemcpy6 *m, int64_t off,
			   struct rf_gpu_activity *a)
{
	a->kind = RF_GPU_ACT_MEMCPY;
	/* correlationId is the driver call's; the runtime call's, which is
	 * the one callbacks.c reports for a runtime copy, is separate. */
	a->correlation_id = m->runtimeCorrelationId ? m->runtimeCorrelationId
						    : m->correlationId;
	a->start_ns = rf_clock_to_mono(m->start, off);
	a->end_ns = rf_clock_to_mono(m->end, off);
	a->device_id = m->deviceId;
	a->context_id = m->contextId;
	a->stream_id = m->streamId;
	a->bytes = m->bytes;
	a->copy_kind = m->copyKind;
	a->src_kind = m->srcKind;
	a->dst_kind = m->dstKind;
	a->graph_id = m->graphId;
	a->graph_node_id = m->graphNodeId;
}

static void convert_memset(const CUpti_ActivityMemset4 *s, int64_t off,
			   struct rf_gpu_activity *a)
{
	a->kind = RF_GPU_ACT_MEMSET;
	a->correlation_id = s->correlationId;
	a->start_ns = rf_clock_to_mono(s->start, off);
	a->end_ns = rf_clock_to_mono(s->end, off);
	a->device_id = s->deviceId;
	a->context_id = s->contextId;
	a->stream_id = s->streamId;
	a->bytes = s->bytes;
	a->dst_kind = (uint8_t)s->memoryKind;
	a->memset_value = s->value;
	a->graph_id = s->graphId;
	a->graph_node_id = s->graphNodeId;
}

/* A copy between two devices (CUPTI_ACTIVITY_KIND_MEMCPY2): drawn on the
 * device and stream that ran it, as Kineto draws it ("Memcpy PtoP"). */
static void convert_peer_copy(const CUpti_ActivityMemcpyPtoP4 *m,
			      int64_t off, struct rf_gpu_activity *a)
{
	a->kind = RF_GPU_ACT_MEMCPY;
	a->correlation_id = m->correlationId;
	a->start_ns = rf_clock_to_mono(m->start, off);
	a->end_ns = rf_clock_to_mono(m->end, off);
	a->device_id = m->deviceId;
	a->context_id = m->contextId;
	a->stream_id = m->streamId;
	a->bytes = m->bytes;
	a->copy_kind = m->copyKind;
	a->src_kind = m->srcKind;
	a->dst_kind = m->dstKind;
	a->graph_id = m->graphId;
	a->graph_node_id = m->graphNodeId;
}

/* A wait in a sync call (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION), timed by
 * CUPTI. It has no device: the loader finds it from the context. */
static void convert_sync(const CUpti_ActivitySynchronization *s,
			 int64_t off, struct rf_gpu_activity *a)
{
	a->kind = RF_GPU_ACT_SYNC;
	a->correlation_id = s->correlationId;
	a->start_ns = rf_clock_to_mono(s->start, off);
	a->end_ns = rf_clock_to_mono(s->end, off);
	a->context_id = s->contextId;
	a->stream_id = s->streamId;
	a->sync_type = (uint32_t)s->type;
	a->cuda_event_id = s->cudaEventId;
}

/* Pure (see agent.h). A record with a 0 start or end (CUPTI leaves them
 * so when it could not time the work) would be drawn at the epoch. */
int rf_activity_convert(const CUpti_Activity *rec, int64_t clock_offset,
			struct rf_gpu_activity *out)
{
	*out = (struct rf_gpu_activity){
		.abi_version = RF_GPU_ABI_VERSION,
		.size = sizeof(*out),
	};
	switch (rec->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		convert_kernel((const void *)rec, clock_offset, out);
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		convert_memcpy((const void *)rec, clock_offset, out);
		break;
	case CUPTI_ACTIVITY_KIND_MEMSET:
		convert_memset((const void *)rec, clock_offset, out);
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY2:
		convert_peer_copy((const void *)rec, clock_offset, out);
		break;
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		convert_sync((const void *)rec, clock_offset, out);
		break;
	default:
		return RF_ACT_UNKNOWN;
	}
	return out->start_ns && out->end_ns ? 0 : RF_ACT_NO_TIME;
}

void rf_activity_forward(const CUpti_Activity *rec, bool traced)
{
	struct rf_gpu_activity a;
	int r;

	/* Untraced records are only counted: nothing to convert for. */
	if (!traced) {
		rf_count(&rfbpf_gpu_control.records_untraced, 1);
		return;
	}
	r = rf_activity_convert(rec, rf_clock_offset(), &a);
	if (r) {
		rf_count(r == RF_ACT_NO_TIME ?
			 &rfbpf_gpu_control.records_no_time :
			 &rfbpf_gpu_control.records_unknown, 1);
		return;
	}
	/* A sync has its own probe: a tracer that predates syncs does not
	 * attach it, and so never reads a kind it does not know. */
	if (a.kind == RF_GPU_ACT_SYNC)
		rf_probe_gpu_sync_record(&a);
	else
		rf_probe_gpu_activity(&a);
	rf_count(&rfbpf_gpu_control.records, 1);
}

/* Buffers handed to CUPTI and not yet back. */
static unsigned buffers_out;

unsigned rf_activity_buffers_out(void)
{
	return __atomic_load_n(&buffers_out, __ATOMIC_ACQUIRE);
}

void CUPTIAPI rfbpf_cupti_buffer_requested(uint8_t **buffer, size_t *size,
					   size_t *max_records)
{
	static int once, capped;
	uint8_t *b = NULL;

	*max_records = 0;	/* as many as fit */
	/* A cap, as Kineto has: a job whose GPU outruns the flushes must
	 * not take the host's memory; CUPTI counts what it then drops. */
	if (__atomic_add_fetch(&buffers_out, 1, __ATOMIC_ACQ_REL) >
	    RF_ACTIVITY_BUFFERS_MAX) {
		__atomic_sub_fetch(&buffers_out, 1, __ATOMIC_ACQ_REL);
		rf_count(&rfbpf_gpu_control.buffers_refused, 1);
		rf_warn_once(&capped, "%u activity buffers of %u MiB already "
			     "out: CUPTI drops records until one comes back",
			     RF_ACTIVITY_BUFFERS_MAX,
			     RF_ACTIVITY_BUFFER_SIZE >> 20);
		*buffer = NULL;
		*size = 0;
		return;
	}
	/* CUPTI wants 8-byte alignment; malloc gives 16. */
	b = malloc(RF_ACTIVITY_BUFFER_SIZE);
	if (!b) {
		__atomic_sub_fetch(&buffers_out, 1, __ATOMIC_ACQ_REL);
		rf_warn_once(&once, "no memory for an activity buffer: "
			     "CUPTI will drop records");
	}
	*buffer = b;
	*size = b ? RF_ACTIVITY_BUFFER_SIZE : 0;
}

void CUPTIAPI rfbpf_cupti_buffer_completed(CUcontext ctx, uint32_t stream_id,
					   uint8_t *buffer, size_t size,
					   size_t valid_size)
{
	bool traced = rf_lease_active(0);
	CUpti_Activity *rec = NULL;
	size_t dropped = 0;

	(void)size;
	/* Only the CUPTI that was loaded completes buffers; never walk one
	 * without it. */
	while (buffer && valid_size && rf_cupti_load()) {
		CUptiResult r = rf_cupti.ActivityGetNextRecord(buffer,
							       valid_size, &rec);
		static int once;

		if (r == CUPTI_ERROR_MAX_LIMIT_REACHED)
			break;
		if (r != CUPTI_SUCCESS) {
			/* INVALID_KIND: a record CUPTI cannot read. Its
			 * iterator does not move past one (CUPTI 13.0, tried
			 * here), so the rest of the buffer is lost: counted. */
			rf_cupti_failed(r, "cuptiActivityGetNextRecord", &once);
			rf_count(&rfbpf_gpu_control.buffers_cut, 1);
			break;
		}
		rf_activity_forward(rec, traced);
	}
	if (rf_cupti_load() &&
	    RF_CUPTI_CHECK(rf_cupti.ActivityGetNumDroppedRecords(ctx, stream_id,
							     &dropped)) &&
	    dropped)
		rf_count(&rfbpf_gpu_control.records_dropped, dropped);
	if (buffer)
		__atomic_sub_fetch(&buffers_out, 1, __ATOMIC_ACQ_REL);
	free(buffer);
}

static const CUpti_ActivityKind kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMSET,
	CUPTI_ACTIVITY_KIND_MEMCPY2,	/* peer-to-peer copies */
};
#define NR_KINDS (sizeof(kinds) / sizeof(kinds[0]))
/* Kinds that add to the trace but that the GPU work does not need: one
 * a CUPTI refuses (too old, or not on this device) is left off, and the
 * rest goes on without it. */
static const CUpti_ActivityKind extra_kinds[] = {
	CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,	/* waits in sync calls */
};
#define NR_EXTRA (sizeof(extra_kinds) / sizeof(extra_kinds[0]))
static bool extra_on[NR_EXTRA];

static void set_extra_kinds(bool on)
{
	for (size_t i = 0; i < NR_EXTRA; i++) {
		if (on)	/* no RF_CUPTI_CHECK: a refusal is no error */
			extra_on[i] = rf_cupti.ActivityEnable(extra_kinds[i]) ==
				      CUPTI_SUCCESS;
		else if (extra_on[i])
			RF_CUPTI_CHECK(rf_cupti.ActivityDisable(
				extra_kinds[i]));
		extra_on[i] &= on;
	}
}

/* Called by the agent's thread only. On: every kind or none (a partial
 * set is rolled back). Off: flush first so buffers in flight come back
 * before the kinds go away. */
bool rf_activity_set_enabled(bool on)
{
	size_t n = 0;

	if (on) {
		rf_count(&rfbpf_gpu_control.activity_starts, 1);
		while (n < NR_KINDS && RF_CUPTI_CHECK(rf_cupti.ActivityEnable(kinds[n])))
			n++;
		if (n == NR_KINDS) {
			set_extra_kinds(true);
			__atomic_store_n(&rfbpf_gpu_control.activity_enabled,
					 1, __ATOMIC_RELEASE);
			return true;
		}
	} else {
		RF_CUPTI_CHECK(rf_cupti.ActivityFlushAll(
			CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
		set_extra_kinds(false);
		n = NR_KINDS;
	}
	while (n--)
		RF_CUPTI_CHECK(rf_cupti.ActivityDisable(kinds[n]));
	__atomic_store_n(&rfbpf_gpu_control.activity_enabled, 0,
			 __ATOMIC_RELEASE);
	return false;
}
