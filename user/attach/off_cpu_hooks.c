// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The one set of scheduler programs of an rfbpf process (off_cpu_hooks.h).
 * The BPF side keeps a bit per traced tgid, and by tgid its ring, its
 * settings and its per-CPU counts; this file keeps those maps and the
 * number of processes in them.
 */
#include "attach/off_cpu_hooks.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "off_cpu.skel.h"

/* The kernel's PID_MAX_LIMIT on 64-bit machines: pid_max can be raised at
 * run time, up to this, so the bitmap covers it (512 KiB). */
#define TGID_LIMIT (4u * 1024 * 1024)

static struct off_cpu_bpf *skel;
static struct bpf_link *links[2];
static int nr_traced;

static int ring_size(int ring_fd, uint32_t *bytes)
{
	struct bpf_map_info info;
	uint32_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(ring_fd, &info, &len))
		return -errno;
	*bytes = info.max_entries;
	return 0;
}

static void unload(void)
{
	for (int i = 1; i >= 0; i--) {
		bpf_link__destroy(links[i]);
		links[i] = NULL;
	}
	off_cpu_bpf__destroy(skel);
	skel = NULL;
}

/* Loaded with ring_fd's size as the template every ring must match. */
static int load(int ring_fd, char *err, size_t errlen)
{
	struct bpf_program *progs[2];
	uint32_t bytes = 0;
	int ret, template;

	if ((ret = ring_size(ring_fd, &bytes))) {
		snprintf(err, errlen, "cannot read the ring buffer's size: %s",
			 strerror(-ret));
		return ret;
	}
	skel = off_cpu_bpf__open();
	if (!skel) {
		ret = -errno;
		snprintf(err, errlen, "cannot open the scheduler programs: %s",
			 strerror(-ret));
		return ret;
	}
	bpf_map__set_max_entries(skel->maps.traced_bits, TGID_LIMIT / 64);
	/* The rings' template: a ring of this size (libbpf 1.1 gives no
	 * handle on the one the object declares before load). */
	template = bpf_map_create(BPF_MAP_TYPE_RINGBUF, NULL, 0, 0, bytes,
				  NULL);
	ret = template < 0 ? -errno :
	      bpf_map__set_inner_map_fd(skel->maps.job_rings, template);
	if (!ret)
		ret = off_cpu_bpf__load(skel);
	if (template >= 0)
		close(template);
	if (ret) {
		snprintf(err, errlen, "cannot load the scheduler programs: %s",
			 strerror(-ret));
		unload();
		return ret;
	}
	progs[0] = skel->progs.off_cpu_switch;
	progs[1] = skel->progs.off_cpu_waking;
	for (int i = 0; i < 2; i++) {
		links[i] = bpf_program__attach(progs[i]);
		if (!links[i]) {
			ret = -errno;
			snprintf(err, errlen, "cannot attach the scheduler "
				 "tracepoints (sched_switch, sched_waking): "
				 "%s", strerror(-ret));
			unload();
			return ret;
		}
	}
	return 0;
}

static int set_bit(pid_t tgid, bool on)
{
	int fd = bpf_map__fd(skel->maps.traced_bits);
	uint32_t word = (uint32_t)tgid / 64;
	uint64_t bits;

	if (bpf_map_lookup_elem(fd, &word, &bits))
		return -errno;
	if (on)
		bits |= 1ull << (tgid % 64);
	else
		bits &= ~(1ull << (tgid % 64));
	return bpf_map_update_elem(fd, &word, &bits, BPF_ANY) ? -errno : 0;
}

static bool known(pid_t tgid)
{
	struct rf_off_cpu_job job;
	uint32_t key = tgid;

	return skel && !bpf_map_lookup_elem(
		bpf_map__fd(skel->maps.job_settings), &key, &job);
}

/* The bit first: the programs look at nothing else of a tgid whose bit is
 * clear (the counts are read after it, by off_cpu_hooks_remove). */
static void forget(pid_t tgid)
{
	uint32_t key = tgid;

	bpf_map_delete_elem(bpf_map__fd(skel->maps.job_rings), &key);
	bpf_map_delete_elem(bpf_map__fd(skel->maps.job_settings), &key);
	bpf_map_delete_elem(bpf_map__fd(skel->maps.job_counts), &key);
}

/* The ring, the settings and zeroed counts first, the bit last: the
 * programs look at nothing else of a tgid whose bit is clear. */
static int enter(pid_t tgid, int ring_fd, uint64_t wakeup_bytes)
{
	struct rf_off_cpu_job job = { .wakeup_bytes = wakeup_bytes };
	int ncpu = libbpf_num_possible_cpus();
	struct rf_off_cpu_counts *zero;
	uint32_t key = tgid;
	int ret = 0;

	if (ncpu < 0)
		return ncpu;
	zero = calloc(ncpu, sizeof(*zero));
	if (!zero)
		return -ENOMEM;
	if (bpf_map_update_elem(bpf_map__fd(skel->maps.job_rings), &key,
				&ring_fd, BPF_ANY) ||
	    bpf_map_update_elem(bpf_map__fd(skel->maps.job_settings), &key,
				&job, BPF_ANY) ||
	    bpf_map_update_elem(bpf_map__fd(skel->maps.job_counts), &key, zero,
				BPF_ANY))
		ret = -errno;
	free(zero);
	return ret ? ret : set_bit(tgid, true);
}

int off_cpu_hooks_add(pid_t tgid, int ring_fd, uint64_t wakeup_bytes,
		      char *err, size_t errlen)
{
	int ret;

	if (tgid <= 0 || (uint32_t)tgid >= TGID_LIMIT) {
		snprintf(err, errlen, "process id %d out of range", tgid);
		return -EINVAL;
	}
	if (known(tgid)) {
		snprintf(err, errlen, "the context switches of process %d "
			 "are traced already", tgid);
		return -EEXIST;
	}
	if (!skel && (ret = load(ring_fd, err, errlen)))
		return ret;
	if ((ret = enter(tgid, ring_fd, wakeup_bytes))) {
		snprintf(err, errlen, "cannot trace the context switches of "
			 "process %d: %s%s", tgid, strerror(-ret),
			 ret == -EINVAL ? " (its ring buffer differs in size "
			 "from the first one's)" : "");
		set_bit(tgid, false);
		forget(tgid);
		if (!nr_traced)
			unload();
		return ret;
	}
	nr_traced++;
	return 0;
}

int off_cpu_hooks_set_gil(pid_t tgid, uint64_t gil_addr)
{
	int fd = skel ? bpf_map__fd(skel->maps.job_settings) : -1;
	struct rf_off_cpu_job job;
	uint32_t key = tgid;

	if (fd < 0 || bpf_map_lookup_elem(fd, &key, &job))
		return -ENOENT;
	job.gil_addr = gil_addr;
	return bpf_map_update_elem(fd, &key, &job, BPF_EXIST) ? -errno : 0;
}

void off_cpu_hooks_read(pid_t tgid, struct rf_off_cpu_counts *sum)
{
	int ncpu = libbpf_num_possible_cpus();
	struct rf_off_cpu_counts *per_cpu;
	uint32_t key = tgid;

	if (!skel || ncpu <= 0 || !(per_cpu = calloc(ncpu, sizeof(*per_cpu))))
		return;
	if (!bpf_map_lookup_elem(bpf_map__fd(skel->maps.job_counts), &key,
				 per_cpu))
		for (int i = 0; i < ncpu; i++) {
			sum->switches += per_cpu[i].switches;
			sum->drops += per_cpu[i].drops;
		}
	free(per_cpu);
}

void off_cpu_hooks_remove(pid_t tgid, struct rf_off_cpu_counts *sum)
{
	if (!known(tgid))
		return;
	set_bit(tgid, false);
	off_cpu_hooks_read(tgid, sum);
	forget(tgid);
	if (--nr_traced == 0)
		unload();
}

int off_cpu_hooks_count(void)
{
	return nr_traced;
}
