// SPDX-License-Identifier: BSD-2-Clause
/*
 * Bench-only: splits the cost of rfbpf's full trace on callback probes
 * into its layers, by building them up one at a time in a running
 * PyTorch process:
 *
 *   (default)        rfbpf's callback registered with rfbpf's own code
 *                    (user/attach/activation.c), start/end on rfbpf's page's
 *                    stubs (user/attach/stub_page.h), and no uprobe: what
 *                    PyTorch's RecordFunction machinery costs per op;
 *   --empty-probes   the same plus uprobes on both stubs running an empty
 *                    BPF program: adds the uprobe (optimized path) itself.
 *
 * rfbpf's full trace adds its BPF programs, the ring buffer and the
 * loader on top. This is not an rfbpf option because tracing nothing is
 * useless to a user; it exists to explain where the time goes.
 *
 *   build/bench/callback_only PID [--empty-probes]
 *       prints "active" once everything is in place, then waits for a
 *       line (or EOF) on stdin and removes it all
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "attach/activation.h"
#include "empty.skel.h"
#include "attach/target.h"

#define ALL_SCOPES ((1u << RF_NUM_SCOPES) - 1)

static int attach_empty(struct empty_bpf **skel, struct bpf_link *links[2],
			pid_t pid, const char *path)
{
	const size_t offs[2] = { STUB_START_PROBE, STUB_END_PROBE };

	*skel = empty_bpf__open_and_load();
	if (!*skel)
		return -1;
	for (int i = 0; i < 2; i++) {
		links[i] = bpf_program__attach_uprobe((*skel)->progs.empty,
						      false, pid, path,
						      offs[i]);
		if (!links[i])
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct activation act = { .lock_fd = -1 };
	struct bpf_link *links[2] = { NULL, NULL };
	struct empty_bpf *skel = NULL;
	char lib[PATH_MAX], err[512], line[16];
	pid_t pid;
	int ret = 1;

	if (argc < 2 || (argc > 2 && strcmp(argv[2], "--empty-probes")))
		return fprintf(stderr, "usage: %s PID [--empty-probes]\n",
			       argv[0]), 2;
	pid = atoi(argv[1]);
	/* No safe-point probe here (no rfbpf BPF object): the bench target
	 * waits on stdin, a safe point of the other kind. */
	if (target_find_libtorch(pid, lib, sizeof(lib)) ||
	    activation_lock(&act, pid, err, sizeof(err)) ||
	    activation_prepare(&act, lib, err, sizeof(err)))
		goto out;
	act.find.find_ms = 3000;
	if (activation_begin(&act, err, sizeof(err)))
		goto out;
	if (argc > 2 && attach_empty(&skel, links, pid, act.page.path)) {
		snprintf(err, sizeof(err), "cannot attach the empty program");
		activation_finish(&act);
		goto out;
	}
	stub_page_set_on(pid, &act.page, true);
	ret = activation_register(&act, 1.0, ALL_SCOPES,
				  act.page.addr + STUB_START_OFFSET,
				  act.page.addr + STUB_END_OFFSET, err,
				  sizeof(err)) ? 1 : 0;
	activation_finish(&act);
	if (ret)
		goto out;
	ret = 1;
	printf("active\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		line[0] = 0;
	act.find.find_ms = 10000;
	ret = activation_stop(&act, err, sizeof(err)) ? 1 : 0;
	stub_page_set_on(pid, &act.page, false);
out:
	if (ret)
		fprintf(stderr, "callback_only: %s\n", err);
	for (int i = 0; i < 2; i++)
		bpf_link__destroy(links[i]);
	empty_bpf__destroy(skel);
	activation_unlock(&act);
	return ret;
}
