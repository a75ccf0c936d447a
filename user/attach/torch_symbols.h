/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The at::RecordFunction entry points rfbpf probes, by variant, and what
 * their presence says about the build (which std::string ABI it uses).
 */
#ifndef RFBPF_TORCH_SYMBOLS_H
#define RFBPF_TORCH_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "rfbpf.h"

struct torch_symbols {
	uint64_t offset[RF_V_NR];	/* file offset per variant, 0 = absent */
	unsigned nr_before;		/* before() variants found */
	bool old_string_abi;
};

/* The mangled symbol of a variant (RF_V_END included). */
const char *torch_symbol(unsigned variant);
/* Resolves every variant in the file at path. Returns the number of
 * symbols found (before variants + end), or a negative elf_symbols error. */
int torch_symbols_resolve(const char *path, struct torch_symbols *s);
/* The version of the torch build the library at path belongs to, as its
 * real name (libtorch_cpu.so.2.14.1: "2.14.1") or the torch/version.py
 * beside it ("2.6.0+cu124") has it; false if neither tells. */
bool torch_version_text(const char *path, char *buf, size_t len);
/* Its major.minor. */
bool torch_version(const char *path, int *major, int *minor);
/* Where this build's RecordFunction keeps fwd_thread_id_ (it moved when
 * 2.4 added kwinputs_), from the version in the library's name or its
 * torch/version.py; 0 when the version cannot be told. */
uint32_t torch_fwd_tid_offset(const char *path, const struct torch_symbols *s);
/* "before(std::string), before(FunctionSchema), ... ; C++11 string ABI" */
void torch_symbols_describe(const struct torch_symbols *s, char *buf,
			    size_t len);

#endif
