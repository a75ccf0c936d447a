// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "target.h"

static int read_small_file(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = 0;
	return (int)n;
}

bool target_alive(pid_t pid)
{
	char path[64], stat[512], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (read_small_file(path, stat, sizeof(stat)) <= 0)
		return false;
	/* "pid (comm) S ...": the state follows the last ')' */
	p = strrchr(stat, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

static void read_comm(const char *path, char *buf, size_t len,
		      const char *fallback)
{
	if (read_small_file(path, buf, len) <= 0) {
		snprintf(buf, len, "%s", fallback);
		return;
	}
	buf[strcspn(buf, "\n")] = 0;
}

void target_comm(pid_t pid, char *buf, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	read_comm(path, buf, len, "?");
}

void target_thread_comm(pid_t pid, pid_t tid, char *buf, size_t len)
{
	char path[96];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	read_comm(path, buf, len, "");
}

bool is_libtorch_cpu_name(const char *base)
{
	static const char stem[] = "libtorch_cpu.so";
	size_t n = sizeof(stem) - 1;

	return !strncmp(base, stem, n) && (!base[n] || base[n] == '.');
}

bool is_cupti_agent_name(const char *base)
{
	return !strncmp(base, "librfbpf_cupti", 14);
}

int target_find_library(pid_t pid, bool (*match)(const char *base),
			char *buf, size_t len)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	int err = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *file = strchr(line, '/'), *base;

		if (!file)
			continue;
		file[strcspn(file, "\n")] = 0;
		base = strrchr(file, '/') + 1;
		if (!match(base))
			continue;
		snprintf(buf, len, "/proc/%d/map_files/%.*s", pid,
			 (int)strcspn(line, " "), line);
		err = 0;
		break;
	}
	free(line);
	fclose(f);
	return err;
}

int target_find_libtorch(pid_t pid, char *buf, size_t len)
{
	return target_find_library(pid, is_libtorch_cpu_name, buf, len);
}

/* perm: 'x' for code, 'w' for writable data. */
static int addr_of_offset(pid_t pid, const char *path, uint64_t off,
			  int perm_index, uint64_t *addr)
{
	unsigned long long start, end, pgoff, ino;
	unsigned int maj, min;
	char maps[64], perms[8], *line = NULL;
	int err = -ENOENT;
	size_t cap = 0;
	struct stat st;
	FILE *f;

	if (stat(path, &st))
		return -errno;
	snprintf(maps, sizeof(maps), "/proc/%d/maps", pid);
	f = fopen(maps, "re");
	if (!f)
		return -errno;
	while (err && getline(&line, &cap, f) > 0) {
		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &start, &end,
			   perms, &pgoff, &maj, &min, &ino) != 7)
			continue;
		if (ino != st.st_ino || makedev(maj, min) != st.st_dev ||
		    perms[perm_index] == '-' || off < pgoff ||
		    off >= pgoff + (end - start))
			continue;
		*addr = start + (off - pgoff);
		err = 0;
	}
	free(line);
	fclose(f);
	return err;
}

int target_addr_of_offset(pid_t pid, const char *path, uint64_t off,
			  uint64_t *addr)
{
	return addr_of_offset(pid, path, off, 2, addr);
}

int target_addr_of_data_offset(pid_t pid, const char *path, uint64_t off,
			       uint64_t *addr)
{
	return addr_of_offset(pid, path, off, 1, addr);
}

unsigned long long target_start_time(pid_t pid)
{
	char path[64], stat[1024], *p;
	unsigned long long t = 0;
	int field = 2;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (read_small_file(path, stat, sizeof(stat)) <= 0)
		return 0;
	p = strrchr(stat, ')');
	/* Fields after "(comm)": state is field 3, starttime field 22. */
	for (; p && *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (p)
		t = strtoull(p, NULL, 10);
	return t;
}

void target_mapped_name(const char *map_files_path, char *buf, size_t len)
{
	ssize_t n = readlink(map_files_path, buf, len - 1);

	buf[n > 0 ? n : 0] = 0;
}

bool target_status(pid_t pid, pid_t tid, const char *key, char *val,
		   size_t len)
{
	char path[96], line[256];
	size_t klen = strlen(key);
	bool found = false;
	FILE *f;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid,
			 tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) || line[klen] != ':')
			continue;
		snprintf(val, len, "%s", line + klen + 1 +
			 strspn(line + klen + 1, " \t"));
		val[strcspn(val, "\n")] = 0;
		found = true;
	}
	fclose(f);
	return found;
}
