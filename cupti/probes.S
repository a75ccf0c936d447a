/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The seven functions rfbpf puts uprobes on. Each begins at its symbol with
 * the 5-byte NOP `0f 1f 44 00 00` (nopl 0x0(%rax,%rax,1)): a uprobe on a
 * 5-byte NOP takes the kernel's optimized path (a call into a trampoline
 * rather than an int3 trap) on kernels that have it. Written in assembly
 * because a C function may start with endbr64, a push or anything else,
 * and because the compiler cannot see into them, so it can never drop a
 * call whose only purpose is to be observed.
 *
 * Deliberately no endbr64: it would put the NOP at +4, and userspace IBT
 * is not enforced on Linux (this object carries no IBT property note, so
 * the linked library is not marked IBT-compatible either).
 */
/*
 * The NOP is spelled as bytes: `nopl 0x0(%rax,%rax,1)` is assembled to the
 * 4-byte form (0f 1f 04 00, no displacement), which is not what the
 * kernel's optimizer looks for.
 */
#define NOP5 .byte 0x0f, 0x1f, 0x44, 0x00, 0x00

/*
 * Each probe also gets a hidden alias, rf_probe_*, which the agent's C code
 * calls: a call to the exported name from inside the library would go
 * through the PLT (the name is interposable), one more indirect jump per
 * launch and record. Same address, so the uprobe fires either way.
 */
#define PROBE(name, alias)		\
	.globl	name;			\
	.type	name, @function;	\
	.globl	alias;			\
	.hidden	alias;			\
	.set	alias, name;		\
	.p2align 4;			\
name:

	.text

/* void rfbpf_probe_gpu_launch(const struct rf_gpu_launch *) */
PROBE(rfbpf_probe_gpu_launch, rf_probe_gpu_launch)
	NOP5
	ret
	.size	rfbpf_probe_gpu_launch, .-rfbpf_probe_gpu_launch

/* void rfbpf_probe_gpu_sync(const struct rf_gpu_launch *) */
PROBE(rfbpf_probe_gpu_sync, rf_probe_gpu_sync)
	NOP5
	ret
	.size	rfbpf_probe_gpu_sync, .-rfbpf_probe_gpu_sync

/* void rfbpf_probe_gpu_activity(const struct rf_gpu_activity *) */
PROBE(rfbpf_probe_gpu_activity, rf_probe_gpu_activity)
	NOP5
	ret
	.size	rfbpf_probe_gpu_activity, .-rfbpf_probe_gpu_activity

/* void rfbpf_probe_gpu_sync_record(const struct rf_gpu_activity *) */
PROBE(rfbpf_probe_gpu_sync_record, rf_probe_gpu_sync_record)
	NOP5
	ret
	.size	rfbpf_probe_gpu_sync_record, .-rfbpf_probe_gpu_sync_record

/* void rfbpf_probe_gpu_device(const struct rf_gpu_device *) */
PROBE(rfbpf_probe_gpu_device, rf_probe_gpu_device)
	NOP5
	ret
	.size	rfbpf_probe_gpu_device, .-rfbpf_probe_gpu_device

/*
 * at::RecordFunctionCallback::StartCallback:
 *   std::unique_ptr<at::ObserverContext> (*)(const at::RecordFunction &)
 * unique_ptr is not trivially destructible, so the Itanium C++ ABI returns
 * it through a hidden slot: rdi = the slot, rsi = the RecordFunction. We
 * store NULL (no observer context) and return the slot's address in rax.
 */
PROBE(rfbpf_probe_op_start, rf_probe_op_start)
	NOP5
	movq	$0, (%rdi)
	movq	%rdi, %rax
	ret
	.size	rfbpf_probe_op_start, .-rfbpf_probe_op_start

/* EndCallback: void (*)(const at::RecordFunction &, at::ObserverContext *) */
PROBE(rfbpf_probe_op_end, rf_probe_op_end)
	NOP5
	ret
	.size	rfbpf_probe_op_end, .-rfbpf_probe_op_end

	.section .note.GNU-stack, "", @progbits
