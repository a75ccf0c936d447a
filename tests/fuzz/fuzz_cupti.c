/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The CUPTI agent's own parsing (cupti/): a completed activity buffer of
 * arbitrary records walked by rfbpf_cupti_buffer_completed, each record
 * converted again on its own with an arbitrary clock offset, then a run of
 * API callbacks (the launch nesting rule and the launch records), and
 * RFBPF_SAMPLE's parser. What the agent hands rfbpf's probes must be a
 * record the loader can take: a NUL-terminated name, a known kind.
 *
 * The buffer is walked by the real cuptiActivityGetNextRecord: CUDA 13's
 * libcupti (the toolkit's, linked) or, for inputs flagged CUDA 12,
 * Debian's CUDA 12.4 libcupti.so.12 (opened from CUPTI12_LIB; without
 * it those inputs are skipped, said once). Each kernel record it returns
 * gets a name in the fuzzer's own storage: a record's name is CUPTI's
 * pointer, which the agent trusts, as it must. The rest of CUPTI
 * (rf_cupti; cupti_lib.c is not linked) is stood in for by functions
 * that check the agent keeps CUPTI's rules. The probes (probes.S in the
 * agent) are functions here that check what they get.
 *
 * Input: a flags byte, a dropped-records byte, a 16-bit length and that
 * many bytes of activity buffer, then 16-byte API callbacks; or, with
 * F_HANDSHAKE, 16-byte steps of the handshake instead (see handshake()):
 * control blocks as rfbpf, a stale lease or a hostile job may leave
 * them, and CUPTI's answers, each followed by one tick of the agent's
 * loop.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include <cupti_activity_deprecated.h>	/* CUDA 12's record versions */

enum {
	F_CUDA12	= 1u << 0,	/* CUDA 12's record sizes */
	F_LEASE		= 1u << 1,	/* a tracer holds the lease */
	F_HANDSHAKE	= 1u << 2,	/* the tail is handshake steps */
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

/* The real iterator of the input's CUDA version: 13's is linked; 12's is
 * opened once, NULL when it is not there. */
typedef CUptiResult (*next_record_fn)(uint8_t *, size_t, CUpti_Activity **);

static next_record_fn real_next_record(void)
{
	static next_record_fn next12;
	static bool tried;
	void *h;

	if (!cuda12)
		return cuptiActivityGetNextRecord;
	if (!tried) {
		tried = true;
		h = dlopen(CUPTI12_LIB, RTLD_NOW | RTLD_LOCAL);
		if (h)
			*(void **)&next12 = dlsym(h,
						  "cuptiActivityGetNextRecord");
		if (!next12)
			fprintf(stderr, "fuzz_cupti: no CUDA 12 CUPTI at %s "
				"(make deps unpacks it): CUDA 12 inputs "
				"skipped\n", CUPTI12_LIB);
	}
	return next12;
}

/* cuptiActivityGetNextRecord, CUPTI's own; a kernel record's name is made
 * a string CUPTI keeps, as it is in a real buffer. */
static CUptiResult CUPTIAPI next_record(uint8_t *buf, size_t valid,
					CUpti_Activity **rec)
{
	CUptiResult r = real_next_record()(buf, valid, rec);

	if (r == CUPTI_SUCCESS &&
	    ((*rec)->kind == CUPTI_ACTIVITY_KIND_KERNEL ||
	     (*rec)->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) {
		/* Kernel9 (12) and Kernel10 (13) keep name in one place
		 * (activity.c checks it at build time). */
		CUpti_ActivityKernel10 *k = (void *)*rec;
		uint64_t v;

		memcpy(&v, &k->name, sizeof(v));
		k->name = cupti_string(v);
	}
	return r;
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

void rf_probe_gpu_sync_record(const struct rf_gpu_activity *a)
{
	if (a->size != sizeof(*a) || a->kind != RF_GPU_ACT_SYNC)
		abort();
}

/* No libcuda in the fuzzer's process: never called. */
void rf_probe_gpu_device(const struct rf_gpu_device *d)
{
	(void)d;
	abort();
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

/*
 * The handshake. CUPTI's answers come from the step at hand; its rules
 * are checked as the agent calls it: one subscriber (never two
 * subscriptions, never one after the agent yielded), and nothing
 * process-wide (callbacks, kinds, buffers, clock, flushes) touched
 * without the subscription.
 */
static struct {
	bool subscribed;
	CUptiResult subscribe, other;	/* what the next calls return */
	uint64_t ts;			/* CUPTI's clock */
} cupti;

#define SUBSCRIBER ((CUpti_SubscriberHandle)(uintptr_t)0x5b)

static CUptiResult process_wide(void)
{
	if (!cupti.subscribed)
		abort();	/* reaches into another tool's CUPTI */
	return cupti.other;
}

static CUptiResult CUPTIAPI subscribe(CUpti_SubscriberHandle *sub,
				      CUpti_CallbackFunc cb, void *ud)
{
	(void)cb, (void)ud;
	if (cupti.subscribed ||
	    __atomic_load_n(&rfbpf_gpu_control.yielded, __ATOMIC_ACQUIRE))
		abort();
	*sub = NULL;
	if (cupti.subscribe != CUPTI_SUCCESS)
		return cupti.subscribe;
	cupti.subscribed = true;
	*sub = SUBSCRIBER;
	return CUPTI_SUCCESS;
}

static CUptiResult CUPTIAPI subscribe_v2(CUpti_SubscriberHandle *sub,
					 CUpti_CallbackFunc cb, void *ud,
					 CUpti_SubscriberParams *params)
{
	CUptiResult r = subscribe(sub, cb, ud);

	/* CUPTI names the holder it refused: the input says who. */
	if (r != CUPTI_SUCCESS && params && params->oldSubscriberName &&
	    params->oldSubscriberSize)
		snprintf(params->oldSubscriberName, params->oldSubscriberSize,
			 "%s", strings);
	return r;
}

static CUptiResult CUPTIAPI unsubscribe(CUpti_SubscriberHandle sub)
{
	if (!cupti.subscribed || sub != SUBSCRIBER)
		abort();
	cupti.subscribed = false;
	return CUPTI_SUCCESS;
}

static CUptiResult CUPTIAPI enable_callback(uint32_t on,
					    CUpti_SubscriberHandle sub,
					    CUpti_CallbackDomain d,
					    CUpti_CallbackId cbid)
{
	(void)on, (void)d, (void)cbid;
	if (sub != SUBSCRIBER)
		abort();
	return process_wide();
}

static CUptiResult CUPTIAPI activity_kind(CUpti_ActivityKind kind)
{
	(void)kind;
	return process_wide();
}

static CUptiResult CUPTIAPI register_callbacks(
	CUpti_BuffersCallbackRequestFunc req,
	CUpti_BuffersCallbackCompleteFunc done)
{
	(void)req, (void)done;
	return process_wide();
}

static CUptiResult CUPTIAPI register_timestamp(
	CUpti_TimestampCallbackFunc fn)
{
	(void)fn;
	return process_wide();
}

static CUptiResult CUPTIAPI flush_all(uint32_t flag)
{
	(void)flag;
	return process_wide();
}

static CUptiResult CUPTIAPI get_timestamp(uint64_t *ts)
{
	*ts = cupti.ts++;
	return cupti.other;
}

/* CUPTI's answers as the input picks them. */
static CUptiResult answer(uint8_t b)
{
	static const CUptiResult r[] = {
		CUPTI_SUCCESS, CUPTI_SUCCESS, CUPTI_SUCCESS,
		CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
		CUPTI_ERROR_NOT_INITIALIZED, CUPTI_ERROR_UNKNOWN,
	};

	return r[b % (sizeof(r) / sizeof(r[0]))];
}

/*
 * 16 bytes a step: what rfbpf (or a stale or hostile writer) left in the
 * control block, and what CUPTI answers; then one tick of the agent.
 *   [0] bits 0-1: the lease: none, expired, held, or the u64 at [8]
 *       bit 2: a yield request; bit 3: a flush request (the next number);
 *       bit 4: the flush request is the u64 at [8] instead
 *   [1] Subscribe's answer, [2] every other call's
 *   [3] bit 0: CUDA 13's cuptiSubscribe_v2 is there
 *   [4..7] the flush period in ms (the agent's own setting, 1 ms..1 h)
 */
static void handshake(const uint8_t *p, size_t len)
{
	struct rf_gpu_control *c = &rfbpf_gpu_control;
	bool on = false, torch_done = true;	/* no libtorch here */
	uint64_t last_flush = 0;

	for (; len >= 16; p += 16, len -= 16) {
		uint64_t word, period, sleep_ns;
		uint32_t ms;
		int lease = p[0] & 3;
		bool was_yielded = c->yielded;

		memcpy(&word, p + 8, 8);
		memcpy(&ms, p + 4, 4);
		c->lease_until_ns = lease == 0 ? 0 : lease == 1 ? 1 :
				    lease == 2 ? UINT64_MAX : word;
		if (p[0] & 4)
			c->yield_request = 1;
		if (p[0] & 8)
			c->flush_request++;
		if (p[0] & 16)
			c->flush_request = word;
		cupti.subscribe = answer(p[1]);
		cupti.other = answer(p[2]);
		rf_cupti.Subscribe_v2 = p[3] & 1 ? subscribe_v2 : NULL;
		period = (1 + ms % 3600000u) * 1000000ull;
		c->flush_period_ns = period;
		sleep_ns = rf_agent_tick(&on, &last_flush, &torch_done);
		/* The request is answered within the tick that saw it. */
		if (c->flush_done != c->flush_request ||
		    !sleep_ns || sleep_ns > period)
			abort();
		if (lease != 3 && c->lease_seen != (lease == 2))
			abort();
		/* No lease, or yielded: CUPTI is free for other tools. */
		if ((!c->lease_seen || c->yielded) && cupti.subscribed)
			abort();
		if (c->yielded && (c->activity_enabled || !c->yield_request))
			abort();
		if (was_yielded && !c->yielded)
			abort();
	}
	/* The lease runs out: the agent gives everything back. */
	c->lease_until_ns = 0;
	rf_agent_tick(&on, &last_flush, &torch_done);
	if (cupti.subscribed || c->activity_enabled)
		abort();
}

/* A fresh job: the control block as the agent starts it, no history. */
static void new_agent(void)
{
	rf_agent_forget();
	memset(&rfbpf_gpu_control, 0, sizeof(rfbpf_gpu_control));
	rfbpf_gpu_control.magic = RF_GPU_CONTROL_MAGIC;
	rfbpf_gpu_control.abi_version = RF_GPU_ABI_VERSION;
	rfbpf_gpu_control.flush_period_ns = 1000000000ull;
	memset(&cupti, 0, sizeof(cupti));
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
	if (!real_next_record()) {
		free(strings);
		return 0;		/* a CUDA 12 input, no CUDA 12 CUPTI */
	}
	rf_cupti = (struct rf_cupti){
		.Subscribe = subscribe,
		.Unsubscribe = unsubscribe,
		.EnableCallback = enable_callback,
		.ActivityEnable = activity_kind,
		.ActivityDisable = activity_kind,
		.ActivityRegisterCallbacks = register_callbacks,
		.ActivityRegisterTimestampCallback = register_timestamp,
		.ActivityFlushAll = flush_all,
		.ActivityGetNextRecord = next_record,
		.ActivityGetNumDroppedRecords = dropped_records,
		.GetTimestamp = get_timestamp,
		.GetResultString = result_string,
		.version = cuda12 ? RF_CUPTI12_VERSION_MAX :
				    RF_CUPTI_VERSION_MIN,
	};
	new_agent();
	rfbpf_gpu_control.lease_until_ns = data[0] & F_LEASE ? UINT64_MAX : 0;
	buf_len = data[2] | (size_t)data[3] << 8;
	if (buf_len > size - 4)
		buf_len = size - 4;
	complete_buffer(data + 4, buf_len);
	convert_each(data + 4, buf_len);
	if (data[0] & F_HANDSHAKE)
		handshake(data + 4 + buf_len, size - 4 - buf_len);
	else
		api_calls(data + 4 + buf_len, size - 4 - buf_len);
	rf_parse_sample(strings + 4 + buf_len, &p);
	free(strings);
	return 0;
}
