/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Finding functions in an ELF file by symbol name, as file offsets (what a
 * uprobe is attached at). Reads both .dynsym and .symtab with libelf, and
 * converts each symbol's virtual address to a file offset through the
 * PT_LOAD program headers, because a shared library's text segment need not
 * start at file offset == vaddr.
 */
#ifndef RFBPF_ELF_SYMBOLS_H
#define RFBPF_ELF_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

enum elf_symbols_error {
	ELF_SYMS_OK = 0,
	ELF_SYMS_OPEN = -1,	/* cannot open or read the file (errno set) */
	ELF_SYMS_NOT_ELF = -2,	/* not an ELF file */
	ELF_SYMS_BAD_ELF = -3,	/* ELF, but headers unreadable */
	ELF_SYMS_TRUNCATED = -4,/* headers point past the end of the file */
};

/*
 * For each names[i], set offsets[i] to the file offset of the defined
 * function of that name, or 0 when absent (or names[i] is NULL). Returns how many were found,
 * or a negative enum elf_symbols_error.
 */
int elf_find_functions(const char *path, const char *const *names, size_t n,
		       uint64_t *offsets);
/* The same for variables (STT_OBJECT) with initialised data. */
int elf_find_objects(const char *path, const char *const *names, size_t n,
		     uint64_t *offsets);
const char *elf_symbols_strerror(int err);

#endif
