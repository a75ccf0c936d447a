/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rfbpf's page in the target: a few kilobytes rfbpf maps into the traced
 * process once, on its first attach, and never unmaps (an op that began
 * with rfbpf's callback may still be about to enter it, and a remote call
 * may be returning through it). A later rfbpf finds it by its name in
 * /proc/PID/maps and its magic, and uses it again.
 *
 *   code page (a memfd, read+exec, so uprobes can be placed on it):
 *     start callback  if (on) nop5 (probed); else if (child_on) push
 *                     (probed in children, --children); ops++ (the
 *                     control block's, locked); *rdi = 0; ret
 *     end callback    the same, then ret (no count)
 *     count callbacks ops++, *rdi = 0, ret; and ret: a burst that only
 *                     counts ops (control_block.h, the price of a burst)
 *     return          the address every remote call returns to: it stops
 *                     at a marker system call, where rfbpf puts the thread
 *                     back; if rfbpf died mid-call, it puts the thread
 *                     back by itself from the saved block (signal mask,
 *                     XSAVE state, flags, every register, rip).
 *   data pages (anonymous, read+write, MADV_WIPEONFORK):
 *     `on`, the saved block of the call in progress, its result.
 *
 * Why `on` lives in a WIPEONFORK page: the kernel rewrites a probed nop5
 * into a call into its [uprobes-trampoline] mapping, which a child does
 * not inherit. A forked child (a DataLoader worker) that entered the nop5
 * would jump into nothing. Its copy of `on` is zero, so it skips the nop5.
 * With --children rfbpf sets the child's own `child_on` and probes the
 * child's push, which the kernel emulates and never rewrites.
 *
 * This header is shared with stub_page.S (plain #defines only).
 */
#ifndef RFBPF_STUB_PAGE_H
#define RFBPF_STUB_PAGE_H

#define STUB_PAGE_SIZE		4096
#define STUB_DATA_PAGES		4	/* the block + the largest XSAVE area */
#define STUB_MAP_SIZE		(STUB_PAGE_SIZE * (1 + STUB_DATA_PAGES))
#define STUB_MEMFD_NAME		"rfbpf-page"

/* Code page offsets (checked by tests/unit/test_stub_page.c). */
#define STUB_START_OFFSET	0x00	/* the start callback */
#define STUB_START_PROBE	0x09	/* its nop5 */
#define STUB_START_CHILD_PROBE	0x19	/* its push, in traced children */
#define STUB_END_OFFSET		0x40	/* the end callback */
#define STUB_END_PROBE		0x49	/* its nop5 */
#define STUB_END_CHILD_PROBE	0x58	/* its push, in traced children */
/* Where a call that found `on` clear checks `child_on`: every call in a
 * forked child gets there (its `on` is wiped), from its first op, before
 * rfbpf has seen the fork (--children probes these, for every process). */
#define STUB_START_CHILD_CHECK	0x10
#define STUB_END_CHILD_CHECK	0x4f
#define STUB_RETURN_OFFSET	0x80	/* remote calls return here */
/* rip at the marker system call's entry stop: right after its syscall */
#define STUB_MARKER_END		0x91
#define STUB_COUNT_START_OFFSET	0x140	/* counts, probes nothing */
#define STUB_COUNT_END_OFFSET	0x160
/* The control thread's code (control_loop.c, control_block.h): its entry
 * points, a 16-byte jump each, then the code, to the end of the page. */
#define STUB_CONTROL_CODE	0x200
#define STUB_CONTROL_MAIN	0x200	/* pthread start routine */
#define STUB_CONTROL_PREPARE	0x210	/* pthread_atfork prepare */
#define STUB_CONTROL_PARENT	0x220	/* ...and parent */
#define STUB_CONTROL_EXIT	0x230	/* __cxa_atexit handler */

/* Data offsets, from the start of the mapping (the data follows the code
 * page). */
#define STUB_DATA		STUB_PAGE_SIZE
#define STUB_ON			(STUB_DATA + 0x000)	/* u8: tracing on */
#define STUB_CHILD_ON		(STUB_DATA + 0x001)	/* u8: in a child */
#define STUB_RESULT		(STUB_DATA + 0x008)	/* u64: last call's rax */
#define STUB_MASK		(STUB_DATA + 0x010)	/* u64: signal mask */
#define STUB_RFLAGS		(STUB_DATA + 0x018)
#define STUB_REGS		(STUB_DATA + 0x020)	/* below, 8 bytes each */
#define STUB_MAGIC		(STUB_DATA + 0x100)	/* STUB_MAGIC_TEXT */
#define STUB_CONTROL		(STUB_DATA + 0x200)	/* control_block.h */
/* u64: ops begun in rfbpf's callbacks, the block's first field */
#define STUB_OPS		STUB_CONTROL
#define STUB_CONTROL_MAX	(STUB_PAGE_SIZE - 0x200)
#define STUB_XSAVE		(STUB_DATA + STUB_PAGE_SIZE)	/* 64-aligned */
#define STUB_XSAVE_MAX		(STUB_PAGE_SIZE * (STUB_DATA_PAGES - 1))
/* v2: the control thread; v3: its op count and the count callbacks */
#define STUB_MAGIC_TEXT		"rfbpf page v3"

/* The saved registers in the block, in this order. */
#define STUB_R_RAX	0
#define STUB_R_RBX	1
#define STUB_R_RCX	2
#define STUB_R_RDX	3
#define STUB_R_RSI	4
#define STUB_R_RDI	5
#define STUB_R_RBP	6
#define STUB_R_R8	7
#define STUB_R_R9	8
#define STUB_R_R10	9
#define STUB_R_R11	10
#define STUB_R_R12	11
#define STUB_R_R13	12
#define STUB_R_R14	13
#define STUB_R_R15	14
#define STUB_R_RSP	15
#define STUB_R_RIP	16
#define STUB_R_NR	17

#ifndef __ASSEMBLER__
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "remote_call.h"

/* The code page's bytes (stub_page.S), STUB_PAGE_SIZE long. */
extern const unsigned char stub_page_code[];

struct stub_page {
	uint64_t addr;		/* where it is mapped in the target, 0: not */
	char path[96];		/* the code file, for uprobes (rfbpf's view) */
	bool created;		/* mapped by this rfbpf (else found) */
};

/* Finds rfbpf's page in pid (left by an earlier rfbpf). Returns 0 and
 * fills p, or -ENOENT. */
int stub_page_find(pid_t pid, struct stub_page *p);
/* Is p (found or made earlier in pid) still there? Reads the page's
 * magic, not maps. */
bool stub_page_still_there(pid_t pid, const struct stub_page *p);
/* Maps a new page into h's process through system calls run on h, a
 * thread rfbpf holds at a safe point (safe_point.h), all in that one
 * stop. Returns 0 or -errno with a reason in err. */
int stub_page_create(struct held_thread *h, struct stub_page *p, char *err,
		     size_t len);
/* Sets the page's `on` byte: the callbacks enter their probes only while
 * it is set. */
int stub_page_set_on(pid_t pid, const struct stub_page *p, bool on);
/* The same for a forked child's `child_on` (its page is at the same
 * address as its parent's). */
int stub_page_set_child_on(pid_t child, const struct stub_page *p, bool on);
/* A forked child's copy of the page lost its data (WIPEONFORK): mark it
 * again, so that a call into the child finds the page instead of mapping
 * another. */
int stub_page_mark_in_child(pid_t child, const struct stub_page *p);
/* The result of the last call made through the page (a call rfbpf did not
 * see return, after a crash). */
int stub_page_last_result(pid_t pid, const struct stub_page *p,
			  uint64_t *result);
#endif

#endif
