// SPDX-License-Identifier: BSD-2-Clause
/*
 * The torch version a library belongs to (user/attach/torch_symbols.c), as
 * rfbpf reads it for its layouts and labels: from the library's real name
 * (Debian), from the torch/version.py beside torch/lib/ (wheels), and from
 * the text of a link it cannot follow (a map_files link into another
 * mount namespace). The files are made here, empty: only names and
 * version.py matter.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "attach/torch_symbols.h"

static char dir[] = "/tmp/rfbpf-torch-version-XXXXXX";

static void put(const char *rel, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static const char *at(const char *rel)
{
	static char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	return path;
}

/* The version text of rel, or "(none)". */
static const char *version_of(const char *rel)
{
	static char v[64];

	if (!torch_version_text(at(rel), v, sizeof(v)))
		snprintf(v, sizeof(v), "(none)");
	return v;
}

static void make_tree(void)
{
	CHECK(mkdtemp(dir) != NULL);
	CHECK(!mkdir(at("lib"), 0755));
	CHECK(!mkdir(at("torch"), 0755));
	CHECK(!mkdir(at("torch/lib"), 0755));
	CHECK(!mkdir(at("other"), 0755));
	CHECK(!mkdir(at("other/lib"), 0755));
	put("lib/libtorch_cpu.so.2.14.1", "");
	CHECK(!symlink("libtorch_cpu.so.2.14.1", at("lib/libtorch_cpu.so")));
	CHECK(!symlink("/nowhere/usr/lib/libtorch_cpu.so.2.6.0",
		       at("lib/elsewhere")));
	CHECK(!symlink("/nowhere/libtorch_cpu.so.2.14.1 (deleted)",
		       at("lib/replaced")));
	put("torch/lib/libtorch_cpu.so", "");
	put("torch/version.py", "from typing import Optional\n"
	    "__all__ = ['__version__', 'debug', 'cuda']\n"
	    "__version__ = '2.6.0+cu124'\ndebug = False\n");
	put("other/lib/libtorch_cpu.so", "");
	put("other/version.py", "__version__ = 'unknown'\n");
}

static void remove_tree(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(!system(cmd));
}

TEST(versions_from_names_packages_and_links)
{
	int major = 0, minor = 0;

	make_tree();
	CHECK_STR(version_of("lib/libtorch_cpu.so.2.14.1"), "2.14.1");
	/* The real name, not the link's. */
	CHECK_STR(version_of("lib/libtorch_cpu.so"), "2.14.1");
	/* Unreachable from here: the link's own text. */
	CHECK_STR(version_of("lib/elsewhere"), "2.6.0");
	/* A library replaced on disk since it was mapped. */
	CHECK_STR(version_of("lib/replaced"), "2.14.1");
	CHECK_STR(version_of("torch/lib/libtorch_cpu.so"), "2.6.0+cu124");
	CHECK(torch_version(at("torch/lib/libtorch_cpu.so"), &major, &minor));
	CHECK(major == 2 && minor == 6);
	/* A version.py with no number in it tells nothing. */
	CHECK_STR(version_of("other/lib/libtorch_cpu.so"), "(none)");
	CHECK(!torch_version(at("other/lib/libtorch_cpu.so"), &major,
			     &minor));
	put("other/version.py", "__version__ = \"2.14.0a0+git1234\"\n");
	CHECK_STR(version_of("other/lib/libtorch_cpu.so"), "2.14.0a0+git1234");
	CHECK_STR(version_of("missing/libtorch_cpu.so"), "(none)");
	remove_tree();
}

RUN_TESTS()
