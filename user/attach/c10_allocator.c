// SPDX-License-Identifier: BSD-2-Clause
/* Finding PyTorch's allocator functions in c10: see c10_allocator.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "c10_allocator.h"
#include "elf_symbols.h"
#include "target.h"

bool is_libc10_name(const char *base)
{
	static const char stem[] = "libc10.so";
	size_t n = sizeof(stem) - 1;

	return !strncmp(base, stem, n) && (!base[n] || base[n] == '.');
}

/* libtorch_cpu.so.X -> libc10.so.X in the same directory. */
static int beside(const char *torch_path, char *buf, size_t len)
{
	const char *base = strrchr(torch_path, '/');
	const char *suffix;
	int n;

	base = base ? base + 1 : torch_path;
	suffix = strstr(base, "libtorch_cpu.so");
	if (!suffix)
		return -ENOENT;
	suffix += strlen("libtorch_cpu.so");
	n = snprintf(buf, len, "%.*slibc10.so%s", (int)(base - torch_path),
		     torch_path, suffix);
	if (n < 0 || (size_t)n >= len || access(buf, R_OK))
		return -ENOENT;
	return 0;
}

int c10_library(pid_t pid, const char *torch_path, char *buf, size_t len)
{
	if (pid > 0 && !target_find_library(pid, is_libc10_name, buf, len))
		return 0;
	return torch_path ? beside(torch_path, buf, len) : -ENOENT;
}

int c10_allocator_offsets(const char *path, uint64_t off[C10_ALLOCATOR_FUNCS])
{
	/* reportMemoryUsageToProfiler's totals were int64_t in 1.13 and
	 * size_t from 2.0: both manglings are looked for. */
	static const char *const names[] = {
		"_ZN3c1025ProfiledCPUMemoryReporter3NewEPvm",
		"_ZN3c1025ProfiledCPUMemoryReporter6DeleteEPv",
		"_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE",
		"_ZN3c1027reportMemoryUsageToProfilerEPvlllNS_6DeviceE",
	};
	uint64_t found[4] = { 0 };
	int n = elf_find_functions(path, names, 4, found);

	if (n < 0)
		return n;
	off[0] = found[0];
	off[1] = found[1];
	off[2] = found[2] ? found[2] : found[3];
	return !!off[0] + !!off[1] + !!off[2];
}
