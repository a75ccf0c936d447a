// SPDX-License-Identifier: BSD-2-Clause
/*
 * rfbpf's page (user/attach/stub_page.S), run for real in this process: its
 * layout (the probed nop5s where the loader probes them, the marker
 * system call where remote_call.c waits for it), the callbacks with `on`
 * set and clear, `on` wiped in a forked child, and the return code's
 * self-restore, the path a thread takes when rfbpf dies mid-call: every
 * register, the flags and the signal mask come back from the block.
 * Also the allow-list of waits a thread may be caught in.
 */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/futex.h>
#include "check.h"
#include "attach/safe_point.h"
#include "attach/stub_page.h"

static unsigned char *map_page(void)
{
	unsigned char *p = mmap(NULL, STUB_MAP_SIZE, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memcpy(p, stub_page_code, STUB_PAGE_SIZE);
	if (mprotect(p, STUB_PAGE_SIZE, PROT_READ | PROT_EXEC) ||
	    madvise(p + STUB_PAGE_SIZE, STUB_MAP_SIZE - STUB_PAGE_SIZE,
		    MADV_WIPEONFORK))
		return NULL;
	memcpy(p + STUB_MAGIC, STUB_MAGIC_TEXT, sizeof(STUB_MAGIC_TEXT));
	return p;
}

TEST(layout)
{
	static const unsigned char nop5[] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
	const unsigned char *c = stub_page_code;

	CHECK(!memcmp(c + STUB_START_PROBE, nop5, 5));
	CHECK(!memcmp(c + STUB_END_PROBE, nop5, 5));
	CHECK(c[STUB_START_CHILD_PROBE] == 0x55);	/* push %rbp */
	CHECK(c[STUB_END_CHILD_PROBE] == 0x55);
	/* cmpb $0, child_on(%rip): 80 3d, then je over the push */
	CHECK(c[STUB_START_CHILD_CHECK] == 0x80 &&
	      c[STUB_START_CHILD_CHECK + 1] == 0x3d);
	CHECK(c[STUB_END_CHILD_CHECK] == 0x80 &&
	      c[STUB_END_CHILD_CHECK + 1] == 0x3d);
	CHECK(STUB_START_CHILD_CHECK + 9 == STUB_START_CHILD_PROBE);
	CHECK(STUB_END_CHILD_CHECK + 9 == STUB_END_CHILD_PROBE);
	CHECK(c[STUB_MARKER_END - 2] == 0x0f && c[STUB_MARKER_END - 1] == 0x05);
	CHECK(STUB_XSAVE % 64 == 0);
	CHECK(c[STUB_PAGE_SIZE - 1] == 0xcc);
}

typedef void *(*start_fn)(void **slot, void *rf);
typedef void (*end_fn)(void *rf, void *ctx);

TEST(callbacks_with_on_and_child_on_set_and_clear)
{
	unsigned char *p = map_page();
	void *slot = (void *)1;

	CHECK(p != NULL);
	if (!p)
		return;
	for (int on = 0; on < 4; on++) {	/* on, child_on: every pair */
		p[STUB_ON] = on & 1;
		p[STUB_CHILD_ON] = on >> 1;
		slot = (void *)1;
		CHECK(((start_fn)(p + STUB_START_OFFSET))(&slot, p) == &slot);
		CHECK(slot == NULL);	/* no ObserverContext */
		((end_fn)(p + STUB_END_OFFSET))(p, NULL);
		/* every start counted, whatever is probed; no end */
		CHECK(*(uint64_t *)(p + STUB_OPS) == (uint64_t)on + 1);
	}
	munmap(p, STUB_MAP_SIZE);
}

/* A counting burst's callbacks: the op counted as the traced ones count
 * it (the price compares the two), no context, nothing else written. */
TEST(count_callbacks_count_starts_only)
{
	unsigned char *p = map_page();
	unsigned char before[STUB_PAGE_SIZE];
	void *slot;

	CHECK(p != NULL);
	if (!p)
		return;
	memcpy(before, p + STUB_DATA, sizeof(before));
	for (int i = 0; i < 3; i++) {
		slot = (void *)1;
		CHECK(((start_fn)(p + STUB_COUNT_START_OFFSET))(&slot, p) ==
		      &slot);
		CHECK(slot == NULL);
		((end_fn)(p + STUB_COUNT_END_OFFSET))(p, NULL);
	}
	CHECK(*(uint64_t *)(p + STUB_OPS) == 3);
	*(uint64_t *)(p + STUB_OPS) = 0;
	CHECK(!memcmp(before, p + STUB_DATA, sizeof(before)));
	munmap(p, STUB_MAP_SIZE);
}

TEST(on_is_wiped_in_a_child)
{
	unsigned char *p = map_page();
	int st = -1;
	pid_t pid;

	CHECK(p != NULL);
	if (!p)
		return;
	p[STUB_ON] = 1;
	pid = fork();
	if (pid == 0) {
		void *slot;

		((start_fn)(p + STUB_START_OFFSET))(&slot, p);
		((start_fn)(p + STUB_COUNT_START_OFFSET))(&slot, p);
		/* the child counts in its own (wiped) page */
		_exit(p[STUB_ON] == 0 && !memchr(p + STUB_MAGIC, 'r', 16) &&
		      *(uint64_t *)(p + STUB_OPS) == 2 ? 0 : 1);
	}
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(p[STUB_ON] == 1);		/* the parent keeps its own */
	CHECK(*(uint64_t *)(p + STUB_OPS) == 0);
	munmap(p, STUB_MAP_SIZE);
}

/*
 * The self-restore. enter_return() saves the C state, loads rax and jumps
 * to the page's return code as a returning function would; with no
 * tracer, the marker getpid just returns, and the page restores the block
 * and jumps to its rip: landing, which records every register and flag,
 * then goes back to enter_return's caller.
 */
uint64_t landed_regs[STUB_R_NR + 1];	/* + rflags */
uint64_t saved_c_rsp;
void enter_return(uint64_t target, uint64_t rax);
void landing(void);
__asm__(
	".text\n"
	".globl enter_return\n"
	"enter_return:\n"
	"	pushq %rbx; pushq %rbp; pushq %r12; pushq %r13; pushq %r14\n"
	"	pushq %r15\n"
	"	movq %rsp, saved_c_rsp(%rip)\n"
	"	movq %rsi, %rax\n"
	"	jmp *%rdi\n"
	".globl landing\n"
	"landing:\n"
	"	movq %rax, landed_regs+0(%rip)\n"
	"	movq %rbx, landed_regs+8(%rip)\n"
	"	movq %rcx, landed_regs+16(%rip)\n"
	"	movq %rdx, landed_regs+24(%rip)\n"
	"	movq %rsi, landed_regs+32(%rip)\n"
	"	movq %rdi, landed_regs+40(%rip)\n"
	"	movq %rbp, landed_regs+48(%rip)\n"
	"	movq %r8, landed_regs+56(%rip)\n"
	"	movq %r9, landed_regs+64(%rip)\n"
	"	movq %r10, landed_regs+72(%rip)\n"
	"	movq %r11, landed_regs+80(%rip)\n"
	"	movq %r12, landed_regs+88(%rip)\n"
	"	movq %r13, landed_regs+96(%rip)\n"
	"	movq %r14, landed_regs+104(%rip)\n"
	"	movq %r15, landed_regs+112(%rip)\n"
	"	movq %rsp, landed_regs+120(%rip)\n"
	"	leaq landing(%rip), %rax\n"
	"	movq %rax, landed_regs+128(%rip)\n"
	"	pushfq\n"
	"	popq landed_regs+136(%rip)\n"
	"	movq saved_c_rsp(%rip), %rsp\n"
	"	popq %r15; popq %r14; popq %r13; popq %r12; popq %rbp\n"
	"	popq %rbx\n"
	"	ret\n");

TEST(return_code_restores_the_thread_by_itself)
{
	static unsigned char stack[8192] __attribute__((aligned(16)));
	unsigned char *p = map_page();
	uint64_t regs[STUB_R_NR], head[3], xcr0_size, a, b, c, d;
	sigset_t before, during, after;

	CHECK(p != NULL);
	if (!p)
		return;
	for (int i = 0; i < STUB_R_NR; i++)
		regs[i] = 0x1111111111111111ull * (i + 1);
	regs[STUB_R_RSP] = (uint64_t)(stack + sizeof(stack) - 64);
	regs[STUB_R_RIP] = (uint64_t)landing;
	/* The mask to come back: ours plus SIGUSR2. */
	sigprocmask(SIG_SETMASK, NULL, &before);
	during = before;
	sigaddset(&during, SIGUSR2);
	memcpy(&head[1], &during, 8);
	head[0] = 0;
	head[2] = 0x202 | 0x1;		/* IF, and CF set */
	memcpy(p + STUB_RESULT, head, sizeof(head));
	memcpy(p + STUB_REGS, regs, sizeof(regs));
	/* A valid XSAVE image of this thread (standard form). */
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d)
			 : "a"(0xd), "c"(0));
	xcr0_size = b;
	CHECK(xcr0_size <= STUB_XSAVE_MAX);
	memset(p + STUB_XSAVE, 0, xcr0_size);
	__asm__ volatile("xsave64 %0" : "+m"(*(unsigned char (*)[4096])
					      (p + STUB_XSAVE))
			 : "a"(-1), "d"(-1) : "memory");
	enter_return((uint64_t)(p + STUB_RETURN_OFFSET), 0xabcdef);
	sigprocmask(SIG_SETMASK, NULL, &after);
	sigprocmask(SIG_SETMASK, &before, NULL);
	for (int i = 0; i < STUB_R_NR; i++)
		CHECK_EQ_U64(landed_regs[i], regs[i]);
	CHECK_EQ_U64(landed_regs[STUB_R_NR] & 0x1, 1);	/* CF */
	CHECK(sigismember(&after, SIGUSR2) == 1);
	CHECK_EQ_U64(*(uint64_t *)(p + STUB_RESULT), 0xabcdef);
	munmap(p, STUB_MAP_SIZE);
}

TEST(allowed_waits)
{
	uint64_t args[6] = { 0 };
	pid_t self = getpid();
	int fds[2];

	args[1] = FUTEX_WAIT_PRIVATE;
	CHECK(safe_point_blocking_call_ok(self, SYS_futex, args));
	args[1] = FUTEX_WAKE_PRIVATE;
	CHECK(!safe_point_blocking_call_ok(self, SYS_futex, args));
	CHECK(safe_point_blocking_call_ok(self, SYS_clock_nanosleep, args));
	CHECK(safe_point_blocking_call_ok(self, SYS_epoll_wait, args));
	CHECK(!safe_point_blocking_call_ok(self, SYS_clone, args));
	CHECK(!safe_point_blocking_call_ok(self, SYS_clone3, args));
	CHECK(!safe_point_blocking_call_ok(self, SYS_mmap, args));
	CHECK(!safe_point_blocking_call_ok(self, SYS_openat, args));
	CHECK(pipe(fds) == 0);
	args[0] = fds[0];
	CHECK(safe_point_blocking_call_ok(self, SYS_read, args));
	args[0] = 0x7fffff;		/* no such fd */
	CHECK(!safe_point_blocking_call_ok(self, SYS_read, args));
	close(fds[0]);
	close(fds[1]);
}

RUN_TESTS()
