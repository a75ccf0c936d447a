/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The ELF symbol reader (user/attach/elf_symbols.c) on arbitrary files: it
 * must answer with offsets or an error, never crash or hang. The input is
 * written to a memfd, because the reader takes a path as rfbpf gets one.
 */
#include <stdio.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "attach/elf_symbols.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {
		"_ZN2at14RecordFunction3endEv",
		"_ZN2at14RecordFunction6beforeEPKcl",
		"main",
	};
	uint64_t offsets[3];
	char path[64];
	int fd = memfd_create("fuzz-elf", 0);

	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		elf_find_functions(path, names, 3, offsets);
		elf_find_objects(path, names, 3, offsets);
	}
	close(fd);
	return 0;
}
