/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Fleet mode's view of the host: every process that maps a libtorch_cpu,
 * found by rescanning /proc about once a second. Processes in containers
 * (other mount and PID namespaces) are named by their host pid and given
 * a path to their library that rfbpf itself can open; processes that map
 * the same file (same device and inode) can then share one set of uprobes.
 */
#ifndef RFBPF_FLEET_DISCOVERY_H
#define RFBPF_FLEET_DISCOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct torch_process {
	pid_t pid;			/* host pid (as rfbpf sees it) */
	/* /proc/PID/stat field 22: (pid, start_ticks) names one process
	 * across pid reuse. */
	unsigned long long start_ticks;
	char comm[16];
	/* argv joined with spaces, cut on a UTF-8 character boundary;
	 * "" for kernel threads. */
	char cmdline[256];
	/* the library's path as /proc/PID/maps shows it (the target's view,
	 * " (deleted)" included when it was replaced on disk) */
	char lib_in_target[4096];
	/* a path rfbpf can open: /proc/PID/map_files/START-END, or
	 * /proc/PID/root/<path> when map_files/ is closed to rfbpf */
	char lib_path[4096];
	uint64_t lib_dev, lib_ino;	/* the mapped file's identity (maps) */
	/* "docker://<64hex>", "containerd://<64hex>", "cri-o://<64hex>",
	 * "podman://<64hex>", "k8s-pod://<uid>" (only the pod known), or "" */
	char container[128];
	bool other_mount_ns;		/* /proc/PID/ns/mnt differs from ours */
};

/*
 * Every process under proc_root ("/proc", or a fake tree in tests) that
 * maps a libtorch_cpu, sorted by pid, without rfbpf itself, zombies,
 * kernel threads and processes that vanish while being read (not an
 * error). *out is malloc'd (the caller frees it; NULL when *nr is 0).
 * Returns 0 or -errno (proc_root unreadable).
 */
int discovery_scan(const char *proc_root, struct torch_process **out,
		   size_t *nr);
/* The same for one pid (-p PID in fleet mode): 0, -ENOENT if there is no
 * such process (or a zombie), -ENOEXEC if it maps no libtorch_cpu, or
 * another -errno (-EACCES: maps closed to rfbpf). */
int discovery_read(const char *proc_root, pid_t pid, struct torch_process *p);
/* The container id in the text of /proc/PID/cgroup (v1 or v2), as above;
 * "" if none or the text is not understood. */
void container_id_from_cgroup(const char *cgroup_text, char *out, size_t len);

#endif
