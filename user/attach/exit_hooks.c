// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The one thread-exit program of an rfbpf process (exit_hooks.h). The BPF
 * side routes a tgid to a slot and keeps by slot a ring and a per-CPU
 * drop count; this file hands out the slots and keeps those maps.
 */
#include "attach/exit_hooks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "rfbpf.h"
#include "thread_exits.skel.h"

/* The kernel's PID_MAX_LIMIT on 64-bit machines: pid_max can be raised at
 * run time, up to this, so the bitmap covers it (512 KiB). */
#define TGID_LIMIT (4u * 1024 * 1024)

static struct thread_exits_bpf *skel;
static struct bpf_link *exit_link;
static uint64_t *bits;		/* exit_bits, mapped */
static bool used[RF_EXIT_MAX_JOBS];
static uint64_t wakeups[RF_EXIT_MAX_JOBS];
static int nr_used;

static void unload(void)
{
	bpf_link__destroy(exit_link);
	exit_link = NULL;
	if (bits)
		munmap(bits, TGID_LIMIT / 8);
	bits = NULL;
	thread_exits_bpf__destroy(skel);
	skel = NULL;
}

static int load(uint64_t pidns_dev, uint64_t pidns_ino, char *err,
		size_t errlen)
{
	int ret, template;

	skel = thread_exits_bpf__open();
	if (!skel) {
		ret = -errno;
		snprintf(err, errlen, "cannot open the thread-exit program: "
			 "%s", strerror(-ret));
		return ret;
	}
	skel->rodata->pidns_dev = pidns_dev;
	skel->rodata->pidns_ino = pidns_ino;
	bpf_map__set_max_entries(skel->maps.exit_bits, TGID_LIMIT / 64);
	/* The rings' template (libbpf 1.1 gives no handle on the one the
	 * object declares before load). Since Linux 5.10 an inner ring may
	 * differ from it in size, so sessions keep their own. */
	template = bpf_map_create(BPF_MAP_TYPE_RINGBUF, NULL, 0, 0,
				  (uint32_t)sysconf(_SC_PAGESIZE), NULL);
	ret = template < 0 ? -errno :
	      bpf_map__set_inner_map_fd(skel->maps.exit_rings, template);
	if (!ret)
		ret = thread_exits_bpf__load(skel);
	if (template >= 0)
		close(template);
	if (!ret) {
		bits = mmap(NULL, TGID_LIMIT / 8, PROT_READ | PROT_WRITE,
			    MAP_SHARED, bpf_map__fd(skel->maps.exit_bits), 0);
		if (bits == MAP_FAILED) {
			ret = -errno;
			bits = NULL;
			snprintf(err, errlen, "cannot map the thread-exit "
				 "bitmap: %s", strerror(-ret));
			unload();
			return ret;
		}
		exit_link = bpf_program__attach(skel->progs.thread_exit);
		if (!exit_link) {
			ret = -errno;
			snprintf(err, errlen, "cannot attach the "
				 "sched_process_exit raw tracepoint: %s",
				 strerror(-ret));
			unload();
			return ret;
		}
		return 0;
	}
	snprintf(err, errlen, "cannot load the thread-exit program: %s%s",
		 strerror(-ret), ret == -EPERM ? " (needs CAP_BPF and "
		 "CAP_PERFMON, or CAP_SYS_ADMIN)" : "");
	unload();
	return ret;
}

int exit_hooks_new_job(uint64_t pidns_dev, uint64_t pidns_ino,
		       uint32_t *job, int *routes_fd, int *bits_fd,
		       char *err, size_t errlen)
{
	uint32_t j = 0;
	int ret;

	while (j < RF_EXIT_MAX_JOBS && used[j])
		j++;
	if (j == RF_EXIT_MAX_JOBS) {
		snprintf(err, errlen, "more than %d sessions in one rfbpf "
			 "process", RF_EXIT_MAX_JOBS);
		return -E2BIG;
	}
	if (!skel && (ret = load(pidns_dev, pidns_ino, err, errlen)))
		return ret;
	used[j] = true;
	wakeups[j] = 0;
	nr_used++;
	*job = j;
	*routes_fd = bpf_map__fd(skel->maps.exit_routes);
	*bits_fd = bpf_map__fd(skel->maps.exit_bits);
	return 0;
}

/* The bit last on the way in, first on the way out: the program looks at
 * nothing else of a tgid whose bit is clear. */
static void set_bit(uint32_t tgid, bool on)
{
	uint64_t mask = 1ull << (tgid % 64);

	if (on)
		__atomic_fetch_or(&bits[tgid / 64], mask, __ATOMIC_RELEASE);
	else
		__atomic_fetch_and(&bits[tgid / 64], ~mask, __ATOMIC_RELEASE);
}

int exit_hooks_route(uint32_t job, pid_t tgid, bool on)
{
	struct rf_exit_route route = { .job = job };
	uint32_t key = (uint32_t)tgid;
	int fd;

	if (!skel || job >= RF_EXIT_MAX_JOBS || !used[job])
		return -ENOENT;
	if (tgid <= 0 || key >= TGID_LIMIT)
		return -EINVAL;
	fd = bpf_map__fd(skel->maps.exit_routes);
	if (!on) {
		set_bit(key, false);
		bpf_map_delete_elem(fd, &key);
		return 0;
	}
	route.wakeup_bytes = wakeups[job];
	if (bpf_map_update_elem(fd, &key, &route, BPF_ANY))
		return -errno;
	set_bit(key, true);
	return 0;
}

/* Its count zeroed and its ring in place before any route leads there. */
static int open_slot(uint32_t job, int ring_fd)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *zero;
	int ret = 0;

	if (ncpu <= 0)
		return ncpu ? ncpu : -EINVAL;
	zero = calloc(ncpu, sizeof(*zero));
	if (!zero)
		return -ENOMEM;
	if (bpf_map_update_elem(bpf_map__fd(skel->maps.exit_drops), &job,
				zero, BPF_ANY) ||
	    bpf_map_update_elem(bpf_map__fd(skel->maps.exit_rings), &job,
				&ring_fd, BPF_ANY))
		ret = -errno;
	free(zero);
	return ret;
}

int exit_hooks_start(uint32_t job, pid_t tgid, int ring_fd,
		     uint64_t wakeup_bytes, char *err, size_t errlen)
{
	int ret = -ENOENT;

	if (skel && job < RF_EXIT_MAX_JOBS && used[job]) {
		wakeups[job] = wakeup_bytes;
		ret = open_slot(job, ring_fd);
		if (!ret)
			ret = exit_hooks_route(job, tgid, true);
	}
	if (ret)
		snprintf(err, errlen, "cannot trace the thread exits of "
			 "process %d: %s", tgid, strerror(-ret));
	return ret;
}

uint64_t exit_hooks_drops(uint32_t job)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *per_cpu, sum = 0;

	if (!skel || job >= RF_EXIT_MAX_JOBS || !used[job] || ncpu <= 0 ||
	    !(per_cpu = calloc(ncpu, sizeof(*per_cpu))))
		return 0;
	if (!bpf_map_lookup_elem(bpf_map__fd(skel->maps.exit_drops), &job,
				 per_cpu))
		for (int i = 0; i < ncpu; i++)
			sum += per_cpu[i];
	free(per_cpu);
	return sum;
}

bool exit_hooks_comm(uint32_t tid, char *buf, size_t len)
{
	char comm[17] = "";

	if (!skel ||
	    bpf_map_lookup_elem(bpf_map__fd(skel->maps.exited_comms), &tid,
				comm) || !comm[0])
		return false;
	snprintf(buf, len, "%s", comm);
	return true;
}

/* Every route to job: the target's, the children's the loader added and
 * those its fork program added. The keys are collected first, since
 * deleting while walking a hash can restart the walk. */
static void unroute_all(uint32_t job)
{
	int fd = bpf_map__fd(skel->maps.exit_routes), n = 0;
	static uint32_t keys[RF_EXIT_MAX_PROCS];
	struct rf_exit_route route;
	uint32_t key, next;
	void *prev = NULL;

	while (n < RF_EXIT_MAX_PROCS &&
	       !bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (!bpf_map_lookup_elem(fd, &key, &route) && route.job == job)
			keys[n++] = key;
	}
	for (int i = 0; i < n; i++) {
		if (keys[i] < TGID_LIMIT)
			set_bit(keys[i], false);
		bpf_map_delete_elem(fd, &keys[i]);
	}
}

void exit_hooks_remove(uint32_t job)
{
	if (!skel)
		return;
	if (job < RF_EXIT_MAX_JOBS && used[job]) {
		unroute_all(job);
		bpf_map_delete_elem(bpf_map__fd(skel->maps.exit_rings), &job);
		used[job] = false;
		nr_used--;
	}
	if (!nr_used)
		unload();
}

int exit_hooks_count(void)
{
	return nr_used;
}
