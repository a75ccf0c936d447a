// SPDX-License-Identifier: BSD-2-Clause
/*
 * The signal frame under the system calls that map rfbpf's page
 * (user/attach/sigframe.h), run for real on a forked child: the child is
 * seized, made to run a system call through remote_syscall(), and then let
 * go without being put back, as the kernel lets it go when rfbpf dies.
 * The child must come back through rt_sigreturn exactly as it was: every
 * general register, the upper half of a ymm register, its signal mask and
 * its alternate signal stack; a child blocked in read() must still be
 * reading, and get the byte written afterwards.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "attach/remote_call.h"
#include "attach/sigframe.h"

#define NR_KNOWN 13	/* rbx rbp r12-r15 rsi rdx rcx r8-r11 */

/* Loads known values into every register it can (rdi holds the flags,
 * rax is scratch) and ymm8, says so in go[1], spins until go[0], then
 * stores what the registers hold into seen[] and ymm_seen[]. */
uint64_t seen[NR_KNOWN];
double ymm_seen[4];
int use_ymm_flag;
const uint64_t known_base = 0x0123456789abcd00ull;
const double ymm_value = 1234.5;
void spin_with_known_registers(volatile int *go, int use_ymm);
__asm__(
	".text\n"
	".globl spin_with_known_registers\n"
	"spin_with_known_registers:\n"
	"	pushq %rbx; pushq %rbp; pushq %r12; pushq %r13; pushq %r14\n"
	"	pushq %r15\n"
	"	movl %esi, use_ymm_flag(%rip)\n"
	"	testl %esi, %esi\n"
	"	jz 2f\n"
	"	vbroadcastsd ymm_value(%rip), %ymm8\n"
	"2:	movq known_base(%rip), %rax\n"
	"	leaq 1(%rax), %rbx; leaq 2(%rax), %rbp; leaq 3(%rax), %r12\n"
	"	leaq 4(%rax), %r13; leaq 5(%rax), %r14; leaq 6(%rax), %r15\n"
	"	leaq 7(%rax), %rsi; leaq 8(%rax), %rdx; leaq 9(%rax), %rcx\n"
	"	leaq 10(%rax), %r8; leaq 11(%rax), %r9; leaq 12(%rax), %r10\n"
	"	leaq 13(%rax), %r11\n"
	"	movl $1, 4(%rdi)\n"
	"1:	pause\n"
	"	cmpl $0, (%rdi)\n"
	"	je 1b\n"
	"	movq %rbx, seen+0(%rip); movq %rbp, seen+8(%rip)\n"
	"	movq %r12, seen+16(%rip); movq %r13, seen+24(%rip)\n"
	"	movq %r14, seen+32(%rip); movq %r15, seen+40(%rip)\n"
	"	movq %rsi, seen+48(%rip); movq %rdx, seen+56(%rip)\n"
	"	movq %rcx, seen+64(%rip); movq %r8, seen+72(%rip)\n"
	"	movq %r9, seen+80(%rip); movq %r10, seen+88(%rip)\n"
	"	movq %r11, seen+96(%rip)\n"
	"	cmpl $0, use_ymm_flag(%rip)\n"
	"	je 3f\n"
	"	vmovupd %ymm8, ymm_seen(%rip)\n"
	"	vzeroupper\n"
	"3:	popq %r15; popq %r14; popq %r13; popq %r12; popq %rbp\n"
	"	popq %rbx\n"
	"	ret\n");

/* Seizes child (already running) and stops it. */
static int seize_and_stop(pid_t child)
{
	int st;

	if (ptrace(PTRACE_SEIZE, child, 0, (void *)PTRACE_O_TRACESYSGOOD) ||
	    ptrace(PTRACE_INTERRUPT, child, 0, 0) ||
	    waitpid(child, &st, __WALL) != child || !WIFSTOPPED(st))
		return -1;
	return 0;
}

/* What rfbpf does up to the page's first system call, then a dying
 * rfbpf: the child is detached where it stands, at the exit of nr. */
static int abandon_after(pid_t child, long nr, const char *mem,
			 int64_t *ret)
{
	static struct held_thread h;
	uint64_t args[6] = { 0 };
	char err[256] = "";

	memset(&h, 0, sizeof(h));
	h.pid = h.tid = child;
	if (remote_save(&h))
		return -1;
	if (remote_syscall(&h, nr, args, mem, mem ? strlen(mem) + 1 : 0,
			   mem ? 1 : 0, ret, err, sizeof(err))) {
		fprintf(stderr, "  remote_syscall: %s\n", err);
		return -1;
	}
	return ptrace(PTRACE_DETACH, child, 0, 0) ? -1 : 0;
}

TEST(thread_let_go_mid_call_comes_back_whole)
{
	volatile int *go = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int use_ymm = __builtin_cpu_supports("avx"), st = -1;
	int64_t ret = 0;
	pid_t child;

	CHECK(go != MAP_FAILED);
	if (go == MAP_FAILED)
		return;
	child = fork();
	if (child == 0) {
		static char alt[65536];
		stack_t ss = { .ss_sp = alt, .ss_size = sizeof(alt) }, now;
		sigset_t mask;
		int bad = 0;

		sigemptyset(&mask);
		sigaddset(&mask, SIGUSR2);
		sigprocmask(SIG_SETMASK, &mask, NULL);
		sigaltstack(&ss, NULL);
		spin_with_known_registers(go, use_ymm);
		for (int i = 0; i < NR_KNOWN; i++)
			bad += seen[i] != known_base + 1 + i;
		if (use_ymm && ymm_seen[2] != ymm_value)
			bad += 100;
		sigprocmask(SIG_SETMASK, NULL, &mask);
		if (sigismember(&mask, SIGUSR2) != 1 ||
		    sigismember(&mask, SIGUSR1) != 0)
			bad += 1000;
		sigaltstack(NULL, &now);
		if (now.ss_sp != alt || now.ss_size != sizeof(alt) ||
		    (now.ss_flags & SS_DISABLE))
			bad += 10000;
		_exit(bad ? 1 : 0);
	}
	while (!go[1])
		usleep(1000);
	usleep(20000);
	CHECK(seize_and_stop(child) == 0);
	CHECK(abandon_after(child, SYS_getpid, NULL, &ret) == 0);
	CHECK_EQ_U64(ret, child);
	usleep(20000);
	go[0] = 1;
	CHECK(waitpid(child, &st, 0) == child);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	munmap((void *)go, 4096);
}

TEST(thread_blocked_in_read_still_reads)
{
	int fds[2], st = -1;
	int64_t fd = -1;
	pid_t child;

	CHECK(pipe(fds) == 0);
	child = fork();
	if (child == 0) {
		char c = 0;
		ssize_t n;

		close(fds[1]);
		n = read(fds[0], &c, 1);
		_exit(n == 1 && c == 'x' ? 0 : 1);
	}
	close(fds[0]);
	usleep(50000);
	CHECK(seize_and_stop(child) == 0);
	/* The page's own first call, with its name on the stack. */
	CHECK(abandon_after(child, SYS_memfd_create, "rfbpf-test", &fd) == 0);
	CHECK(fd >= 0);
	usleep(50000);
	CHECK(kill(child, 0) == 0);
	CHECK(write(fds[1], "x", 1) == 1);
	CHECK(waitpid(child, &st, 0) == child);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(fds[1]);
}

TEST(frame_rejects_what_the_kernel_would)
{
	static unsigned char out[8192], xstate[1024];
	struct user_regs_struct r = { 0 };

	CHECK(sigframe_build(out, sizeof(out), 0x1000 + 16, &r, 0, xstate,
			     sizeof(xstate), 0) == -EINVAL);
	CHECK(sigframe_build(out, 100, 0x1000, &r, 0, xstate, sizeof(xstate),
			     0) == -EINVAL);
	CHECK(sigframe_build(out, sizeof(out), 0x1000, &r, 0, xstate, 512,
			     0) == -EINVAL);
	CHECK(sigframe_build(out, sizeof(out), 0x1000, &r, 0, xstate,
			     sizeof(xstate), 0) ==
	      (long)sigframe_size(sizeof(xstate)));
}

TEST(gadgets_are_in_our_libc)
{
	struct sigframe_gadgets g;

	CHECK(sigframe_find_gadgets(getpid(), &g) == 0);
	CHECK(g.syscall_ret && !memcmp((void *)g.syscall_ret, "\x0f\x05\xc3",
				       3));
	CHECK(g.sigreturn != 0);
}

RUN_TESTS()
