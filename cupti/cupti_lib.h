/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The job's libcupti, opened at run time rather than linked.
 *
 * Why: a job has one CUPTI, the one its CUDA stack uses. A pip torch
 * bundles its own (nvidia/cuda_cupti/lib/libcupti.so.12 or .13) and loads
 * it for torch.profiler; a second CUPTI of another version in the same
 * process is two tools fighting over one driver. So the agent takes the
 * copy already mapped in the process if there is one, and only otherwise
 * loads the toolkit's. A job with no CUPTI at all still loads the agent
 * (its op probes and lease work); it then says why it has no GPU activity.
 *
 * Which: the agent reads the fields of four records (kernel, copy, peer
 * copy, set) that CUDA 12 and 13 lay out alike: CUDA 12's CUPTI writes
 * CUpti_ActivityKernel9 and Memcpy5 where 13's writes Kernel10 and
 * Memcpy6, which only append to them (activity.c checks every field read
 * at build time). So CUPTI of CUDA 12.0 to 13.x is read; any other
 * version (cuptiGetVersion) is refused, with its version said, rather
 * than misread. CUDA 12's CUPTI has no cuptiSubscribe_v2: cuptiSubscribe
 * is used, and another subscriber then goes unnamed.
 */
#ifndef RFBPF_CUPTI_LIB_H
#define RFBPF_CUPTI_LIB_H

#include <stdbool.h>
#include <stdint.h>
#include <cupti.h>

/* The CUPTI API versions whose records the agent reads (cupti_version.h:
 * CUDA 12.0 reports 19 and 12.9 Update 1 28; CUDA 13.x 130000 and up). */
#define RF_CUPTI12_VERSION_MIN 19u
#define RF_CUPTI12_VERSION_MAX 28u
#define RF_CUPTI_VERSION_MIN 130000u
#define RF_CUPTI_VERSION_END 140000u

static inline bool rf_cupti_version_readable(uint32_t v)
{
	return (v >= RF_CUPTI12_VERSION_MIN && v <= RF_CUPTI12_VERSION_MAX) ||
	       (v >= RF_CUPTI_VERSION_MIN && v < RF_CUPTI_VERSION_END);
}

/* Each call the agent makes, typed by the installed headers. */
struct rf_cupti {
	__typeof__(&cuptiSubscribe) Subscribe;
	__typeof__(&cuptiSubscribe_v2) Subscribe_v2;	/* NULL before 13.0 */
	__typeof__(&cuptiUnsubscribe) Unsubscribe;
	__typeof__(&cuptiEnableCallback) EnableCallback;
	__typeof__(&cuptiActivityEnable) ActivityEnable;
	__typeof__(&cuptiActivityDisable) ActivityDisable;
	__typeof__(&cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks;
	__typeof__(&cuptiActivityRegisterTimestampCallback)
		ActivityRegisterTimestampCallback;
	__typeof__(&cuptiActivityFlushAll) ActivityFlushAll;
	__typeof__(&cuptiActivityGetNextRecord) ActivityGetNextRecord;
	__typeof__(&cuptiActivityGetNumDroppedRecords)
		ActivityGetNumDroppedRecords;
	__typeof__(&cuptiGetTimestamp) GetTimestamp;
	__typeof__(&cuptiGetResultString) GetResultString;
	__typeof__(&cuptiGetVersion) GetVersion;
	uint32_t version;		/* cuptiGetVersion's */
	char path[512];			/* where it was found */
};

/* Filled by rf_cupti_load(); all NULL until it succeeds (Subscribe_v2
 * may stay NULL). */
extern struct rf_cupti rf_cupti;

/* Opens the job's CUPTI once (later calls return the first answer):
 * true with every call in rf_cupti, else false, said once on stderr. */
bool rf_cupti_load(void);

#endif
