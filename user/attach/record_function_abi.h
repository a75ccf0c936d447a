/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What rfbpf needs to know of PyTorch's callback registration ABI, shared
 * by the loader (remote registration through ptrace,
 * user/attach/activation.c) and the CUPTI agent (in-process registration,
 * cupti/). Pure C.
 */
#ifndef RFBPF_RECORD_FUNCTION_ABI_H
#define RFBPF_RECORD_FUNCTION_ABI_H

#include <stddef.h>
#include <stdint.h>

#define RF_NUM_SCOPES 10

#define RF_SYM_ADD_GLOBAL_CALLBACK \
	"_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE"
#define RF_SYM_REMOVE_CALLBACK "_ZN2at14removeCallbackEm"

/*
 * at::RecordFunctionCallback, identical in every release from 1.13 to
 * 2.14: trivially copyable, 40 bytes, passed by value in memory.
 */
struct rf_callback_abi {
	uint64_t start;			/* StartCallback, or 0 */
	uint64_t end;			/* EndCallback, or 0 */
	double sampling_prob;
	uint8_t scopes[RF_NUM_SCOPES];	/* std::array<bool, NUM_SCOPES> */
	uint8_t needs_inputs, needs_outputs, needs_ids;
	uint8_t pad[3];
};
_Static_assert(sizeof(struct rf_callback_abi) == 40, "callback size");
_Static_assert(offsetof(struct rf_callback_abi, sampling_prob) == 16, "");
_Static_assert(offsetof(struct rf_callback_abi, scopes) == 24, "");
_Static_assert(offsetof(struct rf_callback_abi, needs_inputs) == 34, "");
_Static_assert(offsetof(struct rf_callback_abi, needs_ids) == 36, "");

#endif
