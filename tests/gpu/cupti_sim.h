/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the no-GPU drivers of the agent (cupti_driver.c, gpu_synth.c)
 * share: the agent's entry points as CUDA and CUPTI reach them, one API
 * callback as CUPTI makes it, and an activity buffer filled record by
 * record and completed the way CUPTI completes one. Tests only.
 */
#ifndef RFBPF_TEST_CUPTI_SIM_H
#define RFBPF_TEST_CUPTI_SIM_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cupti.h>
#include "rfbpf_gpu.h"

/* The agent's exports (what CUDA and CUPTI are given). */
extern struct rf_gpu_control rfbpf_gpu_control;
int InitializeInjection(void);
void rfbpf_cupti_api_callback(void *, CUpti_CallbackDomain, CUpti_CallbackId,
			      const void *);
void rfbpf_cupti_buffer_requested(uint8_t **, size_t *, size_t *);
void rfbpf_cupti_buffer_completed(CUcontext, uint32_t, uint8_t *, size_t,
				  size_t);

static inline uint64_t sim_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One ENTER or EXIT callback, as CUPTI calls the subscriber. */
static inline void sim_api(CUpti_CallbackDomain d, CUpti_CallbackId cbid,
			   CUpti_ApiCallbackSite site, const char *name,
			   uint32_t corr, const char *symbol)
{
	CUpti_CallbackData cd = {
		.callbackSite = site, .functionName = name,
		.correlationId = corr, .symbolName = symbol,
	};

	rfbpf_cupti_api_callback(NULL, d, cbid, &cd);
}

struct sim_buffer {
	uint8_t *data;
	size_t size, used;
};

/* Hands the buffer back to the agent, empty or not, as CUPTI returns
 * every buffer it was given through the completion callback. */
static inline void sim_buffer_complete(struct sim_buffer *b)
{
	if (b->data)
		rfbpf_cupti_buffer_completed(NULL, 0, b->data, b->size,
					     b->used);
	b->data = NULL;
}

/* Room for one record of len bytes, zeroed; completes a full buffer and
 * asks the agent for a new one as CUPTI does. */
static inline void *sim_buffer_slot(struct sim_buffer *b, size_t len)
{
	size_t max;

	if (b->data && b->used + len > b->size)
		sim_buffer_complete(b);
	if (!b->data) {
		rfbpf_cupti_buffer_requested(&b->data, &b->size, &max);
		if (!b->data) {
			fprintf(stderr, "cupti sim: the agent gave no buffer\n");
			abort();
		}
		b->used = 0;
	}
	b->used += len;
	return memset(b->data + b->used - len, 0, len);
}

#endif
