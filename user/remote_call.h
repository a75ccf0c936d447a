/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Calling a function inside another process with ptrace, the way a
 * debugger's `call` does, restricted to a safe point: a thread at a system
 * call (blocked in it, or caught entering it) that is not made by the
 * dynamic loader nor a memory-management call, so the thread is not in the
 * middle of a dlopen or of malloc and the called function may allocate
 * and take its own locks.
 *
 * Only the chosen thread is stopped, and only while its registers are
 * swapped (microseconds); the call itself runs at full speed. The thread's
 * general registers, its extended FPU/SSE/AVX state and its interrupted
 * system call (which the kernel restarts as if nothing happened) are
 * restored exactly; a signal that arrives meanwhile is held and delivered
 * after the restore.
 */
#ifndef RFBPF_REMOTE_CALL_H
#define RFBPF_REMOTE_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct remote_call {
	uint64_t fn;		/* address of the function in the target */
	long syscall_nr;	/* or, with fn == 0, this system call */
	uint64_t args[6];	/* rdi, rsi, rdx, rcx (r10 for syscalls), r8,
				 * r9 */
	const void *stack_arg;	/* copied to [rsp+8] at entry (by-value */
	size_t stack_len;	/*  struct class MEMORY), or NULL */
	int stack_arg_ptr;	/* >0: args[n-1] = the copy's address (to pass
				 * a path to a system call) */
	int find_ms;		/* how long to look for a safe thread */
	int call_ms;		/* after this long, say the call is slow */
	void (*idle)(void *);	/* called while waiting (drain buffers) */
	bool verbose;		/* say which thread, and for how long */
	void *idle_ctx;
	pid_t traced_tid;	/* a thread the caller already traces, stopped
				 * at a safe system-call entry: use it as is */
};

/*
 * Runs the call in pid; *ret receives rax. Returns 0, or -errno with a
 * one-line reason in err (-ESRCH: the process is gone; -ETIMEDOUT: no
 * thread was blocked in a system call within find_ms).
 */
int remote_call(pid_t pid, const struct remote_call *c, uint64_t *ret,
		char *err, size_t errlen);

/* For a thread the caller traces, stopped at a system-call entry: is it a
 * safe point (not the dynamic loader, not memory management)? */
bool remote_safe_syscall_entry(pid_t pid, pid_t tid);
/* A signal held back during calls on a traced thread (0 if none): the
 * caller delivers it when it lets the thread go. */
int remote_take_held_signal(void);

#endif
