/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The CUPTI agent's own parsing (cupti/): a completed activity buffer of
 * arbitrary records walked by rfbpf_cupti_buffer_completed, each record
 * converted again on its own with an arbitrary clock offset, then a run of
 * API callbacks (the launch nesting rule and the launch records), and
 * RFBPF_SAMPLE's parser. What the agent hands rfbpf's probes must be a
 * record the loader can take: a NUL-terminated name, a known kind.
 *
 * CUPTI is stood in for here, as tests/gpu/sim_libcupti.c does for the
 * agent's tests: rf_cupti (cupti_lib.c is not linked) walks the buffer
 * as cuptiActivityGetNextRecord does, one record after the other by the
 * size of its kind (CUDA 13's or 12's layouts), and gives kernel records
 * names in its own storage (a record's name is CUPTI's pointer, which
 * the agent trusts, as it must). The probes (probes.S in the agent) are
 * functions here that check what they get.
 *
 * Input: a flags byte, a dropped-records byte, a 16-bit length and that
 * many bytes of activity buffer, then 16-byte API callbacks.
 */
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include <cupti_activity_deprecated.h>	/* CUDA 12's record versions */

enum {
	F_CUDA12	= 1u << 0,	/* CUDA 12's record sizes */
	F_LEASE		= 1u << 1,	/* a tracer holds the lease */
};

struct rf_cupti rf_cupti;

/* The input, NUL-terminated: where kernel names and API names point. */
static char *strings;
static size_t strings_len;
static bool cuda12;
static uint8_t dropped;

bool rf_cupti_load(void)
{
	return true;
}

/* A pointer as CUPTI would have it: NULL, or a string it keeps. */
static const char *cupti_string(uint64_t v)
{
	return v ? strings + v % strings_len : NULL;
}

/* The size CUPTI writes a record of this kind in, 0 for one it cannot
 * read. */
static size_t record_size(CUpti_ActivityKind kind)
{
	switch (kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		return cuda12 ? sizeof(CUpti_ActivityKernel9) :
				sizeof(CUpti_ActivityKernel10);
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		return cuda12 ? sizeof(CUpti_ActivityMemcpy5) :
				sizeof(CUpti_ActivityMemcpy6);
	case CUPTI_ACTIVITY_KIND_MEMSET:
		return sizeof(CUpti_ActivityMemset4);
	case CUPTI_ACTIVITY_KIND_MEMCPY2:
		return sizeof(CUpti_ActivityMemcpyPtoP4);
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER:
		return sizeof(CUpti_ActivityAPI);
	default:
		return 0;
	}
}

/* cuptiActivityGetNextRecord: *rec NULL starts the walk. A kernel's
 * name is made a string CUPTI keeps, as it is in a real buffer. */
static CUptiResult CUPTIAPI next_record(uint8_t *buf, size_t valid,
					CUpti_Activity **rec)
{
	size_t at = 0, size;
	CUpti_Activity *r;

	if (*rec)
		at = (size_t)((uint8_t *)*rec - buf) +
		     record_size((*rec)->kind);
	if (at >= valid || valid - at < sizeof(CUpti_Activity))
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	r = (CUpti_Activity *)(buf + at);
	size = record_size(r->kind);
	if (!size)
		return CUPTI_ERROR_INVALID_KIND;
	if (valid - at < size)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	if (r->kind == CUPTI_ACTIVITY_KIND_KERNEL ||
	    r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
		CUpti_ActivityKernel10 *k = (void *)r;
		uint64_t v;

		memcpy(&v, &k->name, sizeof(v));
		k->name = cupti_string(v);
	}
	*rec = r;
	return CUPTI_SUCCESS;
}

static CUptiResult CUPTIAPI dropped_records(CUcontext ctx, uint32_t stream,
					    size_t *n)
{
	(void)ctx, (void)stream;
	*n = dropped;
	return CUPTI_SUCCESS;
}

static CUptiResult CUPTIAPI result_string(CUptiResult r, const char **s)
{
	(void)r;
	*s = "fuzz";
	return CUPTI_SUCCESS;
}

/* The probes: what BPF would read from their argument. */
void rf_probe_gpu_activity(const struct rf_gpu_activity *a)
{
	if (a->size != sizeof(*a) || a->kind < RF_GPU_ACT_KERNEL ||
	    a->kind > RF_GPU_ACT_MEMSET || !memchr(a->name, 0, sizeof(a->name)))
		abort();
}

void rf_probe_gpu_launch(const struct rf_gpu_launch *l)
{
	if (l->size != sizeof(*l) || !memchr(l->api_name, 0,
					     sizeof(l->api_name)))
		abort();
}

void rf_probe_gpu_sync(const struct rf_gpu_launch *sync)
{
	rf_probe_gpu_launch(sync);
}

/* RFBPF_SAMPLE's op callbacks (torch_activation.c): not run here. */
void rf_probe_op_start(void)
{
}

void rf_probe_op_end(void)
{
}

/* The activity buffer, in a block of exactly its size so that ASan sees
 * a read past it. The agent's own buffer is requested and given back, so
 * its count of buffers out stays right. */
static void complete_buffer(const uint8_t *p, size_t len)
{
	uint8_t *b, *mine = malloc(len ? len : 1);
	size_t size, max;

	if (!mine)
		abort();
	memcpy(mine, p, len);
	rfbpf_cupti_buffer_requested(&b, &size, &max);
	free(b);
	rfbpf_cupti_buffer_completed(NULL, 0, mine, len, len);
}

/* Each record again, converted with an offset taken from its bytes. */
static void convert_each(const uint8_t *p, size_t len)
{
	CUpti_Activity *rec = NULL;
	struct rf_gpu_activity a;
	uint8_t *copy = malloc(len ? len : 1);

	if (!copy)
		abort();
	memcpy(copy, p, len);
	while (next_record(copy, len, &rec) == CUPTI_SUCCESS) {
		int64_t off;

		memcpy(&off, (uint8_t *)rec + 8, sizeof(off));
		if (!rf_activity_convert(rec, off, &a))
			rf_probe_gpu_activity(&a);
	}
	free(copy);
}

/* 16 bytes a call: domain, site, cbid, correlation id, return value. */
static void api_calls(const uint8_t *p, size_t len)
{
	rf_api_new_generation();	/* this thread's nesting restarts */
	for (; len >= 16; p += 16, len -= 16) {
		uint32_t cbid, corr, name;
		int ret;
		CUpti_CallbackData cd = { 0 };

		memcpy(&cbid, p + 2, 4);
		memcpy(&corr, p + 6, 4);
		memcpy(&ret, p + 10, 4);
		name = p[14] | (uint32_t)p[15] << 8;
		cd.callbackSite = p[1] & 1 ? CUPTI_API_EXIT : CUPTI_API_ENTER;
		cd.correlationId = corr;
		cd.functionName = cupti_string(name);
		cd.functionReturnValue = p[1] & 2 ? &ret : NULL;
		rfbpf_cupti_api_callback(NULL, (CUpti_CallbackDomain)(p[0] % 8),
					 cbid, p[1] & 4 ? NULL : &cd);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t buf_len;
	double p;

	if (size < 4)
		return 0;
	strings = malloc(size + 1);
	if (!strings)
		abort();
	memcpy(strings, data, size);
	strings[size] = 0;
	strings_len = size + 1;
	cuda12 = data[0] & F_CUDA12;
	dropped = data[1];
	rf_cupti = (struct rf_cupti){
		.ActivityGetNextRecord = next_record,
		.ActivityGetNumDroppedRecords = dropped_records,
		.GetResultString = result_string,
		.version = cuda12 ? RF_CUPTI12_VERSION_MAX :
				    RF_CUPTI_VERSION_MIN,
	};
	rfbpf_gpu_control.lease_until_ns = data[0] & F_LEASE ? UINT64_MAX : 0;
	buf_len = data[2] | (size_t)data[3] << 8;
	if (buf_len > size - 4)
		buf_len = size - 4;
	complete_buffer(data + 4, buf_len);
	convert_each(data + 4, buf_len);
	api_calls(data + 4 + buf_len, size - 4 - buf_len);
	rf_parse_sample(strings + 4 + buf_len, &p);
	free(strings);
	return 0;
}
