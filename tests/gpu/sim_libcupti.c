// SPDX-License-Identifier: BSD-2-Clause
/*
 * A stand-in libcupti.so.13 for tests: the calls the agent makes, with
 * the process-wide rules the CUPTI headers document rather than the
 * agent's own assumptions:
 *   - one subscriber per process: a second cuptiSubscribe fails with
 *     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, and
 *     cuptiSubscribe_v2 names the holder;
 *   - activity kinds, the buffer callbacks and the timestamp callback
 *     belong to the process, whoever set them (any caller can change
 *     them);
 *   - callbacks are enabled on a subscriber handle, which must be valid;
 *   - a library torn down at exit: CUPTI is C++, and the destructors of
 *     its statics are registered when it is loaded, so exit() runs them
 *     before any handler registered earlier. The stand-in registers its
 *     teardown at load the same way, and a call after it aborts, naming
 *     itself: a tool whose exit work runs after CUPTI's would crash in
 *     the real one. With SIM_CUPTI_EXIT_CHECK=1 the teardown also fails
 *     the process (exit 3) if a subscriber or kind is still held then.
 *   - activity buffers: once a kind is on, CUPTI asks the registered
 *     request callback for a buffer and holds it; a forced flush hands
 *     it to the completion callback registered *then* (another tool's,
 *     if it has re-registered since), as CUPTI's one set of callbacks
 *     does.
 *   - launches: the stand-in libcudart's cudaLaunchKernel calls
 *     sim_cupti_launch(), which does what CUPTI does for one: the
 *     subscriber's runtime API callbacks (ENTER, EXIT) if it enabled
 *     that cbid, and a CUpti_ActivityKernel10 record in the held buffer
 *     if a kernel kind is on, stamped by the timestamp callback if one
 *     is registered, else by cuptiGetTimestamp's clock. A flush hands
 *     a buffer with records to the completion callback, and
 *     cuptiActivityGetNextRecord walks it. Its cudaStreamSynchronize
 *     calls sim_cupti_stream_sync(): the callbacks around a wait, and
 *     a synchronization record if that kind is on. Its cudaMemcpyAsync
 *     and cudaMemsetAsync call sim_cupti_copy() and sim_cupti_set(): the
 *     runtime call's callbacks around the driver call's, and a copy or
 *     set record with the ids CUDA 13's CUPTI gives them.
 * No GPU: a kernel's record says it ran for the time the launch asked,
 * starting as it was launched. The sim_cupti_* functions let a test
 * play another tool (Kineto) and read the process-wide state;
 * SIM_CUPTI_VERSION sets what cuptiGetVersion reports and
 * SIM_CUPTI_DROPPED how many records cuptiActivityGetNumDroppedRecords
 * says were dropped (once).
 * Built with SIM_CUDA12 it plays CUDA 12's CUPTI as a whole: soname
 * libcupti.so.12, version 22 (12.4) unless SIM_CUPTI_VERSION says
 * otherwise, and no cuptiSubscribe_v2 (13.0 added it), so another
 * subscriber cannot be named.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <time.h>
#include <cupti.h>

#define EXPORT __attribute__((visibility("default")))

/* The records of the CUPTI played that differ (13 appended to 12's). */
#ifdef SIM_CUDA12
#include <cupti_activity_deprecated.h>
typedef CUpti_ActivitySynchronization sim_sync_record;
typedef CUpti_ActivityMemcpy5 sim_copy_record;
#else
typedef CUpti_ActivitySynchronization2 sim_sync_record;
typedef CUpti_ActivityMemcpy6 sim_copy_record;
#endif

struct CUpti_Subscriber_st {
	char name[64];
	bool live;
	CUpti_CallbackFunc fn;
	void *data;
};

static struct CUpti_Subscriber_st subscribers[4];
static CUpti_SubscriberHandle holder;
static uint64_t kinds;			/* bit per CUpti_ActivityKind < 64 */
static CUpti_TimestampCallbackFunc timestamp_fn;
static CUpti_BuffersCallbackRequestFunc requested_fn;
static CUpti_BuffersCallbackCompleteFunc completed_fn;
static unsigned domains_enabled;	/* cuptiEnableDomain calls, any */
static unsigned callbacks_enabled;
static bool torn_down;
static uint8_t *held;			/* the buffer CUPTI fills, if any */
static size_t held_size, held_used;
/* held and held_used: launches fill on the job's threads, flushes take
 * the buffer on the agent's. */
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static bool runtime_domain;		/* every runtime cbid enabled */
static uint8_t runtime_cbids[1024 / 8];	/* or these, one bit each */
static uint8_t driver_cbids[1024 / 8];	/* driver ones, one bit each */

static void dead_call(const char *fn)
{
	fprintf(stderr, "sim libcupti: %s called after CUPTI's teardown at "
		"exit\n", fn);
	abort();
}
#define ALIVE() do { if (torn_down) dead_call(__func__); } while (0)

static void teardown(void)
{
	const char *check = getenv("SIM_CUPTI_EXIT_CHECK");

	torn_down = true;
	if (check && *check == '1' && (holder || kinds)) {
		fprintf(stderr, "sim libcupti: torn down at exit with %s still "
			"subscribed and kinds %#llx enabled\n",
			holder ? holder->name : "nobody",
			(unsigned long long)kinds);
		_exit(3);
	}
}

__attribute__((constructor)) static void loaded(void)
{
	atexit(teardown);
}

static CUptiResult subscribe(CUpti_SubscriberHandle *out, const char *name,
			     char *old, size_t old_len)
{
	if (!out)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (holder) {
		if (old && old_len) {
			strncpy(old, holder->name, old_len - 1);
			old[old_len - 1] = 0;
		}
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	}
	for (size_t i = 0; i < sizeof(subscribers) / sizeof(*subscribers);
	     i++) {
		if (subscribers[i].live)
			continue;
		subscribers[i].live = true;
		strncpy(subscribers[i].name, name ? name : "",
			sizeof(subscribers[i].name) - 1);
		holder = &subscribers[i];
		*out = holder;
		return CUPTI_SUCCESS;
	}
	return CUPTI_ERROR_OUT_OF_MEMORY;
}

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *s,
				  CUpti_CallbackFunc fn, void *data)
{
	CUptiResult r;

	ALIVE();
	r = subscribe(s, "", NULL, 0);
	if (r == CUPTI_SUCCESS)
		(*s)->fn = fn, (*s)->data = data;
	return r;
}

#ifndef SIM_CUDA12
EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *s,
				     CUpti_CallbackFunc fn, void *data,
				     CUpti_SubscriberParams *p)
{
	CUptiResult r;

	ALIVE();
	r = subscribe(s, p ? p->subscriberName : "",
		      p ? p->oldSubscriberName : NULL,
		      p ? p->oldSubscriberSize : 0);
	if (r == CUPTI_SUCCESS)
		(*s)->fn = fn, (*s)->data = data;
	return r;
}
#endif

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle s)
{
	ALIVE();
	if (!s || s != holder)
		return CUPTI_ERROR_INVALID_PARAMETER;
	s->live = false;
	s->fn = NULL;
	holder = NULL;
	runtime_domain = false;
	memset(runtime_cbids, 0, sizeof(runtime_cbids));
	memset(driver_cbids, 0, sizeof(driver_cbids));
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableDomain(uint32_t enable,
				     CUpti_SubscriberHandle s,
				     CUpti_CallbackDomain d)
{
	ALIVE();
	if (!s || s != holder)
		return CUPTI_ERROR_INVALID_PARAMETER;
	domains_enabled += enable ? 1 : 0;
	if (d == CUPTI_CB_DOMAIN_RUNTIME_API)
		runtime_domain = enable;
	return CUPTI_SUCCESS;
}

static uint32_t version(void);

EXPORT CUptiResult cuptiEnableCallback(uint32_t enable,
				       CUpti_SubscriberHandle s,
				       CUpti_CallbackDomain d,
				       CUpti_CallbackId cbid)
{
	ALIVE();
	if (!s || s != holder)
		return CUPTI_ERROR_INVALID_PARAMETER;
	/* As CUDA 12.4's CUPTI (its cupti_*_cbid.h sizes): ids it does not
	 * have are invalid. */
	if (version() < 130000 &&
	    ((d == CUPTI_CB_DOMAIN_RUNTIME_API && cbid >= 468) ||
	     (d == CUPTI_CB_DOMAIN_DRIVER_API && cbid >= 754)))
		return CUPTI_ERROR_INVALID_PARAMETER;
	callbacks_enabled += enable ? 1 : 0;
	if (d == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < 1024) {
		if (enable)
			runtime_cbids[cbid / 8] |= 1u << cbid % 8;
		else
			runtime_cbids[cbid / 8] &= ~(1u << cbid % 8);
	}
	if (d == CUPTI_CB_DOMAIN_DRIVER_API && cbid < 1024) {
		if (enable)
			driver_cbids[cbid / 8] |= 1u << cbid % 8;
		else
			driver_cbids[cbid / 8] &= ~(1u << cbid % 8);
	}
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind k)
{
	ALIVE();
	if ((unsigned)k >= 64)
		return CUPTI_ERROR_INVALID_KIND;
	kinds |= 1ull << k;
	pthread_mutex_lock(&held_lock);
	if (!held && requested_fn) {
		size_t max;

		requested_fn(&held, &held_size, &max);
		held_used = 0;
	}
	pthread_mutex_unlock(&held_lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind k)
{
	ALIVE();
	if ((unsigned)k >= 64)
		return CUPTI_ERROR_INVALID_KIND;
	kinds &= ~(1ull << k);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterCallbacks(
	CUpti_BuffersCallbackRequestFunc req,
	CUpti_BuffersCallbackCompleteFunc done)
{
	ALIVE();
	if (!req || !done)
		return CUPTI_ERROR_INVALID_PARAMETER;
	requested_fn = req;
	completed_fn = done;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(
	CUpti_TimestampCallbackFunc fn)
{
	ALIVE();
	timestamp_fn = fn;
	return CUPTI_SUCCESS;
}

/* A forced flush hands the buffer back, empty or not; a plain one only
 * one with records in it (the completion callback runs on the flushing
 * thread, with no lock held: it calls cuptiActivityGetNextRecord). */
EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	size_t size, used;
	uint8_t *b;

	ALIVE();
	pthread_mutex_lock(&held_lock);
	b = held;
	size = held_size;
	used = held_used;
	if (b && (used || flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED))
		held = NULL, held_used = 0;
	else
		b = NULL;
	pthread_mutex_unlock(&held_lock);
	if (b && completed_fn)
		completed_fn(NULL, 0, b, size, used);
	return CUPTI_SUCCESS;
}

/* The stand-in makes kernel records (always CUpti_ActivityKernel10)
 * and sync records, and steps by each one's size as CUPTI does. */
static size_t record_size(const CUpti_Activity *r)
{
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		return sizeof(sim_sync_record);
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		return sizeof(sim_copy_record);
	case CUPTI_ACTIVITY_KIND_MEMSET:
		return sizeof(CUpti_ActivityMemset4);
	default:
		return sizeof(CUpti_ActivityKernel10);
	}
}

EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t len,
					      CUpti_Activity **rec)
{
	uint8_t *next;

	ALIVE();
	next = *rec ? (uint8_t *)*rec + record_size(*rec) : buf;
	if (!buf || next + sizeof(CUpti_Activity) > buf + len ||
	    next + record_size((CUpti_Activity *)next) > buf + len)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*rec = (CUpti_Activity *)next;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext c,
						     uint32_t stream,
						     size_t *dropped)
{
	static bool told;
	const char *n = getenv("SIM_CUPTI_DROPPED");

	ALIVE();
	(void)c;
	(void)stream;
	*dropped = n && !told ? strtoul(n, NULL, 10) : 0;
	told = true;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetTimestamp(uint64_t *ts)
{
	struct timespec t;

	ALIVE();

	clock_gettime(CLOCK_MONOTONIC_RAW, &t);
	*ts = (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
	return CUPTI_SUCCESS;
}

/* A CPU timestamp as CUPTI takes one for a record. */
static uint64_t record_now(void)
{
	uint64_t ts;

	if (timestamp_fn)
		return timestamp_fn();
	cuptiGetTimestamp(&ts);
	return ts;
}

static bool runtime_callback_on(CUpti_CallbackId cbid)
{
	return holder && holder->fn && (runtime_domain ||
		(cbid < 1024 && runtime_cbids[cbid / 8] >> cbid % 8 & 1));
}

/* A kernel's name, kept for the life of the process as CUPTI keeps the
 * names its records point to. */
static const char *kept_name(const char *name)
{
	static const char *names[64];
	static int nr;

	for (int i = 0; i < nr; i++)
		if (!strcmp(names[i], name))
			return names[i];
	if (nr == 64)
		return "sim_kernel_names_full";
	return names[nr++] = strdup(name);
}

/* A record of `size` bytes in the held buffer, zeroed, or NULL (no
 * buffer, or full). Takes held_lock either way: the caller releases it
 * once the record is written. */
static void *record_locked(size_t size)
{
	void *r = NULL;
	size_t max;

	pthread_mutex_lock(&held_lock);
	if (!held && requested_fn) {
		requested_fn(&held, &held_size, &max);
		held_used = 0;
	}
	if (held && held_used + size <= held_size) {
		r = held + held_used;
		held_used += size;
		memset(r, 0, size);
	}
	return r;
}

static void kernel_record(const char *name, uint32_t corr, uint64_t dur_ns)
{
	CUpti_ActivityKernel10 *k = record_locked(sizeof(*k));

	if (k) {
		k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
		k->start = record_now();
		k->end = k->start + dur_ns;
		k->correlationId = corr;
		k->contextId = 1;
		k->streamId = 7;
		k->gridX = 64, k->gridY = k->gridZ = 1;
		k->blockX = 256, k->blockY = k->blockZ = 1;
		k->registersPerThread = 32;
		k->name = kept_name(name);
	}
	pthread_mutex_unlock(&held_lock);
}

/* What CUPTI writes for a cudaStreamSynchronize that waited from start
 * to end (its clock). */
static void sync_record(uint32_t corr, uint64_t start, uint64_t end)
{
	sim_sync_record *r = record_locked(sizeof(*r));

	if (r) {
		r->kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
		r->type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
		r->start = start;
		r->end = end;
		r->correlationId = corr;
		r->contextId = 1;
		r->streamId = 7;
		r->cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
	}
	pthread_mutex_unlock(&held_lock);
}

static uint32_t next_correlation(void)
{
	static uint32_t last;

	return __atomic_add_fetch(&last, 1, __ATOMIC_RELAXED);
}

/* The subscriber's runtime API callback at one site of a call, if it
 * enabled that cbid. */
static void runtime_callback(CUpti_CallbackId cbid, const char *fn,
			     const char *symbol, uint32_t corr,
			     CUpti_ApiCallbackSite site)
{
	CUpti_SubscriberHandle s = holder;
	CUpti_CallbackData cd = {
		.callbackSite = site, .functionName = fn,
		.symbolName = symbol, .correlationId = corr,
	};

	if (runtime_callback_on(cbid))
		s->fn(s->data, CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &cd);
}

/* What CUPTI does for one cudaLaunchKernel on the calling thread (see the
 * top of this file). Returns its correlation id. */
EXPORT uint32_t sim_cupti_launch(const char *kernel, uint64_t dur_ns)
{
	const CUpti_CallbackId cbid =
		CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
	uint32_t corr = next_correlation();

	ALIVE();
	runtime_callback(cbid, "cudaLaunchKernel", kernel, corr,
			 CUPTI_API_ENTER);
	if (kinds & (1ull << CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL |
		     1ull << CUPTI_ACTIVITY_KIND_KERNEL))
		kernel_record(kernel, corr, dur_ns);
	runtime_callback(cbid, "cudaLaunchKernel", kernel, corr,
			 CUPTI_API_EXIT);
	return corr;
}

/* What CUPTI does around one cudaStreamSynchronize that waits wait_ns
 * for the "GPU" (a sleep): its callbacks, and its synchronization record
 * when that kind is on. */
EXPORT uint32_t sim_cupti_stream_sync(uint64_t wait_ns)
{
	const CUpti_CallbackId cbid =
		CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020;
	struct timespec ts = { .tv_sec = (time_t)(wait_ns / 1000000000u),
			       .tv_nsec = (long)(wait_ns % 1000000000u) };
	uint32_t corr = next_correlation();

	uint64_t start;

	ALIVE();
	runtime_callback(cbid, "cudaStreamSynchronize", NULL, corr,
			 CUPTI_API_ENTER);
	start = record_now();
	nanosleep(&ts, NULL);
	if (kinds & 1ull << CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)
		sync_record(corr, start, record_now());
	runtime_callback(cbid, "cudaStreamSynchronize", NULL, corr,
			 CUPTI_API_EXIT);
	return corr;
}

/* The subscriber's driver API callback at one site, if enabled. */
static void driver_callback(CUpti_CallbackId cbid, const char *fn,
			    uint32_t corr, CUpti_ApiCallbackSite site)
{
	CUpti_SubscriberHandle s = holder;
	CUpti_CallbackData cd = {
		.callbackSite = site, .functionName = fn,
		.correlationId = corr,
	};

	if (s && s->fn && cbid < 1024 && driver_cbids[cbid / 8] >> cbid % 8 & 1)
		s->fn(s->data, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cd);
}

/* A runtime call that makes one driver call and one record of `kind`
 * (size bytes), written by fill with both calls' ids and the time: what
 * CUPTI does for a copy or a set. Returns the runtime call's id. */
struct sim_call {
	CUpti_CallbackId runtime, driver;
	const char *runtime_name, *driver_name;
	CUpti_ActivityKind kind;
	size_t size;
};

static uint32_t call_with_record(const struct sim_call *c,
				 void (*fill)(void *record, uint32_t corr,
					      uint32_t driver,
					      uint64_t start, const void *arg),
				 const void *arg)
{
	uint32_t corr = next_correlation(), driver = next_correlation();
	void *r;

	runtime_callback(c->runtime, c->runtime_name, NULL, corr,
			 CUPTI_API_ENTER);
	driver_callback(c->driver, c->driver_name, driver, CUPTI_API_ENTER);
	if (kinds & 1ull << c->kind) {
		r = record_locked(c->size);
		if (r)
			fill(r, corr, driver, record_now(), arg);
		pthread_mutex_unlock(&held_lock);
	}
	driver_callback(c->driver, c->driver_name, driver, CUPTI_API_EXIT);
	runtime_callback(c->runtime, c->runtime_name, NULL, corr,
			 CUPTI_API_EXIT);
	return corr;
}

struct sim_copy {
	uint64_t bytes, dur_ns;
	int pinned;
};

/* A host-to-device copy's record names the driver call and the
 * runtime call. */
static void fill_copy(void *record, uint32_t corr, uint32_t driver,
		      uint64_t start, const void *arg)
{
	const struct sim_copy *c = arg;
	sim_copy_record *r = record;

	r->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	r->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
	r->srcKind = c->pinned ? CUPTI_ACTIVITY_MEMORY_KIND_PINNED :
				 CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
	r->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	r->bytes = c->bytes;
	r->start = start;
	r->end = start + c->dur_ns;
	r->contextId = 1;
	r->streamId = 7;
	r->correlationId = driver;
	r->runtimeCorrelationId = corr;
}

/* What CUPTI does for one cudaMemcpyAsync from host memory (pinned or
 * pageable) to the device, taking dur_ns. */
EXPORT uint32_t sim_cupti_copy(uint64_t bytes, int pinned, uint64_t dur_ns)
{
	static const struct sim_call call = {
		CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
		CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
		"cudaMemcpyAsync", "cuMemcpyHtoDAsync_v2",
		CUPTI_ACTIVITY_KIND_MEMCPY, sizeof(sim_copy_record),
	};
	const struct sim_copy c = { bytes, dur_ns, pinned };

	ALIVE();
	return call_with_record(&call, fill_copy, &c);
}

struct sim_set {
	uint64_t bytes, dur_ns;
	uint32_t value;
};

/* A set's record names only the driver call, as CUDA 13's says. */
static void fill_set(void *record, uint32_t corr, uint32_t driver,
		     uint64_t start, const void *arg)
{
	const struct sim_set *s = arg;
	CUpti_ActivityMemset4 *r = record;

	(void)corr;
	r->kind = CUPTI_ACTIVITY_KIND_MEMSET;
	r->value = s->value;
	r->bytes = s->bytes;
	r->start = start;
	r->end = start + s->dur_ns;
	r->contextId = 1;
	r->streamId = 7;
	r->correlationId = driver;
	r->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
}

/* The same for one cudaMemsetAsync of device memory. */
EXPORT uint32_t sim_cupti_set(uint64_t bytes, uint32_t value,
			      uint64_t dur_ns)
{
	static const struct sim_call call = {
		CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
		CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,
		"cudaMemsetAsync", "cuMemsetD8Async",
		CUPTI_ACTIVITY_KIND_MEMSET, sizeof(CUpti_ActivityMemset4),
	};
	const struct sim_set set = { bytes, dur_ns, value };

	ALIVE();
	return call_with_record(&call, fill_set, &set);
}

#ifdef SIM_CUDA12
#define SIM_DEFAULT_VERSION 22u		/* CUDA 12.4 */
#else
#define SIM_DEFAULT_VERSION CUPTI_API_VERSION
#endif

/* SIM_CUPTI_VERSION plays another CUPTI (22: CUDA 12.4's, 18: 11.8's). */
static uint32_t version(void)
{
	const char *v = getenv("SIM_CUPTI_VERSION");

	return v ? (uint32_t)strtoul(v, NULL, 10) : SIM_DEFAULT_VERSION;
}

EXPORT CUptiResult cuptiGetVersion(uint32_t *v)
{
	ALIVE();
	*v = version();
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
	ALIVE();
	*s = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ?
	     "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" :
	     r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR (sim)";
	return CUPTI_SUCCESS;
}

/* For tests: another tool takes CUPTI the way Kineto does (subscribe,
 * buffers, kinds; no timestamp callback: Kineto's CuptiActivityApi keeps
 * CUPTI's own clock and converts from it), or lets it go. */
static void other_requested(uint8_t **b, size_t *size, size_t *max)
{
	*b = NULL;
	*size = 0;
	*max = 0;
}

/* Kineto frees each buffer it is handed, its own or (after it took the
 * callbacks over) one the agent had given CUPTI. */
static void other_completed(CUcontext c, uint32_t s, uint8_t *b, size_t n,
			    size_t v)
{
	(void)c; (void)s; (void)n; (void)v;
	free(b);
}

static CUpti_SubscriberHandle other;

/* What Kineto sets up, subscribed or not: its buffers, its kinds. */
static void set_up_activity(void)
{
	cuptiActivityRegisterCallbacks(other_requested, other_completed);
	cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
	cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
	cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
}

EXPORT int sim_cupti_other_takes(const char *name)
{
	if (subscribe(&other, name, NULL, 0) != CUPTI_SUCCESS)
		return -1;
	set_up_activity();
	return 0;
}

/* A tool that, when another holds the subscription (as during rfbpf's
 * lease), sets up activity anyway (the activity API needs no
 * subscription): its buffers, its kinds. Not what Kineto does (below). */
EXPORT int sim_cupti_other_starts(const char *name)
{
	CUpti_SubscriberHandle none;

	if (cuptiSubscribe(&none, NULL, NULL) == CUPTI_SUCCESS)
		cuptiUnsubscribe(none);	/* not the case this plays */
	(void)name;
	set_up_activity();
	return 0;
}

/* Kineto as it is (torch 2.11 on a real GPU): it starts with
 * cuptiSubscribe, called through the library's exported entry (where
 * rfbpf's probe is); if that fails it gives up its CUDA activity for the
 * process and sets up nothing; else it sets up activity and keeps the
 * subscription. 0 if it subscribed. */
EXPORT int sim_cupti_kineto_starts(void)
{
	if (cuptiSubscribe(&other, NULL, NULL) != CUPTI_SUCCESS) {
		other = NULL;
		return -1;
	}
	set_up_activity();
	return 0;
}

EXPORT void sim_cupti_other_leaves(void)
{
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET);
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
	cuptiUnsubscribe(other);
	other = NULL;
}

/* The process-wide state, as a tool would find it. */
EXPORT uint64_t sim_cupti_kinds(void) { return kinds; }
/* Whether anyone replaced CUPTI's own clock for the process. */
EXPORT bool sim_cupti_clock_replaced(void)
{
	return timestamp_fn != NULL;
}
EXPORT bool sim_cupti_buffers_are_other(void)
{
	return requested_fn == other_requested &&
	       completed_fn == other_completed;
}
EXPORT const char *sim_cupti_holder(void)
{
	return holder ? holder->name : NULL;
}
EXPORT unsigned sim_cupti_domains_enabled(void) { return domains_enabled; }
EXPORT unsigned sim_cupti_callbacks_enabled(void)
{
	return callbacks_enabled;
}
