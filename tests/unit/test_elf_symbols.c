// SPDX-License-Identifier: BSD-2-Clause
/*
 * Symbol resolution (user/attach/elf_symbols.c,
 * user/attach/torch_symbols.c) on the ELF fixtures built by
 * tests/fixtures/Makefile and on Debian's libtorch_cpu.
 * Expected offsets come from a second, independent ELF reader written here
 * with <elf.h> over mmap (no libelf), and for the fixtures also from the
 * bytes of each function as the dynamic loader mapped it.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "attach/elf_symbols.h"
#include "attach/torch_symbols.h"

/* Paths are relative to the repository root, where `make unit` runs. */
#define FIX "tests/fixtures/"
#define LIBTORCH "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13"

struct mapped {
	const unsigned char *p;
	size_t size;
};

static int map_file(const char *path, struct mapped *m)
{
	struct stat st;
	int fd = open(path, O_RDONLY);

	m->p = NULL;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !st.st_size) {
		close(fd);
		return -1;
	}
	m->size = st.st_size;
	m->p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m->p == MAP_FAILED) {
		m->p = NULL;
		return -1;
	}
	return 0;
}

static void unmap_file(struct mapped *m)
{
	if (m->p)
		munmap((void *)m->p, m->size);
	m->p = NULL;
}

static int in_file(const struct mapped *m, uint64_t off, uint64_t len)
{
	return off <= m->size && len <= m->size - off;
}

/* The .dynsym entry called name (any type, defined or not), or NULL. */
static const Elf64_Sym *dynsym_lookup(const struct mapped *m,
				      const char *name)
{
	const Elf64_Ehdr *eh = (const void *)m->p;

	if (!in_file(m, 0, sizeof(*eh)) || memcmp(eh->e_ident, ELFMAG, SELFMAG)
	    || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    !in_file(m, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)))
		return NULL;
	const Elf64_Shdr *sh = (const void *)(m->p + eh->e_shoff);
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum)
			continue;
		const Elf64_Shdr *str = &sh[sh[i].sh_link];
		if (!in_file(m, sh[i].sh_offset, sh[i].sh_size) ||
		    !in_file(m, str->sh_offset, str->sh_size))
			return NULL;
		const Elf64_Sym *sym = (const void *)(m->p + sh[i].sh_offset);
		const char *strs = (const char *)m->p + str->sh_offset;
		for (size_t k = 0; k < sh[i].sh_size / sizeof(*sym); k++)
			if (sym[k].st_name < str->sh_size &&
			    !strcmp(strs + sym[k].st_name, name))
				return &sym[k];
	}
	return NULL;
}

/* The PT_LOAD header whose file-backed part holds vaddr, or NULL. */
static const Elf64_Phdr *load_of(const struct mapped *m, uint64_t vaddr)
{
	const Elf64_Ehdr *eh = (const void *)m->p;

	if (!in_file(m, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)))
		return NULL;
	const Elf64_Phdr *ph = (const void *)(m->p + eh->e_phoff);
	for (unsigned i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && vaddr >= ph[i].p_vaddr &&
		    vaddr - ph[i].p_vaddr < ph[i].p_filesz)
			return &ph[i];
	return NULL;
}

/* File offset of the defined function called name, 0 if there is none;
 * *vaddr gets its address and *exec whether its segment is executable. */
static uint64_t expected_offset(const struct mapped *m, const char *name,
				uint64_t *vaddr, int *exec)
{
	const Elf64_Sym *s = dynsym_lookup(m, name);
	const Elf64_Phdr *ph;

	if (!s || ELF64_ST_TYPE(s->st_info) != STT_FUNC ||
	    s->st_shndx == SHN_UNDEF || !(ph = load_of(m, s->st_value)))
		return 0;
	if (vaddr)
		*vaddr = s->st_value;
	if (exec)
		*exec = !!(ph->p_flags & PF_X);
	return s->st_value - ph->p_vaddr + ph->p_offset;
}

/* Resolves path with torch_symbols_resolve() and checks every variant
 * against the independent reader: present exactly when `expect` says so,
 * at the same offset, inside an executable segment. */
static void check_variants(const char *path, const int *expect,
			   struct torch_symbols *s, struct mapped *m)
{
	int want = 0;

	CHECK(!map_file(path, m));
	for (unsigned v = 0; v < RF_V_NR; v++)
		want += expect[v];
	CHECK_EQ_U64(torch_symbols_resolve(path, s), want);
	for (unsigned v = 0; m->p && v < RF_V_NR; v++) {
		int exec = 0;
		uint64_t off;

		if (!torch_symbol(v))	/* rfbpf's own callback: no symbol */
			continue;
		off = expected_offset(m, torch_symbol(v), NULL, &exec);

		if (expect[v] != (off != 0))
			fprintf(stderr, "  %s: %s %s\n", path,
				expect[v] ? "missing" : "unexpected",
				torch_symbol(v));
		CHECK_EQ_U64(off != 0, expect[v]);
		CHECK_EQ_U64(s->offset[v], off);
		if (off)
			CHECK(exec);
	}
}

/* 16 bytes at the file offset must be the function's first bytes as the
 * dynamic loader mapped them. */
static void check_bytes_in_memory(const char *path, const struct mapped *m,
				  const struct torch_symbols *s)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	int checked = 0;

	CHECK(h != NULL);
	if (!h) {
		fprintf(stderr, "  dlopen %s: %s\n", path, dlerror());
		return;
	}
	for (unsigned v = 0; v < RF_V_NR; v++) {
		const void *fn;

		if (!s->offset[v])
			continue;
		fn = dlsym(h, torch_symbol(v));
		CHECK(fn != NULL);
		CHECK(in_file(m, s->offset[v], 16));
		if (fn && in_file(m, s->offset[v], 16)) {
			CHECK(!memcmp(m->p + s->offset[v], fn, 16));
			checked++;
		}
	}
	CHECK(checked > 0);
	dlclose(h);
}

TEST(fake_torch_cxx11_abi)
{
	/* fake_torch.cpp defines everything but the old-ABI string. */
	const int expect[RF_V_NR] = {
		[RF_V_CSTR] = 1, [RF_V_STRING] = 1, [RF_V_SCHEMA] = 1,
		[RF_V_DESCRIPTOR] = 1, [RF_V_DESCRIPTOR_DK] = 1,
		[RF_V_END] = 1,
	};
	struct torch_symbols s;
	struct mapped m;

	check_variants(FIX "fake_torch.so", expect, &s, &m);
	CHECK_EQ_U64(s.nr_before, 5);
	CHECK(!s.old_string_abi);
	if (m.p)
		check_bytes_in_memory(FIX "fake_torch.so", &m, &s);
	/* Distinct functions, distinct offsets. */
	for (unsigned a = 0; a < RF_V_NR; a++)
		for (unsigned b = a + 1; b < RF_V_NR; b++)
			CHECK(!s.offset[a] || s.offset[a] != s.offset[b]);
	unmap_file(&m);
}

/* Linked at 0x400000: a vaddr is not its file offset, so only a real
 * vaddr -> offset mapping through PT_LOAD gives the right answer. */
TEST(fake_torch_vaddr_differs_from_offset)
{
	const int expect[RF_V_NR] = {
		[RF_V_CSTR] = 1, [RF_V_STRING] = 1, [RF_V_SCHEMA] = 1,
		[RF_V_DESCRIPTOR] = 1, [RF_V_DESCRIPTOR_DK] = 1,
		[RF_V_END] = 1,
	};
	struct torch_symbols s;
	struct mapped m;
	uint64_t vaddr = 0;

	check_variants(FIX "fake_torch_shifted.so", expect, &s, &m);
	if (!m.p)
		return;
	uint64_t off = expected_offset(&m, torch_symbol(RF_V_END), &vaddr,
				       NULL);
	CHECK(off != 0);
	CHECK(vaddr - off >= 0x400000);		/* the fixture does shift */
	CHECK(vaddr > m.size);			/* vaddr is no file offset */
	check_bytes_in_memory(FIX "fake_torch_shifted.so", &m, &s);
	unmap_file(&m);
}

TEST(fake_torch_old_abi)
{
	const int expect[RF_V_NR] = {
		[RF_V_CSTR] = 1, [RF_V_STRING_OLD] = 1, [RF_V_SCHEMA] = 1,
		[RF_V_END] = 1,
	};
	struct torch_symbols s;
	struct mapped m;
	char desc[256];

	check_variants(FIX "fake_torch_oldabi.so", expect, &s, &m);
	CHECK_EQ_U64(s.nr_before, 3);
	CHECK(s.old_string_abi);
	torch_symbols_describe(&s, desc, sizeof(desc));
	CHECK(strstr(desc, "pre-C++11") != NULL);
	if (m.p)
		check_bytes_in_memory(FIX "fake_torch_oldabi.so", &m, &s);
	unmap_file(&m);
}

TEST(find_functions_by_list)
{
	const char *names[] = {
		torch_symbol(RF_V_END), "no_such_function",
		torch_symbol(RF_V_CSTR),
		torch_symbol(RF_V_STRING_OLD),	/* not in this build */
	};
	uint64_t off[4] = { 1, 2, 3, 4 };	/* must all be overwritten */
	struct mapped m;

	CHECK_EQ_U64(elf_find_functions(FIX "fake_torch.so", names, 4, off),
		     2);
	CHECK(!map_file(FIX "fake_torch.so", &m));
	if (m.p) {
		CHECK_EQ_U64(off[0], expected_offset(&m, names[0], NULL, NULL));
		CHECK_EQ_U64(off[2], expected_offset(&m, names[2], NULL, NULL));
	}
	CHECK(off[0] && off[2]);
	CHECK_EQ_U64(off[1], 0);
	CHECK_EQ_U64(off[3], 0);
	CHECK_EQ_U64(elf_find_functions(FIX "fake_torch.so", names, 0, off), 0);
	unmap_file(&m);
}

/* The names are there, as a data object and as an undefined reference:
 * neither is a function to probe. */
TEST(elf_without_the_functions)
{
	struct torch_symbols s;
	struct mapped m;

	CHECK(!map_file(FIX "no_symbols.so", &m));
	if (m.p) {
		const Elf64_Sym *d = dynsym_lookup(&m, torch_symbol(RF_V_CSTR));
		const Elf64_Sym *u = dynsym_lookup(&m, torch_symbol(RF_V_END));

		CHECK(d && ELF64_ST_TYPE(d->st_info) == STT_OBJECT);
		CHECK(u && u->st_shndx == SHN_UNDEF);
	}
	CHECK_EQ_U64(torch_symbols_resolve(FIX "no_symbols.so", &s), 0);
	for (unsigned v = 0; v < RF_V_NR; v++)
		CHECK_EQ_U64(s.offset[v], 0);
	CHECK_EQ_U64(s.nr_before, 0);
	unmap_file(&m);
}

TEST(not_elf_and_missing)
{
	struct torch_symbols s;
	const char *names[] = { "x" };
	uint64_t off[1];

	CHECK_EQ_U64(torch_symbols_resolve(FIX "not_elf.bin", &s),
		     (uint64_t)ELF_SYMS_NOT_ELF);
	CHECK_STR(elf_symbols_strerror(ELF_SYMS_NOT_ELF), "not an ELF file");
	/* The fixture really is there: NOT_ELF is not a failed open. */
	CHECK(access(FIX "not_elf.bin", R_OK) == 0);

	errno = 0;
	CHECK_EQ_U64(elf_find_functions(FIX "does_not_exist.so", names, 1, off),
		     (uint64_t)ELF_SYMS_OPEN);
	CHECK_EQ_U64(errno, ENOENT);
	CHECK_EQ_U64(torch_symbols_resolve(FIX "does_not_exist.so", &s),
		     (uint64_t)ELF_SYMS_OPEN);
}

/* Cut and empty files must fail cleanly, without reading past the end. */
static int resolve_prefix(const char *from, size_t len, struct torch_symbols *s)
{
	char path[] = "/tmp/rfbpf-test-XXXXXX";
	int fd = mkstemp(path), ret;
	struct mapped m;

	if (fd < 0 || map_file(from, &m))
		abort();
	if (write(fd, m.p, len) != (ssize_t)len)
		abort();
	close(fd);
	unmap_file(&m);
	ret = torch_symbols_resolve(path, s);
	unlink(path);
	return ret;
}

TEST(truncated_and_empty_files)
{
	struct torch_symbols s;

	CHECK_EQ_U64(resolve_prefix(FIX "fake_torch.so", 0, &s),
		     (uint64_t)ELF_SYMS_NOT_ELF);
	/* ELF header only: no section is readable, nothing may be found. */
	int r = resolve_prefix(FIX "fake_torch.so", sizeof(Elf64_Ehdr), &s);
	CHECK(r <= 0);
	for (unsigned v = 0; v < RF_V_NR; v++)
		CHECK_EQ_U64(s.offset[v], 0);
	r = resolve_prefix(FIX "fake_torch.so", 4096, &s);
	CHECK_EQ_U64(r, (uint64_t)ELF_SYMS_TRUNCATED);
	/* One byte short: the section table's end is cut. */
	struct mapped m;
	if (map_file(FIX "fake_torch.so", &m))
		abort();
	CHECK_EQ_U64(resolve_prefix(FIX "fake_torch.so", m.size - 1, &s),
		     (uint64_t)ELF_SYMS_TRUNCATED);
	unmap_file(&m);
}

/* fake_torch.so with the 8 bytes at off replaced by val, resolved. */
static int resolve_patched(size_t off, uint64_t val, struct torch_symbols *s)
{
	char path[] = "/tmp/rfbpf-test-XXXXXX";
	int fd = mkstemp(path), ret;
	struct mapped m;

	if (fd < 0 || map_file(FIX "fake_torch.so", &m))
		abort();
	if (write(fd, m.p, m.size) != (ssize_t)m.size ||
	    pwrite(fd, &val, sizeof(val), off) != sizeof(val))
		abort();
	close(fd);
	unmap_file(&m);
	ret = torch_symbols_resolve(path, s);
	unlink(path);
	return ret;
}

/* Broken header fields are refused with a reason, never turned into
 * offsets outside the file (what rfbpf --lib would probe). */
TEST(damaged_headers)
{
	struct torch_symbols s;
	struct mapped m;

	if (map_file(FIX "fake_torch.so", &m))
		abort();
	const Elf64_Ehdr *eh = (const void *)m.p;
	const Elf64_Phdr *ph = (const void *)(m.p + eh->e_phoff);
	size_t text = 0;	/* the PT_LOAD of the code */
	for (unsigned i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X))
			text = eh->e_phoff + i * sizeof(*ph);
	CHECK(text != 0);
	CHECK_EQ_U64(resolve_patched(offsetof(Elf64_Ehdr, e_shoff), 1ull << 63,
				     &s), (uint64_t)ELF_SYMS_TRUNCATED);
	CHECK_EQ_U64(resolve_patched(offsetof(Elf64_Ehdr, e_phoff),
				     m.size - 8, &s),
		     (uint64_t)ELF_SYMS_TRUNCATED);
	/* The code segment said to start past the end of the file. */
	CHECK_EQ_U64(resolve_patched(text + offsetof(Elf64_Phdr, p_offset),
				     1ull << 63, &s),
		     (uint64_t)ELF_SYMS_TRUNCATED);
	/* Or mapped elsewhere: no segment holds the functions. */
	CHECK_EQ_U64(resolve_patched(text + offsetof(Elf64_Phdr, p_vaddr),
				     1ull << 40, &s),
		     (uint64_t)ELF_SYMS_BAD_ELF);
	CHECK(strchr(elf_symbols_strerror(ELF_SYMS_TRUNCATED), '\n') == NULL);
	unmap_file(&m);
}

/* Debian's python3-torch 1.13: C++11 ABI, before(const char*),
 * before(std::string), before(FunctionSchema) and end(). `make test`
 * installs it, so its absence is a failure, not a skip. */
TEST(real_libtorch)
{
	const int expect[RF_V_NR] = {
		[RF_V_CSTR] = 1, [RF_V_STRING] = 1, [RF_V_SCHEMA] = 1,
		[RF_V_END] = 1,
	};
	struct torch_symbols s;
	struct mapped m;
	char desc[256];

	if (access(LIBTORCH, R_OK)) {
		fprintf(stderr, "  %s is missing: install python3-torch "
			"(make deps)\n", LIBTORCH);
		CHECK(!"libtorch_cpu 1.13 installed");
		return;
	}
	check_variants(LIBTORCH, expect, &s, &m);
	CHECK_EQ_U64(s.nr_before, 3);
	CHECK(!s.old_string_abi);
	torch_symbols_describe(&s, desc, sizeof(desc));
	CHECK(strstr(desc, "before(const char*)") != NULL);
	CHECK(strstr(desc, "; C++11 string ABI") != NULL);
	unmap_file(&m);
}

RUN_TESTS()
