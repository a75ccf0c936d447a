/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The functions the per-event benchmarks put uprobes on, written in
 * assembly so their first bytes are exactly what matters to the kernel:
 *
 *   bench_cb_start/bench_cb_end have the shape of rfbpf's callback stubs
 *   (user/attach/stub_page.S): a 5-byte NOP first, which the kernel turns
 *   into a call to its uprobe trampoline (optimized path, no trap).
 *   bench_entry_before/bench_entry_end start with the same first
 *   instruction as RecordFunction::before(const char*, int64_t) and
 *   RecordFunction::end() in Debian's libtorch_cpu 1.13: `push %r15`
 *   (which the kernel emulates after the int3 trap) and
 *   `cmpb $0, 0x68(%rdi)` (which it must single-step out of line), so the
 *   entry path costs here what it costs on the real functions.
 */
	.text

	.globl	bench_cb_start
	.type	bench_cb_start, @function
	.p2align 4
bench_cb_start:			/* (void **ret_slot, void *rf) */
	.byte	0x0f, 0x1f, 0x44, 0x00, 0x00	/* nop5: the probe */
	movq	$0, (%rdi)	/* no ObserverContext */
	movq	%rdi, %rax
	ret
	.size	bench_cb_start, .-bench_cb_start

	.globl	bench_cb_end
	.type	bench_cb_end, @function
	.p2align 4
bench_cb_end:			/* (void *rf, void *ctx) */
	.byte	0x0f, 0x1f, 0x44, 0x00, 0x00
	ret
	.size	bench_cb_end, .-bench_cb_end

	.globl	bench_entry_before
	.type	bench_entry_before, @function
	.p2align 4
bench_entry_before:		/* (void *rf, const char *name, long seq) */
	pushq	%r15
	popq	%r15
	ret
	.size	bench_entry_before, .-bench_entry_before

	.globl	bench_entry_end
	.type	bench_entry_end, @function
	.p2align 4
bench_entry_end:		/* (void *rf) */
	cmpb	$0, 0x68(%rdi)
	ret
	.size	bench_entry_end, .-bench_entry_end

	.section .note.GNU-stack, "", @progbits
