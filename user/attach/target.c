// SPDX-License-Identifier: BSD-2-Clause
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/kcmp.h>
#include "elf_symbols.h"
#include "target.h"
#include "model/distributed.h"

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

/* proc_root/PID/name into buf; false if it does not fit. */
static bool proc_file_path(char *buf, size_t len, const char *proc_root,
			   pid_t pid, const char *name)
{
	int n = snprintf(buf, len, "%s/%d/%s", proc_root, pid, name);

	return n >= 0 && (size_t)n < len;
}

int target_read_file_at(const char *proc_root, pid_t pid, const char *name,
			char *buf, size_t len)
{
	char path[PATH_MAX];

	if (!proc_file_path(path, sizeof(path), proc_root, pid, name))
		return -ENAMETOOLONG;
	return read_small_file(path, buf, len);
}

bool target_alive(pid_t pid)
{
	return target_alive_at("/proc", pid);
}

size_t target_threads(pid_t pid, uint32_t **out)
{
	char path[64];
	struct dirent *d;
	size_t n = 0, cap = 0;
	DIR *dir;

	*out = NULL;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	if (!(dir = opendir(path)))
		return 0;
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		if (n == cap) {
			uint32_t *more = realloc(*out, (cap = cap ? 2 * cap : 64) *
						 sizeof(**out));

			if (!more)
				break;
			*out = more;
		}
		(*out)[n++] = (uint32_t)strtoul(d->d_name, NULL, 10);
	}
	closedir(dir);
	return n;
}

bool target_alive_at(const char *proc_root, pid_t pid)
{
	char stat[512], *p;

	if (target_read_file_at(proc_root, pid, "stat", stat,
				sizeof(stat)) <= 0)
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
	target_comm_at("/proc", pid, buf, len);
}

void target_comm_at(const char *proc_root, pid_t pid, char *buf, size_t len)
{
	char path[PATH_MAX];

	if (!proc_file_path(path, sizeof(path), proc_root, pid, "comm")) {
		snprintf(buf, len, "?");
		return;
	}
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

/* The file the driver injects, or the memfd rfbpf loads it from into a
 * job started without it (gpu/inject.h). */
bool is_cupti_agent_name(const char *base)
{
	return !strncmp(base, "librfbpf_cupti", 14) ||
	       !strncmp(base, "memfd:librfbpf_cupti", 20);
}

bool is_cupti_library_name(const char *base)
{
	return !strncmp(base, "libcupti.so", 11);
}

static const char deleted_suffix[] = " (deleted)";

/* The length of a maps path without the " (deleted)" the kernel appends
 * to a file unlinked (or renamed over: a package upgrade) since it was
 * mapped. n is the path's length. */
static size_t without_deleted(const char *path, size_t n, bool *deleted)
{
	size_t d = sizeof(deleted_suffix) - 1;

	*deleted = n > d && !memcmp(path + n - d, deleted_suffix, d);
	return *deleted ? n - d : n;
}

bool target_parse_maps_line(const char *line, struct target_mapping *m)
{
	unsigned long long start, end, ino;
	unsigned int maj, min;
	const char *file;
	size_t n;
	int at = 0;

	/* "START-END perms offset MAJ:MIN inode   path": the path is the
	 * rest of the line, spaces and all (only a newline in a name is
	 * escaped, as \012). */
	if (sscanf(line, "%llx-%llx %*s %*x %x:%x %llu %n", &start, &end,
		   &maj, &min, &ino, &at) != 5 || !at || line[at] != '/')
		return false;
	file = line + at;
	n = strcspn(file, "\n");
	if (n >= sizeof(m->file))
		return false;
	/* map_files/ names a range without the leading zeros maps pads it
	 * with (a non-PIE executable at 0x400000). */
	snprintf(m->range, sizeof(m->range), "%llx-%llx", start, end);
	memcpy(m->file, file, n);
	m->file[n] = 0;
	without_deleted(file, n, &m->deleted);
	m->dev = makedev(maj, min);
	m->ino = ino;
	return true;
}

/* Does the file name of a maps line's path (" (deleted)" left off)
 * satisfy match()? Looks at the name only: cheap for lines that are not
 * the library. */
static bool name_matches(const char *line, bool (*match)(const char *base))
{
	const char *file = strchr(line, '/'), *base;
	char name[NAME_MAX + 1];
	size_t n;
	bool deleted;

	if (!file)
		return false;
	base = file + strcspn(file, "\n");
	while (base > file && base[-1] != '/')
		base--;
	n = without_deleted(base, strcspn(base, "\n"), &deleted);
	if (n > NAME_MAX)
		return false;
	memcpy(name, base, n);
	name[n] = 0;
	return match(name);
}

/*
 * Called every second for every process on the host in fleet mode, so
 * one line buffer serves the whole file and only a line whose file name
 * matches is parsed further. procfs reports a block size of 1 KiB, which
 * stdio would read maps in: a buffer that holds a small process's whole
 * maps saves a fifth of the time (four reads become one).
 */
int target_find_mapping_at(const char *proc_root, pid_t pid,
			   bool (*match)(const char *base),
			   struct target_mapping *m)
{
	char path[PATH_MAX], *line = NULL, io[16384];
	size_t cap = 0;
	int err = -ENOENT;
	FILE *f;

	if (!proc_file_path(path, sizeof(path), proc_root, pid, "maps"))
		return -ENAMETOOLONG;
	f = fopen(path, "re");
	if (!f)
		return -errno;
	setvbuf(f, io, _IOFBF, sizeof(io));
	while (err && getline(&line, &cap, f) > 0)
		if (name_matches(line, match) &&
		    target_parse_maps_line(line, m))
			err = 0;
	free(line);
	fclose(f);
	return err;
}

/* 0 if the file at path (rfbpf's view) is the one the mapping maps,
 * -ESTALE if another file is there, or stat()'s -errno. */
static int check_mapped_file(const char *path, const struct target_mapping *m)
{
	struct stat st;

	if (stat(path, &st))
		return -errno;
	return st.st_dev == m->dev && st.st_ino == m->ino ? 0 : -ESTALE;
}

int target_mapping_path(pid_t pid, const struct target_mapping *m,
			char *buf, size_t len)
{
	char root[PATH_MAX], name[PATH_MAX];
	bool deleted;
	int err;

	snprintf(buf, len, "/proc/%d/map_files/%s", pid, m->range);
	err = check_mapped_file(buf, m);
	if (!err)
		return 0;
	/* maps names a file in the target's mount namespace (a container's
	 * root) but, for a process that chroot()ed in rfbpf's, as rfbpf
	 * sees it: try both, and take the one that is the mapped file. */
	snprintf(name, sizeof(name), "%.*s", (int)without_deleted(m->file,
		 strlen(m->file), &deleted), m->file);
	if (snprintf(root, sizeof(root), "/proc/%d/root%s", pid, name) <
	    (int)sizeof(root) && !check_mapped_file(root, m))
		return snprintf(buf, len, "%s", root), 0;
	if (!check_mapped_file(name, m))
		return snprintf(buf, len, "%s", name), 0;
	/* map_files/ refused (no CAP_SYS_ADMIN), or the mapping is gone. */
	return err == -EACCES || err == -EPERM ? -EPERM : -ENOENT;
}

int target_find_library(pid_t pid, bool (*match)(const char *base),
			char *buf, size_t len)
{
	struct target_mapping m;
	int err = target_find_mapping_at("/proc", pid, match, &m);

	return err ? err : target_mapping_path(pid, &m, buf, len);
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
	return target_start_time_at("/proc", pid);
}

bool target_shares_memory(pid_t a, pid_t b)
{
	return syscall(SYS_kcmp, a, b, KCMP_VM, 0, 0) == 0;
}

/* Numeric fields first..first+n-1 of proc_root/PID/stat (1-based, as
 * proc(5) numbers them; counted after the last ')', since the comm in
 * field 2 may hold spaces). Returns false if gone or short. */
static bool stat_fields(const char *proc_root, pid_t pid, int first, int n,
			unsigned long long *out)
{
	char stat[1024], *p, *end;
	int field = 2;

	if (target_read_file_at(proc_root, pid, "stat", stat,
				sizeof(stat)) <= 0 || !(p = strrchr(stat, ')')))
		return false;
	for (; *p && field < first; p++)
		if (*p == ' ')
			field++;
	for (int i = 0; i < n; i++, p = end) {
		out[i] = strtoull(p, &end, 10);
		if (end == p)
			return false;
	}
	return true;
}

unsigned long long target_start_time_at(const char *proc_root, pid_t pid)
{
	unsigned long long t;

	return stat_fields(proc_root, pid, 22, 1, &t) ? t : 0;
}

double target_cpu_seconds(pid_t pid)
{
	unsigned long long t[2];	/* utime, stime */

	if (!stat_fields("/proc", pid, 14, 2, t))
		return NAN;
	return (double)(t[0] + t[1]) / sysconf(_SC_CLK_TCK);
}

void target_mapped_name(const char *path, char *buf, size_t len)
{
	ssize_t n = readlink(path, buf, len - 1);
	int at = 0;

	buf[n > 0 ? n : 0] = 0;
	/* A file seen through the target's root: the rest is its name. */
	if (n <= 0 && sscanf(path, "/proc/%*d/root%n", &at) == 0 && at &&
	    path[at] == '/')
		snprintf(buf, len, "%s", path + at);
	else if (n <= 0 && path[0] == '/' && strncmp(path, "/proc/", 6))
		snprintf(buf, len, "%s", path);
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

bool target_addr_in_mapping(pid_t pid, uint64_t addr, const char *name)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (getline(&line, &cap, f) > 0) {
		unsigned long long start, end;
		int at = 0;

		line[strcspn(line, "\n")] = 0;
		/* "START-END perms offset MAJ:MIN inode   name" */
		if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %n", &start, &end,
			   &at) < 2 || !at)
			continue;
		if (addr >= start && addr < end) {
			found = !strcmp(line + at, name);
			break;
		}
	}
	free(line);
	fclose(f);
	return found;
}

int target_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len };
	struct iovec remote = { (void *)(uintptr_t)addr, len };
	ssize_t got;

	if (!addr)
		return -EFAULT;
	got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (got == (ssize_t)len)
		return 0;
	return got < 0 ? -errno : -EFAULT;
}

/* glibc's C library, and the libraries an older glibc kept some of its
 * functions in (pthread_create in libpthread, dlopen in libdl, before
 * 2.34). */
static bool is_c_library_name(const char *base)
{
	return !strncmp(base, "libc.so.", 8) || !strncmp(base, "libc-2.", 7);
}

static bool is_libpthread_name(const char *base)
{
	return !strncmp(base, "libpthread.so.", 14) ||
	       !strncmp(base, "libpthread-", 11);
}

static bool is_libdl_name(const char *base)
{
	return !strncmp(base, "libdl.so.", 9) || !strncmp(base, "libdl-", 6);
}

int target_libc_functions(pid_t pid, const char *const *names, size_t n,
			  uint64_t *addr, char *err, size_t len)
{
	bool (*const libs[])(const char *) = {
		is_c_library_name, is_libpthread_name, is_libdl_name,
	};
	uint64_t off[n];
	char path[PATH_MAX];

	memset(addr, 0, sizeof(*addr) * n);
	for (size_t l = 0; l < sizeof(libs) / sizeof(*libs); l++) {
		if (target_find_library(pid, libs[l], path, sizeof(path)) ||
		    elf_find_functions(path, names, n, off) < 0)
			continue;
		for (size_t i = 0; i < n; i++)
			if (!addr[i] && off[i] &&
			    target_addr_of_offset(pid, path, off[i], &addr[i]))
				addr[i] = 0;
	}
	for (size_t i = 0; i < n; i++)
		if (!addr[i])
			return snprintf(err, len, "%s is not in process %d's "
					"C library", names[i], pid), -ENOENT;
	return 0;
}

void target_read_dist_info(pid_t pid, struct dist_info *d)
{
	static char env[256 * 1024];
	int got = target_read_file_at("/proc", pid, "environ", env,
				      sizeof(env));

	if (got > 0)
		dist_info_from_environ(d, env, got);
}
