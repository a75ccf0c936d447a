/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * --shapes: where each PyTorch build keeps an op's boxed inputs and what
 * they point to (RecordFunction, IValue tags, TensorImpl, ListImpl), for
 * BPF to read. Taken from the builds' own headers and checked against the
 * running builds (docs/record-function-inputs.md).
 */
#ifndef RFBPF_TORCH_LAYOUTS_H
#define RFBPF_TORCH_LAYOUTS_H

#include <stdbool.h>
#include <stddef.h>
#include "rfbpf.h"

/* The layout of torch major.minor into cfg (enabled set), and how many
 * scalar types it has; false, with the builds it knows in why, for a
 * build whose layout is not known. */
bool torch_inputs_layout(int major, int minor, bool old_string_abi,
			 struct rf_inputs_config *cfg, unsigned *nr_dtypes,
			 char *why, size_t len);

#endif
