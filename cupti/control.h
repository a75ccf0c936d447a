/* SPDX-License-Identifier: BSD-2-Clause */
/* Part of the CUPTI agent: agent.h says how the parts fit. */
#ifndef RFBPF_CUPTI_CONTROL_H
#define RFBPF_CUPTI_CONTROL_H

#include <stdbool.h>
#include <stdint.h>
#include <cupti.h>
#include "rfbpf_gpu.h"
#include "cupti_lib.h"

#define RF_EXPORT __attribute__((visibility("default")))

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

#endif
