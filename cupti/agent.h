/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * librfbpf_cupti.so, the in-process CUDA side of rfbpf. The CUDA driver
 * loads it through CUDA_INJECTION64_PATH and calls InitializeInjection().
 * From then on it does three things, each in its own file:
 *
 *   callbacks.c  CUPTI API callbacks -> rfbpf_probe_gpu_launch() (or
 *                rfbpf_probe_gpu_sync() for synchronize calls) on the
 *                calling thread, at the call's exit, with its enter time
 *                (one report per call, even when a runtime call nests a
 *                driver call);
 *   activity.c   completed activity buffers -> rfbpf_probe_gpu_activity()
 *                once per kernel/memcpy/memset record (and
 *                rfbpf_probe_gpu_sync_record() per synchronization one);
 *   devices.c    what the GPUs are (the job's driver's attributes) ->
 *                rfbpf_probe_gpu_device() once per device per lease;
 *   torch_activation.c  RFBPF_SAMPLE=P: registers a RecordFunction
 *                callback whose start/end are the op probes.
 *
 * The probes (probes.S) are empty functions that begin with a 5-byte NOP;
 * rfbpf puts uprobes on them. Nothing is written anywhere else: the data
 * reaches rfbpf only through the probes' arguments, and only while rfbpf
 * holds the lease in the control block (control.c), so a job without a
 * tracer pays for a few callbacks and nothing more.
 *
 * Every entry point CUPTI would call is exported under a stable name so
 * tests/gpu can drive the real code without a GPU.
 */
#ifndef RFBPF_CUPTI_AGENT_H
#define RFBPF_CUPTI_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include "activity.h"
#include "callbacks.h"
#include "clock.h"
#include "control.h"
#include "devices.h"
#include "probes.h"
#include "torch_activation.h"

/* agent.c */
int InitializeInjection(void) RF_EXPORT;
/* One step of the agent thread's loop, the agent's side of the handshake
 * with rfbpf: follows the lease (takes CUPTI, gives it back), the yield
 * and flush requests, the periodic flush; returns how long to sleep.
 * Hidden; the thread's only caller in the job, tests/fuzz/fuzz_cupti.c
 * drives it with control blocks of any content. */
uint64_t rf_agent_tick(bool *activity_on, uint64_t *last_flush,
		       bool *torch_done);
/* Leaves CUPTI if ip is on the first instructions of cuptiSubscribe or
 * cuptiSubscribe_v2 and the agent holds it: flushes its records,
 * disables its kinds, unsubscribes. The body of the handler of
 * rf_gpu_control.yield_signal, which rfbpf's probe on those calls
 * sends; true if it left. Hidden; tests call it with an ip of their
 * choosing. */
bool rf_agent_yield_in_call(uintptr_t ip);
/* Forgets the subscription and a yield, which otherwise last the
 * process's life: for the fuzzer, which plays many lives in one
 * process. Never called in a job. */
void rf_agent_forget(void);

#endif
