/* SPDX-License-Identifier: BSD-2-Clause */
/* Part of the CUPTI agent: agent.h says how the parts fit. */
#ifndef RFBPF_CUPTI_CLOCK_H
#define RFBPF_CUPTI_CLOCK_H

#include <stdint.h>

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

#endif
