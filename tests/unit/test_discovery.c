// SPDX-License-Identifier: BSD-2-Clause
/* Fleet discovery: a fake proc tree, cgroup paths of every runtime, and
 * the real /proc with a python3 that imports torch. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "attach/target.h"
#include "fleet/discovery.h"

#define HEX64 "0123456789abcdef0123456789abcdef" \
	      "0123456789abcdef0123456789abcdef"
#define POD_UID "8dbc5577-d0e2-4706-8787-57d52c03ddf2"
#define POD_UID_ "8dbc5577_d0e2_4706_8787_57d52c03ddf2"

static void write_file(const char *dir, const char *name, const char *text,
		       size_t len)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "we");
	if (!f) {
		perror(path);
		exit(2);
	}
	fwrite(text, 1, len, f);
	fclose(f);
}

#define WRITE_TEXT(dir, name, text) \
	write_file(dir, name, text, sizeof(text) - 1)

/* The stat line of a process in state st that started at ticks. */
static void write_stat(const char *dir, pid_t pid, const char *comm, char st,
		       unsigned long long ticks)
{
	char text[512];
	int n = snprintf(text, sizeof(text),
			 "%d (%s) %c 1 %d %d 0 -1 4194560 100 0 0 0 5 3 0 0 "
			 "20 0 4 0 %llu 123456789 2000 18446744073709551615\n",
			 pid, comm, st, pid, pid, ticks);

	write_file(dir, "stat", text, (size_t)n);
}

static void make_dir(char *dir, size_t len, const char *root,
		     const char *name)
{
	snprintf(dir, len, "%s/%s", root, name);
	if (mkdir(dir, 0755) && errno != EEXIST) {
		perror(dir);
		exit(2);
	}
}

static void make_symlink(const char *target, const char *dir,
			 const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (symlink(target, path)) {
		perror(path);
		exit(2);
	}
}

/*
 * The fake tree, pid by pid:
 *   100  libtorch_cpu.so.1.13 from its maps; map_files/ opens a real file
 *        here, so lib_path is the map_files/ one; docker, other mount ns
 *   200  libtorch_cpu.so (another file); no map_files/, root -> "/" and
 *        the maps line names a real file with its inode number (and
 *        another device, as btrfs shows), so lib_path goes through root/;
 *        our own mount ns
 *   250  the same path, but the file there is not the one mapped
 *        (another inode: replaced on disk), so lib_path stays map_files/
 *   300  no torch (names that look alike)
 *   400  a zombie (state Z) whose maps still show torch
 *   500  vanished: its directory is empty
 *   600  a libtorch_cpu deleted on disk since it was mapped
 *   700  "self": rfbpf itself, maps torch, must not be listed
 *   800  a kernel thread: no maps lines, no cmdline
 * plus entries that are no pids.
 */
struct fake_proc {
	char root[64];
	char lib_file[192];	/* the real file 100's map_files/ opens */
	char lib2_file[192];	/* the real file 200's maps name */
	struct stat lib2_st;
};

static void make_fake_proc(struct fake_proc *fp)
{
	char dir[128], sub[192], text[512], own_ns[64];
	ssize_t ns_len;
	int n;

	snprintf(fp->root, sizeof(fp->root), "/tmp/rfbpf-discovery-XXXXXX");
	if (!mkdtemp(fp->root)) {
		perror("mkdtemp");
		exit(2);
	}
	make_dir(dir, sizeof(dir), fp->root, "libs");
	WRITE_TEXT(dir, "libtorch_cpu.so.1.13", "not an ELF");
	WRITE_TEXT(dir, "libtorch_cpu.so", "another file");
	snprintf(fp->lib_file, sizeof(fp->lib_file), "%s/libtorch_cpu.so.1.13",
		 dir);
	snprintf(fp->lib2_file, sizeof(fp->lib2_file), "%s/libtorch_cpu.so",
		 dir);
	if (stat(fp->lib2_file, &fp->lib2_st))
		exit(2);
	ns_len = readlink("/proc/self/ns/mnt", own_ns, sizeof(own_ns) - 1);
	own_ns[ns_len > 0 ? ns_len : 0] = 0;

	make_dir(dir, sizeof(dir), fp->root, "100");
	WRITE_TEXT(dir, "maps",
		"55d0c0000000-55d0c0001000 r--p 00000000 fd:01 131 "
		"                      /usr/bin/python3.10\n"
		"7f1200000000-7f1200200000 r--p 00000000 fd:01 654321 "
		"                   /opt/conda/lib/python3.10/site-packages/"
		"torch/lib/libtorch_cpu.so.1.13\n"
		"7f1200200000-7f1204000000 r-xp 00200000 fd:01 654321 "
		"                   /opt/conda/lib/python3.10/site-packages/"
		"torch/lib/libtorch_cpu.so.1.13\n"
		"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 "
		"                         [stack]\n");
	WRITE_TEXT(dir, "comm", "python\n");
	WRITE_TEXT(dir, "cmdline", "python\0train.py\0--epochs\0" "003\0");
	write_stat(dir, 100, "python", 'S', 4242);
	WRITE_TEXT(dir, "cgroup", "0::/system.slice/docker-" HEX64 ".scope\n");
	make_dir(sub, sizeof(sub), dir, "ns");
	make_symlink("mnt:[4026532999]", sub, "mnt");
	make_dir(sub, sizeof(sub), dir, "map_files");
	make_symlink(fp->lib_file, sub, "7f1200000000-7f1200200000");

	make_dir(dir, sizeof(dir), fp->root, "200");
	n = snprintf(text, sizeof(text),
		     "7f3300000000-7f3300100000 r-xp 00000000 00:2f %llu "
		     "               %s\n",
		     (unsigned long long)fp->lib2_st.st_ino, fp->lib2_file);
	write_file(dir, "maps", text, (size_t)n);
	WRITE_TEXT(dir, "comm", "torchrun\n");
	WRITE_TEXT(dir, "cmdline", "/usr/bin/torchrun\0--nproc-per-node\0"
		   "8\0");
	write_stat(dir, 200, "torchrun", 'R', 99);
	WRITE_TEXT(dir, "cgroup", "0::/user.slice/user-1000.slice/"
		   "session-3.scope\n");
	make_dir(sub, sizeof(sub), dir, "ns");
	make_symlink(own_ns, sub, "mnt");
	make_symlink("/", dir, "root");

	make_dir(dir, sizeof(dir), fp->root, "250");
	n = snprintf(text, sizeof(text),
		     "7f3300000000-7f3300100000 r-xp 00000000 00:2f %llu "
		     "               %s\n",
		     (unsigned long long)fp->lib2_st.st_ino + 1, fp->lib2_file);
	write_file(dir, "maps", text, (size_t)n);
	WRITE_TEXT(dir, "comm", "python\n");
	write_stat(dir, 250, "python", 'S', 250);
	make_symlink("/", dir, "root");

	make_dir(dir, sizeof(dir), fp->root, "300");
	WRITE_TEXT(dir, "maps",
		"7f4400000000-7f4400100000 r-xp 00000000 fd:01 77 "
		"                 /usr/lib/libtorch_cuda.so\n"
		"7f4400100000-7f4400200000 r-xp 00000000 fd:01 78 "
		"                 /usr/lib/libtorch_cpu_extra.so\n"
		"7f4400200000-7f4400300000 r-xp 00000000 fd:01 79 "
		"                 /usr/lib/libtorch_cpu.so/oops.so\n");
	WRITE_TEXT(dir, "comm", "bash\n");
	WRITE_TEXT(dir, "cmdline", "bash\0");
	write_stat(dir, 300, "bash", 'S', 5);

	make_dir(dir, sizeof(dir), fp->root, "400");
	WRITE_TEXT(dir, "maps",
		"7f5500000000-7f5500100000 r-xp 00000000 fd:01 654321 "
		"                 /opt/libtorch_cpu.so\n");
	WRITE_TEXT(dir, "comm", "defunct\n");
	write_stat(dir, 400, "defunct", 'Z', 7);

	make_dir(dir, sizeof(dir), fp->root, "500");

	make_dir(dir, sizeof(dir), fp->root, "600");
	WRITE_TEXT(dir, "maps",
		"7f6600000000-7f6600100000 r-xp 00000000 08:02 4711 "
		"                 /venv/lib/torch/lib/libtorch_cpu.so "
		"(deleted)\n");
	WRITE_TEXT(dir, "comm", "pt_main_thread\n");
	WRITE_TEXT(dir, "cmdline", "python3\0-m\0serve\0");
	write_stat(dir, 600, "pt_main_thread", 'S', 600600);
	WRITE_TEXT(dir, "cgroup",
		"12:pids:/kubepods/burstable/pod" POD_UID "/" HEX64 "\n"
		"1:name=systemd:/kubepods/burstable/pod" POD_UID "/" HEX64
		"\n");

	make_dir(dir, sizeof(dir), fp->root, "700");
	WRITE_TEXT(dir, "maps",
		"7f7700000000-7f7700100000 r-xp 00000000 fd:01 654321 "
		"                 /opt/libtorch_cpu.so\n");
	WRITE_TEXT(dir, "comm", "rfbpf\n");
	write_stat(dir, 700, "rfbpf", 'S', 1);
	make_symlink("700", fp->root, "self");

	make_dir(dir, sizeof(dir), fp->root, "800");
	WRITE_TEXT(dir, "maps", "");
	WRITE_TEXT(dir, "comm", "kworker/0:1\n");
	WRITE_TEXT(dir, "cmdline", "");
	write_stat(dir, 800, "kworker/0:1", 'I', 3);

	make_dir(dir, sizeof(dir), fp->root, "sys");
	make_dir(dir, sizeof(dir), fp->root, "12abc");
	WRITE_TEXT(fp->root, "uptime", "1.0 1.0\n");
}

static void remove_fake_proc(struct fake_proc *fp)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fp->root);
	if (system(cmd))
		fprintf(stderr, "  could not remove %s\n", fp->root);
}

TEST(scan_finds_exactly_the_torch_processes)
{
	struct torch_process *procs = NULL;
	struct fake_proc fp;
	char want[512];
	size_t nr = 99;

	make_fake_proc(&fp);
	CHECK_EQ_U64(discovery_scan(fp.root, &procs, &nr), 0);
	CHECK_EQ_U64(nr, 4);
	if (nr != 4 || !procs) {
		free(procs);
		remove_fake_proc(&fp);
		return;
	}

	/* Sorted by pid. */
	CHECK_EQ_U64(procs[0].pid, 100);
	CHECK_EQ_U64(procs[0].start_ticks, 4242);
	CHECK_STR(procs[0].comm, "python");
	CHECK_STR(procs[0].cmdline, "python train.py --epochs 003");
	CHECK_STR(procs[0].lib_in_target, "/opt/conda/lib/python3.10/"
		  "site-packages/torch/lib/libtorch_cpu.so.1.13");
	snprintf(want, sizeof(want), "%s/100/map_files/"
		 "7f1200000000-7f1200200000", fp.root);
	CHECK_STR(procs[0].lib_path, want);
	CHECK_EQ_U64(procs[0].lib_dev, makedev(0xfd, 0x01));
	CHECK_EQ_U64(procs[0].lib_ino, 654321);
	CHECK_STR(procs[0].container, "docker://" HEX64);
	CHECK(procs[0].other_mount_ns);

	CHECK_EQ_U64(procs[1].pid, 200);
	CHECK_EQ_U64(procs[1].start_ticks, 99);
	CHECK_STR(procs[1].comm, "torchrun");
	CHECK_STR(procs[1].cmdline, "/usr/bin/torchrun --nproc-per-node 8");
	CHECK_STR(procs[1].lib_in_target, fp.lib2_file);
	snprintf(want, sizeof(want), "%s/200/root%s", fp.root, fp.lib2_file);
	CHECK_STR(procs[1].lib_path, want);
	CHECK_EQ_U64(procs[1].lib_dev, makedev(0, 0x2f));
	CHECK_EQ_U64(procs[1].lib_ino, fp.lib2_st.st_ino);
	CHECK_STR(procs[1].container, "");
	CHECK(!procs[1].other_mount_ns);

	/* The file at the mapped path is another one: not taken. */
	CHECK_EQ_U64(procs[2].pid, 250);
	CHECK_EQ_U64(procs[2].lib_ino, fp.lib2_st.st_ino + 1);
	snprintf(want, sizeof(want), "%s/250/map_files/"
		 "7f3300000000-7f3300100000", fp.root);
	CHECK_STR(procs[2].lib_path, want);
	CHECK_STR(procs[2].cmdline, "");	/* no cmdline file */

	/* Deleted on disk: still found, and the path stays map_files/ (in a
	 * real /proc it opens the running copy). */
	CHECK_EQ_U64(procs[3].pid, 600);
	CHECK_STR(procs[3].lib_in_target,
		  "/venv/lib/torch/lib/libtorch_cpu.so (deleted)");
	snprintf(want, sizeof(want), "%s/600/map_files/"
		 "7f6600000000-7f6600100000", fp.root);
	CHECK_STR(procs[3].lib_path, want);
	CHECK_EQ_U64(procs[3].lib_dev, makedev(8, 2));
	CHECK_EQ_U64(procs[3].lib_ino, 4711);
	CHECK_STR(procs[3].container, "containerd://" HEX64);
	CHECK(!procs[3].other_mount_ns);	/* no ns/mnt to tell */
	free(procs);
	remove_fake_proc(&fp);
}

TEST(read_one_pid_tells_why_not)
{
	struct torch_process p;
	struct fake_proc fp;

	make_fake_proc(&fp);
	CHECK_EQ_U64(discovery_read(fp.root, 100, &p), 0);
	CHECK_EQ_U64(p.pid, 100);
	CHECK_STR(p.comm, "python");
	CHECK_EQ_U64(discovery_read(fp.root, 300, &p), -ENOEXEC);
	CHECK_EQ_U64(discovery_read(fp.root, 800, &p), -ENOEXEC);
	CHECK_EQ_U64(discovery_read(fp.root, 400, &p), -ENOENT); /* zombie */
	CHECK_EQ_U64(discovery_read(fp.root, 500, &p), -ENOENT); /* vanished */
	CHECK_EQ_U64(discovery_read(fp.root, 999, &p), -ENOENT);
	CHECK_EQ_U64(discovery_read(fp.root, 0, &p), -ENOENT);
	/* -p names rfbpf itself: read it, the scan is what leaves it out. */
	CHECK_EQ_U64(discovery_read(fp.root, 700, &p), 0);
	remove_fake_proc(&fp);
}

TEST(scan_of_a_missing_root_fails)
{
	struct torch_process *procs = (void *)1;
	size_t nr = 5;

	CHECK_EQ_U64(discovery_scan("/nonexistent/rfbpf-proc", &procs, &nr),
		     -ENOENT);
	CHECK(procs == NULL);
	CHECK_EQ_U64(nr, 0);
}

/* A cmdline longer than fits is cut between characters: "€" (3 bytes)
 * starting at each byte around the cut at 255. */
TEST(cmdline_cut_keeps_utf8_whole)
{
	char dir[128], args[300];
	struct torch_process p;
	struct fake_proc fp;

	make_fake_proc(&fp);
	snprintf(dir, sizeof(dir), "%s/100", fp.root);
	for (size_t at = 250; at <= 256; at++) {
		size_t n = 0, want_len = at < 255 && at + 3 > 255 ? at : 255;

		memcpy(args, "python", 6);
		n = 6;
		args[n++] = 0;
		while (n < at)
			args[n++] = 'x';
		memcpy(args + n, "\xe2\x82\xac" "tail", 8);
		n += 8;
		write_file(dir, "cmdline", args, n);
		CHECK_EQ_U64(discovery_read(fp.root, 100, &p), 0);
		args[6] = ' ';
		if (strlen(p.cmdline) != want_len)
			fprintf(stderr, "  euro sign at %zu\n", at);
		CHECK_EQ_U64(strlen(p.cmdline), want_len);
		CHECK(!memcmp(p.cmdline, args, want_len));
	}
	remove_fake_proc(&fp);
}

struct cgroup_case {
	const char *what, *text, *want;
};

static const struct cgroup_case cgroup_cases[] = {
	{ "docker, cgroup v2, systemd driver",
	  "0::/system.slice/docker-" HEX64 ".scope\n",
	  "docker://" HEX64 },
	{ "docker, cgroup v1, cgroupfs driver",
	  "12:pids:/docker/" HEX64 "\n"
	  "11:memory:/docker/" HEX64 "\n"
	  "1:name=systemd:/docker/" HEX64 "\n"
	  "0::/system.slice/containerd.service\n",
	  "docker://" HEX64 },
	{ "docker, cgroup v2, cgroupfs driver",
	  "0::/docker/" HEX64 "\n", "docker://" HEX64 },
	{ "docker in docker: the inner one",
	  "0::/docker/" HEX64 "/docker/"
	  "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210\n",
	  "docker://"
	  "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210" },
	{ "containerd, nerdctl, cgroup v1",
	  "3:cpu,cpuacct:/default/" HEX64 "\n", "containerd://" HEX64 },
	{ "containerd, nerdctl, systemd driver",
	  "0::/system.slice/nerdctl-" HEX64 ".scope\n",
	  "containerd://" HEX64 },
	{ "containerd, k8s, systemd driver, cgroup v2",
	  "0::/kubepods.slice/kubepods-burstable.slice/"
	  "kubepods-burstable-pod" POD_UID_ ".slice/cri-containerd-" HEX64
	  ".scope\n",
	  "containerd://" HEX64 },
	{ "containerd, k8s, systemd driver, cgroup v1",
	  "11:devices:/kubepods.slice/kubepods-besteffort.slice/"
	  "kubepods-besteffort-pod" POD_UID_ ".slice/cri-containerd-" HEX64
	  ".scope\n"
	  "1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/"
	  "kubepods-besteffort-pod" POD_UID_ ".slice/cri-containerd-" HEX64
	  ".scope\n",
	  "containerd://" HEX64 },
	{ "containerd, runc's slice:prefix:name form",
	  "0::/system.slice/containerd.service/kubepods-burstable-pod"
	  POD_UID_ ".slice:cri-containerd:" HEX64 "\n",
	  "containerd://" HEX64 },
	{ "k8s cgroupfs driver (guaranteed QoS)",
	  "4:memory:/kubepods/pod" POD_UID "/" HEX64 "\n",
	  "containerd://" HEX64 },
	{ "cri-o, systemd driver, cgroup v2",
	  "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
	  POD_UID_ ".slice/crio-" HEX64 ".scope\n",
	  "cri-o://" HEX64 },
	{ "cri-o, cgroupfs driver, cgroup v1",
	  "9:cpuset:/kubepods/besteffort/pod" POD_UID "/crio-" HEX64 "\n",
	  "cri-o://" HEX64 },
	{ "cri-o's conmon is no container: the pod is what is known",
	  "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
	  POD_UID_ ".slice/crio-conmon-" HEX64 ".scope\n",
	  "k8s-pod://" POD_UID },
	{ "podman, rootless, cgroup v2",
	  "0::/user.slice/user-1000.slice/user@1000.service/user.slice/"
	  "libpod-" HEX64 ".scope/container\n",
	  "podman://" HEX64 },
	{ "podman, root, cgroup v2",
	  "0::/machine.slice/libpod-" HEX64 ".scope\n", "podman://" HEX64 },
	{ "podman, cgroupfs driver, cgroup v1",
	  "5:memory:/libpod_parent/libpod-" HEX64 "\n", "podman://" HEX64 },
	{ "pod uid only, cgroupfs",
	  "0::/kubepods/burstable/pod" POD_UID "\n", "k8s-pod://" POD_UID },
	{ "pod uid only, systemd driver",
	  "0::/kubepods.slice/kubepods-besteffort.slice/"
	  "kubepods-besteffort-pod" POD_UID_ ".slice\n",
	  "k8s-pod://" POD_UID },
	{ "static pod (32 hex uid), guaranteed QoS, systemd driver",
	  "0::/kubepods.slice/kubepods-pod6e8f1f2d1a4b8e3f9c0d1e2f3a4b5c6d"
	  ".slice\n",
	  "k8s-pod://6e8f1f2d1a4b8e3f9c0d1e2f3a4b5c6d" },
	{ "the container id on a later line beats the pod uid",
	  "2:cpu:/kubepods/burstable/pod" POD_UID "\n"
	  "1:name=systemd:/kubepods/burstable/pod" POD_UID "/crio-" HEX64
	  "\n",
	  "cri-o://" HEX64 },
	{ "rfbpf in its own cgroup namespace",
	  "0::/../../kubepods-burstable-pod" POD_UID_ ".slice/"
	  "cri-containerd-" HEX64 ".scope\n",
	  "containerd://" HEX64 },
	{ "host process, cgroup v2",
	  "0::/user.slice/user-1000.slice/session-2.scope\n", "" },
	{ "host service, cgroup v1",
	  "12:pids:/system.slice/sshd.service\n"
	  "1:name=systemd:/system.slice/sshd.service\n0::/\n", "" },
	{ "docker's own daemon is no container",
	  "0::/system.slice/docker.service\n", "" },
	{ "a 32-hex sandbox id is no runtime's",
	  "4:memory:/process_api/3e584bbcfa7105229c61903a245b030a\n", "" },
	{ "root cgroup", "0::/\n", "" },
	{ "no trailing newline", "0::/docker/" HEX64, "docker://" HEX64 },
	{ "empty", "", "" },
	{ "no colons", "garbage without colons\n", "" },
	{ "one colon", "0:/docker/" HEX64 "\n", "" },
	{ "uppercase hex is not an id",
	  "0::/docker/0123456789ABCDEF0123456789ABCDEF"
	  "0123456789ABCDEF0123456789ABCDEF\n", "" },
	{ "separators only", "0::////::://\n\n\n", "" },
	{ "bytes of every kind", "\xff\xfe:\x01:\x80/\x80" "docker-\xc3\n",
	  "" },
	{ "pod uid too long",
	  "0::/kubepods/pod" POD_UID "ffffffffff\n", "" },
};

TEST(container_id_from_cgroup_paths)
{
	char out[128];

	for (size_t i = 0; i < sizeof(cgroup_cases) / sizeof(*cgroup_cases);
	     i++) {
		const struct cgroup_case *c = &cgroup_cases[i];

		memset(out, 'x', sizeof(out));
		container_id_from_cgroup(c->text, out, sizeof(out));
		if (strcmp(out, c->want))
			fprintf(stderr, "  case \"%s\"\n", c->what);
		CHECK_STR(out, c->want);
	}

	/* 63 hex digits: no id. */
	char short_id[128];
	snprintf(short_id, sizeof(short_id), "0::/docker/%.63s\n", HEX64);
	container_id_from_cgroup(short_id, out, sizeof(out));
	CHECK_STR(out, "");
	/* NULL text; a buffer too small is cut, not overrun. */
	container_id_from_cgroup(NULL, out, sizeof(out));
	CHECK_STR(out, "");
	char small[12];
	memset(small, 'x', sizeof(small));
	container_id_from_cgroup("0::/docker/" HEX64 "\n", small, 10);
	CHECK_STR(small, "docker://");
	CHECK(small[10] == 'x' && small[11] == 'x');
	container_id_from_cgroup("0::/docker/" HEX64 "\n", small, 0);
	CHECK(small[0] == 'd');
	/* A very long line of one long component. */
	static char huge[1 << 16];
	memcpy(huge, "0::/", 4);
	memset(huge + 4, 'a', sizeof(huge) - 5);
	container_id_from_cgroup(huge, out, sizeof(out));
	CHECK_STR(out, "");
}

static double now_us(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Polls until pid maps libtorch_cpu (0), or it exited or never did. */
static int wait_for_torch(pid_t pid, struct torch_process *p)
{
	for (int i = 0; i < 1200; i++) {	/* 60 s */
		int status, err = discovery_read("/proc", pid, p);

		if (!err)
			return 0;
		if (waitpid(pid, &status, WNOHANG) == pid)
			return -ECHILD;
		usleep(50 * 1000);
	}
	return -ETIMEDOUT;
}

TEST(real_proc_finds_a_python_importing_torch)
{
	struct torch_process p, *procs = NULL, *found = NULL;
	size_t nr = 0;
	struct stat st;
	pid_t child;
	int fd, err;

	fflush(NULL);
	child = fork();
	if (child == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execl("/usr/bin/python3", "python3", "-c",
		      "import torch, time; time.sleep(30)", (char *)NULL);
		_exit(127);
	}
	CHECK(child > 0);
	if (child <= 0)
		return;
	err = wait_for_torch(child, &p);
	if (err) {
		printf("test_discovery: SKIP real /proc: /usr/bin/python3 "
		       "cannot import torch (%s)\n", err == -ECHILD ?
		       "it exited" : "no libtorch_cpu mapped after 60 s");
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		return;
	}

	CHECK_EQ_U64(discovery_scan("/proc", &procs, &nr), 0);
	for (size_t i = 0; i < nr; i++)
		if (procs[i].pid == child)
			found = &procs[i];
	CHECK(found != NULL);
	if (found) {
		CHECK_EQ_U64(found->start_ticks, target_start_time(child));
		CHECK(!strncmp(found->cmdline, "python3 -c import torch", 23));
		CHECK(strstr(found->lib_in_target, "libtorch_cpu.so") != NULL);
		CHECK(!found->other_mount_ns);
		fd = open(found->lib_path, O_RDONLY | O_CLOEXEC);
		CHECK(fd >= 0);
		if (fd >= 0) {
			CHECK(!fstat(fd, &st));
			CHECK_EQ_U64(st.st_dev, found->lib_dev);
			CHECK_EQ_U64(st.st_ino, found->lib_ino);
			close(fd);
		}
		printf("test_discovery: pid %d maps %s, opened as %s\n",
		       child, found->lib_in_target, found->lib_path);
	}
	for (size_t i = 0; i < nr; i++)
		CHECK(procs[i].pid != getpid());
	free(procs);

	/* The cost of one scan of this host: wall and CPU (mostly the
	 * kernel writing maps). */
	double wall = now_us(CLOCK_MONOTONIC);
	double cpu = now_us(CLOCK_PROCESS_CPUTIME_ID);
	int rounds = 10, nproc = 0;
	for (int i = 0; i < rounds; i++) {
		CHECK_EQ_U64(discovery_scan("/proc", &procs, &nr), 0);
		free(procs);
	}
	wall = (now_us(CLOCK_MONOTONIC) - wall) / rounds;
	cpu = (now_us(CLOCK_PROCESS_CPUTIME_ID) - cpu) / rounds;
	DIR *d = opendir("/proc");
	for (struct dirent *e; d && (e = readdir(d));)
		nproc += e->d_name[0] >= '1' && e->d_name[0] <= '9';
	if (d)
		closedir(d);
	printf("test_discovery: discovery_scan(/proc): %.1f ms per scan "
	       "(%.1f ms CPU), %d processes\n", wall / 1e3, cpu / 1e3, nproc);

	CHECK_EQ_U64(discovery_read("/proc", getpid(), &p), -ENOEXEC);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	CHECK_EQ_U64(discovery_read("/proc", child, &p), -ENOENT);
	CHECK_EQ_U64(discovery_read("/proc", INT_MAX, &p), -ENOENT);
}

RUN_TESTS()
