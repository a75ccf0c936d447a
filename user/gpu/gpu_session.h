/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The GPU part of a tracing run: noticing the CUPTI agent in the target
 * (at attach, or later, since the agent loads when the job first uses
 * CUDA), probing it, holding its lease while tracing, and at the end
 * letting it hand over its last records before reading its counters.
 * It works on its session's target, probes, ring and trace, which it
 * reaches through `of` (gpu_session_bind): the session layer above calls
 * down into it, never the other way.
 */
#ifndef RFBPF_GPU_SESSION_H
#define RFBPF_GPU_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "gpu/agent.h"
#include "gpu/inject.h"

struct held_thread;
struct options;
struct probes;
struct ring_buffer;
struct trace;

struct gpu_session {
	struct gpu_agent agent;	/* the CUPTI agent, when the target has it */
	bool attached;		/* its probes are attached, lease held */
	bool given_up;		/* it failed to attach: do not retry */
	double checked_s;	/* last look for it */
	double look_s;		/* ...and how long until the next */
	struct rf_gpu_control base;	/* its counters when we attached */
	bool base_read;
	bool cupti_watched;	/* the job's libcupti is probed (or could
				 * not be: tried once) */
	bool nvtx_attached;	/* NVTX push/pop probed (or tried once) */
	double nvtx_checked_s;	/* last look for the job's NVTX library */
	double nvtx_look_s;	/* ...and how long until the next */
	bool inject_retry;	/* a load left pending: its thread waited */
	double inject_next_s;	/* ...tried again then, */
	uint64_t inject_ops;	/* ...if the job ran ops since this many */
	bool inject;		/* load the agent at the next attach stop, */
	struct gpu_inject inject_how;	/* ...this way */
	struct {		/* the session's, as they are when used */
		const pid_t *pid;
		const struct options *opt;
		struct trace *trace;
		struct probes *probes;
		struct ring_buffer *const *rb;
		const bool *use_stubs;
	} of;
};

/* Points gs at what it works on, before any call below. */
void gpu_session_bind(struct gpu_session *gs, const pid_t *pid,
		      const struct options *opt, struct trace *trace,
		      struct probes *probes, struct ring_buffer *const *rb,
		      const bool *use_stubs);

/* Called on every loop turn: looks for the agent twice a second until
 * found, then renews the lease; looks for the job's shared NVTX library
 * (libnvToolsExt.so.1) as for the agent, until found, and probes its range
 * push and pop. */
void gpu_session_poll(struct gpu_session *gs, double now_s);
/* Before the attach stop (it reads the job's maps, which no held thread
 * should wait for): should the job get the CUPTI agent (gpu/inject.h;
 * not with --no-gpu or --no-gpu-inject)? One that should but cannot is
 * said in one line. */
void gpu_session_want_agent(struct gpu_session *gs);
/* Then, in the attach stop, on the thread rfbpf holds there: loads it
 * (gpu/inject.h). A failure is said in one line and tracing goes on
 * without GPU kernels. A thread held in a wait, not at an op, leaves the
 * load pending: see gpu_session_wants_hold. */
void gpu_session_inject(struct gpu_session *gs, struct held_thread *h);
/* A load left pending (the job's threads were all waiting at the
 * attach): true when it is time for another hold (the job ran ops since
 * the last; tried at most every INJECT_RETRY_S), in which the caller
 * calls gpu_session_inject. */
bool gpu_session_wants_hold(struct gpu_session *gs, double now_s);
/* Tracing stops: ends the lease, drains the agent's final flush (up to
 * a second), and reads the agent's counters into the trace. */
void gpu_session_finish(struct gpu_session *gs);

/* A CUPTI call from another thread than the agent's (RF_EV_CUPTI_CALL,
 * which = its index in RF_CUPTI_WATCHED): another tool is starting to use
 * CUPTI. Said once; the agent is asked to leave CUPTI to it. */
void gpu_session_cupti_call(struct gpu_session *gs, unsigned which, int tid);

/* -p mode: if the agent already switched RecordFunction on in the job
 * (RFBPF_SAMPLE=P), use that instead of registering a callback through
 * ptrace: on the optimized path, probe the agent's callback stubs; with
 * entry probes, before()/end() already see its ops. Returns whether it
 * did. */
bool gpu_session_agent_activation(struct gpu_session *gs);

/* The model's reader of kernel names the events had to cut (struct gpu's
 * read_name): len bytes at addr in process pid, where CUPTI keeps the
 * name. */
bool gpu_session_read_name(void *ctx, uint32_t pid, uint64_t addr,
			   char *buf, size_t len);

#endif
