// SPDX-License-Identifier: BSD-2-Clause
/*
 * Finding the torch processes of a host, every second.
 *
 * Cost: the scan reads every process on the host each second, so a
 * process without torch (nearly all of them) costs one read of
 * /proc/PID/maps and nothing else: no stat, no cmdline, no allocation per
 * line. Everything else is read only for the few that match. Most of the
 * time goes to the kernel writing maps text (about 45 ms of CPU a scan
 * with 1100 processes on a 2-vCPU VM, 4/5 of it in the kernel).
 *
 * Namespaces: rfbpf runs in the host's PID namespace, so a containerised
 * process is named by its host pid, and its maps show paths in its own
 * mount namespace, which rfbpf cannot open as they are. map_files/START-END
 * opens the very file mapped, but only with CAP_SYS_ADMIN (or
 * CAP_CHECKPOINT_RESTORE) in the initial user namespace; without it,
 * /proc/PID/root + path is used, and only while it still names the file
 * mapped (same inode number): a library replaced on disk since (pip
 * install --upgrade under a running job) is another file, and uprobes on
 * it would never fire. The device is not compared: stat() and maps
 * disagree on it for the same file on btrfs (a subvolume's own st_dev)
 * and overlayfs, and a replaced file never keeps the inode number of the
 * one still mapped.
 *
 * Races: a process can exit at any point while it is read. Anything that
 * fails after maps matched means it is gone; it is skipped, not an error.
 * Zombies have no mappings and kernel threads no address space, so maps
 * drops both at once; the state in stat is checked too, for the process
 * that exits between the two reads.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "attach/target.h"
#include "export/utf8.h"
#include "fleet/discovery.h"

/* snprintf that reports whether the whole path fitted. */
static bool format_path(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return n >= 0 && (size_t)n < len;
}

/* The pid a /proc entry's name stands for, or 0 ("self", "sys", ...). */
static pid_t pid_of_name(const char *name)
{
	long pid = 0;

	if (*name < '1' || *name > '9')
		return 0;
	for (; *name; name++) {
		if (*name < '0' || *name > '9' || pid > INT_MAX / 10)
			return 0;
		pid = pid * 10 + (*name - '0');
	}
	return pid <= INT_MAX ? (pid_t)pid : 0;
}

/*
 * rfbpf's own pid as proc_root numbers it: the host's /proc mounted into
 * rfbpf's container says "self" is rfbpf's host pid, which getpid() (the
 * container's number) is not.
 */
static pid_t own_pid_under(const char *proc_root)
{
	char path[PATH_MAX], num[16];
	ssize_t n;
	pid_t pid;

	if (!format_path(path, sizeof(path), "%s/self", proc_root))
		return getpid();
	n = readlink(path, num, sizeof(num) - 1);
	if (n <= 0)
		return getpid();
	num[n] = 0;
	pid = pid_of_name(num);
	return pid ? pid : getpid();
}

/* "mnt:[4026531840]" names a mount namespace; "" if unknown. */
static void own_mount_ns(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/ns/mnt", buf, len - 1);

	buf[n > 0 ? n : 0] = 0;
}

static bool in_other_mount_ns(const char *proc_root, pid_t pid,
			      const char *own)
{
	char path[PATH_MAX], ns[64];
	ssize_t n;

	if (!*own || !format_path(path, sizeof(path), "%s/%d/ns/mnt",
				  proc_root, pid))
		return false;
	n = readlink(path, ns, sizeof(ns) - 1);
	if (n <= 0)
		return false;	/* closed to us: do not claim a difference */
	ns[n] = 0;
	return strcmp(ns, own) != 0;
}

/*
 * A libtorch_cpu deleted or replaced on disk since it was mapped shows as
 * "libtorch_cpu.so (deleted)"; map_files/ still opens the running copy,
 * so the process is still one to trace.
 */
static bool maps_libtorch_cpu(const char *base)
{
	static const char deleted[] = " (deleted)";
	size_t n, d = sizeof(deleted) - 1;
	char name[NAME_MAX + 1];

	if (is_libtorch_cpu_name(base))
		return true;
	n = strlen(base);
	if (n <= d || n - d > NAME_MAX || strcmp(base + n - d, deleted))
		return false;
	memcpy(name, base, n - d);
	name[n - d] = 0;
	return is_libtorch_cpu_name(name);
}

/* argv joined with spaces; a cut falls between UTF-8 characters. */
static void read_cmdline(const char *proc_root, pid_t pid,
			 struct torch_process *p)
{
	/* One byte more than fits tells whether the text goes on. */
	char raw[sizeof(p->cmdline) + 1];
	int n = target_read_file_at(proc_root, pid, "cmdline", raw,
				    sizeof(raw));
	size_t keep, i;

	p->cmdline[0] = 0;
	if (n <= 0)
		return;		/* kernel thread, or gone */
	while (n > 0 && !raw[n - 1])
		n--;		/* argv's last terminator */
	keep = utf8_cut(raw, n, sizeof(p->cmdline) - 1);
	for (i = 0; i < keep; i++)
		p->cmdline[i] = raw[i] ? raw[i] : ' ';
	p->cmdline[keep] = 0;
}

/* See the comment at the top: map_files/, else the target's root. */
static void choose_lib_path(const char *proc_root, pid_t pid,
			    const struct target_mapping *m,
			    struct torch_process *p)
{
	char via_root[sizeof(p->lib_path)];
	struct stat st;

	format_path(p->lib_path, sizeof(p->lib_path), "%s/%d/map_files/%s",
		    proc_root, pid, m->range);
	if (!stat(p->lib_path, &st))
		return;
	if (format_path(via_root, sizeof(via_root), "%s/%d/root%s",
			proc_root, pid, m->file) &&
	    !stat(via_root, &st) && st.st_ino == m->ino)
		memcpy(p->lib_path, via_root, sizeof(via_root));
	/* Else map_files/ stays: attaching fails on it with a clear error. */
}

/* The rest of a process whose maps matched (m). -ENOENT if it is gone or
 * a zombie by now. */
static int describe(const char *proc_root, pid_t pid,
		    const struct target_mapping *m, const char *own_mnt_ns,
		    struct torch_process *p)
{
	/* cgroup v1 lists one line per hierarchy: a dozen long paths. */
	char cgroup[8192];

	memset(p, 0, sizeof(*p));
	if (!target_alive_at(proc_root, pid))
		return -ENOENT;
	p->pid = pid;
	p->start_ticks = target_start_time_at(proc_root, pid);
	target_comm_at(proc_root, pid, p->comm, sizeof(p->comm));
	read_cmdline(proc_root, pid, p);
	snprintf(p->lib_in_target, sizeof(p->lib_in_target), "%s", m->file);
	p->lib_dev = m->dev;
	p->lib_ino = m->ino;
	choose_lib_path(proc_root, pid, m, p);
	if (target_read_file_at(proc_root, pid, "cgroup", cgroup,
				sizeof(cgroup)) > 0)
		container_id_from_cgroup(cgroup, p->container,
					 sizeof(p->container));
	p->other_mount_ns = in_other_mount_ns(proc_root, pid, own_mnt_ns);
	return 0;
}

static int by_pid(const void *a, const void *b)
{
	pid_t x = ((const struct torch_process *)a)->pid;
	pid_t y = ((const struct torch_process *)b)->pid;

	return (x > y) - (x < y);
}

int discovery_scan(const char *proc_root, struct torch_process **out,
		   size_t *nr)
{
	struct torch_process *list = NULL, *grown;
	struct target_mapping m;
	size_t len = 0, cap = 0;
	char own_mnt_ns[64];
	struct dirent *d;
	int err = 0;
	pid_t self;
	DIR *dir;

	*out = NULL;
	*nr = 0;
	dir = opendir(proc_root);
	if (!dir)
		return -errno;
	self = own_pid_under(proc_root);
	own_mount_ns(own_mnt_ns, sizeof(own_mnt_ns));
	for (;;) {
		pid_t pid;

		errno = 0;
		d = readdir(dir);
		if (!d) {
			err = -errno;
			break;
		}
		pid = pid_of_name(d->d_name);
		/* No torch, gone, or maps closed to us: not one to trace. */
		if (!pid || pid == self ||
		    target_find_mapping_at(proc_root, pid, maps_libtorch_cpu,
					   &m))
			continue;
		if (len == cap) {
			cap = cap ? cap * 2 : 8;
			grown = realloc(list, cap * sizeof(*list));
			if (!grown) {
				err = -ENOMEM;
				break;
			}
			list = grown;
		}
		if (!describe(proc_root, pid, &m, own_mnt_ns, &list[len]))
			len++;
	}
	closedir(dir);
	if (err || !len) {
		free(list);
		return err;
	}
	qsort(list, len, sizeof(*list), by_pid);
	*out = list;
	*nr = len;
	return 0;
}

int discovery_read(const char *proc_root, pid_t pid, struct torch_process *p)
{
	struct target_mapping m;
	char own_mnt_ns[64];
	int err;

	if (pid <= 0)
		return -ENOENT;
	err = target_find_mapping_at(proc_root, pid, maps_libtorch_cpu, &m);
	/* Not mapped and no maps at all look alike: ask whether it lives. */
	if (err == -ENOENT)
		return target_alive_at(proc_root, pid) ? -ENOEXEC : -ENOENT;
	if (err)
		return err;
	own_mount_ns(own_mnt_ns, sizeof(own_mnt_ns));
	return describe(proc_root, pid, &m, own_mnt_ns, p);
}

/*
 * Container ids in cgroup paths. Each runtime names its cgroup its own way,
 * with the cgroupfs driver (a directory per container) or the systemd one
 * (a scope unit), and Kubernetes nests them under a pod's:
 *
 *   0::/system.slice/docker-<id>.scope               docker, systemd
 *   4:memory:/docker/<id>                            docker, cgroupfs
 *   .../kubepods-burstable-pod<uid_>.slice/cri-containerd-<id>.scope
 *   .../kubepods-besteffort-pod<uid_>.slice/crio-<id>.scope
 *   .../kubepods-pod<uid_>.slice:cri-containerd:<id> runc's slice:prefix:id
 *   /kubepods/burstable/pod<uid>/<id>                kubelet, cgroupfs
 *   .../libpod-<id>.scope/container                  podman
 *
 * A bare <id> names no runtime; its parent may ("docker", "crio"). Under a
 * pod with the cgroupfs driver it is taken as containerd's, by far the
 * most common runtime since Kubernetes dropped dockershim (1.24), and
 * CRI-O names its own "crio-<id>". Ids are 64 hex digits, which keeps out
 * the "-conmon-" monitors of CRI-O and podman. The innermost container
 * wins (docker in docker); a pod uid is the fallback when no container
 * id is found on any line. rfbpf in its own cgroup namespace sees paths
 * starting with "/../..": components are read one by one, so it works.
 */
struct span {
	const char *s;
	size_t n;
};

/* Runtime words: "<word>-<id>" as a cgroup name, or "<word>" as the
 * parent of a bare <id>. */
static const struct {
	const char *word, *scheme;
} runtimes[] = {
	{ "docker", "docker://" },
	{ "cri-containerd", "containerd://" },
	{ "nerdctl", "containerd://" },
	{ "crio", "cri-o://" },
	{ "libpod", "podman://" },
};

static bool span_is(struct span c, const char *word)
{
	return c.n == strlen(word) && !memcmp(c.s, word, c.n);
}

static bool span_starts(struct span c, const char *prefix)
{
	size_t n = strlen(prefix);

	return c.n >= n && !memcmp(c.s, prefix, n);
}

static bool span_ends(struct span c, const char *suffix)
{
	size_t n = strlen(suffix);

	return c.n >= n && !memcmp(c.s + c.n - n, suffix, n);
}

static bool is_container_hex(struct span c)
{
	if (c.n != 64)
		return false;
	for (size_t i = 0; i < c.n; i++)
		if (!(c.s[i] >= '0' && c.s[i] <= '9') &&
		    !(c.s[i] >= 'a' && c.s[i] <= 'f'))
			return false;
	return true;
}

/* The runtime and id that cgroup name c (under parent) stands for. */
static const char *container_in(struct span c, struct span parent,
				struct span *id)
{
	if (span_ends(c, ".scope"))
		c.n -= strlen(".scope");
	for (size_t i = 0; i < sizeof(runtimes) / sizeof(runtimes[0]); i++) {
		size_t n = strlen(runtimes[i].word);

		if (c.n > n && span_starts(c, runtimes[i].word) &&
		    c.s[n] == '-') {
			*id = (struct span){ c.s + n + 1, c.n - n - 1 };
			if (is_container_hex(*id))
				return runtimes[i].scheme;
		}
	}
	if (!is_container_hex(c))
		return NULL;
	*id = c;
	for (size_t i = 0; i < sizeof(runtimes) / sizeof(runtimes[0]); i++)
		if (span_is(parent, runtimes[i].word))
			return runtimes[i].scheme;
	return "containerd://";
}

/*
 * A pod's uid in cgroup name c into uid (37 bytes): "pod<uid>" (cgroupfs)
 * or "kubepods-<qos>-pod<uid_with_underscores>.slice" (systemd, where '-'
 * separates a slice from its parents, so the uid's dashes become '_').
 * Pod uids are UUIDs, or 32 hex digits for static pods.
 */
static bool pod_uid_in(struct span c, char *uid)
{
	struct span u = { NULL, 0 };

	if (span_ends(c, ".slice")) {
		c.n -= strlen(".slice");
		for (size_t i = c.n; i >= 4; i--)
			if (!memcmp(c.s + i - 4, "-pod", 4)) {
				u = (struct span){ c.s + i, c.n - i };
				break;
			}
	} else if (span_starts(c, "pod")) {
		u = (struct span){ c.s + 3, c.n - 3 };
	}
	if (u.n < 32 || u.n > 36)
		return false;
	for (size_t i = 0; i < u.n; i++) {
		char ch = u.s[i];

		if (ch == '_' || ch == '-')
			ch = '-';
		else if (!(ch >= '0' && ch <= '9') && !(ch >= 'a' && ch <= 'f'))
			return false;
		uid[i] = ch;
	}
	uid[u.n] = 0;
	return true;
}

/* One line "hierarchy:controllers:path": the innermost container's id
 * (*scheme set) and, if seen, the pod's uid (*has_pod set). */
static void read_cgroup_line(struct span line, const char **scheme,
			     struct span *id, char *pod_uid, bool *has_pod)
{
	struct span parent = { "", 0 }, c, found;
	const char *end = line.s + line.n, *p = line.s;
	const char *runtime;

	for (int colons = 0; colons < 2; p++) {
		if (p == end)
			return;		/* malformed: no path */
		colons += *p == ':';
	}
	while (p < end) {
		c.s = p;
		while (p < end && *p != '/' && *p != ':')
			p++;
		c.n = (size_t)(p - c.s);
		if (p < end)
			p++;	/* the separator */
		if (!c.n)
			continue;
		runtime = container_in(c, parent, &found);
		if (runtime) {
			*scheme = runtime;
			*id = found;
		}
		if (!*has_pod)
			*has_pod = pod_uid_in(c, pod_uid);
		parent = c;
	}
}

void container_id_from_cgroup(const char *cgroup_text, char *out, size_t len)
{
	const char *line = cgroup_text, *scheme = NULL;
	char pod_uid[37];
	bool has_pod = false;
	struct span id;

	if (!len)
		return;
	out[0] = 0;
	while (line && *line && !scheme) {
		const char *nl = strchr(line, '\n');
		size_t n = nl ? (size_t)(nl - line) : strlen(line);

		read_cgroup_line((struct span){ line, n }, &scheme, &id,
				 pod_uid, &has_pod);
		line = nl ? nl + 1 : NULL;
	}
	if (scheme)
		snprintf(out, len, "%s%.*s", scheme, (int)id.n, id.s);
	else if (has_pod)
		snprintf(out, len, "k8s-pod://%s", pod_uid);
}
