/* SPDX-License-Identifier: BSD-2-Clause */
/* Part of the CUPTI agent: agent.h says how the parts fit. */
#ifndef RFBPF_CUPTI_PROBES_H
#define RFBPF_CUPTI_PROBES_H

#include "rfbpf_gpu.h"

/* probes.S: the uprobe targets, exported as rfbpf_probe_*; the agent
 * calls them through these hidden aliases (same address, no PLT). */
void rf_probe_gpu_launch(const struct rf_gpu_launch *launch);
void rf_probe_gpu_sync(const struct rf_gpu_launch *sync);
void rf_probe_gpu_activity(const struct rf_gpu_activity *activity);
void rf_probe_gpu_sync_record(const struct rf_gpu_activity *sync);
void rf_probe_gpu_device(const struct rf_gpu_device *device);
/* RecordFunction callbacks; their real C++ types are in probes.S. */
void rf_probe_op_start(void);
void rf_probe_op_end(void);

#endif
