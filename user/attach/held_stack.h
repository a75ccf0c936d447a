/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The stack of the thread rfbpf holds, unwound from the registers it was
 * found with (libdwfl, from the modules' own .eh_frame), to prove what
 * safe_point.h argues before rfbpf makes that thread load a library: that
 * no frame of it is in the dynamic loader (a library constructor that
 * ran an op) or in malloc. A dlopen there would run inside the loader's
 * or the allocator's own work on that thread.
 *
 * The modules are opened through /proc/PID/root, so a job in another
 * mount namespace is unwound as well. A thread caught in rfbpf's own
 * start stub (safe point 3: at its probe, in a page with no unwind data,
 * or in the kernel's uprobe trampoline the probe called) is stepped into
 * the stub's caller by the return address the call into the stub left
 * (held_stack.c says where it is found).
 */
#ifndef RFBPF_HELD_STACK_H
#define RFBPF_HELD_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include "remote_call.h"

enum held_frame_place {
	HELD_FRAME_OTHER = 0,
	HELD_FRAME_LOADER,	/* in ld-linux*.so (dlopen, a constructor) */
	HELD_FRAME_MALLOC,	/* in the C library's allocator */
};

/* Pure: where a frame in module file base name `module` at function
 * `symbol` (either may be NULL: unknown) is. */
enum held_frame_place held_frame_place(const char *module,
				       const char *symbol);

struct held_stack {
	int frames;		/* unwound */
	bool stopped_early;	/* unwinding stopped before the stack's
				 * outermost frame (no unwind data) */
	int bad_frame;		/* the first loader or malloc frame, or -1 */
	enum held_frame_place bad_place;
	char bad_where[160];	/* "ld-linux-x86-64.so.2 (_dl_init)" */
};

/* Unwinds h's stack into s; with verbose, says every frame on stderr.
 * 0, or -errno when it could not begin (s->frames is then 0). */
int held_stack_unwind(const struct held_thread *h, struct held_stack *s,
		      bool verbose);

#endif
