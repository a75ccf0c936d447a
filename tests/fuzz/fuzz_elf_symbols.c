/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The ELF symbol reader (user/attach/elf_symbols.c) on arbitrary files, the
 * way `rfbpf --lib FILE` reads one (session/setup.c's resolve_symbols, then
 * activation's and the Python reader's lookups): it must answer with
 * offsets or a one-line reason, never crash or hang, and an offset it
 * gives must lie in the file, because rfbpf puts a uprobe there.
 *
 * The input is written to a memfd, because the reader takes a path as rfbpf
 * gets one. Seeds (tests/fuzz/seeds/gen_elf_seeds.sh) are tiny shared
 * objects holding the RecordFunction names, so mutations start deep.
 */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "attach/elf_symbols.h"
#include "attach/torch_symbols.h"

/* A refusal is one line that says something (rfbpf prints it as is). */
static void check_refusal(int err)
{
	const char *why = elf_symbols_strerror(err);

	if (err == ELF_SYMS_OPEN || !why[0] || strchr(why, '\n') ||
	    !strcmp(why, "no error"))
		abort();
}

/* n found offsets, each inside the file: never 0 counted, never past it. */
static void check_offsets(int n, const uint64_t *off, size_t nr, size_t size)
{
	int nonzero = 0;

	if (n < 0) {
		check_refusal(n);
		return;
	}
	for (size_t i = 0; i < nr; i++) {
		if (off[i] >= size && off[i])
			abort();
		nonzero += off[i] != 0;
	}
	if (n != nonzero)
		abort();
}

/* What --lib does with the file: resolve, describe, pick the layout. */
static void resolve_as_lib(const char *path, size_t size)
{
	struct torch_symbols s;
	char desc[256];
	int n = torch_symbols_resolve(path, &s);

	check_offsets(n, s.offset, RF_V_NR, size);
	if (n < 0)
		return;
	torch_symbols_describe(&s, desc, sizeof(desc));
	if (strlen(desc) >= sizeof(desc))
		abort();
	torch_fwd_tid_offset(path, &s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* activation.c's registry functions and py_stack.c's variable. */
	static const char *const functions[] = {
		"_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE",
		"_ZN2at14removeCallbackEm",
		"main",
	};
	static const char *const objects[] = { "_PyRuntime", NULL };
	uint64_t off[3];
	char path[64];
	int fd = memfd_create("fuzz-elf", 0);

	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		resolve_as_lib(path, size);
		check_offsets(elf_find_functions(path, functions, 3, off), off,
			      3, size);
		check_offsets(elf_find_objects(path, objects, 2, off), off, 2,
			      size);
	}
	close(fd);
	return 0;
}
