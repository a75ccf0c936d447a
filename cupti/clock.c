// SPDX-License-Identifier: BSD-2-Clause
/*
 * GPU timestamps must be in the clock of bpf_ktime_get_ns(), i.e.
 * CLOCK_MONOTONIC, so rfbpf can place kernels between the CPU events its
 * BPF programs timestamp. Two ways:
 *
 *  1. (the default) CUPTI keeps its own clock (CLOCK_REALTIME on Linux).
 *     We measure offset = cupti - monotonic by bracketing
 *     cuptiGetTimestamp() between two CLOCK_MONOTONIC reads, keep the
 *     tightest of 7 brackets, and subtract the offset from every record.
 *     REALTIME can be stepped, so the offset is measured again when a
 *     lease starts and at every periodic flush.
 *  2. (RFBPF_CUPTI_CLOCK=callback) cuptiActivityRegisterTimestampCallback:
 *     CUPTI asks us for "now" whenever it needs a CPU timestamp, so
 *     records come out in CLOCK_MONOTONIC directly. But the callback is
 *     the process's, and CUPTI has no call to take it back: every tool in
 *     the job gets CLOCK_MONOTONIC from then on, for the rest of its life.
 *     Kineto does not register one (it converts from CUPTI's own clock),
 *     so a torch.profiler run during or after our lease would get its GPU
 *     events on the wrong clock. Hence only on request, for jobs where
 *     nothing else uses CUPTI.
 */
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "control.h"

static int clock_source;		/* enum rf_clock_source */
static int64_t clock_offset;		/* read with atomics: any thread */

static uint64_t CUPTIAPI monotonic_timestamp(void)
{
	return rf_now_ns();
}

/* Pure: a bracket (mono_before, cupti_ts, mono_after) -> offset. */
int64_t rf_clock_offset_from(uint64_t mono_before, uint64_t cupti_ts,
			     uint64_t mono_after)
{
	uint64_t mid = mono_before + (mono_after - mono_before) / 2;

	return (int64_t)(cupti_ts - mid);
}

/* Pure: a CUPTI timestamp -> CLOCK_MONOTONIC. 0 means "no timing" in CUPTI
 * records (no device memory for it) and stays 0; so does a value the
 * offset would take below zero. */
uint64_t rf_clock_to_mono(uint64_t cupti_ts, int64_t offset)
{
	if (!cupti_ts)
		return 0;
	if (offset > 0 && cupti_ts <= (uint64_t)offset)
		return 0;
	return cupti_ts - (uint64_t)offset;
}

static bool calibrate(int64_t *offset)
{
	uint64_t best_width = UINT64_MAX;
	bool ok = false;

	for (int i = 0; i < 7; i++) {
		uint64_t before = rf_now_ns(), ts = 0, after;

		if (!RF_CUPTI_CHECK(rf_cupti.GetTimestamp(&ts)))
			return ok;
		after = rf_now_ns();
		if (after - before < best_width) {
			best_width = after - before;
			*offset = rf_clock_offset_from(before, ts, after);
			ok = true;
		}
	}
	return ok;
}

static bool callback_requested(void)
{
	const char *v = getenv("RFBPF_CUPTI_CLOCK");

	return v && !strcmp(v, "callback");
}

void rf_clock_init(void)
{
	static int once;
	int source = RF_CLOCK_NONE;
	int64_t offset = 0;

	/* Registered once is registered for good (see the top). */
	if (callback_requested() &&
	    RF_CUPTI_CHECK(rf_cupti.ActivityRegisterTimestampCallback(
		    monotonic_timestamp)))
		source = RF_CLOCK_CALLBACK;
	else if (calibrate(&offset))
		source = RF_CLOCK_OFFSET;
	else
		rf_warn_once(&once, "no clock for GPU timestamps: they will "
			     "be passed on unconverted");
	__atomic_store_n(&clock_offset, offset, __ATOMIC_RELAXED);
	__atomic_store_n(&clock_source, source, __ATOMIC_RELAXED);
	__atomic_store_n(&rfbpf_gpu_control.clock_offset_ns, offset,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&rfbpf_gpu_control.clock_source, (uint32_t)source,
			 __ATOMIC_RELEASE);
}

int64_t rf_clock_offset(void)
{
	return __atomic_load_n(&clock_offset, __ATOMIC_RELAXED);
}

/* Every periodic flush, with the offset clock: a step of CLOCK_REALTIME
 * (NTP, an admin) moves CUPTI's clock against CLOCK_MONOTONIC. */
void rf_clock_recalibrate(void)
{
	int64_t offset;

	if (__atomic_load_n(&clock_source, __ATOMIC_RELAXED) !=
	    RF_CLOCK_OFFSET || !calibrate(&offset))
		return;
	__atomic_store_n(&clock_offset, offset, __ATOMIC_RELAXED);
	__atomic_store_n(&rfbpf_gpu_control.clock_offset_ns, offset,
			 __ATOMIC_RELAXED);
}
