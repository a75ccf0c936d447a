/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * librfbpf_cupti.so, the in-process CUDA side of rfbpf. The CUDA driver
 * loads it through CUDA_INJECTION64_PATH and calls InitializeInjection().
 * From then on it does three things, each in its own file:
 *
 *   callbacks.c  CUPTI API callbacks -> rfbpf_probe_gpu_launch() (or
 *                rfbpf_probe_gpu_sync() for synchronize calls) on the
 *                calling thread, at the call's exit, with its enter time
 *                (one report per call, even when a runtime call nests a
 *                driver call);
 *   activity.c   completed activity buffers -> rfbpf_probe_gpu_activity()
 *                once per kernel/memcpy/memset record;
 *   torch_activation.c  RFBPF_SAMPLE=P: registers a RecordFunction
 *                callback whose start/end are the op probes.
 *
 * The probes (probes.S) are empty functions that begin with a 5-byte NOP;
 * rfbpf puts uprobes on them. Nothing is written anywhere else: the data
 * reaches rfbpf only through the probes' arguments, and only while rfbpf
 * holds the lease in the control block (control.c), so a job without a
 * tracer pays for a few callbacks and nothing more.
 *
 * Every entry point CUPTI would call is exported under a stable name so
 * tests/gpu can drive the real code without a GPU.
 */
#ifndef RFBPF_CUPTI_AGENT_H
#define RFBPF_CUPTI_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <cupti.h>
#include "rfbpf_gpu.h"
#include "cupti_lib.h"

#define RF_EXPORT __attribute__((visibility("default")))

/* probes.S: the uprobe targets, exported as rfbpf_probe_*; the agent
 * calls them through these hidden aliases (same address, no PLT). */
void rf_probe_gpu_launch(const struct rf_gpu_launch *launch);
void rf_probe_gpu_sync(const struct rf_gpu_launch *sync);
void rf_probe_gpu_activity(const struct rf_gpu_activity *activity);
/* RecordFunction callbacks; their real C++ types are in probes.S. */
void rf_probe_op_start(void);
void rf_probe_op_end(void);

/* control.c: the control block, the lease, counters, error reports. */
extern struct rf_gpu_control rfbpf_gpu_control;
uint64_t rf_now_ns(void);
bool rf_lease_active(uint64_t now_ns);
/* CLOCK_MONOTONIC now if the lease is live, else 0 (and no clock read
 * when no tracer ever came). */
uint64_t rf_lease_now(void);
void rf_count(__u64 *counter, uint64_t n);
/* Counts a failed CUPTI call; prints one line the first time *once is 0. */
void rf_cupti_failed(CUptiResult res, const char *what, int *once);
#define RF_CUPTI_CHECK(call)						\
	({								\
		static int once_;					\
		CUptiResult res_ = (call);				\
		if (res_ != CUPTI_SUCCESS)				\
			rf_cupti_failed(res_, #call, &once_);		\
		res_ == CUPTI_SUCCESS;					\
	})
/* One line to stderr, "rfbpf-cupti: ...", at most once per *once flag. */
void rf_warn_once(int *once, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* clock.c: GPU timestamps in CLOCK_MONOTONIC ns (bpf_ktime_get_ns). */
enum rf_clock_source {
	RF_CLOCK_NONE = 0,
	RF_CLOCK_CALLBACK = 1,	/* CUPTI calls our timestamp callback
				 * (RFBPF_CUPTI_CLOCK=callback only) */
	RF_CLOCK_OFFSET = 2,	/* CUPTI's own clock minus a calibrated
				 * offset (the default) */
};
/* Sets up the clock (each time a lease starts), before any activity kind
 * is enabled. */
void rf_clock_init(void);
int64_t rf_clock_offset(void);
/* Measures the offset again (offset clock only). */
void rf_clock_recalibrate(void);
uint64_t rf_clock_to_mono(uint64_t cupti_ts, int64_t offset);
int64_t rf_clock_offset_from(uint64_t mono_before, uint64_t cupti_ts,
			     uint64_t mono_after);

/* callbacks.c: which API calls are reported, and the nesting rule. */
enum rf_api_class {
	RF_API_OTHER = 0,	/* not ours */
	RF_API_LAUNCH,		/* kernel launch: one record */
	RF_API_GRAPH,		/* graph launch: many records */
	RF_API_COPY,		/* memcpy / memset (runtime only): one */
	RF_API_COPY_BATCH,	/* batched copies: one record per copy */
	RF_API_SYNC,		/* stream/device/event synchronize: none */
	RF_API_DRIVER_COPY,	/* a driver copy or set: its id is noted if
				 * a runtime call of ours made it */
};
enum rf_api_class rf_api_classify(CUpti_CallbackDomain domain,
				  CUpti_CallbackId cbid);
/* Runtime calls of ours nested deeper than this are still reported, with
 * their enter time unknown. */
#define RF_API_MAX_NESTING 4
/* Per-thread nesting state: the depth of runtime calls in progress. */
struct rf_api_nesting {
	uint32_t runtime_depth;
	uint32_t generation;	/* of the subscription it was counted in */
	uint32_t nested_correlation_id;	/* first driver call inside the
					 * current runtime call, 0 if none */
	/* When each call in progress entered (0: not traced then). */
	uint64_t runtime_enter_ns[RF_API_MAX_NESTING];
	uint64_t driver_enter_ns;	/* a driver call made directly */
	bool driver_in_call;		/* a driver call of ours, made
					 * directly, is in progress */
	bool captured;			/* the call in progress made a graph
					 * node: its stream is being captured */
};
/* A new subscription: every thread's depth restarts from 0. */
void rf_api_new_generation(void);
/* Feeds one ENTER/EXIT of a classified call; true = report it now, with
 * *enter_ns the now_ns its ENTER was fed with. */
bool rf_api_step(struct rf_api_nesting *n, CUpti_CallbackDomain domain,
		 CUpti_ApiCallbackSite site, uint32_t correlation_id,
		 uint64_t now_ns, uint64_t *enter_ns);
/* A graph node was made on this thread (CUPTI's resource callback): if
 * a call of ours is in progress, it was captured, not run. */
void rf_api_note_graph_node(struct rf_api_nesting *n);
/* A driver copy or set: only its id is noted, if it is nested. */
void rf_api_note_driver(struct rf_api_nesting *n, CUpti_ApiCallbackSite site,
			uint32_t correlation_id);
/* The probe's argument for one reported call. */
void rf_launch_fill(struct rf_gpu_launch *l, CUpti_CallbackDomain domain,
		    CUpti_CallbackId cbid, enum rf_api_class class,
		    const CUpti_CallbackData *cd, uint64_t enter_ns);
/* Enables the callbacks of every classified cbid on the subscriber. */
int rf_api_enable_callbacks(CUpti_SubscriberHandle sub);
void CUPTIAPI rfbpf_cupti_api_callback(void *userdata,
				       CUpti_CallbackDomain domain,
				       CUpti_CallbackId cbid,
				       const void *cbdata) RF_EXPORT;

/* activity.c: records -> struct rf_gpu_activity, and the buffers. */
/* Kineto's size; at most RF_ACTIVITY_BUFFERS_MAX out with CUPTI at once
 * (64 MiB): past it CUPTI gets no buffer and drops records, counted. */
#define RF_ACTIVITY_BUFFER_SIZE (4u << 20)
#define RF_ACTIVITY_BUFFERS_MAX 16
/* 0 and *out filled; RF_ACT_UNKNOWN for a kind we do not forward;
 * RF_ACT_NO_TIME for a record with no start or end. */
enum { RF_ACT_UNKNOWN = -1, RF_ACT_NO_TIME = -2 };
int rf_activity_convert(const CUpti_Activity *rec, int64_t clock_offset,
			struct rf_gpu_activity *out);
/* Forwards (or counts) one record; traced = the lease was held. */
void rf_activity_forward(const CUpti_Activity *rec, bool traced);
bool rf_activity_set_enabled(bool on);	/* returns the new state */
unsigned rf_activity_buffers_out(void);	/* given to CUPTI, not yet back */
void CUPTIAPI rfbpf_cupti_buffer_requested(uint8_t **buffer, size_t *size,
					   size_t *max_records) RF_EXPORT;
void CUPTIAPI rfbpf_cupti_buffer_completed(CUcontext ctx, uint32_t stream_id,
					   uint8_t *buffer, size_t size,
					   size_t valid_size) RF_EXPORT;

/* torch_activation.c: RFBPF_SAMPLE. */
/* Parses RFBPF_SAMPLE: 1 = valid (*p set), 0 = unset, -1 = invalid. */
int rf_parse_sample(const char *text, double *p);
void rf_torch_activation_init(void);
/* Tries to register once more; true when there is nothing left to try. */
bool rf_torch_activation_poll(void);

/* agent.c */
int InitializeInjection(void) RF_EXPORT;
/* One step of the agent thread's loop, the agent's side of the handshake
 * with rfbpf: follows the lease (takes CUPTI, gives it back), the yield
 * and flush requests, the periodic flush; returns how long to sleep.
 * Hidden; the thread's only caller in the job, tests/fuzz/fuzz_cupti.c
 * drives it with control blocks of any content. */
uint64_t rf_agent_tick(bool *activity_on, uint64_t *last_flush,
		       bool *torch_done);
/* Forgets the subscription and a yield, which otherwise last the
 * process's life: for the fuzzer, which plays many lives in one
 * process. Never called in a job. */
void rf_agent_forget(void);

#endif
