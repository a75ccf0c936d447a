/* SPDX-License-Identifier: BSD-2-Clause */
/* rfbpf's command line: every option, its default, and its checks. */
#ifndef RFBPF_CLI_H
#define RFBPF_CLI_H

#include <stdbool.h>
#include <sys/types.h>
#include "model/aggregate.h"

enum probe_path { PROBES_AUTO, PROBES_ENTRY, PROBES_CALLBACK };

struct options {
	pid_t pid;		/* -p; 0 when launching a command */
	char **command;		/* after "--"; NULL when attaching */
	double duration_s;	/* -d; 0 = until Ctrl-C or target exit */
	const char *trace_path;	/* -o */
	const char *folded_path;/* --folded */
	const char *gpu_folded_path;	/* --gpu-folded */
	bool gpu;		/* off with --no-gpu */
	const char *lib;	/* --lib */
	bool table;		/* off with --no-table */
	int top;		/* --top, rows of the table (0 = all) */
	enum sort_key sort;
	unsigned ringbuf_mb;	/* --ringbuf-mb */
	bool verbose;		/* -v */
	bool activate;		/* off with --no-activate */
	bool deactivate;	/* --deactivate: remove a leftover callback */
	double sample_prob;	/* --sample, RecordFunction's own sampler */
	double tree_prob;	/* --tree-sample, whole top-level trees */
	unsigned scopes;	/* --scopes, bit per at::RecordScope */
	enum probe_path probes;	/* --probes */
	bool quiet;		/* -q: no live status line */
	bool children;		/* --children: trace child processes too */
};

/* Parses argv; on a bad value prints one line and exits with status 2. */
void parse_options(int argc, char **argv, struct options *opt);

#endif
