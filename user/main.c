// SPDX-License-Identifier: BSD-2-Clause
/*
 * rfbpf: trace PyTorch ops with BPF uprobes on at::RecordFunction.
 *
 * The story of a run: parse options; check privileges; find the target
 * (or fork the command, held before exec) and the libtorch_cpu it uses;
 * resolve the RecordFunction symbols; load the BPF programs for that pid;
 * attach; loop until a signal, the duration or the target's exit; detach;
 * print the table and write the trace files. Every error before tracing
 * starts is one line on stderr and a non-zero exit, with the target
 * untouched.
 */
#include <errno.h>
#include <glob.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "cli.h"
#include "attach/elf_symbols.h"
#include "export/chrome.h"
#include "export/folded.h"
#include "attach/privileges.h"
#include "session.h"
#include "session_children.h"
#include "session_gpu.h"
#include "export/table.h"
#include "attach/target.h"
#include "version.h"

static bool verbose;

static int libbpf_print_fn(enum libbpf_print_level level, const char *fmt,
			   va_list args)
{
	if (level == LIBBPF_DEBUG && !verbose)
		return 0;
	if (!verbose)
		return 0;
	return vfprintf(stderr, fmt, args);
}

static volatile sig_atomic_t last_signal;

static void on_signal(int sig)
{
	last_signal = sig;
	stop_signals++;
}

static void die_setup(struct session *s, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rfbpf: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (s->act.handle)
		session_deactivate(s);
	activation_unlock(&s->act);
	if (s->launched)
		launch_abort(&s->launch);
	if (s->rb)
		ring_buffer__free(s->rb);
	probes_destroy(&s->probes);
	exit(1);
}

/* Resolves the library's RecordFunction symbols or explains why not. */
static void resolve_symbols(struct session *s, const char *path,
			    struct torch_symbols *syms)
{
	int n = torch_symbols_resolve(path, syms);

	if (n < 0)
		die_setup(s, "%s: %s", path, elf_symbols_strerror(n));
	if (!syms->nr_before || !syms->offset[RF_V_END])
		die_setup(s, "%s: no at::RecordFunction before()/end() symbols;"
			  " not a libtorch_cpu build rfbpf supports (1.13 to "
			  "2.14 are)", path);
	torch_symbols_describe(syms, s->trace.build, sizeof(s->trace.build));
	if (s->opt->verbose)
		fprintf(stderr, "rfbpf: %s: %s\n", path, s->trace.build);
}

/* Launch mode without --lib: libraries the command is likely to load,
 * probed before it runs. Anything else is caught once it is mapped. */
static int default_libraries(glob_t *g)
{
	static const char *const patterns[] = {
		"/usr/lib/*/libtorch_cpu.so*",
		"/usr/lib/libtorch_cpu.so*",
		"/usr/local/lib/libtorch_cpu.so*",
	};
	int flags = 0;

	memset(g, 0, sizeof(*g));
	for (size_t i = 0; i < sizeof(patterns) / sizeof(*patterns); i++) {
		glob(patterns[i], flags, NULL, g);
		flags = GLOB_APPEND;
	}
	return g->gl_pathc;
}

/* The libraries to probe and their symbols, chosen before the BPF object
 * is loaded because the string ABI they use is a load-time constant. */
struct libraries {
	char path[PROBES_MAX_LIBS][PATH_MAX];
	struct torch_symbols syms[PROBES_MAX_LIBS];
	int nr;
};

/* The libtorch_cpu mapped in a running target, or a one-line reason. */
static void library_of_target(struct session *s, char *path, size_t len)
{
	int err = target_find_libtorch(s->pid, path, len);

	if (err == -ENOENT)
		die_setup(s, "process %d (%s) has no libtorch_cpu.so mapped: "
			  "not a PyTorch process, or torch not imported yet "
			  "(name the library with --lib)", s->pid,
			  s->trace.process_name);
	if (err)
		die_setup(s, "cannot read /proc/%d/maps: %s%s", s->pid,
			  strerror(-err), err == -EACCES ? " (needs "
			  "CAP_SYS_PTRACE for other users' processes)" : "");
}

static bool already_chosen(const struct libraries *libs, const char *path)
{
	char a[PATH_MAX], b[PATH_MAX];

	if (!realpath(path, a))
		return false;
	for (int i = 0; i < libs->nr; i++)
		if (realpath(libs->path[i], b) && !strcmp(a, b))
			return true;
	return false;
}

/* Launch mode without --lib: the usual candidates that are real torch
 * builds; session_check_launched_lib() catches any other once mapped. */
static void launch_candidates(struct session *s, struct libraries *libs)
{
	glob_t g;
	size_t nr = default_libraries(&g);
	char desc[256];

	for (size_t i = 0; i < nr && libs->nr < PROBES_MAX_LIBS; i++) {
		struct torch_symbols *syms = &libs->syms[libs->nr];
		bool ok;

		if (already_chosen(libs, g.gl_pathv[i]))
			continue;	/* a symlink to one we have */
		ok = torch_symbols_resolve(g.gl_pathv[i], syms) > 0 &&
		     syms->nr_before && syms->offset[RF_V_END];

		if (ok) {
			torch_symbols_describe(syms, desc, sizeof(desc));
			if (!s->trace.build[0])
				snprintf(s->trace.build, sizeof(s->trace.build),
					 "%s", desc);
			snprintf(libs->path[libs->nr++], PATH_MAX, "%s",
				 g.gl_pathv[i]);
		}
		if (s->opt->verbose)
			fprintf(stderr, "rfbpf: candidate %s: %s\n",
				g.gl_pathv[i], ok ? desc :
				"not a supported libtorch_cpu, skipped");
	}
	globfree(&g);
}

static void choose_libraries(struct session *s, struct libraries *libs)
{
	char path[PATH_MAX];

	libs->nr = 0;
	if (!s->opt->lib && s->launched) {
		launch_candidates(s, libs);
		return;
	}
	if (s->opt->lib)
		snprintf(path, sizeof(path), "%s", s->opt->lib);
	else
		library_of_target(s, path, sizeof(path));
	resolve_symbols(s, path, &libs->syms[0]);
	snprintf(libs->path[0], PATH_MAX, "%s", path);
	libs->nr = 1;
}

/* The library as the target sees it: without our /proc/PID/root prefix,
 * and through symlinks (libtorch_cpu.so -> libtorch_cpu.so.1.13.0). */
static void describe_path(struct session *s, const char *path)
{
	char real[PATH_MAX];

	if (!strncmp(path, "/proc/", 6) && strstr(path, "/map_files/"))
		target_mapped_name(path, real, sizeof(real));
	else if (!realpath(path, real))
		snprintf(real, sizeof(real), "%s", path);
	snprintf(s->trace.library, sizeof(s->trace.library), "%s", real);
}

static void attach_libraries(struct session *s, const struct libraries *libs)
{
	for (int i = 0; i < libs->nr; i++) {
		int n = probes_attach_lib(&s->probes, s->pid, libs->path[i],
					  &libs->syms[i], s->opt->verbose);

		if (n < 0 && !s->launched && !target_alive(s->pid))
			die_setup(s, "process %d exited during attach",
				  s->pid);
		if (n < 0)
			die_setup(s, "cannot attach uprobes to %s: %s",
				  libs->path[i], strerror(-n));
		if (n > 0 && !s->trace.library[0])
			describe_path(s, libs->path[i]);
		if (n > 0 && !s->child_lib[0]) {	/* --children */
			snprintf(s->child_lib, sizeof(s->child_lib), "%s",
				 libs->path[i]);
			s->child_syms = libs->syms[i];
		}
	}
}

/* -p PID: the process exists, and no other rfbpf is on it. */
static void claim_target(struct session *s, pid_t pid)
{
	char why[256];

	if (!target_alive(pid))
		die_setup(s, "no process with PID %d (is it running?)", pid);
	s->pid = pid;
	if (activation_lock(&s->act, pid, why, sizeof(why)))
		die_setup(s, "%s", why);
}

static void setup(struct session *s, struct options *opt)
{
	static struct libraries libs;
	char why[512];
	int err;

	if (!have_tracing_privileges(why, sizeof(why)))
		die_setup(s, "%s", why);
	if (opt->pid) {
		claim_target(s, opt->pid);
		s->pidfd = syscall(SYS_pidfd_open, s->pid, 0);
	} else {
		err = launch_prepare(&s->launch, opt->command);
		if (err)
			die_setup(s, "cannot start %s: %s", opt->command[0],
				  strerror(-err));
		s->launched = true;
		s->pid = s->launch.pid;
		s->act.pid = s->pid;
		/* Registered once the command has loaded torch. */
		s->activation_pending = opt->activate;
	}
	trace_init(&s->trace, s->pid);
	if (opt->pid)
		target_comm(s->pid, s->trace.process_name,
			    sizeof(s->trace.process_name));
	else
		snprintf(s->trace.process_name, sizeof(s->trace.process_name),
			 "%s", strrchr(opt->command[0], '/') ?
			 strrchr(opt->command[0], '/') + 1 : opt->command[0]);
	choose_libraries(s, &libs);
	err = probes_load(&s->probes, s->pid, opt->ringbuf_mb,
			  libs.nr && libs.syms[0].old_string_abi,
			  opt->tree_prob, why, sizeof(why));
	if (err)
		die_setup(s, "%s", why);
	s->trace.tree_prob = opt->tree_prob;
	/* Tests only: widen the window in which a target can exit mid-attach,
	 * so "exits during attach" is tested deterministically. */
	if (getenv("RFBPF_TEST_ATTACH_DELAY_MS"))
		usleep(1000 * atoi(getenv("RFBPF_TEST_ATTACH_DELAY_MS")));
	/* Optimized probes need the callback, so they come with activation;
	 * entry probes are attached now (launch mode: before exec). */
	s->use_stubs = opt->activate && (opt->probes == PROBES_CALLBACK ||
		(opt->probes == PROBES_AUTO && probes_kernel_optimizes_nop()));
	snprintf(s->trace.probes, sizeof(s->trace.probes), "%s",
		 s->use_stubs ? "callback stubs (optimized uprobes)" :
		 "RecordFunction::before/end entry (int3 uprobes)");
	if (!s->use_stubs)
		attach_libraries(s, &libs);
	else if (!s->trace.library[0] && libs.nr)
		describe_path(s, libs.path[0]);
	if (session_open_ring(s))
		die_setup(s, "cannot read the ring buffer: %s",
			  strerror(errno));
	if (opt->children)
		session_children_start(s);
	if (!s->launched && opt->activate && session_gpu_agent_activation(s))
		fprintf(stderr, "rfbpf: the job's CUPTI agent switched "
			"RecordFunction on (RFBPF_SAMPLE): no ptrace needed\n");
	else if (!s->launched && opt->activate &&
		 session_activate(s, libs.path[0], why, sizeof(why)))
		die_setup(s, "cannot switch RecordFunction on in process %d: "
			  "%s; nothing was changed", s->pid, why);
}

static int write_outputs(struct session *s)
{
	int ret = 0;

	if (s->opt->table)
		print_table(stdout, &s->trace, s->opt->sort, s->opt->top);
	if (s->opt->trace_path &&
	    export_chrome_trace(&s->trace, s->opt->trace_path)) {
		fprintf(stderr, "rfbpf: cannot write %s: %s\n",
			s->opt->trace_path, strerror(errno));
		ret = 1;
	}
	if (s->opt->folded_path &&
	    export_folded(&s->trace, s->opt->folded_path)) {
		fprintf(stderr, "rfbpf: cannot write %s: %s\n",
			s->opt->folded_path, strerror(errno));
		ret = 1;
	}
	if (s->opt->gpu_folded_path && !s->trace.gpu.counts.agent_seen)
		fprintf(stderr, "rfbpf: %s has no GPU frames: the target never "
			"loaded the CUPTI agent (run it with "
			"CUDA_INJECTION64_PATH=/path/to/librfbpf_cupti.so)\n",
			s->opt->gpu_folded_path);
	if (s->opt->gpu_folded_path &&
	    export_gpu_folded(&s->trace, s->opt->gpu_folded_path)) {
		fprintf(stderr, "rfbpf: cannot write %s: %s\n",
			s->opt->gpu_folded_path, strerror(errno));
		ret = 1;
	}
	return ret;
}

/* --deactivate -p PID: remove the callback a killed rfbpf left. */
static int deactivate_leftover(struct session *s, const struct options *opt)
{
	char why[512], path[PATH_MAX];
	bool found;

	if (!have_tracing_privileges(why, sizeof(why)))
		die_setup(s, "%s", why);
	claim_target(s, opt->pid);
	target_comm(s->pid, s->trace.process_name,
		    sizeof(s->trace.process_name));
	library_of_target(s, path, sizeof(path));
	/* The op-entry safe point needs rfbpf's BPF object; without it only
	 * a waiting thread will do. */
	if (!probes_load(&s->probes, s->pid, 1, false, 1.0, why, sizeof(why)))
		session_init_safe_point(s);
	s->act.find.find_ms = 10000;
	if (activation_prepare(&s->act, path, why, sizeof(why)) ||
	    activation_remove_leftover(&s->act, &found, why, sizeof(why)))
		die_setup(s, "%s", why);
	activation_unlock(&s->act);
	probes_destroy(&s->probes);
	printf("rfbpf: %s\n", found ? "removed the RecordFunction callback "
	       "a previous rfbpf left" : "no callback left by rfbpf found");
	return 0;
}

int main(int argc, char **argv)
{
	static struct session s = {
		.pidfd = -1, .act = { .lock_fd = -1 },
		.gpu = { .mem_fd = -1 },
	};
	struct options opt;
	int ret;

	parse_options(argc, argv, &opt);
	verbose = opt.verbose;
	s.opt = &opt;
	libbpf_set_print(libbpf_print_fn);
	if (opt.deactivate)
		return deactivate_leftover(&s, &opt);
	/* Before anything touches the target: a signal then only sets a
	 * flag, and every call into the target finishes and is undone. */
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	signal(SIGPIPE, SIG_IGN);	/* a closed pipe is an error, not death */
	setup(&s, &opt);

	if (s.launched) {
		/* Told to stop before the command ran (the same Ctrl-C reached
		 * the held child with rfbpf's handler, which only counts): it
		 * never starts, as if the signal had ended it. */
		if (stop_signals) {
			launch_abort(&s.launch);
			return 128 + last_signal;
		}
		ret = launch_release(&s.launch);
		if (ret == -EPIPE && launch_reap(&s.launch, true, &ret))
			return ret;	/* a signal ended it before exec */
		if (ret)
			die_setup(&s, "cannot run %s: %s", opt.command[0],
				  strerror(-ret));
		/* RecordFunction on before the command's first op. */
		if (s.activation_pending)
			session_launch_activate(&s);
	} else if (!target_alive(s.pid)) {
		die_setup(&s, "process %d exited during attach", s.pid);
	}
	fprintf(stderr, "rfbpf: tracing PID %d (%s)%s%s, probes: %s; %s\n",
		s.pid, s.trace.process_name, s.trace.library[0] ? " via " : "",
		s.trace.library, s.trace.probes,
		s.launched ? "until it exits" : "Ctrl-C to stop");
	status_init(&s.status, opt.quiet);

	session_run(&s);
	if (s.trace.activated && !s.trace.counts.events &&
	    monotonic_s() - s.start_s > 0.5)
		fprintf(stderr, "rfbpf: warning: RecordFunction was on in "
			"process %d but no op was recorded: it ran none while "
			"traced, or its threads are not visible from rfbpf's "
			"PID namespace (run rfbpf in the job's container or on "
			"the host)\n", s.pid);
	ret = write_outputs(&s);
	ring_buffer__free(s.rb);
	probes_destroy(&s.probes);
	if (s.launched) {
		session_reap_command(&s, true);
		ret = s.child_code;
	}
	if (s.detach_failed && !ret)
		ret = 3;
	activation_unlock(&s.act);
	trace_free(&s.trace);
	return ret;
}
