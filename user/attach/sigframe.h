/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The net under rfbpf's first system calls in a target, before its page
 * (stub_page.h) exists to catch a thread rfbpf can no longer put back.
 *
 * Each such system call runs at a `syscall; ret` in the target's libc, on
 * a stack whose top is a signal frame: the one the kernel builds for a
 * signal handler, here describing the thread as rfbpf found it (every
 * register, the XSAVE area, the signal mask, the system call to resume).
 * Its first word, where a handler's return address sits, is libc's own
 * signal-return trampoline (`mov $15, %rax; syscall`).
 *
 * While rfbpf lives, the frame never runs: rfbpf puts the thread back at
 * a system-call stop. If rfbpf dies (SIGKILL, OOM) the kernel lets the
 * thread go wherever it is: it finishes the system call, `ret` takes it to
 * the trampoline, and rt_sigreturn restores all of it in one step, as
 * after any signal handler. Two differences with the thread's own state:
 * its alternate signal stack is left as it is (the frame names an invalid
 * one, which rt_sigreturn ignores), and a sleep that was to be continued
 * through restart_syscall returns EINTR instead, as it would after a
 * handler.
 */
#ifndef RFBPF_SIGFRAME_H
#define RFBPF_SIGFRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

/* Addresses in the target's libc text. */
struct sigframe_gadgets {
	uint64_t syscall_ret;	/* syscall; ret */
	uint64_t sigreturn;	/* mov $15, %rax (or %eax); syscall */
};

/* Finds both in pid's libc. Returns 0, or -ENOENT if either is missing. */
int sigframe_find_gadgets(pid_t pid, struct sigframe_gadgets *g);

/* The most bytes sigframe_build() writes for an XSAVE area of xstate_len
 * bytes. */
size_t sigframe_size(size_t xstate_len);

/* Builds, into out, the frame to be written at address at (64-byte
 * aligned, and the stack pointer the `ret` runs with): the thread resumes
 * with the registers in resume (rip, rsp, rax as it must resume), signal
 * mask sigmask, and the XSAVE area xstate (standard form, as
 * PTRACE_GETREGSET NT_X86_XSTATE gives it, XCR0 at byte 464). Returns the
 * number of bytes to write, or -EINVAL for an area too small or
 * misaligned. */
long sigframe_build(unsigned char *out, size_t cap, uint64_t at,
		    const struct user_regs_struct *resume, uint64_t sigmask,
		    const unsigned char *xstate, size_t xstate_len,
		    uint64_t sigreturn);

#endif
