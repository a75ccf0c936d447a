/* SPDX-License-Identifier: BSD-2-Clause */
/* Part of the CUPTI agent: agent.h says how the parts fit. */
#ifndef RFBPF_CUPTI_CALLBACKS_H
#define RFBPF_CUPTI_CALLBACKS_H

#include <stdbool.h>
#include <stdint.h>
#include "control.h"

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

#endif
