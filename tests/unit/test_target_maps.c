// SPDX-License-Identifier: BSD-2-Clause
/* Lines of /proc/PID/maps as real machines have them: paths with spaces
 * and non-ASCII names (virtualenvs, home directories), files deleted or
 * replaced since they were mapped, and the real /proc for identities. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "check.h"
#include "attach/target.h"

#define ENV "/home/ana/my envs/t\xc3\xb8rch \xc3\xa9/site-packages/torch/lib"

TEST(maps_line_with_spaces_and_utf8)
{
	struct target_mapping m;

	CHECK(target_parse_maps_line("7fed7700a000-7fed7c09b000 r-xp 0080a000 "
				     "fe:00 11012569                   " ENV
				     "/libtorch_cpu.so\n", &m));
	CHECK_STR(m.range, "7fed7700a000-7fed7c09b000");
	CHECK_STR(m.file, ENV "/libtorch_cpu.so");
	CHECK(m.dev == makedev(0xfe, 0) && m.ino == 11012569);
	CHECK(!m.deleted);
}

TEST(maps_line_deleted_suffix_is_noted)
{
	struct target_mapping m;

	CHECK(target_parse_maps_line("7f0461a00000-7f046220a000 r--p 00000000 "
				     "08:01 42 " ENV "/libtorch_cpu.so.1.13 "
				     "(deleted)\n", &m));
	CHECK_STR(m.file, ENV "/libtorch_cpu.so.1.13 (deleted)");
	CHECK(m.deleted && m.ino == 42 && m.dev == makedev(8, 1));
	/* " (deleted)" inside a name is not the kernel's suffix. */
	CHECK(target_parse_maps_line("1000-2000 r--p 0 08:01 7 /x (deleted)/y\n",
				     &m));
	CHECK_STR(m.file, "/x (deleted)/y");
	CHECK(!m.deleted);
}

TEST(maps_line_range_without_padding)
{
	struct target_mapping m;

	/* A non-PIE executable: maps pads, map_files/ does not. */
	CHECK(target_parse_maps_line("00400000-00420000 r-xp 00000000 fe:00 9 "
				     "/usr/bin/python3.11", &m));
	CHECK_STR(m.range, "400000-420000");
	CHECK_STR(m.file, "/usr/bin/python3.11");
}

TEST(maps_lines_that_map_no_file)
{
	struct target_mapping m;

	CHECK(!target_parse_maps_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0 "
				      "                 [stack]\n", &m));
	CHECK(!target_parse_maps_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0\n",
				      &m));
	CHECK(!target_parse_maps_line("garbage /usr/lib/libtorch_cpu.so\n", &m));
	CHECK(!target_parse_maps_line("", &m));
}

static bool is_torch(const char *base)
{
	return is_libtorch_cpu_name(base);
}

/* A fake proc root holding 1/maps with text. */
static void fake_maps(char *root, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	strcpy(root, "/tmp/rfbpf-maps-XXXXXX");
	if (!mkdtemp(root))
		exit(2);
	snprintf(path, sizeof(path), "%s/1", root);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/1/maps", root);
	f = fopen(path, "we");
	if (!f)
		exit(2);
	fputs(text, f);
	fclose(f);
}

static void remove_fake(const char *root)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/1/maps", root);
	unlink(path);
	snprintf(path, sizeof(path), "%s/1", root);
	rmdir(path);
	rmdir(root);
}

TEST(find_mapping_matches_the_name_without_deleted)
{
	char root[64];
	struct target_mapping m;

	fake_maps(root,
		  "1000-2000 r--p 00000000 fe:00 5 /usr/lib/libc10.so (deleted)\n"
		  "3000-4000 r--p 00000000 00:00 0 [heap]\n"
		  "5000-6000 r--p 00000000 fe:00 6 " ENV
		  "/libtorch_cpu.so (deleted)\n"
		  "6000-7000 r-xp 00001000 fe:00 6 " ENV
		  "/libtorch_cpu.so (deleted)\n");
	CHECK(target_find_mapping_at(root, 1, is_torch, &m) == 0);
	CHECK_STR(m.range, "5000-6000");
	CHECK_STR(m.file, ENV "/libtorch_cpu.so (deleted)");
	CHECK(m.deleted && m.ino == 6);
	remove_fake(root);
	fake_maps(root, "5000-6000 r--p 00000000 fe:00 6 /opt/libtorch_cpu.sox"
		  " (deleted)\n");
	CHECK(target_find_mapping_at(root, 1, is_torch, &m) == -ENOENT);
	remove_fake(root);
}

/* This process's own mapping of the unit test binary, found in the real
 * /proc: map_files/ when allowed, else the path itself, both the file. */
static bool is_self_exe(const char *base)
{
	return !strcmp(base, "test_target_maps");
}

TEST(mapping_path_is_the_mapped_file)
{
	struct target_mapping m;
	char path[PATH_MAX];
	struct stat st;

	CHECK(target_find_mapping_at("/proc", getpid(), is_self_exe, &m) == 0);
	CHECK(target_mapping_path(getpid(), &m, path, sizeof(path)) == 0);
	CHECK(!stat(path, &st) && st.st_ino == m.ino && st.st_dev == m.dev);
	/* Another inode at the path (a replaced file): never taken. */
	m.ino++;
	CHECK(target_mapping_path(getpid(), &m, path, sizeof(path)) != 0);
}

RUN_TESTS()
