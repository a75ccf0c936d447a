/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What calibrate.c puts rfbpf's probes on, in rfbpf's own binary: two
 * copies of the start/end callbacks of rfbpf's page (stub_page.S), the
 * same instructions on the path a sampled op takes:
 *
 *   start: cmpb $0, on; je (not taken); nop5 (the probe); jmp;
 *          *rdi = 0; rax = rdi; ret
 *   end:   cmpb $0, on; je (not taken); nop5 (the probe); ret
 *
 * The nop5 sits at the same offset in each function as in the page
 * (STUB_START_PROBE, STUB_END_PROBE - STUB_END_OFFSET) and never crosses a
 * page, so the kernel rewrites it into a call into its uprobe trampoline
 * on the first hit, as it does in the target. The nop5 is spelled out: an
 * assembler may pick another 5-byte NOP, and the kernel optimizes only
 * this one. calibrate_probed_* are probed; calibrate_bare_* are the same
 * code, never probed: the baseline the probed calls are compared with.
 */
#define NOP5	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00

	.data
calibrate_on:			/* the page's `on` byte, always set here */
	.byte	1

	.text

.macro	CALLBACK_PAIR name
	.globl	calibrate_\name\()_start
	.type	calibrate_\name\()_start, @function
	.p2align 6
calibrate_\name\()_start:	/* (void **ret_slot, void *rf) */
	cmpb	$0, calibrate_on(%rip)
	je	1f
	.globl	calibrate_\name\()_start_probe
calibrate_\name\()_start_probe:
	NOP5
	jmp	2f
1:	nop			/* the page's child branch: not taken here */
2:	movq	$0, (%rdi)	/* no ObserverContext */
	movq	%rdi, %rax
	ret
	.size	calibrate_\name\()_start, .-calibrate_\name\()_start

	.globl	calibrate_\name\()_end
	.type	calibrate_\name\()_end, @function
	.p2align 6
calibrate_\name\()_end:		/* (void *rf, void *ctx) */
	cmpb	$0, calibrate_on(%rip)
	je	1f
	.globl	calibrate_\name\()_end_probe
calibrate_\name\()_end_probe:
	NOP5
	ret
1:	ret
	.size	calibrate_\name\()_end, .-calibrate_\name\()_end
.endm

	CALLBACK_PAIR probed
	CALLBACK_PAIR bare

	.section .note.GNU-stack, "", @progbits
