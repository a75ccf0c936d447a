// SPDX-License-Identifier: BSD-2-Clause
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "session/session.h"
#include "session/children.h"
#include "attach/target.h"

#define SCAN_EVERY_S 0.5

void session_children_start(struct session *s)
{
	int ret = probes_follow_children(&s->probes, true);

	if (ret)
		fprintf(stderr, "rfbpf: warning: cannot follow the target's "
			"forks (%s): --children traces only children found "
			"every %g s\n", strerror(-ret), SCAN_EVERY_S);
}

static struct child_proc *find_child(struct session *s, pid_t pid)
{
	for (int i = 0; i < s->nr_children; i++)
		if (s->children[i].pid == pid)
			return &s->children[i];
	return NULL;
}

/* The child processes of pid (of every one of its threads). */
static int list_children(pid_t pid, pid_t *out, int max)
{
	char path[320];
	struct dirent *d;
	int n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return 0;
	while ((d = readdir(dir)) && n < max) {
		long c;
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/children", pid,
			 d->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		while (n < max && fscanf(f, "%ld", &c) == 1)
			out[n++] = (pid_t)c;
		fclose(f);
	}
	closedir(dir);
	return n;
}

/* Every descendant of the target, found through /proc (rfbpf's view). */
static int list_descendants(struct session *s, pid_t *out, int max)
{
	int n = list_children(s->pid, out, max);

	for (int i = 0; i < n && n < max; i++)
		n += list_children(out[i], out + n, max - n);
	return n;
}

static void drop(struct session *s, int i);

/* A vfork child runs in its parent's address space until it execs or
 * exits: it has no callback registry, page or stubs of its own, and what
 * rfbpf would write or call "in it" would land in its parent (a second
 * removal of the parent's callback made PyTorch log "Requested callback
 * is not found" into the job's stderr). It is left alone; once it execs,
 * the next scan finds it as a process of its own. */
static bool in_parents_memory(pid_t pid)
{
	char ppid[32];

	return target_status(pid, 0, "PPid", ppid, sizeof(ppid)) &&
	       target_shares_memory(pid, atoi(ppid));
}

/* Children that exited keep their uprobes until the table is full:
 * detaching a uprobe waits for the kernel (tens of ms), time in which a
 * short-lived worker would be forked and gone unseen. */
static void drop_exited(struct session *s)
{
	for (int i = 0; i < s->nr_children; i++)
		if (!target_alive(s->children[i].pid))
			drop(s, i--);
}

static void adopt(struct session *s, pid_t pid)
{
	struct child_proc *c;
	int n;

	if (in_parents_memory(pid))
		return;
	if (s->nr_children == SESSION_MAX_CHILDREN)
		drop_exited(s);
	if (s->nr_children == SESSION_MAX_CHILDREN) {
		s->trace.counts.children_unprobed++;
		return;
	}
	c = &s->children[s->nr_children];
	memset(c, 0, sizeof(*c));
	c->pid = pid;
	s->nr_children++;
	if (probes_trace_child(&s->probes, pid, true)) {
		s->trace.counts.children_unprobed++;
		return;
	}
	off_cpu_procs_child(&s->off_cpu, pid, true);
	/* Its stubs are probed already, for every process, and BPF marked
	 * it traced as it was forked: its first op was recorded. */
	if (s->child_stubs_probed)
		n = 0;
	else if (s->use_stubs)
		n = probes_attach_child(&s->probes, pid, s->act.page.path, NULL,
					STUB_START_CHILD_PROBE,
					STUB_END_CHILD_PROBE, c->links,
					RF_V_NR);
	else if (s->child_lib[0])
		n = probes_attach_child(&s->probes, pid, s->child_lib,
					&s->child_syms, 0, 0, c->links,
					RF_V_NR);
	else
		n = -ENOENT;
	if (n < 0) {		/* mostly: it has exited already */
		s->trace.counts.children_unprobed++;
		return;
	}
	c->nr_links = n;
	if (s->use_stubs && !s->child_stubs_probed &&
	    stub_page_set_child_on(pid, &s->act.page, true)) {
		s->trace.counts.children_unprobed++;	/* it has exited */
		return;
	}
	/* Probed only now, milliseconds after its fork: what it ran before
	 * was seen by nothing, so not even counted. Say so, in numbers. */
	if (!s->child_stubs_probed)
		s->trace.counts.children_probed_late++;
	if (s->opt->verbose)
		fprintf(stderr, "rfbpf: tracing child process %d\n", pid);
}

static void drop(struct session *s, int i)
{
	struct child_proc *c = &s->children[i];

	for (int j = 0; j < c->nr_links; j++)
		bpf_link__destroy(c->links[j]);
	probes_trace_child(&s->probes, c->pid, false);
	off_cpu_procs_child(&s->off_cpu, c->pid, false);
	s->children[i] = s->children[--s->nr_children];
}

void session_children_forked(struct session *s, pid_t child)
{
	if (!s->opt->children || !s->trace.activated)
		return;
	if (!child)
		s->fork_seen = true;
	else if (!find_child(s, child))
		adopt(s, child);
}

void session_children_poll(struct session *s, double now)
{
	static pid_t pids[SESSION_MAX_CHILDREN * 2];
	int n;

	if (!s->opt->children || !s->trace.activated ||
	    (!s->fork_seen && now - s->children_scanned_s < SCAN_EVERY_S))
		return;
	s->fork_seen = false;
	s->children_scanned_s = now;
	n = list_descendants(s, pids, SESSION_MAX_CHILDREN * 2);
	for (int i = 0; i < n; i++)
		if (!find_child(s, pids[i]) && target_alive(pids[i]))
			adopt(s, pids[i]);
}

/* Was pid forked after the callback was registered (so it has it)? */
static bool has_callback(struct session *s, pid_t pid)
{
	return target_start_time(pid) >= s->activated_ticks;
}

static void remove_from_child(struct session *s, pid_t pid, uint64_t handle)
{
	static struct activation a;
	char err[512];

	if (!has_callback(s, pid) || in_parents_memory(pid) ||
	    stub_page_mark_in_child(pid, &s->act.page))
		return;
	a = s->act;
	a.pid = pid;
	/* A child's threads enter another probe of the stub (its push). */
	a.callback_probe = NULL;
	a.lock_fd = -1;
	a.holding = false;
	a.handle = handle;
	/* BPF's safe-point probe must see the child's threads. */
	probes_trace_child(&s->probes, pid, true);
	if (activation_stop(&a, err, sizeof(err)) && target_alive(pid)) {
		fprintf(stderr, "rfbpf: warning: the RecordFunction callback "
			"is still registered in child process %d of %d (%s); "
			"it pays for RecordFunction until it exits\n", pid,
			s->pid, err);
		s->detach_failed = true;
	}
}

void session_children_detach(struct session *s, uint64_t handle)
{
	static pid_t pids[SESSION_MAX_CHILDREN * 2];
	int n;

	if (s->child_stubs_probed)
		probes_stop_counting_child_misses(&s->probes);
	while (s->nr_children)
		drop(s, 0);
	if (!handle || !s->act.page.addr)
		return;
	n = list_descendants(s, pids, SESSION_MAX_CHILDREN * 2);
	if (n)
		probes_follow_children(&s->probes, false);
	for (int i = 0; i < n; i++)
		remove_from_child(s, pids[i], handle);
}
