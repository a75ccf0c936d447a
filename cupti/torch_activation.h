/* SPDX-License-Identifier: BSD-2-Clause */
/* Part of the CUPTI agent: agent.h says how the parts fit. */
#ifndef RFBPF_CUPTI_TORCH_ACTIVATION_H
#define RFBPF_CUPTI_TORCH_ACTIVATION_H

#include <stdbool.h>

/* torch_activation.c: RFBPF_SAMPLE. */
/* Parses RFBPF_SAMPLE: 1 = valid (*p set), 0 = unset, -1 = invalid. */
int rf_parse_sample(const char *text, double *p);
void rf_torch_activation_init(void);
/* Tries to register once more; true when there is nothing left to try. */
bool rf_torch_activation_poll(void);

#endif
