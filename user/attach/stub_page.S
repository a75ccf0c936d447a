/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The code page rfbpf maps into the target (layout and why: stub_page.h).
 * These bytes are data in rfbpf; they run only in the target, at whatever
 * address it maps them, so every reference is rip-relative within the
 * mapping. The nop5 probe points are spelled out: an assembler may pick
 * another NOP, and the kernel optimizes uprobes only on this one.
 */
#include "stub_page.h"

#define AT(off)	.Lpage + (off)(%rip)
#define NOP5	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00
/* je 1f, over the nop5 and the 2-byte jmp or the ret after it: spelled
 * out so that the probe offsets are known when assembling */
#define JE_OVER_NOP5	je 1f

	.section .rodata.rfbpf_stub_page, "a"
	.p2align 12
	.globl stub_page_code
stub_page_code:
.Lpage:

/* StartCallback: returns std::unique_ptr<ObserverContext> through the
 * hidden slot in rdi (NULL: no context); the RecordFunction is in rsi.
 * The traced process enters the nop5; a child rfbpf traces (--children)
 * enters the push instead, a probe the kernel emulates without rewriting
 * it into a call (the child has no trampoline of its own to call). */
	.org STUB_START_OFFSET, 0xcc
	cmpb $0, AT(STUB_ON)
	JE_OVER_NOP5
	NOP5
	jmp 2f
1:	cmpb $0, AT(STUB_CHILD_ON)	/* STUB_START_CHILD_CHECK */
	je 2f
	pushq %rbp			/* STUB_START_CHILD_PROBE */
	popq %rbp
2:	lock incq AT(STUB_OPS)		/* every op, probed or not */
	movq $0, (%rdi)
	movq %rdi, %rax
	ret

/* EndCallback: rdi = RecordFunction, rsi = context. */
	.org STUB_END_OFFSET, 0xcc
	cmpb $0, AT(STUB_ON)
	JE_OVER_NOP5
	NOP5
	ret
1:	cmpb $0, AT(STUB_CHILD_ON)	/* STUB_END_CHILD_CHECK */
	je 2f
	pushq %rbp			/* STUB_END_CHILD_PROBE */
	popq %rbp
2:	ret

/* Every remote call returns here with its result in rax. */
	.org STUB_RETURN_OFFSET, 0xcc
	movq %rax, %rdi			/* the result, for rfbpf at the marker */
	movq %rax, AT(STUB_RESULT)	/* and for a later rfbpf */
	movl $39, %eax			/* getpid: harmless, and a ptrace stop */
	syscall
/* Still here: rfbpf did not put the thread back (it died). Do it from the
 * saved block: mask, extended state, flags, registers, then jump. */
	movl $14, %eax			/* rt_sigprocmask(SIG_SETMASK, ...) */
	movl $2, %edi
	leaq AT(STUB_MASK), %rsi
	xorl %edx, %edx
	movl $8, %r10d
	syscall
	movl $-1, %eax			/* every component XSTATE_BV names */
	movl $-1, %edx
	xrstor64 AT(STUB_XSAVE)
	pushq AT(STUB_RFLAGS)
	popfq
	movq AT(STUB_REGS + 8 * STUB_R_RAX), %rax
	movq AT(STUB_REGS + 8 * STUB_R_RBX), %rbx
	movq AT(STUB_REGS + 8 * STUB_R_RCX), %rcx
	movq AT(STUB_REGS + 8 * STUB_R_RDX), %rdx
	movq AT(STUB_REGS + 8 * STUB_R_RSI), %rsi
	movq AT(STUB_REGS + 8 * STUB_R_RDI), %rdi
	movq AT(STUB_REGS + 8 * STUB_R_RBP), %rbp
	movq AT(STUB_REGS + 8 * STUB_R_R8), %r8
	movq AT(STUB_REGS + 8 * STUB_R_R9), %r9
	movq AT(STUB_REGS + 8 * STUB_R_R10), %r10
	movq AT(STUB_REGS + 8 * STUB_R_R11), %r11
	movq AT(STUB_REGS + 8 * STUB_R_R12), %r12
	movq AT(STUB_REGS + 8 * STUB_R_R13), %r13
	movq AT(STUB_REGS + 8 * STUB_R_R14), %r14
	movq AT(STUB_REGS + 8 * STUB_R_R15), %r15
	movq AT(STUB_REGS + 8 * STUB_R_RSP), %rsp
	jmp *AT(STUB_REGS + 8 * STUB_R_RIP)

/* The callbacks of a burst that only counts (control_block.h): no probe,
 * the op counted as the start callback counts it. */
	.org STUB_COUNT_START_OFFSET, 0xcc
	lock incq AT(STUB_OPS)
	movq $0, (%rdi)
	movq %rdi, %rax
	ret

	.org STUB_COUNT_END_OFFSET, 0xcc
	ret

/* The control thread and the job's fork and exit handlers, compiled from
 * control_loop.c and linked at this offset (the Makefile passes the
 * file's path). */
	.org STUB_CONTROL_CODE, 0xcc
	.incbin CONTROL_LOOP_BIN

	.org STUB_PAGE_SIZE, 0xcc	/* int3 everywhere else */

	.section .note.GNU-stack, "", @progbits
