/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * --memory: where PyTorch's allocators can be probed (bpf/rfbpf.h's
 * rf_mem_source says which functions, and why those). They live in c10,
 * the library libtorch_cpu depends on, in the same directory with the
 * same version suffix in every Debian build (libc10.so.1.13 beside
 * libtorch_cpu.so.1.13).
 */
#ifndef RFBPF_C10_ALLOCATOR_H
#define RFBPF_C10_ALLOCATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define C10_ALLOCATOR_FUNCS 3	/* rf_mem_source's order */

bool is_libc10_name(const char *base);
/* The c10 of a target (pid > 0, mapped: the file its mapping names) or
 * beside libtorch_cpu at torch_path (a command not started yet, or a
 * target that has not mapped it). 0, or -ENOENT. */
int c10_library(pid_t pid, const char *torch_path, char *buf, size_t len);
/* The file offsets of the allocator functions in c10 at path (0: absent).
 * Returns how many were found, or a negative elf_symbols error. */
int c10_allocator_offsets(const char *path,
			  uint64_t off[C10_ALLOCATOR_FUNCS]);

#endif
