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
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "model/clocks.h"
#include "cli.h"
#include "attach/privileges.h"
#include "attach/state_dir.h"
#include "all/all_processes.h"
#include "fleet/daemon.h"
#include "session/outputs.h"
#include "session/session.h"
#include "session/children.h"
#include "gpu/gpu_session.h"
#include "attach/target.h"
#include "version.h"

static int verbose;

/* libbpf's debug and info lines are hundreds of CO-RE relocations a load:
 * -vv. -v is rfbpf's own progress, and libbpf's warnings. */
static int libbpf_print_fn(enum libbpf_print_level level, const char *fmt,
			   va_list args)
{
	if (verbose < (level == LIBBPF_WARN ? 1 : 2))
		return 0;
	return vfprintf(stderr, fmt, args);
}

static volatile sig_atomic_t last_signal;

static void on_dump_signal(int sig)
{
	(void)sig;
	dump_signals++;
}

static void on_signal(int sig)
{
	last_signal = sig;
	stop_signals++;
}

/* A signal came before the command ran: it never starts, as if the
 * signal had ended it, and the trace is not written (a trace of nothing
 * must not replace a good one at that path). */
static int stopped_before_start(struct session *s, const struct options *opt,
				int code)
{
	const char *sig = last_signal == SIGINT ? "SIGINT" :
			  last_signal == SIGTERM ? "SIGTERM" :
			  last_signal == SIGHUP ? "SIGHUP" : "a signal";

	outputs_discard(&s->out);
	fprintf(stderr, "rfbpf: %s before %s started: nothing traced%s%s%s\n",
		sig, opt->command[0], opt->trace_path ? ", " : "",
		opt->trace_path ? opt->trace_path : "",
		opt->trace_path ? " not written (a file there is left as it "
		"was)" : "");
	return code;
}

static _Noreturn void die_setup(struct session *s, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rfbpf: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	session_abort(s);
	exit(1);
}

/* --deactivate -p PID: remove the callback a killed rfbpf left. */
static int deactivate_leftover(struct session *s, const struct options *opt)
{
	char why[512], path[PATH_MAX];
	bool found = false;	/* die_setup() exits, which clang cannot see */

	if (!have_tracing_privileges(why, sizeof(why)) ||
	    state_dir_prepare(why, sizeof(why)))
		die_setup(s, "%s", why);
	if (session_claim_target(s, opt->pid))
		die_setup(s, "%s", s->error);
	target_comm(s->pid, s->trace.process_name,
		    sizeof(s->trace.process_name));
	if (target_find_libtorch(s->pid, path, sizeof(path)) == -ENOENT)
		die_setup(s, "process %d (%s) has no libtorch_cpu.so mapped",
			  s->pid, s->trace.process_name);
	if (session_library_of_target(s, path, sizeof(path)))
		die_setup(s, "%s", s->error);	/* why maps are unreadable */
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

/* An empty table, said in one line: why, and what to do. A launched
 * command that never loaded torch keeps its exit status (launch mode
 * passes the command's on, and scripts rely on it); the line says that
 * nothing was traced. */
static void warn_if_nothing_traced(const struct session *s,
				   const struct options *opt)
{
	if (s->launched && !s->lib_checked && !s->trace.counts.ops)
		fprintf(stderr, "rfbpf: warning: %s never loaded "
			"libtorch_cpu.so, so nothing was traced: check that it "
			"imports torch (a launcher that runs Python in a child "
			"process needs --children), or attach with -p to a "
			"process that has\n", opt->command[0]);
	else if (!opt->activate && !s->trace.counts.ops)
		fprintf(stderr, "rfbpf: warning: no op was recorded: with "
			"--no-activate rfbpf sees only the ops the process's "
			"own RecordFunction callbacks switch on (torch.profiler, "
			"an observer it registered), and none was on while "
			"traced; drop --no-activate to switch RecordFunction "
			"on\n");
	else if (s->trace.activated && !s->trace.counts.events &&
		 monotonic_s() - s->start_s > 0.5)
		fprintf(stderr, "rfbpf: warning: RecordFunction was on in "
			"process %d but no op was recorded: it ran none while "
			"traced, or its threads are not visible from rfbpf's "
			"PID namespace (run rfbpf in the job's container or on "
			"the host)\n", s->pid);
}

/* The command let go to exec, with RecordFunction on before its first
 * op; or the target checked alive. False, with its exit code, if it
 * never started. */
static bool start_target(struct session *s, const struct options *opt,
			 int *code)
{
	int ret;

	if (!s->launched) {
		if (!target_alive(s->pid))
			die_setup(s, "process %d exited during attach", s->pid);
		return true;
	}
	/* Told to stop before the command ran (the same Ctrl-C reached the
	 * held child with rfbpf's handler, which only counts): it never
	 * starts, as if the signal had ended it. */
	if (stop_signals) {
		launch_abort(&s->launch);
		*code = stopped_before_start(s, opt, 128 + last_signal);
		return false;
	}
	ret = launch_release(&s->launch);
	/* A signal ended it before exec. */
	if (ret == -EPIPE && launch_reap(&s->launch, true, &ret)) {
		*code = stopped_before_start(s, opt, ret);
		return false;
	}
	if (ret)
		die_setup(s, "cannot run %s: %s", opt->command[0],
			  strerror(-ret));
	/* RecordFunction on before the command's first op. */
	if (s->activation_pending)
		session_launch_activate(s);
	return true;
}

/* The outputs written, everything let go; rfbpf's exit code. */
static int finish(struct session *s, const struct options *opt)
{
	int ret;

	/* A Ctrl-C that ended the command before its first op: no trace of
	 * nothing over the file at that path either. */
	if (s->launched && stop_signals && !s->trace.nr_ops &&
	    outputs_discard(&s->out))
		fprintf(stderr, "rfbpf: %s was stopped by a signal before its "
			"first op: %s not written (a file there is left as "
			"it was)\n", opt->command[0], opt->trace_path);
	warn_if_nothing_traced(s, opt);
	ret = outputs_finish(&s->out, &s->trace, opt);
	ring_buffer__free(s->rb);
	probes_destroy(&s->probes);
	if (s->launched) {
		/* The command's status, unless it succeeded and rfbpf could
		 * not write what it was asked to: that run failed. */
		session_reap_command(s, true);
		if (s->child_code || !ret)
			ret = s->child_code;
	}
	if (s->detach_failed && !ret)
		ret = 3;
	activation_unlock(&s->act);
	outputs_free(&s->out);
	trace_free(&s->trace);
	return ret;
}

int main(int argc, char **argv)
{
	static struct session s = {
		.pidfd = -1, .act = { .lock_fd = -1 },
		.gpu = { .agent = { .mem_fd = -1 } },
	};
	struct options opt;
	int code;

	parse_options(argc, argv, &opt);
	verbose = opt.verbose;
	s.opt = &opt;
	libbpf_set_print(libbpf_print_fn);
	if (opt.deactivate)
		return deactivate_leftover(&s, &opt);
	if (opt.continuous) {
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
		signal(SIGPIPE, SIG_IGN);
		if (opt.flight_s)
			signal(SIGUSR1, on_dump_signal);
		return fleet_run(&opt, argc, argv);
	}
	if (opt.all)
		return all_processes_run(&opt, argc, argv);
	/* Before anything touches the target: a signal then only sets a
	 * flag, and every call into the target finishes and is undone. */
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	signal(SIGPIPE, SIG_IGN);	/* a closed pipe is an error, not death */
	if (opt.flight_s)
		signal(SIGUSR1, on_dump_signal);
	if (!opt.table && !opt.trace_path && !opt.folded_path &&
	    !opt.gpu_folded_path && !opt.off_cpu_folded_path &&
	    !opt.memory_folded_path)
		fprintf(stderr, "rfbpf: warning: --no-table and no -o, --folded, "
			"--gpu-folded, --off-cpu-folded or --memory-folded: this "
			"run writes nothing\n");
	if (session_setup(&s, &opt))
		die_setup(&s, "%s", s.error);
	if (!start_target(&s, &opt, &code))
		return code;
	fprintf(stderr, "rfbpf: tracing PID %d (%s)%s%s, probes: %s; %s\n",
		s.pid, s.trace.process_name, s.trace.library[0] ? " via " : "",
		s.trace.library, s.trace.probes,
		s.launched ? "until it exits" : "Ctrl-C to stop");
	status_init(&s.status, opt.quiet);
	session_run(&s);
	return finish(&s, &opt);
}
