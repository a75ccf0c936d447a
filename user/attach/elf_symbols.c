// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "elf_symbols.h"

/* Does [off, off + len) lie inside a file of size bytes? Written so that
 * no sum can wrap: damaged headers hold any 64-bit value. */
static bool in_file(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/*
 * A damaged library (cut short by a failed copy, or with bytes of its
 * headers changed) must be refused with a reason, not read as a library
 * without our symbols, and never turned into a probe at a file offset
 * that was never in the file. libelf checks less than this: it answers a
 * file whose section table is cut off as one without sections, and it
 * takes PT_LOAD offsets as they are. So everything the lookup reads from
 * is checked to lie within the file first.
 */
static bool layout_in_file(Elf *elf, uint64_t size)
{
	size_t nr_ph, nr_sh;
	GElf_Ehdr eh;
	GElf_Phdr ph;

	if (!gelf_getehdr(elf, &eh) || elf_getphdrnum(elf, &nr_ph) ||
	    elf_getshdrnum(elf, &nr_sh))
		return false;
	/* libelf counts no entries in a table that does not fit: e_phnum
	 * and e_shnum say how many the file claims (PN_XNUM and 0: more than
	 * fit there, and the count libelf found in section 0 is the one). */
	if (eh.e_phnum != PN_XNUM)
		nr_ph = eh.e_phnum;
	if (eh.e_shnum)
		nr_sh = eh.e_shnum;
	/* The tables' sizes as libelf reads them, whatever e_*entsize say. */
	if (!in_file(eh.e_phoff, gelf_fsize(elf, ELF_T_PHDR, nr_ph,
					    EV_CURRENT), size) ||
	    (eh.e_shoff && !in_file(eh.e_shoff, gelf_fsize(elf, ELF_T_SHDR,
					nr_sh, EV_CURRENT), size)))
		return false;
	for (size_t i = 0; i < nr_ph; i++) {
		if (!gelf_getphdr(elf, i, &ph))
			return false;
		if (ph.p_type == PT_LOAD &&
		    !in_file(ph.p_offset, ph.p_filesz, size))
			return false;
	}
	return true;
}

/* The same for a symbol table and the string table it names. */
static bool symtab_in_file(Elf *elf, const GElf_Shdr *sh, uint64_t size)
{
	GElf_Shdr str;

	return in_file(sh->sh_offset, sh->sh_size, size) &&
	       gelf_getshdr(elf_getscn(elf, sh->sh_link), &str) &&
	       in_file(str.sh_offset, str.sh_size, size);
}

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
		if (vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr < ph.p_filesz)
			return vaddr - ph.p_vaddr + ph.p_offset;
	}
	return 0;
}

static int scan_section(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
			int type, const char *const *names, size_t n,
			uint64_t *offsets)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t sym_size = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
	size_t count, found = 0;
	GElf_Sym sym;

	if (!data || !sym_size)
		return 0;
	/* From the data libelf read, not sh_size / sh_entsize: a damaged
	 * sh_entsize of 1 would mean 24 times the lookups for nothing. */
	count = data->d_size / sym_size;
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
			/* A function is code in the file; one that no segment
			 * holds means damaged program headers. (A variable may
			 * be in .bss, past p_filesz: not found, not wrong.) */
			if (!offsets[k] && type == STT_FUNC)
				return ELF_SYMS_BAD_ELF;
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
	int fd, ret, found = 0, err = ELF_SYMS_OK;
	struct stat st;
	Elf *elf = NULL;

	memset(offsets, 0, n * sizeof(*offsets));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return ELF_SYMS_BAD_ELF;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ELF_SYMS_OPEN;
	if (fstat(fd, &st)) {
		err = ELF_SYMS_OPEN;
		goto out;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		err = ELF_SYMS_NOT_ELF;
		goto out;
	}
	if (!layout_in_file(elf, st.st_size)) {
		err = ELF_SYMS_TRUNCATED;
		goto out;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh)) {
			err = ELF_SYMS_BAD_ELF;
			goto out;
		}
		if (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB)
			continue;
		if (!symtab_in_file(elf, &sh, st.st_size)) {
			err = ELF_SYMS_TRUNCATED;
			goto out;
		}
		ret = scan_section(elf, scn, &sh, type, names, n, offsets);
		if (ret < 0) {
			err = ret;
			goto out;
		}
		found += ret;
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
	case ELF_SYMS_TRUNCATED:
		return "truncated or corrupt ELF file: its headers point past "
		       "its end";
	default: return "no error";
	}
}
