/* SPDX-License-Identifier: BSD-2-Clause */
/* Part of the CUPTI agent: agent.h says how the parts fit. */
#ifndef RFBPF_CUPTI_ACTIVITY_H
#define RFBPF_CUPTI_ACTIVITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "control.h"

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

#endif
