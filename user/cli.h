/* SPDX-License-Identifier: BSD-2-Clause */
/* rfbpf's command line: every option, its default, and its checks. */
#ifndef RFBPF_CLI_H
#define RFBPF_CLI_H

#include <stdbool.h>
#include <sys/types.h>
#include "model/aggregate.h"

enum probe_path { PROBES_AUTO, PROBES_ENTRY, PROBES_CALLBACK };

#define CLI_MAX_PIDS 64

struct options {
	pid_t pid;		/* -p; 0 when launching a command */
	char **command;		/* after "--"; NULL when attaching */
	double duration_s;	/* -d; 0 = until Ctrl-C or target exit */
	const char *trace_path;	/* -o */
	const char *folded_path;/* --folded */
	const char *gpu_folded_path;	/* --gpu-folded */
	const char *off_cpu_folded_path;	/* --off-cpu-folded */
	const char *memory_folded_path;		/* --memory-folded */
	bool gpu;		/* off with --no-gpu */
	bool gpu_inject;	/* off with --no-gpu-inject: load the CUPTI
				 * agent into a CUDA job without it */
	const char *gpu_agent;	/* --gpu-agent FILE, the agent to load */
	bool raw_times;		/* --raw-times: no probe-cost compensation */
	const char *lib;	/* --lib */
	bool table;		/* off with --no-table */
	int top;		/* --top, rows of the table (0 = all) */
	bool top_set;		/* --top was given */
	enum sort_key sort;
	unsigned ringbuf_mb;	/* --ringbuf-mb */
	bool ringbuf_set;	/* given (else fleet mode takes less) */
	int verbose;		/* -v: 1, -vv: 2 (libbpf's debug log) */
	bool activate;		/* off with --no-activate */
	bool deactivate;	/* --deactivate: remove a leftover callback */
	double sample_prob;	/* --sample, RecordFunction's own sampler */
	double tree_prob;	/* --tree-sample, whole top-level trees */
	unsigned scopes;	/* --scopes, bit per at::RecordScope */
	enum probe_path probes;	/* --probes */
	bool quiet;		/* -q: no live status line */
	bool children;		/* --children: trace child processes too */
	bool python_stacks;	/* --python-stacks */
	unsigned python_depth;	/* --python-depth, frames kept (64) */
	unsigned group_stack_n;	/* --group-by stack[:N]: table rows per op
				 * and its N innermost Python frames */
	bool shapes;		/* --shapes: ops' input dims and dtypes */
	bool group_shapes;	/* --group-by shapes: rows per op and its
				 * input dims */
	bool off_cpu;		/* --off-cpu: threads off CPU, per op */
	bool memory;		/* --memory: allocations per op */
	uint64_t memory_sample_bytes;	/* --memory-sample (0: every block) */
	bool memory_sample_set;
	unsigned top_wakers;	/* --top-wakers N (0: none) */
	/* Training steps (model/steps.h). */
	unsigned long steps;	/* --steps N: N whole steps, then stop */
	long from_step;		/* --from-step K (-1: the first whole one) */
	const char *step_op;	/* --step-op NAME: the op that is a step */
	bool per_step;		/* --per-step: a table block per step */
	/* --flight-recorder SECONDS[,MB]: -o holds the last window only,
	 * written on SIGUSR1, after a --slow-step and at the end. */
	double flight_s, flight_mb;
	double slow_step_ms;	/* --slow-step MS (0: off) */
	/* Fleet mode (--continuous): a daemon for every PyTorch job. */
	bool continuous;	/* --continuous */
	bool all;		/* --all: every process mapping libtorch_cpu */
	const char *rank_summary;	/* --all's children: their summary
					 * (model/rank_summary.h) goes here */
	pid_t pids[CLI_MAX_PIDS];	/* -p, repeatable with --continuous */
	int nr_pids;
	double interval_s;	/* --interval, default 60 */
	double budget_pct;	/* --budget, default 1 (% of a job's CPU) */
	bool bursts;		/* the default of --continuous (--sampled
				 * turns it off): a control thread in each job
				 * switches a full trace on for short random
				 * bursts, and nothing is registered between */
	bool sampled;		/* --sampled: p < 1 and one full-trace window
				 * a span instead of bursts */
	const char *pprof_dir;	/* --pprof-dir */
	const char *trace_dir;	/* --trace-dir: --flight-recorder's files */
	unsigned pprof_keep;	/* --pprof-keep, default 10 */
	const char *prom_file;	/* --prom-file */
	const char *listen;	/* --listen ADDR:PORT */
	unsigned max_ops;	/* --max-ops, op series per job, default 2000 */
	const char *config;	/* --config FILE */
};

/* Whether the run tells training steps apart (model/steps.h). */
static inline bool options_want_steps(const struct options *opt)
{
	return opt->steps || opt->from_step >= 0 || opt->step_op ||
	       opt->per_step || opt->slow_step_ms;
}

/* Parses argv (and the --config file it names, whose keys are the long
 * options: the command line wins); on a bad value prints one line and
 * exits with status 2. */
void parse_options(int argc, char **argv, struct options *opt);
/* The same for SIGHUP: never exits; 0, or -1 with one line in err. */
int reparse_options(int argc, char **argv, struct options *opt, char *err,
		    size_t len);

#endif
