/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Loading the CUPTI agent (cupti/agent.h) into a job that was started
 * without it, in the attach stop, on the thread rfbpf holds there
 * (safe_point.h: at an op's entry or inside rfbpf's callback, where it
 * holds no allocator or dynamic-loader lock and is in no CUDA call; its
 * stack is unwound first to make sure of the first two):
 *
 *   1. memfd_create("librfbpf_cupti.so") on the held thread, filled with
 *      rfbpf's copy of the agent through /proc/PID/fd/N. The job needs
 *      nothing of rfbpf's file system (a container sees none of it), and
 *      its maps show the agent as "/memfd:librfbpf_cupti.so (deleted)".
 *   2. dlopen("/proc/self/fd/N", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)
 *      with the job's own libc: every symbol of the agent is bound in the
 *      stop (none later, in a launching thread), none of its symbols
 *      joins the job's global scope, and it stays loaded for good.
 *   3. close(N), and InitializeInjection(), as the CUDA driver calls it:
 *      it starts the agent's thread, which takes CUPTI only while rfbpf
 *      holds its lease (so after a detach it is loaded and inert, and a
 *      later attach uses it again).
 *
 * The agent loads the job's own CUPTI (CUDA 12 or 13) when a lease
 * first comes, as it does when the driver injects it.
 */
#ifndef RFBPF_GPU_INJECT_H
#define RFBPF_GPU_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct held_thread;

/* What loading the agent into a job takes, found before the attach stop
 * (it reads the job's maps, which no held thread should wait for). */
struct gpu_inject {
	char agent[4096];	/* rfbpf's own copy of the agent */
	uint64_t dlopen, dlsym, dlerror;	/* the job's */
};

/* Should pid get the agent: it uses CUDA (libcudart or libcuda mapped),
 * runs no agent thread and names no CUDA_INJECTION64_PATH of its own?
 * 1: yes, and g says how; 0: no, why in why; -errno: yes, but it cannot
 * be done (no agent file, no dlopen in the job, a seccomp filter), why in
 * why. The agent file is file if given (--gpu-agent), else the one beside
 * the rfbpf binary (build/cupti/ in a built tree, ../lib/rfbpf/ once
 * installed). */
int gpu_inject_prepare(pid_t pid, const char *file, struct gpu_inject *g,
		       char *why, size_t len);
/* Loads the agent into h's process and initializes it, or initializes
 * one an earlier rfbpf loaded (killed before it could). Refuses, with
 * nothing done, a thread that was not held at an op (it may be in a CUDA
 * call), and one whose stack shows it inside the dynamic loader or malloc
 * (attach/held_stack.h; verbose: its frames on stderr). 0 or -errno with
 * a one-line reason in err. */
int gpu_inject(struct held_thread *h, const struct gpu_inject *g,
	       bool verbose, char *err, size_t len);

#endif
