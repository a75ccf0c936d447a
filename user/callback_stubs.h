/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Optimized probes: instead of probing RecordFunction::before/end (whose
 * first instruction is an ordinary one, so every hit is a full int3 trap),
 * rfbpf registers callbacks whose start and end are two tiny functions it
 * maps into the target, each beginning with a 5-byte NOP. A uprobe on a
 * 5-byte NOP takes the kernel's optimized path (a call into a trampoline
 * instead of a trap, ~25x cheaper here) on kernels that have it.
 *
 *   start: nop5; mov qword [rdi], 0; mov rax, rdi; ret
 *          StartCallback returns std::unique_ptr<ObserverContext> through
 *          the hidden return slot in rdi (NULL: no context); the
 *          RecordFunction is in rsi.
 *   end:   nop5; ret        (rdi = RecordFunction, rsi = context)
 *
 * The code lives in a one-page memfd the target creates and maps read+exec
 * through system calls rfbpf injects (memfd_create, mmap, close; no code
 * of the target runs); rfbpf writes the bytes through /proc/PID/fd and
 * attaches the uprobes to the memfd, so chroots and containers work.
 */
#ifndef RFBPF_CALLBACK_STUBS_H
#define RFBPF_CALLBACK_STUBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define STUB_START_OFFSET 0
#define STUB_END_OFFSET 16
#define STUB_SIZE 4096

struct callback_stubs {
	char path[64];		/* the memfd, for uprobes (our own fd) */
	int own_fd;		/* rfbpf's descriptor of it, -1 if none */
	uint64_t addr;		/* where the target mapped it, 0 if not */
	void (*idle)(void *);	/* run while waiting on the target */
	void *idle_ctx;
	pid_t traced_tid;	/* inject on this traced thread (launch) */
};

/* Does this kernel turn uprobes on 5-byte NOPs into trampoline calls? */
bool kernel_optimizes_nop_uprobes(void);
/* Writes the stub file and maps it into pid. Returns 0 or -errno. */
int stubs_map(struct callback_stubs *st, pid_t pid, char *err, size_t len);
/* Unmaps the stubs from pid and removes the file. */
int stubs_unmap(struct callback_stubs *st, pid_t pid, char *err, size_t len);

#endif
