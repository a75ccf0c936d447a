// SPDX-License-Identifier: BSD-2-Clause
/* The held thread's stack: held_stack.h. */
#include "held_stack.h"

#include <elfutils/libdwfl.h>
#include <dwarf.h>
#include <gelf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "stub_page.h"
#include "target.h"

/* Deeper than any stack an op runs on; past it the walk stops. */
#define MAX_FRAMES 512
/* x86-64's DWARF registers: rax rdx rcx rbx rsi rdi rbp rsp r8-r15, and
 * the return address column (the pc). */
#define DWARF_REGS 17

static bool in_list(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s, list[i]))
			return true;
	return false;
}

enum held_frame_place held_frame_place(const char *module, const char *symbol)
{
	/* The allocator's entry points, glibc's internals among them, and
	 * an interposed allocator's (jemalloc, tcmalloc export the same). */
	static const char *const allocator[] = {
		"malloc", "free", "calloc", "realloc", "reallocarray",
		"memalign", "posix_memalign", "aligned_alloc", "valloc",
		"pvalloc", "malloc_trim", "malloc_consolidate", "sysmalloc",
		"tcache_init", "arena_get2", "cfree",
	};
	const char *base = module ? strrchr(module, '/') : NULL;

	base = base ? base + 1 : module;
	if (base && !strncmp(base, "ld-", 3) && strstr(base, ".so"))
		return HELD_FRAME_LOADER;
	if (!symbol)
		return HELD_FRAME_OTHER;
	if (!strncmp(symbol, "__libc_", 7))
		symbol += 7;
	if (!strncmp(symbol, "_int_", 5) ||
	    in_list(symbol, allocator, sizeof(allocator) / sizeof(*allocator)))
		return HELD_FRAME_MALLOC;
	return HELD_FRAME_OTHER;
}

struct unwind {
	const struct held_thread *h;
	struct held_stack *s;
	Dwfl *dwfl;
	bool verbose;
};

/* The job's files as it sees them, in its mount namespace. */
static __thread pid_t elf_pid;

static int find_elf(Dwfl_Module *mod, void **userdata, const char *name,
		    Dwarf_Addr base, char **file_name, Elf **elfp)
{
	char path[PATH_MAX];
	int fd;

	if (name[0] != '/')	/* [vdso]: read from the job */
		return dwfl_linux_proc_find_elf(mod, userdata, name, base,
						file_name, elfp);
	snprintf(path, sizeof(path), "/proc/%d/root%s", elf_pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	*file_name = strdup(path);
	*elfp = NULL;
	return fd;
}

/* No separate debug files: .eh_frame unwinds and .dynsym names. */
static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *name,
			Dwarf_Addr base, const char *file_name,
			const char *debuglink_file, GElf_Word debuglink_crc,
			char **debuginfo_file_name)
{
	(void)mod, (void)userdata, (void)name, (void)base, (void)file_name;
	(void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
	return -1;
}

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_arg)
{
	struct unwind *u = arg;

	(void)dwfl;
	if (*thread_arg)
		return 0;
	*thread_arg = u;
	return u->h->tid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_arg)
{
	struct unwind *u = arg;

	(void)dwfl;
	*thread_arg = u;
	return tid == u->h->tid;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *out,
			void *arg)
{
	struct unwind *u = arg;

	(void)dwfl;
	return !target_read(u->h->pid, addr, out, sizeof(*out));
}

/* Is pc in rfbpf's page (or in no module at all)? Its code has no
 * unwind data. */
static bool in_rfbpf_page(Dwfl *dwfl, Dwarf_Addr pc)
{
	Dwfl_Module *m = dwfl_addrmodule(dwfl, pc);
	const char *name = m ? dwfl_module_info(m, NULL, NULL, NULL, NULL,
						NULL, NULL, NULL) : NULL;

	return !m || (name && strstr(name, "/memfd:" STUB_MEMFD_NAME));
}

/* Is addr in executable code of a module with unwind data (not rfbpf's
 * page)? A return address is. */
static bool in_code(Dwfl *dwfl, Dwarf_Addr addr)
{
	Dwfl_Module *m;
	Dwarf_Addr at = addr, bias;
	Elf_Scn *scn;
	GElf_Shdr shdr;

	if (in_rfbpf_page(dwfl, addr))
		return false;
	m = dwfl_addrmodule(dwfl, addr);
	scn = dwfl_module_address_section(m, &at, &bias);
	return scn && gelf_getshdr(scn, &shdr) &&
	       (shdr.sh_flags & SHF_EXECINSTR);
}

/* Words of the stack looked at for the stub's return address. */
#define STUB_STACK_WORDS 16

/* The registers as rfbpf found the thread. Caught in rfbpf's start stub
 * (safe point 3, where the kernel's uprobe may have left words of its
 * own on the stack), the walk begins in the stub's caller: the first
 * word of the stack that points into code is its return address. */
static bool initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct unwind *u = arg;
	const struct user_regs_struct *r = &u->h->regs;
	Dwarf_Word regs[DWARF_REGS] = {
		r->rax, r->rdx, r->rcx, r->rbx, r->rsi, r->rdi, r->rbp,
		r->rsp, r->r8, r->r9, r->r10, r->r11, r->r12, r->r13,
		r->r14, r->r15, r->rip,
	};

	if (in_rfbpf_page(u->dwfl, r->rip)) {
		Dwarf_Word words[STUB_STACK_WORDS];
		int i;

		if (target_read(u->h->pid, r->rsp, words, sizeof(words)))
			return false;
		for (i = 0; i < STUB_STACK_WORDS; i++)
			if (in_code(u->dwfl, words[i]))
				break;
		if (i == STUB_STACK_WORDS)
			return false;
		regs[16] = words[i];
		regs[7] = r->rsp + sizeof(words[0]) * (i + 1);
	}
	if (!dwfl_thread_state_registers(thread, 0, DWARF_REGS, regs))
		return false;
	dwfl_thread_state_register_pc(thread, regs[16]);
	return true;
}

static void no_detach(Dwfl *dwfl, void *arg)
{
	(void)dwfl, (void)arg;	/* rfbpf holds the thread, not libdwfl */
}

static int on_frame(Dwfl_Frame *frame, void *arg)
{
	struct unwind *u = arg;
	struct held_stack *s = u->s;
	const char *module = NULL, *symbol = NULL;
	enum held_frame_place place;
	Dwfl_Module *m;
	Dwarf_Addr pc;
	bool activation;

	if (!dwfl_frame_pc(frame, &pc, &activation))
		return DWARF_CB_ABORT;
	/* A return address points after its call: look up the call. */
	if (!activation)
		pc--;
	m = dwfl_addrmodule(u->dwfl, pc);
	if (m) {
		module = dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL,
					  NULL, NULL);
		symbol = dwfl_module_addrname(m, pc);
	}
	place = held_frame_place(module, symbol);
	if (u->verbose)
		fprintf(stderr, "rfbpf: held thread %d: #%d %#llx %s (%s)\n",
			u->h->tid, s->frames, (unsigned long long)pc,
			module ? module : "?", symbol ? symbol : "?");
	if (place != HELD_FRAME_OTHER && s->bad_frame < 0) {
		const char *base = module ? strrchr(module, '/') : NULL;

		s->bad_frame = s->frames;
		s->bad_place = place;
		snprintf(s->bad_where, sizeof(s->bad_where), "%s (%s)",
			 base ? base + 1 : module ? module : "?",
			 symbol ? symbol : "?");
	}
	return ++s->frames < MAX_FRAMES ? DWARF_CB_OK : DWARF_CB_ABORT;
}

int held_stack_unwind(const struct held_thread *h, struct held_stack *s,
		      bool verbose)
{
	static const Dwfl_Callbacks modules = {
		.find_elf = find_elf,
		.find_debuginfo = no_debuginfo,
	};
	static const Dwfl_Thread_Callbacks threads = {
		.next_thread = next_thread,
		.get_thread = get_thread,
		.memory_read = memory_read,
		.set_initial_registers = initial_registers,
		.detach = no_detach,
	};
	struct unwind u = { .h = h, .s = s, .verbose = verbose };
	int ret = 0, r;

	memset(s, 0, sizeof(*s));
	s->bad_frame = -1;
	elf_pid = h->pid;
	u.dwfl = dwfl_begin(&modules);
	if (!u.dwfl)
		return -ENOMEM;
	dwfl_report_begin(u.dwfl);
	if (dwfl_linux_proc_report(u.dwfl, h->pid) ||
	    dwfl_report_end(u.dwfl, NULL, NULL) ||
	    !dwfl_attach_state(u.dwfl, NULL, h->pid, &threads, &u)) {
		ret = -ESRCH;
		goto out;
	}
	r = dwfl_getthread_frames(u.dwfl, h->tid, on_frame, &u);
	/* -1: no unwind data went further (the outermost frame ends with
	 * 0, or DWARF_CB_ABORT at the cap). */
	s->stopped_early = r < 0 && s->frames < MAX_FRAMES;
	if (verbose && s->stopped_early)
		fprintf(stderr, "rfbpf: held thread %d: unwinding stopped "
			"after %d frames: %s\n", h->tid, s->frames,
			dwfl_errmsg(-1));
out:
	dwfl_end(u.dwfl);
	return ret;
}
