/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Running code inside the target on a thread rfbpf holds stopped at a safe
 * point (safe_point.h): a function call the way a debugger's `call` does
 * it, or bare system calls. Afterwards the thread is put back exactly as
 * it was: general registers, extended FPU/SSE/AVX state, signal mask, and
 * the system call it was blocked in, which resumes as the kernel would
 * resume it after a signal (restarted, or continued through
 * restart_syscall for sleeps).
 *
 * Signals: during a call the thread's mask blocks everything but the
 * synchronous faults, so a signal sent to it meanwhile stays pending and
 * is delivered once the mask is restored; none is lost or reordered by
 * rfbpf.
 *
 * rfbpf dying mid-call (SIGKILL, OOM): a function call returns into
 * rfbpf's page (stub_page.h), which stops at a marker system call for
 * rfbpf; with no tracer any more, the page's code restores the thread by
 * itself from the block rfbpf saved there before the call began. The bare
 * system calls that create that page, once per process, run over a signal
 * frame that restores the thread the same way (sigframe.h).
 */
#ifndef RFBPF_REMOTE_CALL_H
#define RFBPF_REMOTE_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#define REMOTE_XSTATE_MAX 16384

/* A thread rfbpf holds in a ptrace stop, and how to put it back. */
struct held_thread {
	pid_t pid, tid;
	struct user_regs_struct regs;	/* as found */
	uint64_t sigmask;		/* as found */
	size_t xstate_len;
	/* the XSAVE area (PTRACE_GETREGSET NT_X86_XSTATE), as found */
	unsigned char xstate[REMOTE_XSTATE_MAX] __attribute__((aligned(64)));
	/* The system call to run when it resumes: the one it was blocked in
	 * (restarted), restart_syscall, or -1 for none. */
	long resume_nr;
	uint64_t syscall_insn;	/* the `syscall` system calls run at, 0
				 * until one is needed */
	uint64_t net_sp;	/* the signal frame under the page's making
				 * (sigframe.h), 0 until written */
	uint64_t page;		/* rfbpf's page, once remote_protect ran */
	int held_signal;	/* a signal that stopped it, to deliver */
	const char *how;	/* for -v: how it was caught */
	bool at_op;		/* caught at an op (safe_point.h's points 1
				 * and 3), not waiting in a system call */
};

/* For this file and safe_point.c: CLOCK_MONOTONIC in ms, and a one-line
 * reason into err that returns ret. */
double remote_now_ms(void);
int remote_fail(char *err, size_t len, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* A wait of rfbpf's on thread tid saw process pid exit (status): noted,
 * since in launch mode that wait took the child's exit status. */
void remote_note_exit(pid_t pid, pid_t tid, int status);
/* The status such a wait took, if one did. */
bool remote_reaped(pid_t pid, int *status);

/* Reads the thread's state into h (it must be in a ptrace stop). */
int remote_save(struct held_thread *h);

/* Once rfbpf's page exists: saves h's state in it and makes every later
 * system call go through the page's own `syscall`, so that from now on a
 * dying rfbpf leaves h to restore itself. Returns 0 or -errno. */
int remote_protect(struct held_thread *h, uint64_t page_addr);

/* Called while waiting on the target (to drain the ring buffer). */
void remote_set_idle(void (*fn)(void *), void *ctx);
void remote_idle(void);

/* Runs system call nr with args on h. mem (mem_len bytes) is copied below
 * the thread's stack and, if mem_arg > 0, passed as argument mem_arg
 * (1-based). *ret receives the raw result (-errno on failure). */
int remote_syscall(struct held_thread *h, long nr, const uint64_t args[6],
		   const void *mem, size_t mem_len, int mem_arg, int64_t *ret,
		   char *err, size_t errlen);

/* remote_syscall with a mem block (none: NULL) passed as the first
 * argument, and a failure of the call itself in the target also returned
 * as -errno, said in err as a failure "while <what>". */
int remote_syscall_checked(struct held_thread *h, long nr,
			   const uint64_t args[6], const void *mem,
			   size_t mem_len, int64_t *ret, const char *what,
			   char *err, size_t errlen);

/* Where remote_call_function copies its stack_arg in h's stack: a call
 * can be passed a pointer to it (a string). Valid during that call. */
uint64_t remote_call_stack_arg(const struct held_thread *h);

/* Calls fn(args...) on h, which remote_protect() must have protected: it
 * returns through rfbpf's page. stack_arg (a by-value struct of class
 * MEMORY) is copied to [rsp+8] at entry. *ret receives rax. call_ms: after
 * this long, say it is slow (it is never abandoned: the thread must come
 * back through the page). */
int remote_call_function(struct held_thread *h, uint64_t fn,
			 const uint64_t args[6], const void *stack_arg,
			 size_t stack_len, int call_ms, uint64_t *ret,
			 char *err, size_t errlen);

/* Puts h back as it was found and leaves it in a syscall-entry stop from
 * which any resume (continue, detach) runs it on. Returns 0 or -errno. */
int remote_restore(struct held_thread *h);

#endif
