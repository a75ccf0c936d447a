// SPDX-License-Identifier: BSD-2-Clause
/*
 * How a call is made (x86-64), on a thread already held in a ptrace stop:
 *
 * 1. remote_save: registers, XSAVE area and signal mask as found. Each
 *    time rip is pointed at code of ours, the mask is set to block every
 *    signal but the synchronous faults (never before: see redirect()).
 * 2. remote_protect, once per hold: the saved state is written to the
 *    page's block (stub_page.h) in the form the thread must resume in: a system call it was blocked in is
 *    re-issued (rip - 2, rax = its number, or restart_syscall after a
 *    sleep), so the block alone is enough to put the thread back.
 * 3. A call frame 640 bytes below its stack pointer (past the 128-byte red
 *    zone): the by-value argument at a 16-byte aligned address and, below
 *    it, the return address: the page's return code. orig_rax = -1 so the
 *    kernel does not restart anything into our function.
 * 4. PTRACE_SYSCALL until the return code's marker system call enters:
 *    rdi then holds the result. The function's own system calls pass.
 * 5. remote_restore, at that syscall-entry stop: XSAVE area, mask and
 *    registers back, with orig_rax = the system call to resume (or -1),
 *    which the kernel then runs in place of the marker, exactly as its own
 *    restart after a signal would.
 *
 * If rfbpf dies at any point after step 2, the kernel lets the thread go:
 * it finishes the call, returns into the page, passes the marker, and the
 * page restores it from the block. Before the page exists (the system
 * calls that map it), a signal frame under the stack does the same job
 * (sigframe.h).
 */
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "model/clocks.h"
#include "remote_call.h"
#include "sigframe.h"
#include "stub_page.h"

#define RED_ZONE 128
#define FRAME_GAP 512

/* Kernel-internal results of an interrupted system call (never seen by
 * user space): the kernel restarts it when the thread resumes. */
#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516

double remote_now_ms(void)
{
	return monotonic_s() * 1e3;
}

int remote_fail(char *err, size_t len, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return ret;
}

static int write_mem(pid_t tid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = { (void *)buf, len };
	struct iovec remote = { (void *)addr, len };

	return process_vm_writev(tid, &local, 1, &remote, 1, 0) == (ssize_t)len
	       ? 0 : -errno;
}

/* Signals a thread may not block without the kernel resetting their
 * handler when one is raised by a fault: they stay deliverable (to rfbpf,
 * as a ptrace stop) during a call. */
static uint64_t call_mask(void)
{
	uint64_t m = ~0ull;

	m &= ~(1ull << (SIGSEGV - 1));
	m &= ~(1ull << (SIGBUS - 1));
	m &= ~(1ull << (SIGILL - 1));
	m &= ~(1ull << (SIGFPE - 1));
	m &= ~(1ull << (SIGTRAP - 1));
	return m;
}

int remote_save(struct held_thread *h)
{
	struct iovec iov = { h->xstate, sizeof(h->xstate) };
	long rax, orig;

	if (ptrace(PTRACE_GETREGS, h->tid, 0, &h->regs) ||
	    ptrace(PTRACE_GETREGSET, h->tid, (void *)NT_X86_XSTATE, &iov) ||
	    ptrace(PTRACE_GETSIGMASK, h->tid, (void *)sizeof(h->sigmask),
		   &h->sigmask))
		return -errno;
	h->xstate_len = iov.iov_len;
	rax = (long)h->regs.rax;
	orig = (long)h->regs.orig_rax;
	/* The kernel's own restart rule (arch_do_signal_or_restart). */
	if (orig >= 0 && (rax == -ERESTARTSYS || rax == -ERESTARTNOINTR ||
			  rax == -ERESTARTNOHAND))
		h->resume_nr = orig;
	else if (orig >= 0 && rax == -ERESTART_RESTARTBLOCK)
		h->resume_nr = SYS_restart_syscall;
	else
		h->resume_nr = -1;
	h->page = 0;
	h->syscall_insn = 0;
	h->net_sp = 0;
	return 0;
}

/* The registers h must resume with: a system call it was blocked in is
 * re-issued (rip back over the `syscall`, rax its number). */
static void resume_regs(const struct held_thread *h,
			struct user_regs_struct *r)
{
	*r = h->regs;
	if (h->resume_nr >= 0) {
		r->rax = (uint64_t)h->resume_nr;
		r->rip -= 2;
	}
}

/* Before the page exists: the signal frame under the thread's stack and
 * libc's `syscall; ret` (sigframe.h), once per hold. */
static int spread_net(struct held_thread *h, char *err, size_t errlen)
{
	static unsigned char frame[REMOTE_XSTATE_MAX + 1024];
	uint64_t below = (h->regs.rsp - RED_ZONE - FRAME_GAP) & ~0xfull;
	struct sigframe_gadgets g;
	struct user_regs_struct r;
	uint64_t at;
	long n;
	int e;

	if (sigframe_find_gadgets(h->pid, &g))
		return remote_fail(err, errlen, -ENOEXEC, "libc has no "
				   "`syscall; ret` or signal-return code "
				   "(rfbpf needs both to map its page safely)");
	at = (below - sigframe_size(h->xstate_len)) & ~63ull;
	resume_regs(h, &r);
	n = sigframe_build(frame, sizeof(frame), at, &r, h->sigmask,
			   h->xstate, h->xstate_len, g.sigreturn);
	if (n < 0)
		return remote_fail(err, errlen, (int)n, "the thread's XSAVE "
				   "area (%zu bytes) does not fit a signal "
				   "frame", h->xstate_len);
	if ((e = write_mem(h->tid, at, frame, (size_t)n)))
		return remote_fail(err, errlen, e, "cannot write to the "
				   "target's stack: %s", strerror(-e));
	h->syscall_insn = g.syscall_ret;
	h->net_sp = at;
	return 0;
}

/* Points r at the `syscall` system calls run through: the page's own once
 * h is protected, else libc's `syscall; ret` over the signal frame. */
static int at_syscall(struct held_thread *h, struct user_regs_struct *r,
		      char *err, size_t errlen)
{
	int e;

	if (!h->page && !h->net_sp && (e = spread_net(h, err, errlen)))
		return e;
	r->rip = h->syscall_insn;
	if (!h->page)
		r->rsp = h->net_sp;
	return 0;
}

/* Points h at code of ours with regs: from here until it is put back,
 * signals for it wait. rip first, then the mask: a thread let go by a
 * dying rfbpf in between runs code of ours, which restores both (the page,
 * or the signal frame); the other order could leave every signal blocked
 * with the thread back in its own code. */
static int redirect(struct held_thread *h, const struct user_regs_struct *r)
{
	uint64_t mask = call_mask();

	return ptrace(PTRACE_SETREGS, h->tid, 0, r) ||
	       ptrace(PTRACE_SETSIGMASK, h->tid, (void *)sizeof(mask), &mask) ?
	       -errno : 0;
}

/* The state the thread resumes in, written to the page so that the page
 * can restore it without rfbpf (see stub_page.S). */
static int write_block(struct held_thread *h, uint64_t page)
{
	struct user_regs_struct resume, *r = &resume;
	uint64_t regs[STUB_R_NR], head[3];
	int e;

	if (h->xstate_len > STUB_XSAVE_MAX)
		return -E2BIG;
	resume_regs(h, r);
	regs[STUB_R_RAX] = r->rax;
	regs[STUB_R_RBX] = r->rbx;
	regs[STUB_R_RCX] = r->rcx;
	regs[STUB_R_RDX] = r->rdx;
	regs[STUB_R_RSI] = r->rsi;
	regs[STUB_R_RDI] = r->rdi;
	regs[STUB_R_RBP] = r->rbp;
	regs[STUB_R_R8] = r->r8;
	regs[STUB_R_R9] = r->r9;
	regs[STUB_R_R10] = r->r10;
	regs[STUB_R_R11] = r->r11;
	regs[STUB_R_R12] = r->r12;
	regs[STUB_R_R13] = r->r13;
	regs[STUB_R_R14] = r->r14;
	regs[STUB_R_R15] = r->r15;
	regs[STUB_R_RSP] = r->rsp;
	regs[STUB_R_RIP] = r->rip;
	head[0] = 0;			/* STUB_RESULT */
	head[1] = h->sigmask;		/* STUB_MASK */
	head[2] = r->eflags;		/* STUB_RFLAGS */
	if ((e = write_mem(h->tid, page + STUB_XSAVE, h->xstate,
			   h->xstate_len)) ||
	    (e = write_mem(h->tid, page + STUB_REGS, regs, sizeof(regs))))
		return e;
	return write_mem(h->tid, page + STUB_RESULT, head, sizeof(head));
}

int remote_protect(struct held_thread *h, uint64_t page_addr)
{
	int e = write_block(h, page_addr);

	if (!e) {
		h->page = page_addr;
		h->syscall_insn = page_addr + STUB_MARKER_END - 2;
	}
	return e;
}

/* A wait on a thread of the target may see the whole process exit; if
 * the process is rfbpf's child (launch mode), that wait took its exit
 * status, which launch mode needs. */
static pid_t reaped_pid;
static int reaped_status;

void remote_note_exit(pid_t pid, pid_t tid, int status)
{
	if (tid == pid) {
		reaped_pid = pid;
		reaped_status = status;
	}
}

bool remote_reaped(pid_t pid, int *status)
{
	if (reaped_pid != pid)
		return false;
	*status = reaped_status;
	return true;
}

static void (*idle_fn)(void *);
static void *idle_ctx;

void remote_set_idle(void (*fn)(void *), void *ctx)
{
	idle_fn = fn;
	idle_ctx = ctx;
}

void remote_idle(void)
{
	if (idle_fn)
		idle_fn(idle_ctx);
}

/* Waits for the next stop of tid (polling, so the caller's ring buffer
 * is drained meanwhile). Returns the status, or -ESRCH. */
static int wait_stop(pid_t pid, pid_t tid, int slow_ms, const char *what)
{
	double warn = remote_now_ms() + slow_ms;
	int st;

	for (;;) {
		pid_t r = waitpid(tid, &st, __WALL | WNOHANG);

		if (r == tid && !WIFSTOPPED(st))
			remote_note_exit(pid, tid, st);
		if (r == tid)
			return WIFSTOPPED(st) ? st : -ESRCH;
		if (r < 0 && errno != EINTR)
			return -ESRCH;
		if (slow_ms > 0 && remote_now_ms() > warn) {
			fprintf(stderr, "rfbpf: %s in the target has not "
				"returned after %d ms; still waiting\n", what,
				slow_ms);
			slow_ms = 0;
		}
		remote_idle();
		usleep(50);
	}
}

enum stop_kind { STOP_ENTRY, STOP_EXIT, STOP_FAULT, STOP_OTHER };

/* Resumes h with PTRACE_SYSCALL and classifies its next stop. A signal
 * that is not a fault (only SIGSTOP can get past the mask) is kept for
 * the detach. */
static int next_stop(struct held_thread *h, int slow_ms, const char *what,
		     struct __ptrace_syscall_info *info)
{
	int st;

	if (ptrace(PTRACE_SYSCALL, h->tid, 0, 0))
		return -ESRCH;
	st = wait_stop(h->pid, h->tid, slow_ms, what);
	if (st < 0)
		return st;
	if (WSTOPSIG(st) == (SIGTRAP | 0x80)) {
		if (ptrace(PTRACE_GET_SYSCALL_INFO, h->tid, sizeof(*info),
			   info) <= 0)
			return -ESRCH;
		return info->op == PTRACE_SYSCALL_INFO_ENTRY ? STOP_ENTRY :
		       STOP_EXIT;
	}
	if ((st >> 16) != 0)	/* a ptrace event stop (group stop...) */
		return STOP_OTHER;
	switch (WSTOPSIG(st)) {
	case SIGSEGV: case SIGBUS: case SIGILL: case SIGFPE: case SIGTRAP:
		return STOP_FAULT;
	default:
		if (!h->held_signal)
			h->held_signal = WSTOPSIG(st);
		return STOP_OTHER;
	}
}

int remote_syscall(struct held_thread *h, long nr, const uint64_t args[6],
		   const void *mem, size_t mem_len, int mem_arg, int64_t *ret,
		   char *err, size_t errlen)
{
	struct user_regs_struct r = h->regs;
	uint64_t sp = (r.rsp - RED_ZONE - FRAME_GAP) & ~0xfull, a[6];
	struct __ptrace_syscall_info info;
	bool entered = false;
	int k, e;

	if ((e = at_syscall(h, &r, err, errlen)))
		return e;
	memcpy(a, args, sizeof(a));
	if (mem && (e = write_mem(h->tid, sp, mem, mem_len)))
		return remote_fail(err, errlen, e,
				   "cannot write to the target's stack: %s",
				   strerror(-e));
	if (mem && mem_arg > 0)
		a[mem_arg - 1] = sp;
	r.rax = nr;
	r.orig_rax = -1;
	r.rdi = a[0]; r.rsi = a[1]; r.rdx = a[2];
	r.r10 = a[3]; r.r8 = a[4]; r.r9 = a[5];
	if (redirect(h, &r))
		return remote_fail(err, errlen, -errno,
				   "cannot set registers: %s",
				   strerror(errno));
	for (;;) {
		k = next_stop(h, 2000, "a system call", &info);
		if (k < 0)
			return remote_fail(err, errlen, -ESRCH,
					   "the thread exited");
		if (k == STOP_FAULT)
			return remote_fail(err, errlen, -EFAULT,
					   "system call %ld faulted", nr);
		if (k == STOP_ENTRY && (long)info.entry.nr == nr &&
		    info.instruction_pointer == h->syscall_insn + 2)
			entered = true;
		else if (k == STOP_EXIT && entered)
			break;
	}
	*ret = (int64_t)info.exit.rval;
	return 0;
}

int remote_syscall_checked(struct held_thread *h, long nr,
			   const uint64_t args[6], const void *mem,
			   size_t mem_len, int64_t *ret, const char *what,
			   char *err, size_t errlen)
{
	int e = remote_syscall(h, nr, args, mem, mem_len, mem ? 1 : 0, ret,
			       err, errlen);

	if (e)
		return e;
	if (*ret < 0 && *ret > -4096)
		return remote_fail(err, errlen, (int)*ret, "system call %ld "
				   "failed in the target while %s: %s", nr,
				   what, strerror((int)-*ret));
	return 0;
}

uint64_t remote_call_stack_arg(const struct held_thread *h)
{
	return (h->regs.rsp - RED_ZONE - FRAME_GAP) & ~0xfull;
}

int remote_call_function(struct held_thread *h, uint64_t fn,
			 const uint64_t args[6],
			 const void *stack_arg, size_t stack_len,
			 int call_ms, uint64_t *ret, char *err,
			 size_t errlen)
{
	struct user_regs_struct r = h->regs;
	uint64_t sp = remote_call_stack_arg(h);
	uint64_t back = h->page + STUB_RETURN_OFFSET;
	struct __ptrace_syscall_info info;
	int k, e;

	if (!h->page)		/* it must be able to come back by itself */
		return remote_fail(err, errlen, -EINVAL, "the thread's state "
				   "is not saved in rfbpf's page");
	if (stack_arg && (e = write_mem(h->tid, sp, stack_arg, stack_len)))
		return remote_fail(err, errlen, e,
				   "cannot write the call frame: %s",
				   strerror(-e));
	sp -= 8;
	if ((e = write_mem(h->tid, sp, &back, sizeof(back))))
		return remote_fail(err, errlen, e,
				   "cannot write the call frame: %s",
				   strerror(-e));
	r.rsp = sp;
	r.rip = fn;
	r.rdi = args[0]; r.rsi = args[1]; r.rdx = args[2];
	r.rcx = args[3]; r.r8 = args[4]; r.r9 = args[5];
	r.rax = 0;
	r.orig_rax = -1;
	if (redirect(h, &r))
		return remote_fail(err, errlen, -errno,
				   "cannot start the call: %s",
				   strerror(errno));
	for (;;) {
		k = next_stop(h, call_ms, "the call", &info);
		if (k < 0)
			return remote_fail(err, errlen, -ESRCH,
					   "the thread exited "
					   "during the call");
		if (k == STOP_FAULT) {
			ptrace(PTRACE_GETREGS, h->tid, 0, &r);
			return remote_fail(err, errlen, -EFAULT,
					   "the called function "
					   "faulted at 0x%llx", r.rip);
		}
		if (k == STOP_ENTRY &&
		    info.instruction_pointer == h->page + STUB_MARKER_END)
			break;
	}
	*ret = info.entry.args[0];	/* rdi: the page moved rax there */
	return 0;
}

/* Brings h to a syscall-entry stop: the one point where every register,
 * orig_rax included, can be set and the kernel then runs (or skips) the
 * system call orig_rax names before returning to user space. */
static int to_entry_stop(struct held_thread *h)
{
	struct __ptrace_syscall_info info;
	struct user_regs_struct r = h->regs;
	char ignored[128];
	int k;

	if (ptrace(PTRACE_GET_SYSCALL_INFO, h->tid, sizeof(info), &info) > 0 &&
	    info.op == PTRACE_SYSCALL_INFO_ENTRY)
		return 0;
	if ((k = at_syscall(h, &r, ignored, sizeof(ignored))))
		return k;
	r.rax = SYS_getpid;
	r.orig_rax = -1;
	if (redirect(h, &r))
		return -ESRCH;
	do {
		k = next_stop(h, 2000, "putting the thread back", &info);
		if (k < 0)
			return k;
	} while (k != STOP_ENTRY);
	return 0;
}

int remote_restore(struct held_thread *h)
{
	struct iovec iov = { h->xstate, h->xstate_len };
	struct user_regs_struct r = h->regs;
	int e = to_entry_stop(h);

	if (e)
		return e;
	r.orig_rax = h->resume_nr;
	if (ptrace(PTRACE_SETREGSET, h->tid, (void *)NT_X86_XSTATE, &iov) ||
	    ptrace(PTRACE_SETSIGMASK, h->tid, (void *)sizeof(h->sigmask),
		   &h->sigmask) ||
	    ptrace(PTRACE_SETREGS, h->tid, 0, &r))
		return -errno;
	return 0;
}
