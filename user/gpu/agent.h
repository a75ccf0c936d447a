/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rfbpf's side of the CUPTI agent (cupti/, bpf/rfbpf_gpu.h) in a target:
 * finding librfbpf_cupti in its maps, where its probe functions and control
 * block are, and holding the lease that tells the agent a tracer is
 * attached. The lease is a CLOCK_MONOTONIC deadline written into the
 * agent's control block through /proc/PID/mem and renewed while tracing;
 * on exit rfbpf sets it to 0, and if rfbpf is killed the agent stops on
 * its own once the deadline passes.
 */
#ifndef RFBPF_GPU_AGENT_H
#define RFBPF_GPU_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "rfbpf_gpu.h"
#include "attach/probes.h"	/* struct gpu_probe_offsets */

/* How far ahead each renewal sets the deadline, and how often it renews. */
#define GPU_LEASE_NS (5ull * 1000000000ull)
#define GPU_RENEW_S 1.0

struct gpu_agent {
	pid_t pid;
	char path[4096];	/* rfbpf's view of the mapped agent file */
	char shown[4096];	/* the target's name for it, for messages */
	struct gpu_probe_offsets probes;	/* file offsets */
	uint64_t op_start_off, op_end_off;
	uint64_t control_addr;	/* rfbpf_gpu_control in the target */
	int mem_fd;		/* /proc/PID/mem, read-write */
	double renewed_s;	/* last renewal (monotonic_s), 0: none */
	bool leased;
};

/* Finds the agent in pid. Returns 0, -ENOENT when it is not loaded, or
 * another -errno with a one-line reason in err. */
int gpu_agent_find(struct gpu_agent *g, pid_t pid, char *err, size_t len);
int gpu_agent_read_control(const struct gpu_agent *g,
			   struct rf_gpu_control *c);
/* Renews the lease if GPU_RENEW_S has passed since the last renewal:
 * returns 1 if it did, 0 if not due yet, or -errno. */
int gpu_agent_renew(struct gpu_agent *g, double now_s);
/* Renews it now. */
int gpu_agent_renew_now(struct gpu_agent *g, double now_s);
/* Asks the agent for a final flush; *request is the value its flush_done
 * takes once it has flushed. */
int gpu_agent_request_flush(struct gpu_agent *g, uint64_t *request);
/* Asks the agent to leave CUPTI to another tool (yield_request). */
int gpu_agent_request_yield(struct gpu_agent *g);
/* Sets the lease to 0 (the agent stops within ~100 ms). */
void gpu_agent_release(struct gpu_agent *g);
void gpu_agent_close(struct gpu_agent *g);

#endif
