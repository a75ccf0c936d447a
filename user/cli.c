// SPDX-License-Identifier: BSD-2-Clause
#include <argp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
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
"  sudo rfbpf --deactivate -p 1234     # remove what a killed rfbpf left\n"
"  sudo rfbpf --sort total --top 20 -- python3 train.py\n"
"  sudo rfbpf --lib /opt/venv/lib/python3.11/site-packages/torch/lib/"
"libtorch_cpu.so -- python3 infer.py\n";

static const char args_doc[] = "-p PID | -- COMMAND [ARGS...]";

enum { OPT_FOLDED = 0x100, OPT_NO_TABLE, OPT_TOP, OPT_SORT, OPT_LIB,
       OPT_RINGBUF, OPT_SAMPLE, OPT_SCOPES, OPT_NO_ACTIVATE, OPT_DEACTIVATE,
       OPT_TREE_SAMPLE, OPT_PROBES, OPT_GPU_FOLDED, OPT_NO_GPU,
       OPT_CHILDREN };

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
	{ "no-gpu", OPT_NO_GPU, NULL, 0,
	  "Ignore the CUPTI agent (librfbpf_cupti.so) even if the target "
	  "has it loaded", 0 },
	{ "no-table", OPT_NO_TABLE, NULL, 0, "Do not print the summary table",
	  0 },
	{ "top", OPT_TOP, "N", 0, "Print the N heaviest rows (default 30, "
	  "0 = all)", 0 },
	{ "sort", OPT_SORT, "KEY", 0,
	  "Sort the table by self, total, calls or cuda (CUDA total; "
	  "default self)", 0 },
	{ "lib", OPT_LIB, "PATH", 0,
	  "The libtorch_cpu.so to probe (default: found in the target)", 0 },
	{ "ringbuf-mb", OPT_RINGBUF, "MB", 0,
	  "Ring buffer size in MiB, a power of two (default 16)", 0 },
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
	{ "no-activate", OPT_NO_ACTIVATE, NULL, 0,
	  "Do not switch RecordFunction on: see only what the target's own "
	  "callbacks (e.g. torch.profiler) make it record", 0 },
	{ "deactivate", OPT_DEACTIVATE, NULL, 0,
	  "Remove the callback a killed rfbpf left in -p PID, and exit", 0 },
	{ "quiet", 'q', NULL, 0, "No live status line on stderr", 0 },
	{ "verbose", 'v', NULL, 0,
	  "Show symbol resolution and libbpf details", 0 },
	{},
};

static void bad(const char *fmt, const char *arg)
{
	fprintf(stderr, "rfbpf: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (see rfbpf --help)\n");
	exit(2);
}

static long parse_long(const char *arg, long min, long max, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < min || v > max)
		bad(what, arg);
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
			bad("invalid --scopes entry '%s': see rfbpf --help "
			    "for the names", tok);
		mask |= 1u << i;
	}
	free(copy);
	if (!mask)
		bad("invalid --scopes '%s': no scope named", arg);
	return mask;
}

static error_t parse_arg(int key, char *arg, struct argp_state *state)
{
	struct options *opt = state->input;
	char *end;

	switch (key) {
	case 'p':
		opt->pid = parse_long(arg, 1, 0x7fffffff,
				      "invalid PID '%s': expected a positive "
				      "process id");
		break;
	case 'd':
		errno = 0;
		opt->duration_s = strtod(arg, &end);
		if (errno || end == arg || *end || !(opt->duration_s > 0) ||
		    opt->duration_s > 1e7)
			bad("invalid duration '%s': expected seconds > 0", arg);
		break;
	case 'o': opt->trace_path = arg; break;
	case OPT_FOLDED: opt->folded_path = arg; break;
	case OPT_NO_TABLE: opt->table = false; break;
	case OPT_GPU_FOLDED: opt->gpu_folded_path = arg; break;
	case OPT_NO_GPU: opt->gpu = false; break;
	case OPT_TOP:
		opt->top = parse_long(arg, 0, 1000000,
				      "invalid --top '%s': expected a count "
				      ">= 0");
		break;
	case OPT_SORT:
		if (!strcmp(arg, "self"))
			opt->sort = SORT_SELF;
		else if (!strcmp(arg, "total"))
			opt->sort = SORT_TOTAL;
		else if (!strcmp(arg, "calls"))
			opt->sort = SORT_CALLS;
		else if (!strcmp(arg, "cuda"))
			opt->sort = SORT_CUDA;
		else
			bad("invalid --sort '%s': expected self, total, calls "
			    "or cuda", arg);
		break;
	case OPT_LIB: opt->lib = arg; break;
	case OPT_RINGBUF: {
		long mb = parse_long(arg, 1, 1024, "invalid --ringbuf-mb '%s': "
				     "expected a power of two from 1 to 1024");
		if (mb & (mb - 1))
			bad("invalid --ringbuf-mb '%s': expected a power of "
			    "two from 1 to 1024", arg);
		opt->ringbuf_mb = mb;
		break;
	}
	case OPT_SAMPLE:
		opt->sample_prob = parse_prob(arg, "invalid --sample '%s': "
					      "expected 0 < P <= 1");
		break;
	case OPT_TREE_SAMPLE:
		opt->tree_prob = parse_prob(arg, "invalid --tree-sample '%s': "
					    "expected 0 < P <= 1");
		break;
	case OPT_SCOPES:
		opt->scopes = parse_scopes(arg);
		break;
	case OPT_PROBES:
		if (!strcmp(arg, "auto"))
			opt->probes = PROBES_AUTO;
		else if (!strcmp(arg, "entry"))
			opt->probes = PROBES_ENTRY;
		else if (!strcmp(arg, "callback"))
			opt->probes = PROBES_CALLBACK;
		else
			bad("invalid --probes '%s': expected auto, entry or "
			    "callback", arg);
		break;
	case OPT_NO_ACTIVATE: opt->activate = false; break;
	case OPT_CHILDREN: opt->children = true; break;
	case OPT_DEACTIVATE: opt->deactivate = true; break;
	case 'q': opt->quiet = true; break;
	case 'v': opt->verbose = true; break;
	case ARGP_KEY_ARG:
		/* Everything from the first non-option on is the command. */
		opt->command = &state->argv[state->next - 1];
		state->next = state->argc;
		break;
	case ARGP_KEY_END:
		if (opt->pid && opt->command)
			bad("%s-p and a command exclude each other", "");
		if (!opt->pid && !opt->command)
			bad("%snothing to trace: give -p PID or -- COMMAND", "");
		if (opt->deactivate && !opt->pid)
			bad("%s--deactivate needs -p PID", "");
		if (opt->children && !opt->activate)
			bad("%s--children needs activation (drop --no-activate)",
			    "");
		if (!opt->activate && opt->probes == PROBES_CALLBACK)
			bad("%s--probes callback needs activation (drop "
			    "--no-activate)", "");
		if (!opt->activate && opt->sample_prob != 1.0)
			bad("%s--sample needs activation (drop --no-activate)",
			    "");
		if (!opt->gpu && opt->gpu_folded_path)
			bad("%s--gpu-folded needs GPU tracing (drop --no-gpu)",
			    "");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

void parse_options(int argc, char **argv, struct options *opt)
{
	static const struct argp argp = {
		.options = options, .parser = parse_arg,
		.args_doc = args_doc, .doc = doc,
	};

	memset(opt, 0, sizeof(*opt));
	opt->table = true;
	opt->top = 30;
	opt->ringbuf_mb = 16;
	opt->activate = true;
	opt->gpu = true;
	opt->sample_prob = 1.0;
	opt->tree_prob = 1.0;
	opt->scopes = (1u << 10) - 1;
	argp_err_exit_status = 2;
	argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, opt);
}
