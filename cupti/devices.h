/* SPDX-License-Identifier: BSD-2-Clause */
/* Part of the CUPTI agent: agent.h says how the parts fit. */
#ifndef RFBPF_CUPTI_DEVICES_H
#define RFBPF_CUPTI_DEVICES_H

#include <stdbool.h>
#include "rfbpf_gpu.h"

/* devices.c: what the GPUs are, for the tracer (rfbpf_probe_gpu_device). */
/* Pure: device ordinal `ordinal` as attr(attribute) says, into d. */
void rf_device_fill(struct rf_gpu_device *d, int ordinal,
		    int (*attr)(int attribute, int ordinal, void *ctx),
		    void *ctx);
/* Reports every GPU once, from the agent's thread, when the job's CUDA
 * driver is up; true once done (or never possible: no libcuda). */
bool rf_devices_report(void);

#endif
