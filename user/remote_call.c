// SPDX-License-Identifier: BSD-2-Clause
/*
 * How the call is made (x86-64):
 *
 * 1. Pick a thread that neither blocks nor ignores SIGSEGV (the call
 *    returns to address 0, and the kernel resets the handler of a blocked
 *    or ignored fault signal, which would change the target).
 * 2. PTRACE_SEIZE + PTRACE_INTERRUPT that thread alone.
 *    - Stopped inside a system call (orig_rax >= 0, blocked in futex, poll,
 *      read...): that is the safe point.
 *    - Stopped in user code: PTRACE_SYSCALL lets it run to its next
 *      system-call entry, for a few milliseconds at most; that entry is the
 *      safe point. A thread that makes none is released untouched.
 *    A safe point is refused if the system call comes from the dynamic
 *    loader (rip inside ld.so: a dlopen is in progress) or manages memory
 *    (mmap, brk...: likely inside malloc, holding an arena lock).
 * 3. Save its registers and XSAVE area. Build a call frame 640 bytes below
 *    its stack pointer (past the 128-byte red zone): the by-value argument
 *    at a 16-byte aligned address, a return address of 0 just below it.
 *    orig_rax = -1 so the kernel neither restarts nor runs the system call
 *    into our function.
 * 4. Continue. The function returns to 0 and faults: a SIGSEGV stop with
 *    rip == 0 is the return, rax the result. Other signals seen meanwhile
 *    are held back.
 * 5. Put the saved state back and detach with the held signal, if any. A
 *    blocked call restarts as after any signal (the saved -ERESTART* rax and
 *    orig_rax tell the kernel to); a call caught at its entry is re-issued
 *    by pointing rip back at its 2-byte `syscall` instruction.
 *
 * The loader keeps draining its ring buffer meanwhile (the idle callback),
 * so probes firing in the target's other threads are not dropped.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "remote_call.h"

#define RED_ZONE 128
#define FRAME_GAP 512

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int fail(char *err, size_t len, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return ret;
}

/* Does the thread block or ignore SIGSEGV? (See step 1.) */
static bool segv_masked(pid_t pid, pid_t tid)
{
	char path[96], line[128];
	unsigned long long mask;
	bool masked = true;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	f = fopen(path, "re");
	if (!f)
		return true;
	masked = false;
	while (fgets(line, sizeof(line), f))
		if ((!strncmp(line, "SigBlk:", 7) ||
		     !strncmp(line, "SigIgn:", 7)) &&
		    sscanf(line + 7, "%llx", &mask) == 1 &&
		    (mask & (1ull << (SIGSEGV - 1))))
			masked = true;
	fclose(f);
	return masked;
}

static void (*idle_fn)(void *);
static void *idle_ctx;

/* Waits for tid to stop, up to ms (ms < 0: forever). Returns the wait
 * status, 0 on timeout, -ESRCH if it is gone. */
static int wait_stop(pid_t tid, double ms)
{
	double end = now_ms() + ms;
	int st;

	for (;;) {
		pid_t r = waitpid(tid, &st, __WALL | WNOHANG);

		if (r == tid)
			return WIFSTOPPED(st) ? st : -ESRCH;
		if (r < 0 && errno != EINTR)
			return -ESRCH;
		if (ms >= 0 && now_ms() >= end)
			return 0;
		if (idle_fn)
			idle_fn(idle_ctx);
		usleep(100);
	}
}

/* The dynamic loader's text, to refuse safe points inside a dlopen. */
static void loader_range(pid_t pid, uint64_t *lo, uint64_t *hi)
{
	char path[64], *line = NULL;
	unsigned long long a, b;
	size_t cap = 0;
	FILE *f;

	*lo = *hi = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (getline(&line, &cap, f) > 0) {
		char *file = strrchr(line, '/');

		if (file && !strncmp(file, "/ld-linux", 9) &&
		    sscanf(line, "%llx-%llx", &a, &b) == 2) {
			if (!*lo || a < *lo)
				*lo = a;
			if (b > *hi)
				*hi = b;
		}
	}
	free(line);
	fclose(f);
}

/* System calls that suggest the thread is inside malloc or the loader. */
static bool memory_syscall(long long nr)
{
	return nr == SYS_mmap || nr == SYS_munmap || nr == SYS_mprotect ||
	       nr == SYS_brk || nr == SYS_mremap || nr == SYS_madvise;
}

struct saved {
	struct user_regs_struct regs;
	unsigned char xstate[16384] __attribute__((aligned(64)));
	struct iovec xstate_iov;
	int pending_sig;
	bool at_entry;		/* caught at syscall entry, not blocked in it */
};

static int save_state(pid_t tid, struct saved *s)
{
	s->xstate_iov.iov_base = s->xstate;
	s->xstate_iov.iov_len = sizeof(s->xstate);
	return ptrace(PTRACE_GETREGS, tid, 0, &s->regs) ||
	       ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE,
		      &s->xstate_iov) ? -ESRCH : 0;
}

/* A stop that is not ours (a signal racing us): hold the signal. */
static void hold_signal(int st, struct saved *s)
{
	if ((st >> 16) == 0 && WSTOPSIG(st) != SIGTRAP &&
	    WSTOPSIG(st) != (SIGTRAP | 0x80) && !s->pending_sig)
		s->pending_sig = WSTOPSIG(st);
}

static bool acceptable(pid_t tid, const struct saved *s, uint64_t ld_lo,
		       uint64_t ld_hi)
{
	uint16_t insn = 0;
	struct iovec local = { &insn, 2 };
	struct iovec remote = { (void *)(s->regs.rip - 2), 2 };

	if (memory_syscall(s->regs.orig_rax))
		return false;
	if (s->regs.rip >= ld_lo && s->regs.rip < ld_hi)
		return false;
	/* Re-issuing needs the 2-byte `syscall` (0f 05) right before rip. */
	return !s->at_entry ||
	       (process_vm_readv(tid, &local, 1, &remote, 1, 0) == 2 &&
		insn == 0x050f);
}

/* Lets go of a thread that offered no safe point. */
static void release(pid_t tid, struct saved *s, bool running)
{
	if (running) {
		ptrace(PTRACE_INTERRUPT, tid, 0, 0);
		hold_signal(wait_stop(tid, -1), s);
	}
	ptrace(PTRACE_DETACH, tid, 0, (void *)(long)s->pending_sig);
}

/* Seizes tid and stops it at a system-call boundary (step 2). Returns 1
 * when stopped there (state saved), 0 when released, -errno on error. */
static int stop_at_syscall(pid_t tid, struct saved *s, uint64_t ld_lo,
			   uint64_t ld_hi)
{
	int st;

	memset(&s->regs, 0, sizeof(s->regs));
	s->pending_sig = 0;
	s->at_entry = false;
	if (ptrace(PTRACE_SEIZE, tid, 0, (void *)PTRACE_O_TRACESYSGOOD))
		return errno == ESRCH ? -ESRCH : -errno;
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0))
		return -ESRCH;
	st = wait_stop(tid, -1);
	if (st < 0)
		return -ESRCH;
	hold_signal(st, s);
	if (save_state(tid, s))
		return release(tid, s, false), -ESRCH;
	if ((long long)s->regs.orig_rax < 0) {
		/* In user code: run it to its next system call entry. */
		if (ptrace(PTRACE_SYSCALL, tid, 0, 0))
			return release(tid, s, false), -ESRCH;
		st = wait_stop(tid, 5);
		while (st > 0 && WSTOPSIG(st) != (SIGTRAP | 0x80)) {
			hold_signal(st, s);
			ptrace(PTRACE_SYSCALL, tid, 0, 0);
			st = wait_stop(tid, 5);
		}
		if (st < 0)
			return -ESRCH;
		if (st == 0)
			return release(tid, s, true), 0;
		s->at_entry = true;
		if (save_state(tid, s))
			return release(tid, s, false), -ESRCH;
	}
	if (!acceptable(tid, s, ld_lo, ld_hi))
		return release(tid, s, false), 0;
	return 1;
}

static int restore(pid_t tid, struct saved *s)
{
	struct user_regs_struct r = s->regs;
	int a, b, c;

	if (s->at_entry) {	/* re-issue the system call it was entering */
		r.rip -= 2;
		r.rax = r.orig_rax;
	}
	a = ptrace(PTRACE_SETREGS, tid, 0, &r);
	b = ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE,
		   &s->xstate_iov);
	c = ptrace(PTRACE_DETACH, tid, 0, (void *)(long)s->pending_sig);
	return a || b || c ? -errno : 0;
}

static int write_mem(pid_t tid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = { (void *)buf, len };
	struct iovec remote = { (void *)addr, len };

	return process_vm_writev(tid, &local, 1, &remote, 1, 0) == (ssize_t)len
	       ? 0 : -errno;
}

/* Runs the call on a thread stopped at a syscall boundary. */
static int call_on(pid_t tid, const struct remote_call *c, struct saved *s,
		   uint64_t *ret, char *err, size_t errlen)
{
	struct user_regs_struct r = s->regs;
	uint64_t sp = (r.rsp - RED_ZONE - FRAME_GAP) & ~0xfull, zero = 0;
	int st, e;

	if (c->stack_arg && (e = write_mem(tid, sp, c->stack_arg,
					   c->stack_len)))
		return fail(err, errlen, e, "cannot write the call frame: %s",
			    strerror(-e));
	sp -= 8;
	if ((e = write_mem(tid, sp, &zero, sizeof(zero))))
		return fail(err, errlen, e, "cannot write the call frame: %s",
			    strerror(-e));
	r.rsp = sp;
	r.rip = c->fn;
	r.rdi = c->args[0]; r.rsi = c->args[1]; r.rdx = c->args[2];
	r.rcx = c->args[3]; r.r8 = c->args[4]; r.r9 = c->args[5];
	r.rax = 0;
	r.orig_rax = -1;
	if (ptrace(PTRACE_SETREGS, tid, 0, &r) ||
	    ptrace(PTRACE_CONT, tid, 0, 0))
		return fail(err, errlen, -errno, "cannot start the call: %s",
			    strerror(errno));
	for (double end = now_ms() + c->call_ms;;) {
		st = wait_stop(tid, end - now_ms());
		if (st == -ESRCH)
			return fail(err, errlen, -ESRCH, "the thread exited "
				    "during the call");
		if (st == 0) {
			/* Giving up would leave the thread to return to
			 * address 0 untraced and crash: wait it out. */
			fprintf(stderr, "rfbpf: the call into the target has "
				"not returned after %d ms; still waiting\n",
				c->call_ms);
			end = 1e300;
			continue;
		}
		if (WSTOPSIG(st) == SIGSEGV && (st >> 16) == 0) {
			if (ptrace(PTRACE_GETREGS, tid, 0, &r))
				return -ESRCH;
			if (r.rip == 0) {
				*ret = r.rax;
				return 0;
			}
			return fail(err, errlen, -EFAULT, "the called function "
				    "faulted at 0x%llx", r.rip);
		}
		hold_signal(st, s);	/* delivered after the restore */
		ptrace(PTRACE_CONT, tid, 0, 0);
	}
}

/* Runs tid to its next system-call stop (entry or exit), holding back any
 * signal on the way; info says which. Returns 0 or -ESRCH. */
static int next_syscall_stop(pid_t tid, struct saved *s,
			     struct __ptrace_syscall_info *info)
{
	for (;;) {
		int st;

		if (ptrace(PTRACE_SYSCALL, tid, 0, 0))
			return -ESRCH;
		st = wait_stop(tid, -1);
		if (st < 0)
			return -ESRCH;
		if (WSTOPSIG(st) != (SIGTRAP | 0x80)) {
			hold_signal(st, s);
			continue;
		}
		if (ptrace(PTRACE_GET_SYSCALL_INFO, tid, sizeof(*info), info)
		    > 0)
			return 0;
	}
}

/* Runs a system call in the target: the thread re-executes the 2-byte
 * `syscall` instruction it stopped after, with our registers, and
 * PTRACE_SYSCALL stops bracket it: our call's entry, then its exit
 * (PTRACE_GET_SYSCALL_INFO tells them apart from the exit of a call the
 * thread was entering when caught, which is skipped first). No code of
 * the target runs, so no lock of the target is involved. */
static int syscall_on(pid_t tid, const struct remote_call *c,
		      struct saved *s, uint64_t *ret, char *err,
		      size_t errlen)
{
	struct user_regs_struct r = s->regs;
	uint64_t sp = (r.rsp - RED_ZONE - FRAME_GAP) & ~0xfull;
	uint64_t args[6];
	uint16_t insn = 0;
	struct iovec local = { &insn, 2 }, remote = { (void *)(r.rip - 2), 2 };
	struct __ptrace_syscall_info info;
	bool entered = false;
	int e;

	if (process_vm_readv(tid, &local, 1, &remote, 1, 0) != 2 ||
	    insn != 0x050f)
		return fail(err, errlen, -EINVAL, "no syscall instruction "
			    "before the stopped thread's rip");
	memcpy(args, c->args, sizeof(args));
	if (c->stack_arg) {
		if ((e = write_mem(tid, sp, c->stack_arg, c->stack_len)))
			return fail(err, errlen, e, "cannot write the argument: "
				    "%s", strerror(-e));
		if (c->stack_arg_ptr > 0)
			args[c->stack_arg_ptr - 1] = sp;
	}
	r.rip -= 2;
	r.rax = c->syscall_nr;
	r.orig_rax = -1;
	r.rdi = args[0]; r.rsi = args[1]; r.rdx = args[2];
	r.r10 = args[3]; r.r8 = args[4]; r.r9 = args[5];
	if (ptrace(PTRACE_SETREGS, tid, 0, &r))
		return fail(err, errlen, -errno, "cannot set registers: %s",
			    strerror(errno));
	for (;;) {
		if (next_syscall_stop(tid, s, &info))
			return fail(err, errlen, -ESRCH, "the thread exited");
		if (info.op == PTRACE_SYSCALL_INFO_ENTRY &&
		    (long)info.entry.nr == c->syscall_nr)
			entered = true;
		else if (info.op == PTRACE_SYSCALL_INFO_EXIT && entered)
			break;
	}
	if (ptrace(PTRACE_GETREGS, tid, 0, &r))
		return -ESRCH;
	*ret = r.rax;
	return 0;
}

static int try_threads(pid_t pid, const struct remote_call *c, uint64_t *ret,
		       char *err, size_t errlen, bool *called)
{
	static struct saved s;
	uint64_t ld_lo, ld_hi;
	char path[64];
	struct dirent *d;
	int res = -EAGAIN;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return fail(err, errlen, -ESRCH, "process %d exited", pid);
	loader_range(pid, &ld_lo, &ld_hi);
	while (res == -EAGAIN && (d = readdir(dir))) {
		pid_t tid = atoi(d->d_name);
		int r;

		if (tid <= 0 || segv_masked(pid, tid))
			continue;
		double t0 = now_ms(), t1;

		r = stop_at_syscall(tid, &s, ld_lo, ld_hi);
		if (r == -EPERM) {
			res = fail(err, errlen, r, "cannot ptrace process %d: "
				   "a debugger is attached, or CAP_SYS_PTRACE "
				   "is missing", pid);
			break;
		}
		if (r <= 0)
			continue;	/* left the syscall, or exited */
		*called = true;
		t1 = now_ms();
		res = c->fn ? call_on(tid, c, &s, ret, err, errlen) :
			      syscall_on(tid, c, &s, ret, err, errlen);
		if (restore(tid, &s) && !res)
			res = fail(err, errlen, -ESRCH, "cannot restore thread "
				   "%d: %s", tid, strerror(errno));
		if (c->verbose)
			fprintf(stderr, "rfbpf: called 0x%llx on thread %d (%s "
				"system call %lld): thread held %.2f ms, of "
				"which the call %.2f ms\n",
				(unsigned long long)c->fn, tid,
				s.at_entry ? "entering" : "blocked in",
				(long long)s.regs.orig_rax, now_ms() - t0,
				now_ms() - t1);
	}
	closedir(dir);
	return res;
}

static int held_signal;

int remote_take_held_signal(void)
{
	int sig = held_signal;

	held_signal = 0;
	return sig;
}

bool remote_safe_syscall_entry(pid_t pid, pid_t tid)
{
	struct saved s = { .at_entry = true };
	uint64_t lo, hi;

	if (ptrace(PTRACE_GETREGS, tid, 0, &s.regs))
		return false;
	loader_range(pid, &lo, &hi);
	return acceptable(tid, &s, lo, hi);
}

/* The call on a thread the caller traces, at a system-call entry stop:
 * afterwards the thread is put back at the same entry (it re-issues the
 * system call and stops there again), still traced. */
static int call_traced(pid_t tid, const struct remote_call *c, uint64_t *ret,
		       char *err, size_t errlen)
{
	static struct saved s;
	struct __ptrace_syscall_info info;
	struct user_regs_struct r;
	int res;

	s.at_entry = true;
	s.pending_sig = 0;
	if (save_state(tid, &s))
		return fail(err, errlen, -ESRCH, "the thread is gone");
	res = c->fn ? call_on(tid, c, &s, ret, err, errlen) :
		      syscall_on(tid, c, &s, ret, err, errlen);
	r = s.regs;
	r.rip -= 2;
	r.rax = r.orig_rax;
	if (ptrace(PTRACE_SETREGS, tid, 0, &r) ||
	    ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE,
		   &s.xstate_iov))
		return fail(err, errlen, -ESRCH, "cannot restore the thread");
	do {
		if (next_syscall_stop(tid, &s, &info))
			return fail(err, errlen, -ESRCH, "the thread exited");
	} while (info.op != PTRACE_SYSCALL_INFO_ENTRY);
	if (s.pending_sig && !held_signal)
		held_signal = s.pending_sig;
	return res;
}

int remote_call(pid_t pid, const struct remote_call *c, uint64_t *ret,
		char *err, size_t errlen)
{
	double end = now_ms() + c->find_ms;
	bool called = false;
	int res;

	idle_fn = c->idle;
	idle_ctx = c->idle_ctx;
	if (c->traced_tid)
		return call_traced(c->traced_tid, c, ret, err, errlen);
	for (;;) {
		res = try_threads(pid, c, ret, err, errlen, &called);
		if (res != -EAGAIN || called)
			return res;
		if (kill(pid, 0) && errno == ESRCH)
			return fail(err, errlen, -ESRCH, "process %d exited",
				    pid);
		if (now_ms() >= end)
			return fail(err, errlen, -ETIMEDOUT, "no thread of "
				    "process %d reached a safe point (a system "
				    "call outside malloc and the loader) within "
				    "%d ms: it is busy in one long computation; "
				    "try again later", pid, c->find_ms);
		for (int i = 0; i < 20; i++) {
			if (idle_fn)
				idle_fn(idle_ctx);
			usleep(100);
		}
	}
}
