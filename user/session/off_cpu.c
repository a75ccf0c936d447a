// SPDX-License-Identifier: BSD-2-Clause
/*
 * --off-cpu for one session (session/off_cpu.h).
 */
#include "session/off_cpu.h"

#include <stdio.h>
#include <string.h>
#include "attach/off_cpu_hooks.h"

int off_cpu_procs_start(struct off_cpu_procs *o, pid_t target, int ring_fd,
			uint64_t wakeup_bytes, char *err, size_t errlen)
{
	int ret;

	memset(o, 0, sizeof(*o));
	o->ring_fd = ring_fd;
	o->wakeup_bytes = wakeup_bytes;
	if ((ret = off_cpu_hooks_add(target, ring_fd, wakeup_bytes, err,
				     errlen)))
		return ret;
	o->pids[o->nr++] = target;
	return 0;
}

static int find(const struct off_cpu_procs *o, pid_t pid)
{
	for (int i = 1; i < o->nr; i++)
		if (o->pids[i] == pid)
			return i;
	return -1;
}

void off_cpu_procs_child(struct off_cpu_procs *o, pid_t child, bool on)
{
	int i = find(o, child);
	char why[256];

	if (!o->nr || (i >= 0) == on)
		return;		/* off, or already so */
	if (!on) {
		off_cpu_hooks_remove(child, &o->gone);
		o->pids[i] = o->pids[--o->nr];
		return;
	}
	if (o->nr < OFF_CPU_MAX_PROCS &&
	    !off_cpu_hooks_add(child, o->ring_fd, o->wakeup_bytes, why,
			       sizeof(why))) {
		o->pids[o->nr++] = child;
		return;
	}
	if (o->nr == OFF_CPU_MAX_PROCS)
		snprintf(why, sizeof(why), "%d processes traced already", o->nr);
	if (!o->said_missed)
		fprintf(stderr, "rfbpf: warning: --off-cpu: child process %d "
			"is traced without its context switches (%s)\n", child,
			why);
	o->said_missed = true;
}

void off_cpu_procs_set_gil(struct off_cpu_procs *o, uint64_t addr)
{
	if (o->nr)
		off_cpu_hooks_set_gil(o->pids[0], addr);
}

void off_cpu_procs_read(const struct off_cpu_procs *o,
			struct rf_off_cpu_counts *sum)
{
	sum->switches += o->gone.switches;
	sum->drops += o->gone.drops;
	for (int i = 0; i < o->nr; i++)
		off_cpu_hooks_read(o->pids[i], sum);
}

void off_cpu_procs_stop(struct off_cpu_procs *o)
{
	while (o->nr > 0)
		off_cpu_hooks_remove(o->pids[--o->nr], &o->gone);
}
