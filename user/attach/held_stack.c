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

/* Is addr in an executable section of module m? */
static bool in_code(Dwfl_Module *m, Dwarf_Addr addr)
{
	Dwarf_Addr at = addr, bias;
	Elf_Scn *scn = m ? dwfl_module_address_section(m, &at, &bias) : NULL;
	GElf_Shdr shdr;

	return scn && gelf_getshdr(scn, &shdr) &&
	       (shdr.sh_flags & SHF_EXECINSTR);
}

/* dwfl_getmodules: the start of the module that is rfbpf's page. */
static int find_page(Dwfl_Module *m, void **userdata, const char *name,
		     Dwarf_Addr start, void *arg)
{
	Dwarf_Addr *found = arg;

	(void)m, (void)userdata;
	if (name && strstr(name, "/memfd:" STUB_MEMFD_NAME)) {
		*found = start;
		return DWARF_CB_ABORT;
	}
	return DWARF_CB_OK;
}

/* rfbpf's page in the job, from its module (0 if not mapped). */
static Dwarf_Addr rfbpf_page(Dwfl *dwfl)
{
	Dwarf_Addr found = 0;

	dwfl_getmodules(dwfl, find_page, &found, 0);
	return found;
}

/* Words of the stack looked at for the stub's return address. */
#define STUB_STACK_WORDS 16

/* The registers as rfbpf found the thread. Caught at safe point 3 it is
 * in rfbpf's start stub, whose page has no unwind data: at its probe
 * (the stub has pushed nothing, so the top of the stack is the return
 * into the stub's caller), or, on an optimized uprobe, in the kernel's
 * uprobe trampoline, which the probe's nop5 called: above the words the
 * trampoline saved is its return into the stub, right after the nop5,
 * and the word after that is the return into the stub's caller. The walk
 * begins there, in RecordFunction's code. */
static bool initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct unwind *u = arg;
	const struct user_regs_struct *r = &u->h->regs;
	Dwarf_Word regs[DWARF_REGS] = {
		r->rax, r->rdx, r->rcx, r->rbx, r->rsi, r->rdi, r->rbp,
		r->rsp, r->r8, r->r9, r->r10, r->r11, r->r12, r->r13,
		r->r14, r->r15, r->rip,
	};
	Dwarf_Addr page = rfbpf_page(u->dwfl);
	Dwarf_Addr after_probe = page + STUB_START_PROBE + 5;

	if (page && r->rip >= page && r->rip < page + STUB_PAGE_SIZE) {
		Dwarf_Word ret;

		if (target_read(u->h->pid, r->rsp, &ret, sizeof(ret)))
			return false;
		regs[16] = ret;
		regs[7] = r->rsp + sizeof(ret);
	} else if (page && target_addr_in_mapping(u->h->pid, r->rip,
						  "[uprobes-trampoline]")) {
		Dwarf_Word words[STUB_STACK_WORDS];
		int i;

		if (target_read(u->h->pid, r->rsp, words, sizeof(words)))
			return false;
		for (i = 0; i + 1 < STUB_STACK_WORDS; i++)
			if (words[i] == after_probe)
				break;
		if (i + 1 == STUB_STACK_WORDS)
			return false;	/* not in our probe: not guessed */
		regs[16] = words[i + 1];
		regs[7] = r->rsp + sizeof(words[0]) * (i + 2);
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
	/* Only code counts: a stray address (a walk gone wrong) that
	 * falls in a module's range is not a frame of it. */
	place = in_code(m, pc) ? held_frame_place(module, symbol) :
				 HELD_FRAME_OTHER;
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
