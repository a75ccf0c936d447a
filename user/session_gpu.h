/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The GPU part of a tracing run: noticing the CUPTI agent in the target
 * (at attach, or later, since the agent loads when the job first uses
 * CUDA), probing it, holding its lease while tracing, and at the end
 * letting it hand over its last records before reading its counters.
 */
#ifndef RFBPF_SESSION_GPU_H
#define RFBPF_SESSION_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct session;

/* Called on every loop turn: looks for the agent twice a second until
 * found, then renews the lease. */
void session_gpu_poll(struct session *s, double now_s);
/* Tracing stops: ends the lease, drains the agent's final flush (up to
 * a second), and reads the agent's counters into the trace. */
void session_gpu_finish(struct session *s);

/* A CUPTI call from another thread than the agent's (RF_EV_CUPTI_CALL,
 * which = its index in RF_CUPTI_WATCHED): another tool is starting to use
 * CUPTI. Said once; the agent is asked to leave CUPTI to it. */
void session_gpu_cupti_call(struct session *s, unsigned which, int tid);

/* -p mode: if the agent already switched RecordFunction on in the job
 * (RFBPF_SAMPLE=P), use that instead of registering a callback through
 * ptrace: on the optimized path, probe the agent's callback stubs; with
 * entry probes, before()/end() already see its ops. Returns whether it
 * did. */
bool session_gpu_agent_activation(struct session *s);

/* The model's reader of kernel names the events had to cut (struct gpu's
 * read_name): len bytes at addr in process pid, where CUPTI keeps the
 * name. */
bool session_gpu_read_name(void *ctx, uint32_t pid, uint64_t addr,
			   char *buf, size_t len);

#endif
