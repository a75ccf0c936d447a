// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <poll.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include "model/clocks.h"
#include "session/session.h"
#include "session/children.h"
#include "gpu/gpu_session.h"
#include "attach/safe_point.h"
#include "attach/target.h"
#include "attach/torch_layouts.h"
#include "model/events.h"
#include "python/py_stack.h"

volatile sig_atomic_t stop_signals;
volatile sig_atomic_t dump_signals;

/* A thread seen for the first time: name it while it is alive. It may be
 * a thread of a child process (--children). One that is gone already (its
 * records read only as the job ended) is named as it exited. */
static void name_new_thread(void *ctx, struct trace *t, struct thread *th)
{
	struct session *s = ctx;
	char comm[16];

	target_thread_comm(th->pid, th->tid, comm, sizeof(comm));
	if (!comm[0])
		probes_exited_comm(&s->probes, th->tid, comm, sizeof(comm));
	trace_name_thread(t, th, comm);
}

static void forked(void *ctx, uint32_t child)
{
	session_children_forked(ctx, (pid_t)child);	/* --children */
}

static void cupti_call(void *ctx, unsigned index, int tid)
{
	struct session *s = ctx;

	gpu_session_cupti_call(&s->gpu, index, tid);
}

static void py_stack_note(void *ctx, struct trace *t,
			  const struct rf_py_stack_event *e)
{
	struct session *s = ctx;

	py_session_note(&s->py, t, e);
}

/* The record itself goes to the model (model/events.h); the session
 * adds what needs the live target. */
static int handle_event(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;
	const struct event_hooks hooks = {
		.new_thread = name_new_thread, .forked = forked,
		.cupti_call = cupti_call, .py_stack = py_stack_note, .ctx = s,
	};

	events_dispatch(&s->trace, &hooks, data, size);
	/* Time to come up for air? The event is read: libbpf returns
	 * with it consumed. */
	if (s->read_until_s && ++s->since_clock >= 4096) {
		s->since_clock = 0;
		if (monotonic_s() >= s->read_until_s)
			return -EAGAIN;
	}
	return 0;
}

int session_read(struct session *s, int timeout_ms, double budget_s)
{
	int ret;

	s->read_until_s = monotonic_s() + budget_s;
	ret = timeout_ms < 0 ? ring_buffer__consume(s->rb) :
			       ring_buffer__poll(s->rb, timeout_ms);
	s->read_until_s = 0;
	return ret == -EAGAIN ? 0 : ret;
}

/* While rfbpf waits on the target, keep reading events. In launch mode
 * it waits for the command's first op, however late: keep the CUPTI
 * agent's lease meanwhile, since the job may wait for it (its threads
 * then stop at their first ops together, see park_others). With -p the
 * lease waits for the callback: ops the lease let go before it would be
 * missed. */
static void drain(void *ctx)
{
	struct session *s = ctx;

	if (s->rb)
		ring_buffer__consume(s->rb);
	if (s->act.find.park_others && !s->act.holding)
		gpu_session_poll(&s->gpu, monotonic_s());
}

/* A running job reaches a safe point within milliseconds (its next op or
 * its next wait); one that does neither for this long gets a clear error. */
#define ATTACH_FIND_MS 3000

/* The BPF side of safe points (safe_point.h), for activation.c. */
static int arm_safe_point(void *ctx, pid_t pid, int sig, const pid_t *tids,
			  int nr)
{
	struct session *s = ctx;

	return probes_arm_safe_point(&s->probes, pid, s->act.lib,
				     s->act.entry_off, sig, tids, nr);
}

static int allow_safe_point(void *ctx, pid_t tid)
{
	struct session *s = ctx;

	return probes_allow_stop(&s->probes, tid);
}

static void stop_all_at_safe_point(void *ctx)
{
	struct session *s = ctx;

	probes_stop_every_thread(&s->probes);
}

static void reap_safe_point(void *ctx)
{
	struct session *s = ctx;

	probes_reap_safe_point(&s->probes);
}

static void disarm_safe_point(void *ctx)
{
	struct session *s = ctx;

	probes_disarm_safe_point(&s->probes);
}

/* The stop inside rfbpf's start callback, from the probe already on it. */
static int arm_callback_point(void *ctx, pid_t pid, int sig,
			      const pid_t *tids, int nr)
{
	struct session *s = ctx;

	(void)pid;
	return probes_arm_callback_stop(&s->probes, sig, tids, nr);
}

void session_init_safe_point(struct session *s)
{
	s->act.verbose = s->opt->verbose;
	s->safe_point = (struct safe_point_probe){
		.arm = arm_safe_point, .allow = allow_safe_point,
		.stop_all = stop_all_at_safe_point,
		.disarm = disarm_safe_point, .reap = reap_safe_point,
		.ctx = s,
	};
	s->act.probe = &s->safe_point;
	s->callback_point = s->safe_point;
	s->callback_point.arm = arm_callback_point;
	s->callback_point.reap = NULL;	/* nothing was attached */
	s->callback_point.where = "in rfbpf's start callback";
	s->act.find.find_ms = s->attach_find_ms ? s->attach_find_ms :
			      ATTACH_FIND_MS;
}

int session_open_ring(struct session *s)
{
	s->rb = ring_buffer__new(probes_events_fd(&s->probes), handle_event,
				 s, NULL);
	/* From now on every wait on the target keeps reading. */
	remote_set_idle(drain, s);
	session_init_safe_point(s);
	return s->rb ? 0 : -errno;
}

/* Optimized path: probe the page's callback stubs and let them enter
 * their probes. */
static int probe_stubs(struct session *s, uint64_t *start, uint64_t *end,
		       char *err, size_t len)
{
	/* pid -1: the page is this job's own memfd, so no other process
	 * maps it but the job's forked children, which never reach these
	 * two (their `on` is wiped), and BPF filters by tgid. A uprobe for
	 * one pid is a perf event bound to the job's main thread, which the
	 * kernel switches out and in with it: about 1 us each time it
	 * sleeps here (bench/task_event_switch.py), and the MLP job's main
	 * thread sleeps 5,900 times a second (docs/BENCHMARKS.md, "A perf
	 * event on the job's main thread"). */
	int ret = probes_attach_callbacks(&s->probes, -1, s->act.page.path,
					  STUB_START_PROBE, STUB_END_PROBE,
					  s->opt->verbose);

	if (!ret && s->opt->children && !s->child_stubs_probed) {
		ret = probes_attach_child_callbacks(&s->probes,
						    s->act.page.path,
						    STUB_START_CHILD_CHECK,
						    STUB_END_CHILD_CHECK,
						    s->opt->verbose);
		s->child_stubs_probed = !ret;
	}
	if (!ret)
		ret = stub_page_set_on(s->pid, &s->act.page, true);
	if (ret)
		return snprintf(err, len, "cannot probe the callback stubs: "
				"%s", strerror(-ret)), ret;
	*start = s->act.page.addr + STUB_START_OFFSET;
	*end = s->act.page.addr + STUB_END_OFFSET;
	s->act.callback_probe = &s->callback_point;
	return 0;
}

/* Now, in the unit of process start times (clock ticks after boot). */
static unsigned long long boot_ticks(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (unsigned long long)ts.tv_sec * sysconf(_SC_CLK_TCK) +
	       (unsigned long long)ts.tv_nsec * sysconf(_SC_CLK_TCK) /
	       1000000000ull;
}

/* Which threads were there before the callback: the ones that start
 * later begin with PyTorch's sampler in its initial state. */
static void note_threads_alive(struct session *s)
{
	uint32_t *tids;
	size_t n = target_threads(s->pid, &tids);

	trace_threads_alive(&s->trace, tids, n);
	free(tids);
}

/* Bursts, in the attach stop: the control thread instead of a
 * callback; it registers one (p = 1) for each burst. Not under a seccomp
 * filter: the thread's system calls (clone, clock_nanosleep, futex...)
 * are ones the job may never make. */
static int start_control(struct session *s, uint64_t start, uint64_t end,
			 char *err, size_t len)
{
	struct rf_callback_abi cb = {
		.start = start, .end = end, .sampling_prob = 1.0,
		.needs_inputs = s->act.needs_inputs,
	};

	if (activation_seccomp_mode(s->pid))
		return snprintf(err, len, "process %d runs under a seccomp "
				"filter: rfbpf starts no thread in it (run "
				"the daemon with --sampled)", s->pid),
		       -EPERM;
	for (int i = 0; i < RF_NUM_SCOPES; i++)
		cb.scopes[i] = !!(s->opt->scopes & (1u << i));
	return control_thread_start(&s->control, &s->act.held, &s->act.page,
				    &cb, s->act.add_addr, s->act.remove_addr,
				    err, len);
}

int session_activate(struct session *s, const char *lib, char *err,
		     size_t len)
{
	uint64_t start = 0, end = 0;
	bool probed = false;
	int ret;

	session_python_start(s);	/* the first op has its stack */
	ret = activation_prepare(&s->act, lib, err, len);
	if (!ret)	/* before any hold: it may take up to its lease */
		activation_reap_control(&s->act);

	/* Attaching uprobes takes milliseconds (tens on a loaded machine):
	 * not while a thread of the job is held. A first attach maps the page
	 * in a hold of its own; launch mode does it all at the command's
	 * first op, which must not run untraced. */
	if (!ret && s->use_stubs && !s->launched &&
	    stub_page_find(s->pid, &s->act.page) &&
	    !(ret = activation_begin(&s->act, err, len)))
		activation_finish(&s->act);
	if (!ret && s->use_stubs && s->act.page.addr) {
		ret = probe_stubs(s, &start, &end, err, len);
		probed = true;
	}
	if (!ret)
		gpu_session_want_agent(&s->gpu);
	if (!ret)
		ret = activation_begin(&s->act, err, len);
	if (ret)
		return ret;
	if (s->use_stubs && !probed)
		ret = probe_stubs(s, &start, &end, err, len);
	s->activated_ticks = boot_ticks();
	if (!ret && s->want_control)
		ret = start_control(s, start, end, err, len);
	else if (!ret)
		ret = activation_register(&s->act, s->opt->sample_prob,
					  s->opt->scopes, start, end, err, len);
	if (!ret)	/* the same stop: a CUDA job started without it */
		gpu_session_inject(&s->gpu, &s->act.held);
	activation_finish(&s->act);
	if (ret) {
		stub_page_set_on(s->pid, &s->act.page, false);
		return ret;
	}
	s->trace.sample_prob = s->want_control ? 1.0 : s->opt->sample_prob;
	s->trace.activated = true;
	note_threads_alive(s);
	return 0;
}

/* A detach is retried for this long: every op a busy job dispatches is a
 * chance, and so is every wait of an idle one. */
#define DETACH_FIND_MS 10000

/* How long a retry of the agent's load looks for a thread at an op
 * before it lets the hold go (to one waiting, which gets nothing). */
#define INJECT_FIND_MS 500

void session_retry_gpu_inject(struct session *s)
{
	char err[256];

	if (!gpu_session_wants_hold(&s->gpu, monotonic_s()))
		return;
	s->act.find.find_ms = INJECT_FIND_MS;
	s->act.find.cancel = NULL;
	remote_set_idle(drain, s);	/* this session's ring, while held */
	if (activation_begin(&s->act, err, sizeof(err))) {
		if (s->opt->verbose)
			fprintf(stderr, "rfbpf: GPU: no hold to load the agent "
				"in: %s\n", err);
		return;
	}
	gpu_session_inject(&s->gpu, &s->act.held);
	activation_finish(&s->act);
}

int session_set_sample_prob(struct session *s, double p,
			    struct replace_times *times, char *err, size_t len)
{
	uint64_t start = 0, end = 0;
	int ret;

	if (s->use_stubs && s->act.page.addr) {
		start = s->act.page.addr + STUB_START_OFFSET;
		end = s->act.page.addr + STUB_END_OFFSET;
	}
	s->act.find.find_ms = s->attach_find_ms ? s->attach_find_ms :
			      ATTACH_FIND_MS;
	s->act.find.cancel = NULL;
	remote_set_idle(drain, s);	/* this session's ring, while held */
	ret = activation_replace(&s->act, p, s->opt->scopes, start, end,
				 times, err, len);
	if (!ret)
		s->trace.sample_prob = p;
	return ret;
}

void session_read_counters(struct session *s, struct counts *c)
{
	struct rf_off_cpu_counts sched = { 0 };

	probes_read_counters(&s->probes, c);
	off_cpu_procs_read(&s->off_cpu, &sched);
	c->off_cpu_switches += sched.switches;
	c->drops += sched.drops;
}

void session_free(struct session *s)
{
	if (s->rb)
		ring_buffer__free(s->rb);
	s->rb = NULL;
	off_cpu_procs_stop(&s->off_cpu);
	probes_destroy(&s->probes);
	activation_unlock(&s->act);
	if (s->pidfd >= 0)
		close(s->pidfd);
	s->pidfd = -1;
	outputs_free(&s->out);
	trace_free(&s->trace);
	py_session_free(&s->py);
}

void session_abort(struct session *s)
{
	outputs_discard(&s->out);	/* nothing traced: no file made */
	if (s->act.handle || s->control.block)
		session_deactivate(s);
	activation_unlock(&s->act);
	if (s->launched)
		launch_abort(&s->launch);
	if (s->rb)
		ring_buffer__free(s->rb);
	s->rb = NULL;
	off_cpu_procs_stop(&s->off_cpu);
	probes_destroy(&s->probes);
}

void session_deactivate(struct session *s)
{
	uint64_t handle = s->act.handle;
	char err[512];

	if (s->control.block && control_thread_stop(&s->control, 3000) &&
	    target_alive(s->pid))
		fprintf(stderr, "rfbpf: warning: the control thread in process "
			"%d did not stop within 3 s; its lease ends it\n",
			s->pid);
	s->act.find.find_ms = DETACH_FIND_MS;
	s->act.find.cancel = NULL;
	remote_set_idle(drain, s);	/* this session's ring, while held */
	if (!activation_stop(&s->act, err, sizeof(err))) {
		/* No new child gets it now: take it from those that did. */
		session_children_detach(s, handle);
	} else {
		status_clear(&s->status);
		fprintf(stderr, "rfbpf: error: the RecordFunction callback is "
			"still registered in process %d (%s): it keeps paying "
			"for RecordFunction until you run rfbpf --deactivate "
			"-p %d\n", s->pid, err, s->pid);
		s->detach_failed = true;
	}
}

/* After the probes are gone: the page's stubs no longer enter them (ops
 * that started under the callback may still call the end stub). */
static void quiet_stubs(struct session *s)
{
	if (s->act.page.addr && target_alive(s->pid))
		stub_page_set_on(s->pid, &s->act.page, false);
}

void session_set_build(struct session *s, const char *path,
		       const struct torch_symbols *syms)
{
	struct rf_inputs_config cfg;
	int major = 0, minor = 0;
	char why[256];

	s->trace.fwd_threads = probes_set_build(&s->probes, path, syms);
	if (!torch_version_text(path, s->trace.torch_version,
				sizeof(s->trace.torch_version)))
		s->trace.torch_version[0] = 0;
	/* Collectives' inputs are read in any case (their tensors give the
	 * bytes a collective moves); every op's only with --shapes. */
	torch_version(path, &major, &minor);
	if (!torch_inputs_layout(major, minor, syms->old_string_abi, &cfg,
				 &s->trace.inputs.nr_dtypes, why,
				 sizeof(why))) {
		if (!s->opt->shapes)
			return;
		status_clear(&s->status);
		fprintf(stderr, "rfbpf: warning: --shapes: %s; ops are traced "
			"without their inputs\n", why);
		return;
	}
	cfg.enabled = s->opt->shapes;
	cfg.collectives = 1;
	s->trace.inputs.every_op = s->opt->shapes;
	probes_set_inputs(&s->probes, &cfg);
}

/* Probes a library the command mapped that was not probed before exec. */
static void probe_late_library(struct session *s, const char *path)
{
	struct torch_symbols syms;
	int n;

	if (probes_has_lib(&s->probes, path))
		return;
	n = torch_symbols_resolve(path, &syms);
	if (n <= 0 || !syms.nr_before || !syms.offset[RF_V_END]) {
		status_clear(&s->status);
		fprintf(stderr, "rfbpf: warning: %s has no RecordFunction "
			"symbols rfbpf supports; nothing will be traced\n",
			path);
		return;
	}
	if (!s->child_lib[0]) {		/* --children */
		snprintf(s->child_lib, sizeof(s->child_lib), "%s", path);
		s->child_syms = syms;
	}
	if (!s->probes.nr_libs)
		session_set_build(s, path, &syms);
	if (probes_attach_lib(&s->probes, s->pid, path, &syms,
			      s->opt->verbose) < 0) {
		fprintf(stderr, "rfbpf: warning: cannot probe %s: %s\n", path,
			strerror(errno));
		return;
	}
	status_clear(&s->status);
	fprintf(stderr, "rfbpf: warning: the command loaded %s, which was "
		"probed only once mapped: its first ops may be missing (name "
		"it with --lib to trace from the start)\n", path);
	target_mapped_name(path, s->trace.library, sizeof(s->trace.library));
}

void session_check_launched_lib(struct session *s)
{
	char path[PATH_MAX];

	if ((s->lib_checked && !s->activation_pending) ||
	    target_find_libtorch(s->pid, path, sizeof(path)))
		return;
	if (!s->lib_checked && !s->use_stubs)
		probe_late_library(s, path);
	s->lib_checked = true;
	session_python_start(s);	/* --no-activate: no activation */
	if (s->activation_pending) {
		char err[512];

		s->activation_pending = false;
		if (session_activate(s, path, err, sizeof(err))) {
			status_clear(&s->status);
			fprintf(stderr, "rfbpf: warning: cannot switch "
				"RecordFunction on: %s; tracing only what the "
				"command's own callbacks record\n", err);
		}
	}
}

/* --off-cpu: where the target's GIL is, so that BPF can tell a wait for
 * it from other sleeps (nothing to do for a process that is not Python). */
static void find_gil(struct session *s)
{
	struct py_reader r;
	uint64_t gil = 0;
	char why[256];

	if (!s->opt->off_cpu || s->gil_found ||
	    py_reader_open(&r, s->pid, why, sizeof(why)))
		return;
	if (!py_gil_address(&r, &gil)) {
		off_cpu_procs_set_gil(&s->off_cpu, gil);
		s->gil_found = true;
	}
	py_reader_close(&r);
}

void session_python_start(struct session *s)
{
	char why[256];

	find_gil(s);
	if (!s->opt->python_stacks ||
	    py_session_start(&s->py, s->pid, s->opt->python_depth,
			     &s->probes, &s->trace, why, sizeof(why)) ||
	    !why[0])
		return;
	status_clear(&s->status);
	fprintf(stderr, "rfbpf: warning: --python-stacks: %s; ops are traced "
		"without Python frames\n", why);
}

bool session_reap_command(struct session *s, bool block)
{
	int st;

	if (s->child_exited)
		return true;
	if (!launch_reap(&s->launch, block, &s->child_code))
		return false;
	s->child_exited = true;
	if (s->child_code >= 0)
		return true;
	/* A wait on its threads took the status (remote_call.h). */
	if (remote_reaped(s->pid, &st)) {
		s->child_code = WIFEXITED(st) ? WEXITSTATUS(st) :
				128 + WTERMSIG(st);
	} else {
		fprintf(stderr, "rfbpf: warning: the command's exit status "
			"was lost; exiting with 1\n");
		s->child_code = 1;
	}
	return true;
}

/* Launch mode: stop waiting for the command's first op once it exited, or
 * once rfbpf was told twice to stop (the first Ctrl-C is the command's). */
static bool launch_cancelled(void *ctx)
{
	struct session *s = ctx;

	return stop_signals > 1 || !target_alive(s->pid) ||
	       (s->opt->duration_s &&
		monotonic_s() - s->launch_s >= s->opt->duration_s);
}

/* Waits until the command has mapped libtorch_cpu's code (not only
 * reserved its address range), holding the file open: path becomes
 * /proc/self/fd/N, valid whatever the loader does to the mappings next.
 * Returns false if launch_cancelled() says so first. */
static bool wait_for_torch(struct session *s, char *path, size_t len)
{
	char err[512], mapped[PATH_MAX];
	bool prepared = false;
	uint64_t addr;
	int fd = -1;

	for (;;) {
		if (fd < 0 && !target_find_libtorch(s->pid, mapped,
						    sizeof(mapped)) &&
		    (fd = open(mapped, O_RDONLY | O_CLOEXEC)) >= 0) {
			snprintf(path, len, "/proc/self/fd/%d", fd);
			target_mapped_name(mapped, s->trace.library,
					   sizeof(s->trace.library));
		}
		if (fd >= 0 && !prepared) {
			if (activation_prepare(&s->act, path, err,
					       sizeof(err))) {
				fprintf(stderr, "rfbpf: warning: %s\n", err);
				return false;
			}
			prepared = true;
		}
		if (prepared && !target_addr_of_offset(s->pid, path,
						       s->act.add_off, &addr))
			return true;
		if (launch_cancelled(s))
			return false;
		usleep(1000);
	}
}

void session_launch_activate(struct session *s)
{
	char path[PATH_MAX], err[512];

	s->launch_s = monotonic_s();
	if (!wait_for_torch(s, path, sizeof(path)))
		return;
	/* Named as it runs now, not as launched: a launcher (chroot, env,
	 * a shell script) has exec'd the program that loaded torch. */
	target_comm(s->pid, s->trace.process_name,
		    sizeof(s->trace.process_name));
	s->activation_pending = false;
	s->lib_checked = true;
	if (!s->use_stubs)
		probe_late_library(s, path);
	s->act.find.find_ms = 0;	/* until its first op, however late */
	s->act.find.ops_only = true;
	s->act.find.park_others = true;
	s->act.find.cancel = launch_cancelled;
	s->act.find.cancel_ctx = s;
	if (session_activate(s, path, err, sizeof(err))) {
		if (target_alive(s->pid) || s->opt->verbose)
			fprintf(stderr, "rfbpf: warning: cannot switch "
				"RecordFunction on: %s; tracing only what the "
				"command's own callbacks record\n", err);
	}
	s->act.find.cancel = NULL;
	s->act.find.ops_only = false;
	s->act.find.park_others = false;
}

static bool target_gone(struct session *s)
{
	struct pollfd pfd = { .fd = s->pidfd, .events = POLLIN };

	if (s->launched)
		return session_reap_command(s, false);
	if (s->pidfd >= 0)
		return poll(&pfd, 1, 0) > 0;
	return !target_alive(s->pid);
}

/* In launch mode the first Ctrl-C reaches the command too (same process
 * group), which decides what it means: keep tracing until it exits. rfbpf
 * never signals the command itself. A second signal stops tracing at once
 * (the command runs on; rfbpf waits for it and passes on its status). */
static bool should_stop(struct session *s, int *signals_seen)
{
	if (stop_signals == *signals_seen)
		return false;
	*signals_seen = stop_signals;
	if (!s->launched || stop_signals > 1)
		return true;
	status_clear(&s->status);
	fprintf(stderr, "rfbpf: tracing until the command exits (signal "
		"again to stop tracing now)\n");
	return false;
}

void session_run(struct session *s)
{
	int signals_seen = 0, dumps_seen = dump_signals;
	struct counts bpf;

	s->start_s = monotonic_s();
	for (;;) {
		double now;
		/* Poll fast until the launched command has mapped torch, so a
		 * library found only then is probed and activated early. */
		int err = session_read(s, s->launched && !s->lib_checked ? 2 :
				       100, 0.2);

		if (err < 0 && err != -EINTR) {
			fprintf(stderr, "rfbpf: reading the ring buffer: %s\n",
				strerror(-err));
			break;
		}
		if (s->launched)
			session_check_launched_lib(s);
		/* Tracing has begun: the Chrome trace replaces the file at
		 * its path (it ends whole whatever signal comes now). */
		if (s->trace.nr_ops)
			outputs_publish(&s->out, s->opt);
		if (dump_signals != dumps_seen || s->out.slow_step >= 0) {
			int now_seen = dump_signals;

			outputs_poll(&s->out, &s->trace, s->opt,
				     now_seen != dumps_seen);
			dumps_seen = now_seen;
		}
		gpu_session_poll(&s->gpu, monotonic_s());
		session_retry_gpu_inject(s);
		session_children_poll(s, monotonic_s());
		safe_point_poll_late();
		now = monotonic_s() - s->start_s;
		memset(&bpf, 0, sizeof(bpf));
		if (s->status.enabled)
			session_read_counters(s, &bpf);
		status_update(&s->status, now, s->trace.counts.events,
			      s->trace.nr_ops, bpf.drops);
		if (should_stop(s, &signals_seen) || target_gone(s))
			break;
		if (s->opt->duration_s && now >= s->opt->duration_s)
			break;
		if (s->trace.steps && steps_finished(s->trace.steps))
			break;
	}
	status_clear(&s->status);
	session_finish(s);
}

/* How long ops begun before the detach get to end: most end within
 * milliseconds; an op open for longer (a whole training loop's scope)
 * is closed at detach, flagged. */
#define DRAIN_MS 200

/* Start probes off first, end probes kept while the ops begun before
 * end: detaching both at once (or the end probes first) left every op
 * still running without an end, and its time running on to the detach. */
static void drain_ends(struct session *s)
{
	double until = monotonic_s() + DRAIN_MS / 1e3;

	probes_detach_starts(&s->probes);
	off_cpu_procs_stop(&s->off_cpu);
	while (ring_buffer__consume(s->rb) > 0)
		;
	while (s->trace.nr_open && monotonic_s() < until &&
	       target_alive(s->pid))
		if (ring_buffer__poll(s->rb, 10) < 0)
			break;
}

void session_finish(struct session *s)
{
	/* The agent's last records still need the probes attached. */
	gpu_session_finish(&s->gpu);
	/* Switch RecordFunction off, detach so the target runs free, then
	 * drain what is left. */
	session_deactivate(s);
	drain_ends(s);
	probes_detach_all(&s->probes);
	quiet_stubs(s);
	while (ring_buffer__consume(s->rb) > 0)
		;
	session_read_counters(s, &s->trace.counts);
	gpu_detach(&s->trace.gpu);
	stacks_detach(&s->trace, s->trace.last_ns > monotonic_ns() ?
		      s->trace.last_ns : monotonic_ns());
}
