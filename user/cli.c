// SPDX-License-Identifier: BSD-2-Clause
#include <argp.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli.h"
#include "export/perfetto.h"
#include "cli/help.h"
#include "model/trace.h"
#include "version.h"

const char *argp_program_version = "rfbpf " RFBPF_VERSION;
const char *argp_program_bug_address = NULL;

static const char doc[] =
"rfbpf: trace PyTorch operators with eBPF uprobes on at::RecordFunction.\n"
"\n"
"Attaches to a running process (-p) or runs a command (after --), switches\n"
"RecordFunction on inside it (one empty global callback, removed on exit),\n"
"records every op with its thread, nesting and timing, and prints a\n"
"key_averages-style table.\n"
"\v"
"Examples:\n"
"  sudo rfbpf -p 1234                  # trace until Ctrl-C, print the table\n"
"  sudo rfbpf -p 1234 -d 10 -o t.json  # 10 s, Chrome/Perfetto trace\n"
"  sudo rfbpf -p 1234 --folded f.txt   # flame graph input (flamegraph.pl)\n"
"  sudo rfbpf -p 1234 --sample 0.01    # 1% of ops, estimates scaled up\n"
"  sudo rfbpf -p 1234 --tree-sample 0.05 -o t.json  # 5% of whole trees\n"
"  sudo rfbpf -p 1234 --scopes function,user_scope\n"
"  sudo rfbpf -p 1234 -o t.json --gpu-folded g.txt  # with CUPTI agent\n"
"  sudo rfbpf --children -o t.json -- python3 train.py  # + DataLoader workers\n"
"  sudo rfbpf -p 1234 --python-stacks --folded f.txt  # model code over ops\n"
"  sudo rfbpf -p 1234 --python-stacks --group-by stack:3  # per call site\n"
"  sudo rfbpf -p 1234 --shapes --group-by shapes -o t.json  # input dims\n"
"  sudo rfbpf -p 1234 --off-cpu --top-wakers 10 -o t.json  # waiting ops\n"
"  sudo rfbpf --all --steps 4 -o traces/  # every rank: traces, straggler\n"
"  sudo rfbpf --deactivate -p 1234     # remove what a killed rfbpf left\n"
"  sudo rfbpf --sort total --top 20 -- python3 train.py\n"
"  sudo rfbpf --lib venv/lib/python3*/site-packages/torch/lib/libtorch_cpu.so \\\n"
"      -- python3 infer.py\n"
"\n"
"Fleet mode: one daemon samples every PyTorch job on the host\n"
"  sudo rfbpf --continuous --all --listen :9464 \\\n"
"      --prom-file /var/lib/node_exporter/rfbpf.prom\n"
"  sudo rfbpf --continuous -p 1234 -p 5678 --interval 10 --budget 0.5 \\\n"
"      --pprof-dir /var/lib/rfbpf\n"
"  sudo rfbpf --config /etc/rfbpf.conf   # long options as key = value\n"
"\n"
"Environment:\n"
"  RFBPF_STATE_DIR=DIR  where rfbpf records the callbacks it registered "
"and\n"
"                       its per-process locks (default /run/rfbpf, made "
"with\n"
"                       its parents on first use)\n";

static const char args_doc[] = "-p PID | -- COMMAND [ARGS...] | --all | "
				"--continuous (--all | -p PID...)";

enum { OPT_FOLDED = 0x100, OPT_NO_TABLE, OPT_TOP, OPT_SORT, OPT_LIB,
       OPT_RINGBUF, OPT_SAMPLE, OPT_SCOPES, OPT_NO_ACTIVATE, OPT_DEACTIVATE,
       OPT_TREE_SAMPLE, OPT_PROBES, OPT_GPU_FOLDED, OPT_NO_GPU,
       OPT_CHILDREN, OPT_CONTINUOUS, OPT_ALL, OPT_INTERVAL, OPT_BUDGET,
       OPT_BURSTS,
       OPT_SAMPLED,
       OPT_PPROF_DIR, OPT_PPROF_KEEP, OPT_PROM_FILE, OPT_LISTEN, OPT_MAX_OPS,
       OPT_CONFIG, OPT_RAW_TIMES, OPT_PYTHON_STACKS, OPT_PYTHON_DEPTH,
       OPT_GROUP_BY, OPT_SHAPES, OPT_OFF_CPU, OPT_TOP_WAKERS, OPT_MEMORY,
       OPT_MEMORY_FOLDED, OPT_MEMORY_SAMPLE,
       OPT_OFF_CPU_FOLDED, OPT_NO_GPU_INJECT, OPT_GPU_AGENT, OPT_USAGE,
       OPT_MAN, OPT_STEPS, OPT_FROM_STEP, OPT_STEP_OP, OPT_PER_STEP,
       OPT_FLIGHT_RECORDER, OPT_SLOW_STEP, OPT_TRACE_DIR,
       OPT_RANK_SUMMARY };

static const struct argp_option options[] = {
	{ "pid", 'p', "PID", 0, "Trace the running process PID", 0 },
	{ "duration", 'd', "SECONDS", 0,
	  "Stop after SECONDS (default: Ctrl-C, SIGTERM or target exit)", 0 },
	{ "output", 'o', "FILE", 0,
	  "Write a Chrome Trace Event JSON file (Perfetto, chrome://tracing)",
	  0 },
	{ "folded", OPT_FOLDED, "FILE", 0,
	  "Write folded stacks weighted by self time in ns (flamegraph.pl, "
	  "speedscope, inferno)", 0 },
	{ "gpu-folded", OPT_GPU_FOLDED, "FILE", 0,
	  "Write folded op stacks ending in [gpu] kernel frames, weighted by "
	  "GPU time in ns (needs the CUPTI agent in the target)", 0 },
	{ "raw-times", OPT_RAW_TIMES, NULL, 0,
	  "Keep rfbpf's own probe cost in the table's, stacks' and metrics' "
	  "times (by default it is calibrated at start and taken out)", 0 },
	{ "no-gpu", OPT_NO_GPU, NULL, 0,
	  "Ignore the CUPTI agent (librfbpf_cupti.so) even if the target "
	  "has it loaded", 0 },
	{ "no-gpu-inject", OPT_NO_GPU_INJECT, NULL, 0,
	  "Do not load the CUPTI agent into a CUDA job started without it "
	  "(by default rfbpf loads it in the attach stop, and leaves it "
	  "loaded and idle after)", 0 },
	{ "gpu-agent", OPT_GPU_AGENT, "FILE", 0,
	  "The librfbpf_cupti.so to load into CUDA jobs (default: the one "
	  "beside rfbpf, build/cupti/ or ../lib/rfbpf/)", 0 },
	{ "no-table", OPT_NO_TABLE, NULL, 0, "Do not print the summary table",
	  0 },
	{ "top", OPT_TOP, "N", 0, "Print the N heaviest rows (default 30, "
	  "0 = all)", 0 },
	{ "sort", OPT_SORT, "KEY", 0,
	  "Sort the table by a column: self (default), total, calls, avg, "
	  "min, max, cuda (CUDA total), self_cuda, kernels, gpu_wait (time "
	  "in CUDA synchronize calls), or name (A to Z); a GPU column with "
	  "no GPU activity sorts by self, and says so",
	  0 },
	{ "lib", OPT_LIB, "PATH", 0,
	  "The libtorch_cpu.so to probe (default: found in the target)", 0 },
	{ "ringbuf-mb", OPT_RINGBUF, "MB", 0,
	  "Ring buffer size in MiB, a power of two (default 16; 4 a job "
	  "with --continuous)", 0 },
	{ "sample", OPT_SAMPLE, "P", 0,
	  "Let RecordFunction's own sampler pick ops with probability P "
	  "(0 < P <= 1, default 1); counts and times are scaled by 1/P", 0 },
	{ "tree-sample", OPT_TREE_SAMPLE, "P", 0,
	  "Keep whole top-level op trees with probability P, decided in BPF "
	  "(skipped trees cost no ring-buffer space); combines with --sample",
	  0 },
	{ "scopes", OPT_SCOPES, "LIST", 0,
	  "RecordScopes to switch on: all (default) or a comma list of "
	  "function, backward_function, torchscript_function, "
	  "kernel_function_dtype, custom_class, build_feature, "
	  "lite_interpreter, user_scope, static_runtime_op, "
	  "static_runtime_model", 0 },
	{ "probes", OPT_PROBES, "KIND", 0,
	  "callback: uprobes on 5-byte-NOP callback stubs rfbpf maps into "
	  "the target (the kernel's optimized path, several times cheaper: see "
	  "docs/BENCHMARKS.md); entry: "
	  "uprobes on RecordFunction::before/end; auto (default): callback "
	  "when the kernel optimizes NOP uprobes and rfbpf activates", 0 },
	{ "children", OPT_CHILDREN, NULL, 0,
	  "Also trace the target's child processes (forked DataLoader "
	  "workers), each from the moment rfbpf finds it, milliseconds after "
	  "its fork", 0 },
	{ "python-stacks", OPT_PYTHON_STACKS, NULL, 0,
	  "Record the Python stack of each op's thread at its start "
	  "(CPython 3.11, 3.13, 3.14): folded stacks and pprof show the "
	  "model code "
	  "above the ops", 0 },
	{ "shapes", OPT_SHAPES, NULL, 0,
	  "Record each op's inputs: tensors' dims, dtypes and strides, "
	  "scalars' values (torch 1.13, 2.6, 2.14), as "
	  "record_shapes=True: the Chrome trace's Input Dims and Input type",
	  0 },
	{ "off-cpu", OPT_OFF_CPU, NULL, 0,
	  "Follow the traced threads off and back on the CPU (scheduler "
	  "tracepoints): each op's off-CPU time, why (sleeping, preempted, "
	  "block I/O) and who woke it, in the table and the trace", 0 },
	{ "memory", OPT_MEMORY, NULL, 0,
	  "Record every allocation and free of PyTorch's CPU allocator (and "
	  "of the CUDA caching allocator): each op's Self CPU Mem and CPU "
	  "Mem as profile_memory=True, [memory] events and live bytes in the "
	  "trace, and the blocks still live at the end (a leak view)", 0 },
	{ "memory-sample", OPT_MEMORY_SAMPLE, "BYTES", 0,
	  "With --memory: sample blocks by bytes, one sample point per BYTES "
	  "allocated on average (Poisson, as Go's heap profiles), weighed "
	  "so the estimates stay unbiased; 0 records every block (default: "
	  "0, and 524288 with --continuous)", 0 },
	{ "memory-folded", OPT_MEMORY_FOLDED, "FILE", 0,
	  "With --memory: folded op stacks weighted by the bytes allocated "
	  "while each was the innermost op (an allocation flame graph)", 0 },
	{ "off-cpu-folded", OPT_OFF_CPU_FOLDED, "FILE", 0,
	  "With --off-cpu: folded op stacks weighted by the time their "
	  "threads were off CPU in the innermost op (an off-CPU flame "
	  "graph)", 0 },
	{ "top-wakers", OPT_TOP_WAKERS, "N", 0,
	  "With --off-cpu: after the table, the N pairs of ops where one "
	  "thread's op most often woke another's", 0 },
	{ "python-depth", OPT_PYTHON_DEPTH, "N", 0,
	  "With --python-stacks: keep the N innermost Python frames "
	  "(default 64, at most 128); deeper stacks are marked truncated", 0 },
	{ "group-by", OPT_GROUP_BY, "stack[:N]|shapes", 0,
	  "A table row per op and the N innermost Python frames it was "
	  "called from (default 5, needs --python-stacks), with its source "
	  "location, as key_averages(group_by_stack_n=N); or per op and "
	  "input shapes (needs --shapes), as group_by_input_shape=True. "
	  "Give it twice for both", 0 },
	{ "steps", OPT_STEPS, "N", 0,
	  "Trace N whole training steps, then stop: the outputs hold only "
	  "what began in them. A step is torch.profiler's ProfilerStep#N "
	  "where the job has a schedule, else the span between two ends of "
	  "the optimizer's step() (Optimizer.step#...), else --step-op",
	  0 },
	{ "from-step", OPT_FROM_STEP, "K", 0,
	  "Begin at step K: ProfilerStep's own number, else steps counted "
	  "from the first marker rfbpf sees (in launch mode, the job's "
	  "count from 0)", 0 },
	{ "step-op", OPT_STEP_OP, "NAME", 0,
	  "The op (a record_function scope) each of whose calls is one "
	  "step, instead of ProfilerStep or the optimizer", 0 },
	{ "per-step", OPT_PER_STEP, NULL, 0,
	  "Print a block of the heaviest ops (--top, default 10 here) for "
	  "each step, after the table", 0 },
	{ "flight-recorder", OPT_FLIGHT_RECORDER, "SECONDS[,MB]", 0,
	  "Trace all along but keep only the last SECONDS of the Chrome "
	  "trace, in at most MB of rfbpf's memory (default 256): -o gets "
	  "that window at the end, and FILE.sigusr1-N.json on each SIGUSR1 "
	  "to rfbpf (with --continuous: each job's bursts, see --trace-dir)",
	  0 },
	{ "slow-step", OPT_SLOW_STEP, "MS", 0,
	  "With --flight-recorder: when a training step (as --steps tells "
	  "them) lasts longer than MS, write the window, which holds it and "
	  "the steps before, to FILE.slow-step-N.json", 0 },
	{ "no-activate", OPT_NO_ACTIVATE, NULL, 0,
	  "Do not switch RecordFunction on: see only what the target's own "
	  "callbacks (e.g. torch.profiler) make it record", 0 },
	{ "deactivate", OPT_DEACTIVATE, NULL, 0,
	  "Remove the callback a killed rfbpf left in -p PID, and exit", 0 },
	{ "continuous", OPT_CONTINUOUS, NULL, 0,
	  "Fleet mode: run as a daemon, sample every job (--all or -p, "
	  "repeatable) within --budget, export per --interval", 1 },
	{ "all", OPT_ALL, NULL, 0, "Every process on the host that maps a "
	  "libtorch_cpu: at once, each into its own file in -o DIR/ (named "
	  "by rank), then a table of the ranks' steps and collective waits; "
	  "with --continuous, each found within 2 s of its start", 1 },
	/* --all's children: where each writes what the rank table needs. */
	{ "rank-summary", OPT_RANK_SUMMARY, "FILE", OPTION_HIDDEN,
	  "Write this run's rank, steps and collective times to FILE", 1 },
	{ "interval", OPT_INTERVAL, "SECONDS", 0,
	  "Export period of --continuous (default 60)", 1 },
	{ "budget", OPT_BUDGET, "PERCENT", 0, "Keep each job's estimated "
	  "tracing cost under PERCENT of its CPU time (0 < PERCENT <= 50, "
	  "default 1)", 1 },
	{ "bursts", OPT_BURSTS, NULL, 0, "With --continuous (the default): "
	  "start a control thread in each job that switches a full trace on "
	  "for many short bursts at random moments, with no callback in "
	  "between", 1 },
	{ "sampled", OPT_SAMPLED, NULL, 0, "With --continuous: instead of "
	  "bursts, keep a callback that samples ops at p < 1 in each job, "
	  "with one full-trace window a span (costs a training job several "
	  "times the budget; for jobs whose ops are too small for bursts)",
	  1 },
	{ "pprof-dir", OPT_PPROF_DIR, "DIR", 0, "Write one gzipped pprof "
	  "profile per interval into DIR (profile-*.pb.gz)", 1 },
	{ "trace-dir", OPT_TRACE_DIR, "DIR", 0, "With --flight-recorder: "
	  "write each job's window (the bursts it holds) into DIR on SIGUSR1 "
	  "and when the job ends, as rfbpf-PID.WHY.json.gz", 1 },
	{ "pprof-keep", OPT_PPROF_KEEP, "N", 0,
	  "Keep the newest N profiles in --pprof-dir (default 10)", 1 },
	{ "prom-file", OPT_PROM_FILE, "FILE", 0, "Write Prometheus metrics "
	  "to FILE each interval, for node_exporter's textfile collector", 1 },
	{ "listen", OPT_LISTEN, "ADDR:PORT", 0, "Serve /metrics, "
	  "/debug/pprof/profile, /debug/rfbpf/trace and /healthz over HTTP "
	  "(no authentication: bind loopback or put a proxy in front)", 1 },
	{ "max-ops", OPT_MAX_OPS, "N", 0, "Op series per job in the metrics; "
	  "the rest add up in op=\"[other]\" (default 2000)", 1 },
	{ "config", OPT_CONFIG, "FILE", 0, "Read long options from FILE, one "
	  "'key = value' a line (SIGHUP re-reads it)", 1 },
	{ "quiet", 'q', NULL, 0, "No live status line on stderr", 2 },
	{ "verbose", 'v', NULL, 0,
	  "Show rfbpf's progress (symbols found, probes attached, the "
	  "callback registered) and libbpf's warnings; -vv adds libbpf's "
	  "debug log", 2 },
	/* argp's own (it adds them unless ARGP_NO_HELP), handled here so
	 * that rfbpf lays out --help itself (cli/help.c): argp's filling
	 * shifted some entries. */
	{ "help", '?', NULL, 0, "Give this help list", -1 },
	{ "usage", OPT_USAGE, NULL, 0, "Give a short usage message", -1 },
	{ "version", 'V', NULL, 0, "Print program version", -1 },
	/* For the build: the man page, from this table (make rfbpf.8). */
	{ "man", OPT_MAN, NULL, OPTION_HIDDEN, "Write the man page", -1 },
	{},
};

/* While SIGHUP re-reads the options, a bad value is kept here instead of
 * ending the daemon. */
static bool reparsing;
static bool last_pass;
static char reparse_error[512];

static void bad(const char *fmt, const char *arg)
{
	char msg[400];

	snprintf(msg, sizeof(msg), fmt, arg);
	if (reparsing) {
		if (!reparse_error[0])
			snprintf(reparse_error, sizeof(reparse_error), "%s",
				 msg);
		return;
	}
	fprintf(stderr, "rfbpf: %s (see rfbpf --help)\n", msg);
	exit(2);
}

static double parse_double(const char *arg, double min, double max,
			   const char *what)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v >= min) || v > max)
		bad(what, arg);
	return v;
}

/* A count: "invalid NAME 'ARG': EXPECTED" when it is not one, or is
 * below min; the real limit when it is a count, only too large (saying
 * "expected a count" of 2147483647 would send the user looking for what
 * is wrong with it). */
static long parse_long(const char *arg, long min, long max, const char *name,
		       const char *expected)
{
	char *end, msg[256];
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (end != arg && !*end && *arg != '-' && (errno == ERANGE || v > max)) {
		snprintf(msg, sizeof(msg), "invalid %s '%s': too large, at most "
			 "%ld", name, arg, max);
		bad("%s", msg);
	}
	if (errno || end == arg || *end || v < min) {
		snprintf(msg, sizeof(msg), "invalid %s '%%s': %s", name,
			 expected);
		bad(msg, arg);
	}
	return v;
}

static double parse_prob(const char *arg, const char *what)
{
	char *end;
	double p;

	errno = 0;
	p = strtod(arg, &end);
	if (errno || end == arg || *end || !(p > 0) || p > 1)
		bad(what, arg);
	return p;
}

static unsigned parse_scopes(const char *arg)
{
	char *copy, *save = NULL, *tok;
	unsigned mask = 0;

	if (!strcmp(arg, "all"))
		return (1u << 10) - 1;
	copy = strdup(arg);
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		unsigned i = 0;

		while (i < 10 && strcmp(tok, scope_name(i)))
			i++;
		if (i == 10)
			bad("invalid --scopes entry '%s': expected all, or "
			    "names from function, backward_function, "
			    "torchscript_function, kernel_function_dtype, "
			    "custom_class, build_feature, lite_interpreter, "
			    "user_scope, static_runtime_op, static_runtime_model",
			    tok);
		mask |= 1u << i;
	}
	free(copy);
	if (!mask)
		bad("invalid --scopes '%s': no scope named", arg);
	return mask;
}

/* SECONDS[,MB] */
static void parse_flight_recorder(const char *arg, struct options *opt)
{
	char *end;
	double mb = 256;

	errno = 0;
	opt->flight_s = strtod(arg, &end);
	if (!errno && end != arg && *end == ',') {
		const char *m = end + 1;

		mb = strtod(m, &end);
		if (end == m)
			mb = -1;
	}
	if (errno || end == arg || *end || !(opt->flight_s > 0) ||
	    opt->flight_s > 86400 || !(mb >= 1) || mb > 65536)
		bad("invalid --flight-recorder '%s': expected SECONDS (above "
		    "0, at most 86400) and optionally ,MB (1 to 65536)", arg);
	opt->flight_mb = mb;
}

/* Fleet mode's options (the daemon's own); false if key is not one. */
static bool parse_fleet_arg(int key, char *arg, struct options *opt)
{
	switch (key) {
	case OPT_CONTINUOUS: opt->continuous = true; break;
	case OPT_ALL: opt->all = true; break;
	case OPT_INTERVAL:
		opt->interval_s = parse_double(arg, 1, 86400, "invalid "
			"--interval '%s': expected seconds from 1 to 86400");
		break;
	case OPT_BUDGET:
		opt->budget_pct = parse_double(arg, 1e-6, 50, "invalid --budget "
			"'%s': expected a percentage above 0 and at most 50");
		break;
	case OPT_BURSTS: opt->bursts = true; break;
	case OPT_SAMPLED: opt->sampled = true; break;
	case OPT_PPROF_DIR: opt->pprof_dir = arg; break;
	case OPT_TRACE_DIR: opt->trace_dir = arg; break;
	case OPT_PPROF_KEEP:
		opt->pprof_keep = parse_long(arg, 1, 1000000, "--pprof-keep",
					     "expected a count >= 1");
		break;
	case OPT_PROM_FILE: opt->prom_file = arg; break;
	case OPT_LISTEN: opt->listen = arg; break;
	case OPT_MAX_OPS:
		opt->max_ops = parse_long(arg, 1, 1000000, "--max-ops",
					  "expected a count >= 1");
		break;
	case OPT_CONFIG: opt->config = arg; break;
	case OPT_RANK_SUMMARY: opt->rank_summary = arg; break;
	default:
		return false;
	}
	return true;
}

/* --continuous: a daemon over many jobs, with its own outputs. */
static void check_continuous(struct options *opt)
{
	/* A job's ring holds a few ms of events between reads: its sampled
	 * ops, or a short window's at p = 1. 16 MiB a job is memory the
	 * daemon would hold for nothing. */
	if (!opt->ringbuf_set)
		opt->ringbuf_mb = 4;
	if (opt->command)
		bad("%s--continuous traces running processes: give --all or "
		    "-p PID, not a command", "");
	else if (!opt->all && !opt->nr_pids)
		bad("%s--continuous needs --all or -p PID", "");
	else if (options_want_steps(opt))
		bad("%s--steps, --from-step, --step-op, --per-step and "
		    "--slow-step are for one run, not --continuous (its "
		    "bursts hold no whole step)", "");
	else if (opt->flight_s && !opt->trace_dir)
		bad("%s--flight-recorder with --continuous needs --trace-dir "
		    "DIR, where each job's window is written", "");
	else if (opt->trace_dir && !opt->flight_s)
		bad("%s--trace-dir needs --flight-recorder", "");
	else if (opt->trace_path || opt->folded_path || opt->gpu_folded_path ||
		 opt->off_cpu_folded_path)
		bad("%s--continuous writes --pprof-dir, --prom-file and "
		    "--listen, not -o, --folded or --gpu-folded (those are for "
		    "one run)", "");
	else if (opt->deactivate)
		bad("%s--deactivate and --continuous exclude each other", "");
	else if (opt->sample_prob != 1.0)
		bad("%s--continuous chooses each job's sampling from --budget:"
		    " drop --sample", "");
	else if (!opt->activate)
		bad("%s--continuous switches RecordFunction on: drop "
		    "--no-activate", "");
	else if (!opt->pprof_dir && !opt->prom_file && !opt->listen)
		bad("%s--continuous needs somewhere to export: --pprof-dir, "
		    "--prom-file or --listen", "");
	else if (opt->bursts && opt->sampled)
		bad("%s--bursts and --sampled exclude each other (bursts are "
		    "the default)", "");
	opt->bursts = !opt->sampled;
	/* Every block of every job would cost the daemon's budget: a
	 * sample per 512 KiB, as Go's heap profiles default to. */
	if (opt->memory && !opt->memory_sample_set)
		opt->memory_sample_bytes = 512 * 1024;
}

static const struct argp argp;

/* --sort KEY; a bad key leaves the sort as it was. */
static void parse_sort(const char *arg, struct options *opt)
{
	static const struct { const char *name; enum sort_key key; }
	keys[] = {
		{ "self", SORT_SELF }, { "total", SORT_TOTAL },
		{ "calls", SORT_CALLS }, { "avg", SORT_AVG },
		{ "min", SORT_MIN }, { "max", SORT_MAX },
		{ "cuda", SORT_CUDA }, { "self_cuda", SORT_SELF_CUDA },
		{ "kernels", SORT_KERNELS }, { "gpu_wait", SORT_GPU_WAIT },
		{ "name", SORT_NAME },
	};

	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (!strcmp(arg, keys[k].name)) {
			opt->sort = keys[k].key;
			return;
		}
	bad("invalid --sort '%s': expected self, total, calls, avg, min, "
	    "max, cuda, self_cuda, kernels, gpu_wait or name", arg);
}

static void parse_probes(const char *arg, struct options *opt)
{
	if (!strcmp(arg, "auto"))
		opt->probes = PROBES_AUTO;
	else if (!strcmp(arg, "entry"))
		opt->probes = PROBES_ENTRY;
	else if (!strcmp(arg, "callback"))
		opt->probes = PROBES_CALLBACK;
	else
		bad("invalid --probes '%s': expected auto, entry or "
		    "callback", arg);
}

static void parse_group_by(const char *arg, struct options *opt)
{
	if (!strcmp(arg, "shapes"))
		opt->group_shapes = true;
	else if (!strcmp(arg, "stack"))
		opt->group_stack_n = 5;
	else if (!strncmp(arg, "stack:", 6))
		opt->group_stack_n = parse_long(arg + 6, 1, RF_PY_MAX_FRAMES,
						"--group-by stack:N",
						"expected N from 1 to 128");
	else
		bad("invalid --group-by '%s': expected stack, stack:N or "
		    "shapes", arg);
}

static void parse_ringbuf(const char *arg, struct options *opt)
{
	long mb = parse_long(arg, 1, 1024, "--ringbuf-mb",
			     "expected a power of two from 1 to 1024");

	if (mb & (mb - 1))
		bad("invalid --ringbuf-mb '%s': expected a power of two from "
		    "1 to 1024", arg);
	opt->ringbuf_mb = mb;
	opt->ringbuf_set = true;
}

/* What is traced and what comes out: false if key is not one of those
 * options. */
static bool parse_output_arg(int key, char *arg, struct options *opt)
{
	switch (key) {
	case 'o': opt->trace_path = arg; break;
	case OPT_FOLDED: opt->folded_path = arg; break;
	case OPT_NO_TABLE: opt->table = false; break;
	case OPT_GPU_FOLDED: opt->gpu_folded_path = arg; break;
	case OPT_NO_GPU: opt->gpu = false; break;
	case OPT_NO_GPU_INJECT: opt->gpu_inject = false; break;
	case OPT_GPU_AGENT: opt->gpu_agent = arg; break;
	case OPT_RAW_TIMES: opt->raw_times = true; break;
	case OPT_TOP:
		/* Any int: more rows than the table has shows them all. */
		opt->top = parse_long(arg, 0, INT_MAX, "--top",
				      "expected a count >= 0, 0 for all");
		opt->top_set = true;
		break;
	case OPT_SORT: parse_sort(arg, opt); break;
	case OPT_OFF_CPU_FOLDED: opt->off_cpu_folded_path = arg; break;
	case OPT_TOP_WAKERS:
		opt->top_wakers = parse_long(arg, 1, 1000000, "--top-wakers",
					     "expected a number of rows >= 1");
		break;
	case OPT_GROUP_BY: parse_group_by(arg, opt); break;
	case 'q': opt->quiet = true; break;
	case 'v': opt->verbose++; break;
	default:
		return false;
	}
	return true;
}

/* How rfbpf traces: probes, sampling, features; false if key is not
 * one of those options. */
static bool parse_tracing_arg(int key, char *arg, struct options *opt)
{
	switch (key) {
	case OPT_LIB: opt->lib = arg; break;
	case OPT_RINGBUF: parse_ringbuf(arg, opt); break;
	case OPT_SAMPLE:
		opt->sample_prob = parse_prob(arg, "invalid --sample '%s': "
					      "expected 0 < P <= 1");
		break;
	case OPT_TREE_SAMPLE:
		opt->tree_prob = parse_prob(arg, "invalid --tree-sample '%s': "
					    "expected 0 < P <= 1");
		break;
	case OPT_SCOPES: opt->scopes = parse_scopes(arg); break;
	case OPT_PROBES: parse_probes(arg, opt); break;
	case OPT_NO_ACTIVATE: opt->activate = false; break;
	case OPT_CHILDREN: opt->children = true; break;
	case OPT_PYTHON_STACKS: opt->python_stacks = true; break;
	case OPT_STEPS:
		opt->steps = parse_long(arg, 1, 1000000, "--steps",
					"expected a number of steps >= 1");
		break;
	case OPT_FROM_STEP:
		opt->from_step = parse_long(arg, 0, LONG_MAX, "--from-step",
					    "expected a step number >= 0");
		break;
	case OPT_STEP_OP:
		if (!*arg)
			bad("invalid --step-op '%s': expected an op name", arg);
		opt->step_op = arg;
		break;
	case OPT_PER_STEP: opt->per_step = true; break;
	case OPT_FLIGHT_RECORDER: parse_flight_recorder(arg, opt); break;
	case OPT_SLOW_STEP:
		opt->slow_step_ms = parse_double(arg, 1e-3, 86400e3,
			"invalid --slow-step '%s': expected milliseconds above "
			"0");
		break;
	case OPT_SHAPES: opt->shapes = true; break;
	case OPT_OFF_CPU: opt->off_cpu = true; break;
	case OPT_MEMORY: opt->memory = true; break;
	case OPT_MEMORY_FOLDED: opt->memory_folded_path = arg; break;
	case OPT_MEMORY_SAMPLE:
		opt->memory_sample_bytes = (uint64_t)parse_long(arg, 0,
			1l << 40, "--memory-sample",
			"expected bytes from 0 (every block) to 2^40");
		opt->memory_sample_set = true;
		break;
	case OPT_PYTHON_DEPTH:
		opt->python_depth = parse_long(arg, 1, RF_PY_MAX_FRAMES,
					       "--python-depth",
					       "expected a count from 1 to 128");
		break;
	case OPT_DEACTIVATE: opt->deactivate = true; break;
	default:
		return false;
	}
	return true;
}

/* -p, -d: false if key is neither. */
static bool parse_target_arg(int key, char *arg, struct options *opt)
{
	char *end;

	switch (key) {
	case 'p':
		opt->pid = parse_long(arg, 1, 0x7fffffff, "PID",
				      "expected a positive process id");
		if (opt->nr_pids == CLI_MAX_PIDS)
			bad("too many -p (at most 64): use --continuous --all%s",
			    "");
		else
			opt->pids[opt->nr_pids++] = opt->pid;
		break;
	case 'd':
		errno = 0;
		opt->duration_s = strtod(arg, &end);
		if (errno || end == arg || *end || !(opt->duration_s > 0) ||
		    opt->duration_s > 1e7)
			bad("invalid duration '%s': expected seconds > 0", arg);
		break;
	default:
		return false;
	}
	return true;
}

/* Whether a path names a directory: it ends in '/' or is one. */
static bool directory_path(const char *path)
{
	struct stat st;
	size_t n = strlen(path);

	return (n && path[n - 1] == '/') ||
	       (!stat(path, &st) && S_ISDIR(st.st_mode));
}

/* One-shot --all: every process, one file each. */
static void check_all(const struct options *opt)
{
	if (opt->pid || opt->command)
		bad("%s--all traces every PyTorch process on the host: drop "
		    "-p and the command", "");
	if (opt->trace_path && !directory_path(opt->trace_path))
		bad("--all writes one trace per process: give -o a directory "
		    "(-o %s/), not a file", opt->trace_path);
	if (opt->folded_path || opt->gpu_folded_path ||
	    opt->off_cpu_folded_path)
		bad("%s--folded, --gpu-folded and --off-cpu-folded take one "
		    "process: with --all, give -o DIR/ (each trace holds its "
		    "stacks)", "");
	if (opt->flight_s)
		bad("%s--flight-recorder takes one process, not --all", "");
}

/* One-shot mode: what to trace, and options only fleet mode takes. */
static void check_one_shot_target(const struct options *opt)
{
	if (opt->bursts || opt->sampled)
		bad("%s--bursts and --sampled need --continuous", "");
	if (opt->nr_pids > 1)
		bad("%sseveral -p need --continuous", "");
	if (opt->pprof_dir || opt->prom_file || opt->listen || opt->trace_dir)
		bad("%s--pprof-dir, --prom-file, --listen and --trace-dir need "
		    "--continuous", "");
	if (opt->pid && opt->command)
		bad("%s-p and a command exclude each other", "");
	if (opt->deactivate && !opt->pid)
		bad("%s--deactivate needs -p PID", "");
	if (opt->all)
		check_all(opt);
	else if (!opt->pid && !opt->command)
		bad("%snothing to trace: give -p PID, -- COMMAND or --all", "");
}

/* One-shot mode: options that need another one. */
static void check_one_shot_options(const struct options *opt)
{
	if (opt->children && !opt->activate)
		bad("%s--children needs activation (drop --no-activate)",
		    "");
	if (!opt->activate && opt->probes == PROBES_CALLBACK)
		bad("%s--probes callback needs activation (drop "
		    "--no-activate)", "");
	if (!opt->activate && opt->sample_prob != 1.0)
		bad("%s--sample needs activation (drop --no-activate)",
		    "");
	if (opt->python_depth != 64 && !opt->python_stacks)
		bad("%s--python-depth needs --python-stacks", "");
	if (opt->group_stack_n && !opt->python_stacks)
		bad("%s--group-by stack needs --python-stacks", "");
	if (opt->group_shapes && !opt->shapes)
		bad("%s--group-by shapes needs --shapes", "");
	if (opt->top_wakers && !opt->off_cpu)
		bad("%s--top-wakers needs --off-cpu", "");
	if (opt->off_cpu_folded_path && !opt->off_cpu)
		bad("%s--off-cpu-folded needs --off-cpu", "");
	if (opt->memory_folded_path && !opt->memory)
		bad("%s--memory-folded needs --memory", "");
	if (opt->memory_sample_set && !opt->memory)
		bad("%s--memory-sample needs --memory", "");
	/* An allocation is charged to the op open on its thread: under a
	 * sampler that may be an op around the one that made it. */
	if (opt->memory && (opt->sample_prob != 1.0 || opt->tree_prob != 1.0))
		bad("%s--memory charges each allocation to the op that made "
		    "it, which --sample and --tree-sample may not record: "
		    "drop them", "");
	if (!opt->gpu && opt->gpu_folded_path)
		bad("%s--gpu-folded needs GPU tracing (drop --no-gpu)",
		    "");
	if (opt->gpu_agent && (!opt->gpu || !opt->gpu_inject))
		bad("%s--gpu-agent needs the agent loaded (drop --no-gpu and "
		    "--no-gpu-inject)", "");
	if (opt->gpu_agent && !opt->activate)
		bad("%s--gpu-agent needs activation: the agent is loaded in "
		    "the attach stop (drop --no-activate)", "");
	if (!opt->gpu && (opt->sort == SORT_CUDA ||
			  opt->sort == SORT_SELF_CUDA ||
			  opt->sort == SORT_KERNELS ||
			  opt->sort == SORT_GPU_WAIT))
		bad("%s--sort by a GPU column needs GPU tracing (drop "
		    "--no-gpu, or sort by self, total, calls, avg, min, "
		    "max or name)", "");
	/* Steps are told from their markers, which a sampler may skip,
	 * and which are user scopes. */
	if (options_want_steps(opt) && (opt->sample_prob != 1.0 ||
					opt->tree_prob != 1.0))
		bad("%s--steps, --from-step, --step-op and --per-step need "
		    "every op seen, to find each step's marker: drop --sample "
		    "and --tree-sample", "");
	if (options_want_steps(opt) && !(opt->scopes & (1u << RF_SCOPE_USER)))
		bad("%ssteps are marked by record_function scopes: add "
		    "user_scope to --scopes", "");
	if (opt->flight_s && !opt->trace_path)
		bad("%s--flight-recorder needs -o FILE, where its window is "
		    "written", "");
	if (opt->flight_s && (opt->steps || opt->from_step >= 0))
		bad("%s--flight-recorder keeps the last window; --steps and "
		    "--from-step trace chosen steps: give one or the other",
		    "");
	if (opt->flight_s && perfetto_path(opt->trace_path))
		bad("%s--flight-recorder writes Chrome JSON: give -o FILE.json "
		    "(or .json.gz)", "");
	if (opt->slow_step_ms && !opt->flight_s)
		bad("%s--slow-step needs --flight-recorder", "");
	/* A stack needs every op above the leaf; RecordFunction's
	 * sampler drops some, so a stack would be made up. */
	if (opt->sample_prob != 1.0 &&
	    (opt->folded_path || opt->gpu_folded_path ||
	     opt->off_cpu_folded_path))
		bad("%s--folded and --gpu-folded need whole op stacks, "
		    "which --sample does not keep: use --tree-sample",
		    "");
}

static error_t parse_arg(int key, char *arg, struct argp_state *state)
{
	struct options *opt = state->input;

	if (parse_fleet_arg(key, arg, opt) || parse_target_arg(key, arg, opt) ||
	    parse_output_arg(key, arg, opt) || parse_tracing_arg(key, arg, opt))
		return 0;
	switch (key) {
	case '?':
		cli_write_help(stdout, &argp, state->name);
		exit(0);
	case OPT_MAN:
		cli_write_man(stdout, &argp);
		exit(0);
	case OPT_USAGE:
		argp_help(&argp, stdout, ARGP_HELP_USAGE, state->name);
		exit(0);
	case 'V':
		printf("%s\n", argp_program_version);
		exit(0);
	case ARGP_KEY_ARG:
		/* Everything from the first non-option on is the command. */
		opt->command = &state->argv[state->next - 1];
		state->next = state->argc;
		break;
	case ARGP_KEY_END:
		/* With --config, the checks wait for the last pass, which
		 * sees the file and the command line together. */
		if (opt->config && !last_pass)
			break;
		if (opt->continuous) {
			check_continuous(opt);
			break;
		}
		check_one_shot_target(opt);
		check_one_shot_options(opt);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static const struct argp argp = {
	.options = options, .parser = parse_arg,
	.args_doc = args_doc, .doc = doc,
};

static void set_defaults(struct options *opt)
{
	memset(opt, 0, sizeof(*opt));
	opt->table = true;
	opt->top = 30;
	opt->ringbuf_mb = 16;
	opt->activate = true;
	opt->gpu = true;
	opt->gpu_inject = true;
	opt->sample_prob = 1.0;
	opt->tree_prob = 1.0;
	opt->scopes = (1u << 10) - 1;
	opt->interval_s = 60;
	opt->budget_pct = 1;
	opt->pprof_keep = 10;
	opt->max_ops = 2000;
	opt->python_depth = 64;
	opt->from_step = -1;
}

static bool known_option(const char *name)
{
	for (const struct argp_option *o = options; o->name || o->key; o++)
		if (o->name && !strcmp(o->name, name))
			return true;
	return false;
}

/* Lines of "key = value" (or a bare "key" for a flag), '#' comments,
 * become "--key=value" arguments. Unknown keys are refused by argp like
 * unknown options. Returns 0, or -1 with a reason in err. */
static int config_args(const char *path, char ***argvp, int *argcp,
		       char *err, size_t len)
{
	FILE *f = fopen(path, "re");
	char line[1024], **argv = calloc(2, sizeof(*argv));
	int argc = 1, lineno = 0;

	if (!f || !argv) {
		snprintf(err, len, "cannot read --config %s: %s", path,
			 strerror(errno));
		if (f)
			fclose(f);
		free(argv);
		return -1;
	}
	argv[0] = strdup("rfbpf");
	while (fgets(line, sizeof(line), f)) {
		char *key = line, *eq, *val = NULL, *end, **grown;

		lineno++;
		line[strcspn(line, "#\n")] = 0;
		while (*key == ' ' || *key == '\t')
			key++;
		if (!*key)
			continue;
		if ((eq = strchr(key, '='))) {
			*eq = 0;
			val = eq + 1;
			while (*val == ' ' || *val == '\t')
				val++;
			for (end = val + strlen(val); end > val &&
			     (end[-1] == ' ' || end[-1] == '\t');)
				*--end = 0;
		}
		for (end = key + strlen(key); end > key &&
		     (end[-1] == ' ' || end[-1] == '\t');)
			*--end = 0;
		if (!strcmp(key, "config") || !strcmp(key, "help") ||
		    !strcmp(key, "usage") || !strcmp(key, "version") ||
		    !strcmp(key, "man") ||
		    !known_option(key)) {
			snprintf(err, len, "--config %s:%d: unknown key '%s' "
				 "(keys are rfbpf's long options)", path,
				 lineno, key);
			fclose(f);
			*argvp = argv;
			*argcp = argc;
			return -1;
		}
		grown = realloc(argv, (argc + 2) * sizeof(*argv));
		if (!grown)
			break;
		argv = grown;
		if (asprintf(&argv[argc], "--%s%s%s", key, val ? "=" : "",
			     val ? val : "") < 0)
			break;
		argv[++argc] = NULL;
	}
	fclose(f);
	*argvp = argv;
	*argcp = argc;
	return 0;
}

static void free_args(char **argv, int argc)
{
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	free(argv);
}

/* Defaults, then the config file (if the command line names one), then
 * the command line again, which wins. */
static int parse_all(int argc, char **argv, struct options *opt,
		     unsigned flags, char *err, size_t len)
{
	char **cargv = NULL;
	int cargc = 0, ret = 0;

	set_defaults(opt);
	last_pass = false;
	flags |= ARGP_NO_HELP;		/* rfbpf's own --help (cli/help.c) */
	if (argp_parse(&argp, argc, argv, flags, NULL, opt))
		return snprintf(err, len, "bad command line"), -1;
	if (!opt->config)
		return 0;
	if (config_args(opt->config, &cargv, &cargc, err, len)) {
		free_args(cargv, cargc);
		return -1;
	}
	set_defaults(opt);
	opt->config = "";	/* the file's own pass is not the last */
	if (argp_parse(&argp, cargc, cargv, flags | ARGP_NO_HELP, NULL, opt))
		ret = -1;
	last_pass = true;
	if (!ret && argp_parse(&argp, argc, argv, flags, NULL, opt))
		ret = -1;
	last_pass = false;
	if (ret)
		snprintf(err, len, "bad option in --config %s", opt->config);
	/* Strings point into argv and the config's arguments: the latter
	 * stay allocated for the life of the options (a SIGHUP makes new
	 * ones; the few bytes of the old are not worth tracking). */
	free(cargv);
	return ret;
}

void parse_options(int argc, char **argv, struct options *opt)
{
	char err[512];

	argp_err_exit_status = 2;
	if (parse_all(argc, argv, opt, ARGP_IN_ORDER, err, sizeof(err))) {
		fprintf(stderr, "rfbpf: %s\n", err);
		exit(2);
	}
}

int reparse_options(int argc, char **argv, struct options *opt, char *err,
		    size_t len)
{
	int ret;

	reparsing = true;
	reparse_error[0] = 0;
	ret = parse_all(argc, argv, opt, ARGP_IN_ORDER | ARGP_NO_EXIT |
			ARGP_NO_ERRS, err, len);
	if (reparse_error[0]) {
		snprintf(err, len, "%s", reparse_error);
		ret = -1;
	}
	reparsing = false;
	return ret;
}
