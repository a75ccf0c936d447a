// SPDX-License-Identifier: BSD-2-Clause
/* Why a signal frame, and what it restores: sigframe.h. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include "sigframe.h"

/*
 * The frame rt_sigreturn reads on x86-64 (the kernel's struct rt_sigframe
 * with its struct ucontext and struct sigcontext; glibc's ucontext_t is
 * another layout). It sits where the returning `ret` left the stack
 * pointer, minus the 8 bytes of the return address it popped.
 */
struct k_sigcontext {
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t di, si, bp, bx, dx, ax, cx, sp, ip, flags;
	uint16_t cs, gs, fs, ss;
	uint64_t err, trapno, oldmask, cr2;
	uint64_t fpstate;		/* the XSAVE area's address */
	uint64_t reserved1[8];
};

struct k_stack {
	uint64_t ss_sp;
	int32_t ss_flags;
	uint32_t pad;
	uint64_t ss_size;
};

struct k_ucontext {
	uint64_t uc_flags;
	uint64_t uc_link;
	struct k_stack uc_stack;
	struct k_sigcontext uc_mcontext;
	uint64_t uc_sigmask;		/* the kernel's 64-signal set */
};

struct k_rt_sigframe {
	uint64_t pretcode;		/* the handler's return address */
	struct k_ucontext uc;
	unsigned char info[128];	/* siginfo: unused by the return */
};

_Static_assert(sizeof(struct k_sigcontext) == 256, "struct sigcontext");
_Static_assert(offsetof(struct k_ucontext, uc_mcontext) == 40, "ucontext");
_Static_assert(sizeof(struct k_ucontext) == 304, "struct ucontext");
_Static_assert(sizeof(struct k_rt_sigframe) == 440, "struct rt_sigframe");

/* uc_flags (arch/x86/include/uapi/asm/ucontext.h): the frame has an XSAVE
 * area, and its ss is to be restored as written. */
#define UC_FP_XSTATE		0x1
#define UC_SIGCONTEXT_SS	0x2
#define UC_STRICT_RESTORE_SS	0x4

/* The software bytes at the end of the legacy area (byte 464), which say
 * the extended state follows; FP_XSTATE_MAGIC2 closes the area. */
#define FX_SW_OFFSET		464
#define FP_XSTATE_MAGIC1	0x46505853u
#define FP_XSTATE_MAGIC2	0x46505845u
#define XSAVE_MIN		576	/* legacy area + header */

struct fx_sw_bytes {
	uint32_t magic1;
	uint32_t extended_size;		/* the area + MAGIC2 */
	uint64_t xfeatures;
	uint32_t xstate_size;
	uint32_t padding[7];
};

_Static_assert(sizeof(struct fx_sw_bytes) == 48, "struct _fpx_sw_bytes");

/* Neither 0, SS_ONSTACK nor SS_DISABLE: rt_sigreturn's attempt to set the
 * alternate signal stack fails with EINVAL, which it ignores, so the
 * thread keeps its own (rfbpf cannot read it). */
#define KEEP_ALTSTACK		3

#define FPSTATE_OFFSET \
	((sizeof(struct k_rt_sigframe) + 63) & ~(size_t)63)

size_t sigframe_size(size_t xstate_len)
{
	return FPSTATE_OFFSET + xstate_len + sizeof(uint32_t);
}

long sigframe_build(unsigned char *out, size_t cap, uint64_t at,
		    const struct user_regs_struct *r, uint64_t sigmask,
		    const unsigned char *xstate, size_t xstate_len,
		    uint64_t sigreturn)
{
	size_t need = sigframe_size(xstate_len);
	struct k_rt_sigframe f;
	struct k_sigcontext *mc = &f.uc.uc_mcontext;
	struct fx_sw_bytes sw = { 0 };
	uint32_t magic2 = FP_XSTATE_MAGIC2;
	uint64_t xcr0;

	if (at % 64 || cap < need || xstate_len < XSAVE_MIN)
		return -EINVAL;
	memset(&f, 0, sizeof(f));
	f.pretcode = sigreturn;
	f.uc.uc_flags = UC_FP_XSTATE | UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS;
	f.uc.uc_stack.ss_flags = KEEP_ALTSTACK;
	mc->r8 = r->r8; mc->r9 = r->r9; mc->r10 = r->r10; mc->r11 = r->r11;
	mc->r12 = r->r12; mc->r13 = r->r13; mc->r14 = r->r14;
	mc->r15 = r->r15;
	mc->di = r->rdi; mc->si = r->rsi; mc->bp = r->rbp; mc->bx = r->rbx;
	mc->dx = r->rdx; mc->ax = r->rax; mc->cx = r->rcx; mc->sp = r->rsp;
	mc->ip = r->rip;
	mc->flags = r->eflags;
	mc->cs = (uint16_t)r->cs;
	mc->ss = (uint16_t)r->ss;
	mc->fpstate = at + FPSTATE_OFFSET;
	f.uc.uc_sigmask = sigmask;
	memset(out, 0, need);
	memcpy(out, &f, sizeof(f));
	memcpy(out + FPSTATE_OFFSET, xstate, xstate_len);
	/* ptrace leaves XCR0 (the features user space has) where a signal
	 * frame has its software bytes. */
	memcpy(&xcr0, xstate + FX_SW_OFFSET, sizeof(xcr0));
	sw.magic1 = FP_XSTATE_MAGIC1;
	sw.extended_size = (uint32_t)(xstate_len + sizeof(magic2));
	sw.xfeatures = xcr0;
	sw.xstate_size = (uint32_t)xstate_len;
	memcpy(out + FPSTATE_OFFSET + FX_SW_OFFSET, &sw, sizeof(sw));
	memcpy(out + FPSTATE_OFFSET + xstate_len, &magic2, sizeof(magic2));
	return (long)need;
}

/* The first occurrence of pat in an executable mapping of pid's libc, or
 * 0. Chunks overlap by the pattern's length so none is missed at a seam. */
static uint64_t find_in_libc(pid_t pid, const void *pat, size_t n)
{
	static unsigned char buf[65536];
	unsigned long long lo, hi;
	char path[64], line[512], perms[8];
	uint64_t found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx-%llx %7s", &lo, &hi, perms) != 3 ||
		    perms[2] != 'x' || !strstr(line, "/libc.so"))
			continue;
		for (uint64_t a = lo; !found && a < hi; a += sizeof(buf) - n) {
			size_t len = hi - a < sizeof(buf) ? hi - a : sizeof(buf);
			struct iovec local = { buf, len };
			struct iovec remote = { (void *)a, len };
			unsigned char *p;

			if (process_vm_readv(pid, &local, 1, &remote, 1, 0) !=
			    (ssize_t)len)
				break;
			p = memmem(buf, len, pat, n);
			if (p)
				found = a + (p - buf);
		}
	}
	fclose(f);
	return found;
}

int sigframe_find_gadgets(pid_t pid, struct sigframe_gadgets *g)
{
	/* glibc's __restore_rt is the first; the second is the same with a
	 * shorter encoding. */
	static const unsigned char ret_rax[] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00,
						 0x00, 0x00, 0x0f, 0x05 };
	static const unsigned char ret_eax[] = { 0xb8, 0x0f, 0x00, 0x00, 0x00,
						 0x0f, 0x05 };
	static const unsigned char syscall_ret[] = { 0x0f, 0x05, 0xc3 };

	g->syscall_ret = find_in_libc(pid, syscall_ret, sizeof(syscall_ret));
	g->sigreturn = find_in_libc(pid, ret_rax, sizeof(ret_rax));
	if (!g->sigreturn)
		g->sigreturn = find_in_libc(pid, ret_eax, sizeof(ret_eax));
	return g->syscall_ret && g->sigreturn ? 0 : -ENOENT;
}
