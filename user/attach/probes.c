// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "probes.h"
#include "exit_hooks.h"
#include "rfbpf_gpu.h"
#include "rfbpf.skel.h"

/* The geometric distribution's inverse CDF at 65536 evenly spaced
 * quantiles: BPF indexes it with 16 random bits to draw a skip count. */
static int fill_geo_table(struct probes *p, double prob)
{
	int fd = bpf_map__fd(p->skel->maps.geo_skip);

	for (__u32 i = 0; i < RF_GEO_TABLE_SIZE; i++) {
		double u = (i + 0.5) / RF_GEO_TABLE_SIZE;
		__u32 skip = prob >= 1.0 ? 0 : (__u32)floor(log(u) /
							  log1p(-prob));

		if (bpf_map_update_elem(fd, &i, &skip, BPF_ANY))
			return -errno;
	}
	return 0;
}

bool probes_kernel_optimizes_nop(void)
{
	char line[256];
	bool found = false;
	FILE *f = fopen("/proc/kallsyms", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, " arch_uprobe_optimize\n") != NULL;
	fclose(f);
	return found;
}

/* Inside a PID namespace other than the initial one (a container), BPF
 * translates ids into rfbpf's namespace: the pid it was given is one. */
static void set_pid_namespace(struct probes *p)
{
	const unsigned long long init_pid_ns_ino = 0xEFFFFFFCull;
	struct stat st;

	if (stat("/proc/self/ns/pid", &st) || st.st_ino == init_pid_ns_ino)
		return;
	p->skel->rodata->pidns_dev = st.st_dev;
	p->skel->rodata->pidns_ino = st.st_ino;
}

/* Thread exits are traced by the rfbpf process's one program
 * (exit_hooks.h): this object gets a slot there and shares its routes and
 * bitmap. */
static int share_exit_routes(struct probes *p, char *err, size_t errlen)
{
	int ret, routes, bits;
	uint32_t job;

	ret = exit_hooks_new_job(p->skel->rodata->pidns_dev,
				 p->skel->rodata->pidns_ino, &job, &routes,
				 &bits, err, errlen);
	if (ret)
		return ret;
	p->exit_slot = job + 1;
	p->skel->rodata->exit_job = job;
	ret = bpf_map__reuse_fd(p->skel->maps.exit_routes, routes);
	if (!ret)
		ret = bpf_map__reuse_fd(p->skel->maps.exit_bits, bits);
	if (ret)
		snprintf(err, errlen, "cannot share the thread-exit routes: "
			 "%s", strerror(-ret));
	return ret;
}

int probes_load(struct probes *p, pid_t pid, unsigned ringbuf_mb,
		bool old_string_abi, double tree_prob, char *err,
		size_t errlen)
{
	int ret;

	memset(p, 0, sizeof(*p));
	p->skel = rfbpf_bpf__open();
	if (!p->skel) {
		ret = -errno;
		snprintf(err, errlen, "cannot open the BPF object: %s",
			 strerror(-ret));
		return ret;
	}
	p->skel->rodata->targ_tgid = pid;
	set_pid_namespace(p);
	ret = share_exit_routes(p, err, errlen);
	if (ret)
		return ret;
	p->skel->rodata->old_string_abi = old_string_abi;
	p->skel->rodata->tree_sample = tree_prob < 1.0;
	p->skel->rodata->wakeup_bytes = ((__u64)ringbuf_mb << 20) / 8;
	bpf_map__set_max_entries(p->skel->maps.events,
				 (__u32)ringbuf_mb << 20);
	ret = rfbpf_bpf__load(p->skel);
	if (ret) {
		snprintf(err, errlen, "cannot load the BPF programs: %s%s",
			 strerror(-ret), ret == -EPERM ?
			 " (needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN)" :
			 "");
		return ret;
	}
	if (tree_prob < 1.0 && (ret = fill_geo_table(p, tree_prob))) {
		snprintf(err, errlen, "cannot fill the tree-sampling table: %s",
			 strerror(-ret));
		return ret;
	}
	return exit_hooks_start(p->exit_slot - 1, pid,
				bpf_map__fd(p->skel->maps.events),
				p->skel->rodata->wakeup_bytes, err, errlen);
}

static struct bpf_program *program_of(struct rfbpf_bpf *skel, unsigned v)
{
	switch (v) {
	case RF_V_CSTR: return skel->progs.before_cstr;
	case RF_V_STRING: return skel->progs.before_string;
	case RF_V_STRING_OLD: return skel->progs.before_string_old;
	case RF_V_SCHEMA: return skel->progs.before_schema;
	case RF_V_DESCRIPTOR: return skel->progs.before_descriptor;
	case RF_V_DESCRIPTOR_DK: return skel->progs.before_descriptor_dk;
	case RF_V_END: return skel->progs.end;
	default: return NULL;
	}
}

/* One uprobe of prog at path+off for pid, with a cookie, kept in
 * p->links. */
static int attach_cookie(struct probes *p, struct bpf_program *prog,
			 pid_t pid, const char *path, uint64_t off,
			 uint64_t cookie, const char *what, bool verbose)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie);
	struct bpf_link *l;

	if (p->nr_links == (int)(sizeof(p->links) / sizeof(p->links[0])))
		return -E2BIG;
	l = bpf_program__attach_uprobe_opts(prog, pid, path, off, &opts);
	if (!l)
		return -errno;
	p->link_progs[p->nr_links] = prog;
	p->links[p->nr_links++] = l;
	if (verbose)
		fprintf(stderr, "rfbpf: uprobe %s at %s+0x%llx\n", what, path,
			(unsigned long long)off);
	return 0;
}

static int attach_one(struct probes *p, struct bpf_program *prog, pid_t pid,
		      const char *path, uint64_t off, const char *what,
		      bool verbose)
{
	return attach_cookie(p, prog, pid, path, off, 0, what, verbose);
}

int probes_attach_callbacks(struct probes *p, pid_t pid, const char *path,
			    uint64_t start_off, uint64_t end_off, bool verbose)
{
	/* The end first (see probes_attach_lib). */
	int ret = attach_one(p, p->skel->progs.callback_end, pid, path,
			     end_off, "end callback", verbose);

	return ret ? ret : attach_one(p, p->skel->progs.callback_start, pid,
				      path, start_off, "start callback",
				      verbose);
}

int probes_attach_child_callbacks(struct probes *p, const char *path,
				  uint64_t start_off, uint64_t end_off,
				  bool verbose)
{
	/* pid -1: every process mapping the page, forked children included
	 * from their first instruction; BPF keeps the target's own out. */
	int ret = attach_one(p, p->skel->progs.child_callback_end, -1, path,
			     end_off, "children's end callback", verbose);

	if (!ret)
		ret = attach_one(p, p->skel->progs.child_callback_start, -1,
				 path, start_off, "children's start callback",
				 verbose);
	if (!ret)
		p->skel->bss->count_child_misses = true;
	return ret;
}

void probes_stop_counting_child_misses(struct probes *p)
{
	p->skel->bss->count_child_misses = false;
}

int probes_attach_gpu(struct probes *p, pid_t pid, const char *path,
		      const struct gpu_probe_offsets *off, bool verbose)
{
	int ret = attach_one(p, p->skel->progs.gpu_launch, pid, path,
			     off->launch, "GPU launch", verbose);

	if (!ret)
		ret = attach_one(p, p->skel->progs.gpu_activity, pid, path,
				 off->activity, "GPU activity", verbose);
	/* Syncs come as launches with RF_GPU_LAUNCH_F_SYNC, their records
	 * as activity of kind RF_GPU_ACT_SYNC: the same two programs. */
	if (!ret && off->sync)
		ret = attach_one(p, p->skel->progs.gpu_launch, pid, path,
				 off->sync, "GPU sync", verbose);
	if (!ret && off->sync_record)
		ret = attach_one(p, p->skel->progs.gpu_activity, pid, path,
				 off->sync_record, "GPU sync record", verbose);
	if (!ret && off->device)
		ret = attach_one(p, p->skel->progs.gpu_device, pid, path,
				 off->device, "GPU device", verbose);
	if (ret)
		return ret;
	/* Tag from now on. Ops opened before have no entry on BPF's
	 * stacks: a launch directly inside one arrives untagged, and the
	 * loader falls back to its own stack of that thread. */
	p->skel->bss->gpu_tagging = true;
	return 0;
}

int probes_attach_nvtx(struct probes *p, pid_t pid, const char *path,
		       uint64_t push_off, uint64_t pop_off, bool verbose)
{
	int ret = attach_one(p, p->skel->progs.nvtx_push, pid, path, push_off,
			     "NVTX push", verbose);

	return ret ? ret : attach_one(p, p->skel->progs.nvtx_pop, pid, path,
				      pop_off, "NVTX pop", verbose);
}

int probes_set_memory_sampling(struct probes *p, uint64_t mean)
{
	int fd = bpf_map__fd(p->skel->maps.mem_exp);
	static uint32_t table[RF_MEM_EXP_TABLE_SIZE];

	memory_exp_table(table, RF_MEM_EXP_TABLE_SIZE);
	for (__u32 i = 0; mean && i < RF_MEM_EXP_TABLE_SIZE; i++)
		if (bpf_map_update_elem(fd, &i, &table[i], BPF_ANY))
			return -errno;
	p->skel->bss->mem_sample_bytes = mean;
	return 0;
}

int probes_attach_memory(struct probes *p, pid_t pid, const char *path,
			 const uint64_t off[PROBES_MEM_NR], bool verbose)
{
	struct bpf_program *progs[PROBES_MEM_NR] = {
		p->skel->progs.mem_cpu_alloc, p->skel->progs.mem_cpu_free,
		p->skel->progs.mem_device_report,
	};
	static const char *const what[PROBES_MEM_NR] = {
		"CPU allocations", "CPU frees", "device allocator reports",
	};
	int n = 0;

	/* Frees before allocations: a block made after its free's probe
	 * is on can always be paired. */
	for (int i = PROBES_MEM_NR - 1; i >= 0; i--) {
		int ret;

		if (!off[i])
			continue;
		ret = attach_one(p, progs[i], pid, path, off[i], what[i],
				 verbose);
		if (ret)
			return ret;
		n++;
	}
	return n;
}

void probes_set_cupti_yield(struct probes *p, uint32_t sig, uint64_t handler)
{
	p->skel->bss->cupti_yield_handler = handler;
	p->skel->bss->cupti_yield_signal = sig;
}

int probes_attach_cupti_watch(struct probes *p, pid_t pid, const char *path,
			      const uint64_t *offs, int n, bool verbose)
{
	static const char *const names[] = RF_CUPTI_WATCHED;
	int attached = 0;

	for (int i = 0; i < n && i < RF_CUPTI_WATCHED_NR; i++) {
		int ret;

		if (!offs[i])
			continue;
		ret = attach_cookie(p, p->skel->progs.cupti_call, pid, path,
				    offs[i], (uint64_t)i, names[i], verbose);
		if (ret)
			return ret;
		attached++;
	}
	return attached;
}

/* Who may be stopped, and with which signal: one token to win. */
static int fill_stop_maps(struct probes *p, int sig, const pid_t *tids,
			  int nr)
{
	int set = bpf_map__fd(p->skel->maps.stoppable);
	int token = bpf_map__fd(p->skel->maps.stop_token);
	__u32 key, next, zero = 0;
	__u8 one = 1;

	while (!bpf_map_get_next_key(set, NULL, &next))
		bpf_map_delete_elem(set, &next);
	for (int i = 0; i < nr; i++) {
		key = tids[i];
		if (bpf_map_update_elem(set, &key, &one, BPF_ANY))
			return -errno;
	}
	p->skel->bss->stop_signal = sig;
	return bpf_map_update_elem(token, &zero, &zero, BPF_ANY) ? -errno : 0;
}

int probes_arm_safe_point(struct probes *p, pid_t pid, const char *lib,
			  uint64_t off, int sig, const pid_t *tids, int nr)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts);
	int ret;

	probes_disarm_safe_point(p);
	if ((ret = fill_stop_maps(p, sig, tids, nr)))
		return ret;
	p->safe_point = bpf_program__attach_uprobe_opts(
		p->skel->progs.safe_point, pid, lib, off, &opts);
	return p->safe_point ? 0 : -errno;
}

int probes_arm_callback_stop(struct probes *p, int sig, const pid_t *tids,
			     int nr)
{
	int ret;

	probes_disarm_safe_point(p);
	if ((ret = fill_stop_maps(p, sig, tids, nr)))
		return ret;
	p->skel->bss->stop_in_callback = true;
	return 0;
}

int probes_allow_stop(struct probes *p, pid_t tid)
{
	__u32 key = tid;
	__u8 one = 1;

	return bpf_map_update_elem(bpf_map__fd(p->skel->maps.stoppable), &key,
				   &one, BPF_ANY) ? -errno : 0;
}

void probes_stop_every_thread(struct probes *p)
{
	p->skel->bss->stop_every_thread = true;
}

void probes_disarm_safe_point(struct probes *p)
{
	__u32 zero = 0;

	if (!p->skel)
		return;
	p->skel->bss->stop_every_thread = false;
	p->skel->bss->stop_in_callback = false;
	bpf_map_delete_elem(bpf_map__fd(p->skel->maps.stop_token), &zero);
	/* Removing a uprobe waits for the kernel, tens of ms: not while a
	 * thread of the job is held. Without the token the program sends
	 * nothing; probes_reap_safe_point removes it once the thread runs. */
	if (p->safe_point) {
		bpf_link__destroy(p->safe_point_stale);
		p->safe_point_stale = p->safe_point;
		p->safe_point = NULL;
	}
}

static void *destroy_link(void *link)
{
	bpf_link__destroy(link);
	return NULL;
}

/* The kernel takes tens of ms to remove a uprobe, and rfbpf must not
 * stall meanwhile (a full-trace window would last that long): a thread of
 * its own waits for it. The link no longer depends on the BPF object. */
void probes_reap_safe_point(struct probes *p)
{
	pthread_attr_t attr;
	pthread_t t;

	if (!p->safe_point_stale)
		return;
	if (pthread_attr_init(&attr) ||
	    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) ||
	    pthread_create(&t, &attr, destroy_link, p->safe_point_stale))
		bpf_link__destroy(p->safe_point_stale);
	pthread_attr_destroy(&attr);
	p->safe_point_stale = NULL;
}

int probes_follow_children(struct probes *p, bool wake_on_fork)
{
	struct bpf_link *l;

	p->skel->bss->follow_children = true;
	if (!wake_on_fork)
		return 0;
	if (p->nr_links == (int)(sizeof(p->links) / sizeof(p->links[0])))
		return -E2BIG;
	l = bpf_program__attach(p->skel->progs.process_fork);
	if (!l)
		return -errno;
	p->links[p->nr_links++] = l;
	return 0;
}

int probes_ring_fd(const struct probes *p)
{
	return bpf_map__fd(p->skel->maps.events);
}

uint64_t probes_wakeup_bytes(const struct probes *p)
{
	return p->skel->rodata->wakeup_bytes;
}

bool probes_pid_namespaced(const struct probes *p)
{
	return p->skel->rodata->pidns_ino != 0;
}

int probes_trace_child(struct probes *p, pid_t child, bool on)
{
	int fd = bpf_map__fd(p->skel->maps.traced_children);
	__u32 key = child;
	__u8 one = 1;

	if (on && bpf_map_update_elem(fd, &key, &one, BPF_ANY))
		return -errno;
	if (!on)
		bpf_map_delete_elem(fd, &key);
	return exit_hooks_route(p->exit_slot - 1, child, on);
}

int probes_attach_child(struct probes *p, pid_t child, const char *path,
			const struct torch_symbols *syms, uint64_t start_off,
			uint64_t end_off, struct bpf_link **links, int max)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts);
	struct bpf_program *prog[RF_V_NR];
	uint64_t off[RF_V_NR];
	int n = 0;

	if (!syms) {
		prog[n] = p->skel->progs.callback_start;
		off[n++] = start_off;
		prog[n] = p->skel->progs.callback_end;
		off[n++] = end_off;
	} else {
		for (unsigned v = 0; v < RF_V_NR; v++)
			if (syms->offset[v] && program_of(p->skel, v)) {
				prog[n] = program_of(p->skel, v);
				off[n++] = syms->offset[v];
			}
	}
	for (int i = 0; i < n; i++) {
		if (i == max)
			return -E2BIG;
		links[i] = bpf_program__attach_uprobe_opts(prog[i], child, path,
							   off[i], &opts);
		if (!links[i]) {
			int e = -errno;

			while (i--)
				bpf_link__destroy(links[i]);
			return e;
		}
	}
	return n;
}

bool probes_has_lib(const struct probes *p, const char *path)
{
	struct stat st;

	if (stat(path, &st))
		return false;
	for (int i = 0; i < p->nr_libs; i++)
		if (p->libs[i].dev == st.st_dev && p->libs[i].ino == st.st_ino)
			return true;
	return false;
}

bool probes_set_build(struct probes *p, const char *path,
		      const struct torch_symbols *s)
{
	/* A variable, not a load-time constant: a launched command's
	 * library is known only after the load. */
	p->skel->bss->fwd_tid_offset = torch_fwd_tid_offset(path, s);
	return p->skel->bss->fwd_tid_offset != 0;
}

int probes_attach_lib(struct probes *p, pid_t pid, const char *path,
		      const struct torch_symbols *s, bool verbose)
{
	struct stat st;
	int attached = 0;

	/* uprobes live on the inode: probing one file through two paths
	 * (libtorch_cpu.so -> .so.1.13) would count every op twice. */
	if (probes_has_lib(p, path))
		return 0;
	if (stat(path, &st))
		return -errno;
	if (p->nr_libs == PROBES_MAX_LIBS)
		return -E2BIG;
	/* end() first, as detach takes it last: an op that begins once its
	 * before() probe is in must find the end probe there already, or
	 * its end is missed and its parent closes it ("closed by parent").
	 * Ends of ops begun before the attach are only counted, unmatched. */
	for (unsigned k = 0; k < RF_V_NR; k++) {
		unsigned v = (k + RF_V_END) % RF_V_NR;
		int ret;

		if (!s->offset[v])
			continue;
		ret = attach_one(p, program_of(p->skel, v), pid, path,
				 s->offset[v], variant_name(v), verbose);
		if (ret)
			return ret;
		attached++;
	}
	p->libs[p->nr_libs].dev = st.st_dev;
	p->libs[p->nr_libs].ino = st.st_ino;
	p->nr_libs++;
	return attached;
}

int probes_events_fd(const struct probes *p)
{
	return bpf_map__fd(p->skel->maps.events);
}

bool probes_exited_comm(const struct probes *p, uint32_t tid, char *buf,
			size_t len)
{
	return p->exit_slot && exit_hooks_comm(tid, buf, len);
}

void probes_set_inputs(struct probes *p, const struct rf_inputs_config *cfg)
{
	memcpy((void *)&p->skel->bss->in_cfg, cfg, sizeof(*cfg));
}

void probes_set_python(struct probes *p, const struct rf_py_config *cfg)
{
	/* The walk reads a frame's fields from one window of it. */
	if (cfg->frame_code > RF_PY_FRAME_WINDOW - 8 ||
	    cfg->frame_previous > RF_PY_FRAME_WINDOW - 8 ||
	    cfg->frame_prev_instr > RF_PY_FRAME_WINDOW - 8)
		return;
	memcpy((void *)&p->skel->bss->py_cfg, cfg, sizeof(*cfg));
}

void probes_read_counters(const struct probes *p, struct counts *c)
{
	int ncpu = libbpf_num_possible_cpus();
	int fd = bpf_map__fd(p->skel->maps.counters);
	__u64 *vals;

	if (ncpu <= 0 || !(vals = calloc(ncpu, sizeof(*vals))))
		return;
	for (__u32 slot = 0; slot < RF_CNT_NR; slot++) {
		__u64 sum = 0;

		if (bpf_map_lookup_elem(fd, &slot, vals))
			continue;
		for (int cpu = 0; cpu < ncpu; cpu++)
			sum += vals[cpu];
		if (slot < RF_V_NR)
			c->bpf_hits[slot] = sum;
		else if (slot == RF_CNT_DROPS)
			c->drops = sum + (p->exit_slot ?
				exit_hooks_drops(p->exit_slot - 1) : 0);
		else if (slot == RF_CNT_TREES_SEEN)
			c->trees_seen = sum;
		else if (slot == RF_CNT_TREES_KEPT)
			c->trees_kept = sum;
		else if (slot == RF_CNT_TREE_TOO_DEEP)
			c->tree_too_deep = sum;
		else if (slot == RF_CNT_GPU_LAUNCHES)
			c->gpu_launch_hits = sum;
		else if (slot == RF_CNT_GPU_RECORDS)
			c->gpu_record_hits = sum;
		else if (slot == RF_CNT_GPU_BAD_RECORD)
			c->gpu_bad_records = sum;
		else if (slot == RF_CNT_PY_NO_THREAD)
			c->py_no_thread = sum;
		else if (slot == RF_CNT_PY_FAULTS)
			c->py_faults = sum;
		else if (slot == RF_CNT_PY_TRUNCATED)
			c->py_truncated = sum;
		else if (slot == RF_CNT_INPUTS_CUT)
			c->inputs_cut = sum;
		else if (slot == RF_CNT_INPUTS_FAULTS)
			c->inputs_faults = sum;
		else if (slot == RF_CNT_SWITCHES)
			c->off_cpu_switches = sum;
		else if (slot == RF_CNT_CHILD_OPS_MISSED)
			c->child_ops_missed = sum;
		else if (slot == RF_CNT_NVTX_POPS_UNMATCHED)
			c->nvtx_pops_unmatched = sum;
		else if (slot == RF_CNT_MEM_ALLOCS)
			c->mem_alloc_hits = sum;
		else if (slot == RF_CNT_MEM_FREES)
			c->mem_free_hits = sum;
		else if (slot == RF_CNT_MEM_SAMPLED_FULL)
			c->mem_sampled_full = sum;
	}
	free(vals);
}

/* The programs kept while the loader drains: those that close ops (end()
 * and the end callbacks). Thread exits stay routed to this object's ring
 * until it is destroyed: a thread first read in the drain (wakeups are
 * batched: its records may wait there) and gone by then is named by the
 * comm its exit left (exited_comms). */
static bool ends_ops(const struct probes *p, const struct bpf_program *prog)
{
	return prog && (prog == p->skel->progs.end ||
			prog == p->skel->progs.callback_end ||
			prog == p->skel->progs.child_callback_end);
}

void probes_detach_starts(struct probes *p)
{
	int kept = 0;

	for (int i = 0; i < p->nr_links; i++) {
		if (ends_ops(p, p->link_progs[i])) {
			p->link_progs[kept] = p->link_progs[i];
			p->links[kept++] = p->links[i];
		} else {
			bpf_link__destroy(p->links[i]);
		}
	}
	p->nr_links = kept;
}

void probes_detach_all(struct probes *p)
{
	for (int i = p->nr_links - 1; i >= 0; i--)
		bpf_link__destroy(p->links[i]);
	p->nr_links = 0;
}

void probes_destroy(struct probes *p)
{
	probes_disarm_safe_point(p);
	probes_reap_safe_point(p);
	for (int i = p->nr_links - 1; i >= 0; i--)
		bpf_link__destroy(p->links[i]);
	p->nr_links = 0;
	rfbpf_bpf__destroy(p->skel);
	p->skel = NULL;
	if (p->exit_slot)
		exit_hooks_remove(p->exit_slot - 1);
	p->exit_slot = 0;
}
