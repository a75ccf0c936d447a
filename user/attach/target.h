/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Finding the target and the libtorch_cpu it has mapped. A path in
 * /proc/PID/maps is only a name: the file there may have been deleted or
 * replaced since (a package upgrade), or live in the target's mount
 * namespace (a container). A mapped library is opened by its identity
 * instead, through map_files/ or a path checked to be the same inode
 * (target_mapping_path).
 */
#ifndef RFBPF_TARGET_H
#define RFBPF_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Does the process exist (zombies count as gone)? */
bool target_alive(pid_t pid);
/* The ids of pid's threads alive now, in *out (malloc'd, the caller
 * frees it): how many, 0 if none could be read. */
size_t target_threads(pid_t pid, uint32_t **out);
/* The process's comm, or "?" */
void target_comm(pid_t pid, char *buf, size_t len);
/* A thread's comm, or "" when it is gone. */
void target_thread_comm(pid_t pid, pid_t tid, char *buf, size_t len);
/*
 * Finds the first mapping of libtorch_cpu.so* in /proc/PID/maps and writes
 * the path to open into buf (target_mapping_path). Returns 0, -ENOENT when
 * not mapped, -EPERM when the mapped file can be opened only through
 * map_files/ and that is refused, or -errno when maps cannot be read.
 */
int target_find_libtorch(pid_t pid, char *buf, size_t len);
/* The same for the first mapping whose file name match() accepts. */
int target_find_library(pid_t pid, bool (*match)(const char *base),
			char *buf, size_t len);
/* The file name /proc/PID/maps shows for a path from target_find_library
 * (" (deleted)" and all), for messages; "" if unknown. */
void target_mapped_name(const char *path, char *buf, size_t len);
/*
 * The address at which file offset off of the file at path (rfbpf's view)
 * is mapped executable in pid, matched by device and inode. Returns 0 or
 * -ENOENT.
 */
int target_addr_of_offset(pid_t pid, const char *path, uint64_t off,
			  uint64_t *addr);
/* The same for a writable data mapping (a variable of the file). */
int target_addr_of_data_offset(pid_t pid, const char *path, uint64_t off,
			       uint64_t *addr);
/* Reads len bytes at addr in the process (process_vm_readv): 0, or
 * -errno (-EFAULT for a short read or a 0 address). */
int target_read(pid_t pid, uint64_t addr, void *buf, size_t len);
/* The process's start time (clock ticks after boot, /proc/PID/stat field
 * 22): with the pid, it names one process across pid reuse. 0 if gone. */
unsigned long long target_start_time(pid_t pid);
/* Do processes a and b run in one address space (a vfork child and its
 * parent, until the child execs or exits)? kcmp(2); false if unknown. */
bool target_shares_memory(pid_t a, pid_t b);
/* Is addr inside pid's mapping called name ("[uprobes-trampoline]")? */
bool target_addr_in_mapping(pid_t pid, uint64_t addr, const char *name);
/* Its CPU time so far (user + system, all threads), seconds; NaN if
 * gone. */
double target_cpu_seconds(pid_t pid);
/* The value of a "key:" line of /proc/PID/status, or of thread tid's
 * (tid != 0), blanks trimmed. Returns false if there is none. */
bool target_status(pid_t pid, pid_t tid, const char *key, char *val,
		   size_t len);
/*
 * The same readings under proc_root instead of "/proc": fleet mode's
 * discovery scans a proc tree it is given (fake ones in its tests).
 */
bool target_alive_at(const char *proc_root, pid_t pid);
void target_comm_at(const char *proc_root, pid_t pid, char *buf, size_t len);
unsigned long long target_start_time_at(const char *proc_root, pid_t pid);
/* proc_root/PID/name into buf, NUL-terminated (the text may hold NULs, as
 * cmdline does). Returns the bytes read or -errno. */
int target_read_file_at(const char *proc_root, pid_t pid, const char *name,
			char *buf, size_t len);
struct dist_info;
/* d filled from pid's environment as it was at exec (model/
 * distributed.h); fields not there are left as they were. */
void target_read_dist_info(pid_t pid, struct dist_info *d);
/* One line of /proc/PID/maps, as target_find_mapping_at() found it. */
struct target_mapping {
	char range[40];		/* "START-END", as map_files/ names it */
	char file[4096];	/* the path as maps shows it */
	uint64_t dev, ino;	/* the file's identity as maps shows it */
	bool deleted;		/* maps said " (deleted)": unlinked, or
				 * renamed over, since it was mapped */
};
/* Parses one line of maps (pure): false for a line that maps no file. */
bool target_parse_maps_line(const char *line, struct target_mapping *m);
/* The first mapping under proc_root/PID/maps whose file name match()
 * accepts (" (deleted)" left off). Returns 0, -ENOENT when none, or
 * -errno when maps cannot be read. */
int target_find_mapping_at(const char *proc_root, pid_t pid,
			   bool (*match)(const char *base),
			   struct target_mapping *m);
/*
 * The path rfbpf opens (symbols) and probes (uprobes resolve a path) for
 * pid's mapping m. /proc/PID/map_files/START-END first: it names the very
 * inode mapped, even one deleted or replaced on disk since (a package
 * upgrade), whatever the target's root or mount namespace; but the kernel
 * lets only CAP_SYS_ADMIN (or CAP_CHECKPOINT_RESTORE) follow it. Else the
 * file at m's path, seen through /proc/PID/root or as is, if its device
 * and inode are still the mapping's. Returns 0, -EPERM (map_files/
 * refused and no path holds the mapped file), or -ENOENT (gone).
 */
int target_mapping_path(pid_t pid, const struct target_mapping *m,
			char *buf, size_t len);
/* The addresses in pid of the C library's functions names[0..n-1]: from
 * libc, or from libpthread or libdl where an older glibc kept them. 0, or
 * -ENOENT with the first one missing named in err. */
int target_libc_functions(pid_t pid, const char *const *names, size_t n,
			  uint64_t *addr, char *err, size_t len);
/* Is base the file name of a libtorch_cpu build (libtorch_cpu.so[.*])? */
bool is_libtorch_cpu_name(const char *base);
/* Is base rfbpf's CUPTI agent (librfbpf_cupti*.so, or the memfd
 * memfd:librfbpf_cupti.so rfbpf loads it from)? */
bool is_cupti_agent_name(const char *base);
/* libcupti.so, libcupti.so.13, libcupti.so.2025.3.1, ... */
bool is_cupti_library_name(const char *base);

#endif
