// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include <unistd.h>
#include "elf_symbols.h"

/* File offset of vaddr, via the PT_LOAD segment that contains it; 0 if no
 * segment does (a symbol we could not probe anyway). */
static uint64_t vaddr_to_offset(Elf *elf, uint64_t vaddr)
{
	size_t nr;
	GElf_Phdr ph;

	if (elf_getphdrnum(elf, &nr))
		return 0;
	for (size_t i = 0; i < nr; i++) {
		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
			return vaddr - ph.p_vaddr + ph.p_offset;
	}
	return 0;
}

static int scan_section(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
			int type, const char *const *names, size_t n,
			uint64_t *offsets)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t count, found = 0;
	GElf_Sym sym;

	if (!data || !sh->sh_entsize)
		return 0;
	count = sh->sh_size / sh->sh_entsize;
	for (size_t i = 0; i < count; i++) {
		const char *name;

		if (!gelf_getsym(data, i, &sym) ||
		    GELF_ST_TYPE(sym.st_info) != type ||
		    sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name)
			continue;
		for (size_t k = 0; k < n; k++) {
			if (offsets[k] || !names[k] || strcmp(name, names[k]))
				continue;
			offsets[k] = vaddr_to_offset(elf, sym.st_value);
			found += offsets[k] != 0;
		}
	}
	return found;
}

static int find_symbols(const char *path, int type, const char *const *names,
			size_t n, uint64_t *offsets)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	int fd, found = 0, err = ELF_SYMS_OK;
	Elf *elf;

	memset(offsets, 0, n * sizeof(*offsets));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return ELF_SYMS_BAD_ELF;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ELF_SYMS_OPEN;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		err = ELF_SYMS_NOT_ELF;
		goto out;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh)) {
			err = ELF_SYMS_BAD_ELF;
			goto out;
		}
		if (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB)
			found += scan_section(elf, scn, &sh, type, names, n,
					      offsets);
	}
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return err ? err : found;
}

int elf_find_functions(const char *path, const char *const *names, size_t n,
		       uint64_t *offsets)
{
	return find_symbols(path, STT_FUNC, names, n, offsets);
}

int elf_find_objects(const char *path, const char *const *names, size_t n,
		     uint64_t *offsets)
{
	return find_symbols(path, STT_OBJECT, names, n, offsets);
}

const char *elf_symbols_strerror(int err)
{
	switch (err) {
	case ELF_SYMS_OPEN: return strerror(errno);
	case ELF_SYMS_NOT_ELF: return "not an ELF file";
	case ELF_SYMS_BAD_ELF: return "corrupt ELF headers";
	default: return "no error";
	}
}
