// SPDX-License-Identifier: BSD-2-Clause
/*
 * Every RecordFunction::before overload PyTorch has exported, 1.13 to main
 * (see docs/pytorch-recordfunction in the steering docs). The argument
 * layout of each is decoded by the BPF program of the same variant.
 */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "elf_symbols.h"
#include "target.h"
#include "torch_symbols.h"
#include "model/trace.h"

#define RF "_ZN2at14RecordFunction"
#define DESCRIPTOR RF "6beforeESt7variantIJSt17basic_string_viewIcSt11char_" \
	"traitsIcEESt17reference_wrapperIKN3c1014FunctionSchemaEEEEl"

static const char *const symbols[RF_V_NR] = {
	[RF_V_CSTR] = RF "6beforeEPKcl",
	[RF_V_STRING] = RF "6beforeENSt7__cxx1112basic_stringIcSt11char_"
			"traitsIcESaIcEEEl",
	[RF_V_STRING_OLD] = RF "6beforeESsl",
	[RF_V_SCHEMA] = RF "6beforeESt17reference_wrapperIKN3c1014Function"
			"SchemaEEl",
	[RF_V_DESCRIPTOR] = DESCRIPTOR,
	[RF_V_DESCRIPTOR_DK] = DESCRIPTOR "NS7_11DispatchKeyE",
	[RF_V_END] = RF "3endEv",
};

const char *torch_symbol(unsigned variant)
{
	return variant < RF_V_NR ? symbols[variant] : NULL;
}

int torch_symbols_resolve(const char *path, struct torch_symbols *s)
{
	int n;

	memset(s, 0, sizeof(*s));
	n = elf_find_functions(path, symbols, RF_V_NR, s->offset);
	if (n < 0)
		return n;
	for (unsigned v = 0; v < RF_V_NR_BEFORE; v++)
		s->nr_before += s->offset[v] != 0;
	/* The old-ABI std::string overload exists only in old-ABI builds
	 * (PyPI wheels up to 2.6); FunctionSchema's name string follows. */
	s->old_string_abi = s->offset[RF_V_STRING_OLD] != 0;
	return n;
}

void torch_symbols_describe(const struct torch_symbols *s, char *buf,
			    size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (unsigned v = 0; v < RF_V_NR_BEFORE && used < len; v++)
		if (s->offset[v])
			used += snprintf(buf + used, len - used, "%s%s",
					 used ? ", " : "", variant_name(v));
	if (used < len)
		snprintf(buf + used, len - used, "; %s string ABI",
			 s->old_string_abi ? "pre-C++11" : "C++11");
}

/* The version in a real name like libtorch_cpu.so.2.14.1 (Debian); a
 * link's text may go on with " (deleted)". */
static bool version_from_name(const char *real, char *buf, size_t len)
{
	const char *v = strstr(real, ".so.");
	int major, minor;

	if (!v || sscanf(v + 4, "%d.%d", &major, &minor) != 2)
		return false;
	snprintf(buf, len, "%.*s", (int)strcspn(v + 4, " "), v + 4);
	return true;
}

/* __version__ from torch/version.py next to torch/lib/ (wheels), as it
 * is written there: 2.6.0+cu124. */
static bool version_from_package(const char *real, char *buf, size_t len)
{
	char dir[PATH_MAX], py[PATH_MAX + 32], line[256], v[64];
	bool found = false;
	int major, minor;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s", real);
	snprintf(py, sizeof(py), "%s/../version.py", dirname(dir));
	f = fopen(py, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "__version__ = %*[\"']%63[^\"']", v) == 1 &&
			sscanf(v, "%d.%d", &major, &minor) == 2;
	fclose(f);
	if (found)
		snprintf(buf, len, "%s", v);
	return found;
}

/* A map_files/ path (target.h): the name maps shows, which realpath()
 * cannot follow once the file is deleted, and its package seen through
 * the target's root (a container's files are not in rfbpf's mount
 * namespace), then as rfbpf sees it (a chroot). */
static bool version_from_mapping(const char *path, char *buf, size_t len)
{
	char name[PATH_MAX], root[PATH_MAX + 32];
	int pid, at = 0;

	if (sscanf(path, "/proc/%d/map_files/%n", &pid, &at) != 1 || !at)
		return false;
	target_mapped_name(path, name, sizeof(name));
	if (name[0] != '/')
		return false;
	snprintf(root, sizeof(root), "/proc/%d/root%s", pid, name);
	return version_from_name(name, buf, len) ||
	       version_from_package(root, buf, len) ||
	       version_from_package(name, buf, len);
}

bool torch_version_text(const char *path, char *buf, size_t len)
{
	char real[PATH_MAX];
	ssize_t n;

	if (version_from_mapping(path, buf, len))
		return true;
	if (!realpath(path, real)) {
		/* A link rfbpf cannot follow: its text still names it. */
		n = readlink(path, real, sizeof(real) - 1);
		if (n > 0)
			real[n] = 0;
		else
			snprintf(real, sizeof(real), "%s", path);
	}
	return version_from_name(real, buf, len) ||
	       version_from_package(real, buf, len);
}

bool torch_version(const char *path, int *major, int *minor)
{
	char v[64];

	return torch_version_text(path, v, sizeof(v)) &&
	       sscanf(v, "%d.%d", major, minor) == 2;
}

uint32_t torch_fwd_tid_offset(const char *path, const struct torch_symbols *s)
{
	int major = 0, minor = 0;
	bool kwinputs;

	if (torch_version(path, &major, &minor))
		kwinputs = major > 2 || (major == 2 && minor >= 4);
	else if (s->offset[RF_V_DESCRIPTOR] || s->offset[RF_V_DESCRIPTOR_DK])
		kwinputs = true;	/* 2.9 and later */
	else
		return 0;		/* unknown: better unread than wrong */
	return (s->old_string_abi ? RF_FWD_TID_OFFSET_OLD :
		RF_FWD_TID_OFFSET_CXX11) + (kwinputs ? RF_KWINPUTS_SIZE : 0);
}
