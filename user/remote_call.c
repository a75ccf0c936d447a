// SPDX-License-Identifier: BSD-2-Clause
/*
 * How the call is made (x86-64):
 *
 * 1. Pick a thread that /proc says is inside a system call and that neither
 *    blocks nor ignores SIGSEGV (the call returns to address 0, and the
 *    kernel would reset the handler of a blocked or ignored fault signal).
 * 2. PTRACE_SEIZE + PTRACE_INTERRUPT that thread alone. If it stopped at a
 *    system-call boundary (orig_rax >= 0) it is ours; otherwise it left the
 *    call meanwhile: let go and try again.
 * 3. Save its registers and XSAVE area. Build a call frame 640 bytes below
 *    its stack pointer (past the 128-byte red zone): the by-value argument
 *    at a 16-byte aligned address, a return address of 0 just below it.
 *    orig_rax = -1 stops the kernel from restarting the interrupted system
 *    call into our function.
 * 4. Continue. The function returns to 0 and faults: a SIGSEGV stop with
 *    rip == 0 is the return, rax the result. Other signals seen meanwhile
 *    are held back.
 * 5. Put the saved state back and detach with the held signal, if any. The
 *    restored orig_rax and -ERESTART* rax make the kernel restart the
 *    interrupted system call exactly as after any signal.
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

/* Is the thread inside a system call right now (per /proc)? */
static bool in_syscall(pid_t pid, pid_t tid)
{
	char path[96], buf[64];
	FILE *f;
	long nr;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
	f = fopen(path, "re");
	if (!f)
		return false;
	nr = fgets(buf, sizeof(buf), f) && buf[0] >= '0' && buf[0] <= '9' ?
	     strtol(buf, NULL, 10) : -1;
	fclose(f);
	return nr >= 0;
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

/* Waits for tid to stop, up to ms (ms < 0: forever). Returns the wait
 * status, 0 on timeout, -ESRCH if it is gone. */
static int wait_stop(pid_t tid, double ms)
{
	double end = now_ms() + ms;
	int st;

	for (;;) {
		pid_t r = waitpid(tid, &st, __WALL | (ms < 0 ? 0 : WNOHANG));

		if (r == tid)
			return WIFSTOPPED(st) ? st : -ESRCH;
		if (r < 0 && errno != EINTR)
			return -ESRCH;
		if (ms >= 0 && now_ms() >= end)
			return 0;
		if (ms >= 0)
			usleep(200);
	}
}

struct saved {
	struct user_regs_struct regs;
	unsigned char xstate[16384] __attribute__((aligned(64)));
	struct iovec xstate_iov;
	int pending_sig;
};

/* Seizes tid and stops it at a system-call boundary. Returns 1 when it is
 * stopped there (state saved), 0 when not safe (released), -ESRCH gone. */
static int stop_at_syscall(pid_t tid, struct saved *s)
{
	int st;

	if (ptrace(PTRACE_SEIZE, tid, 0, 0))
		return errno == ESRCH ? -ESRCH : -errno;
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0))
		return -ESRCH;
	st = wait_stop(tid, -1);
	if (st < 0)
		return -ESRCH;
	s->pending_sig = 0;
	/* A real signal may race the interrupt: hold it for later. */
	if (WSTOPSIG(st) != SIGTRAP && (st >> 16) == 0)
		s->pending_sig = WSTOPSIG(st);
	s->xstate_iov.iov_base = s->xstate;
	s->xstate_iov.iov_len = sizeof(s->xstate);
	if (ptrace(PTRACE_GETREGS, tid, 0, &s->regs) ||
	    ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE,
		   &s->xstate_iov)) {
		ptrace(PTRACE_DETACH, tid, 0, (void *)(long)s->pending_sig);
		return -ESRCH;
	}
	if ((long long)s->regs.orig_rax < 0) {
		ptrace(PTRACE_DETACH, tid, 0, (void *)(long)s->pending_sig);
		return 0;
	}
	return 1;
}

static int restore(pid_t tid, struct saved *s)
{
	int a = ptrace(PTRACE_SETREGS, tid, 0, &s->regs);
	int b = ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE,
		       &s->xstate_iov);
	int c = ptrace(PTRACE_DETACH, tid, 0, (void *)(long)s->pending_sig);

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
		if ((st >> 16) == 0 && !s->pending_sig)
			s->pending_sig = WSTOPSIG(st);	/* deliver later */
		ptrace(PTRACE_CONT, tid, 0, 0);
	}
}

static int try_threads(pid_t pid, const struct remote_call *c, uint64_t *ret,
		       char *err, size_t errlen, bool *called)
{
	static struct saved s;
	char path[64];
	struct dirent *d;
	int res = -EAGAIN;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return fail(err, errlen, -ESRCH, "process %d is gone", pid);
	while (res == -EAGAIN && (d = readdir(dir))) {
		pid_t tid = atoi(d->d_name);
		int r;

		if (tid <= 0 || !in_syscall(pid, tid) || segv_masked(pid, tid))
			continue;
		r = stop_at_syscall(tid, &s);
		if (r == -EPERM) {
			res = fail(err, errlen, r, "cannot ptrace process %d: "
				   "a debugger is attached, or CAP_SYS_PTRACE "
				   "is missing", pid);
			break;
		}
		if (r <= 0)
			continue;	/* left the syscall, or exited */
		*called = true;
		res = call_on(tid, c, &s, ret, err, errlen);
		if (restore(tid, &s) && !res)
			res = fail(err, errlen, -ESRCH, "cannot restore thread "
				   "%d: %s", tid, strerror(errno));
	}
	closedir(dir);
	return res;
}

int remote_call(pid_t pid, const struct remote_call *c, uint64_t *ret,
		char *err, size_t errlen)
{
	double end = now_ms() + c->find_ms;
	bool called = false;
	int res;

	for (;;) {
		res = try_threads(pid, c, ret, err, errlen, &called);
		if (res != -EAGAIN || called)
			return res;
		if (kill(pid, 0) && errno == ESRCH)
			return fail(err, errlen, -ESRCH, "process %d exited",
				    pid);
		if (now_ms() >= end)
			return fail(err, errlen, -ETIMEDOUT, "no thread of "
				    "process %d was blocked in a system call "
				    "within %d ms (it is busy; try again)",
				    pid, c->find_ms);
		usleep(2000);
	}
}
