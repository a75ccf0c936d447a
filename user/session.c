// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <poll.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "remote_call.h"
#include "session.h"
#include "session_gpu.h"
#include "target.h"

volatile sig_atomic_t stop_signals;

double monotonic_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* A thread seen for the first time: name it while it is alive. */
static void name_new_thread(struct session *s, uint32_t tid)
{
	bool created;
	struct thread *th = trace_thread(&s->trace, tid, &created);

	if (th && created)
		target_thread_comm(s->pid, tid, th->comm, sizeof(th->comm));
}

static int handle_event(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;
	const struct rf_event_hdr *h = data;

	if (size < sizeof(*h))
		return 0;
	switch (h->kind) {
	case RF_EV_BEFORE: {
		const struct rf_before_event *e = data;
		struct rf_event_hdr hdr = *h;

		if (size < sizeof(*e))
			return 0;
		if (hdr.name_len >= RF_NAME_MAX)
			hdr.name_len = RF_NAME_MAX - 1;
		name_new_thread(s, h->tid);
		stacks_before(&s->trace, &hdr, e->name, e->seq);
		break;
	}
	case RF_EV_END:
		name_new_thread(s, h->tid);
		stacks_end(&s->trace, h);
		break;
	case RF_EV_THREAD_EXIT: {
		const struct rf_thread_exit_event *e = data;
		long i = trace_thread_index(&s->trace, h->tid);

		if (size < sizeof(*e))
			return 0;
		if (i >= 0)
			memcpy(s->trace.threads[i].comm, e->comm,
			       sizeof(e->comm));
		stacks_thread_exit(&s->trace, h->tid, h->ts_ns);
		break;
	}
	case RF_EV_GPU_LAUNCH: {
		const struct rf_gpu_launch_event *e = data;
		struct trace *t = &s->trace;
		int32_t op;

		if (size < sizeof(*e))
			return 0;
		t->counts.events++;
		name_new_thread(s, h->tid);
		op = stacks_open_op(t, h->tid, h->rf_addr);
		/* BPF tracks only ops opened after GPU tagging began (the
		 * agent may load mid-run); the loader knows older ones. */
		if (op < 0 && !h->rf_addr)
			op = stacks_innermost_op(t, h->tid);
		if (!gpu_add_launch(&t->gpu, &t->names, h->ts_ns, h->tid, op,
				    e))
			t->counts.oom++;
		gpu_evict(&t->gpu, h->ts_ns);
		break;
	}
	case RF_EV_GPU_ACTIVITY:
		if (size < sizeof(struct rf_gpu_activity_event))
			return 0;
		s->trace.counts.events++;
		if (!gpu_add_activity(&s->trace.gpu, &s->trace.names, data))
			s->trace.counts.oom++;
		break;
	}
	return 0;
}

/* While a ptrace call waits on the target, keep reading events. */
static void drain(void *ctx)
{
	struct session *s = ctx;

	if (s->rb)
		ring_buffer__consume(s->rb);
}

int session_open_ring(struct session *s)
{
	s->rb = ring_buffer__new(probes_events_fd(&s->probes), handle_event,
				 s, NULL);
	/* From now on every ptrace call into the target keeps reading. */
	s->act.idle = s->stubs.idle = drain;
	s->act.idle_ctx = s->stubs.idle_ctx = s;
	s->act.verbose = s->opt->verbose;
	return s->rb ? 0 : -errno;
}

/* Optimized path: map the callback stubs and probe them. */
static int prepare_stubs(struct session *s, uint64_t *start, uint64_t *end,
			 char *err, size_t len)
{
	int ret = stubs_map(&s->stubs, s->pid, err, len);

	if (ret)
		return ret;
	ret = probes_attach_callbacks(&s->probes, s->pid, s->stubs.path,
				      STUB_START_OFFSET, STUB_END_OFFSET,
				      s->opt->verbose);
	if (ret) {
		snprintf(err, len, "cannot probe the callback stubs: %s",
			 strerror(-ret));
		return ret;	/* the caller unmaps them */
	}
	*start = s->stubs.addr + STUB_START_OFFSET;
	*end = s->stubs.addr + STUB_END_OFFSET;
	return 0;
}

int session_activate(struct session *s, const char *lib, char *err,
		     size_t len)
{
	uint64_t start = 0, end = 0;
	int ret = activation_prepare(&s->act, lib, err, len);

	if (!ret && s->use_stubs)
		ret = prepare_stubs(s, &start, &end, err, len);
	if (!ret)
		ret = activation_start(&s->act, s->opt->sample_prob,
				       s->opt->scopes, start, end, err, len);
	if (ret) {
		char ignored[256];

		if (s->stubs.addr)
			stubs_unmap(&s->stubs, s->pid, ignored,
				    sizeof(ignored));
		return ret;
	}
	s->trace.sample_prob = s->opt->sample_prob;
	s->trace.activated = true;
	return 0;
}

/* Ops that ran rfbpf's start callback and have not run its end callback
 * yet: they still hold the callback stubs' addresses. */
static int64_t ops_holding_stubs(struct session *s)
{
	struct counts c = {};

	probes_read_counters(&s->probes, &c);
	return (int64_t)(c.bpf_hits[RF_V_CALLBACK] - c.bpf_hits[RF_V_END]);
}

/* After the callback is removed, unmap the stubs once no op can still call
 * them (an op that started with our callback calls its end later), waiting
 * up to 2 s; otherwise leave the harmless page mapped and say so. */
static void release_stubs(struct session *s)
{
	char err[512];
	double end = monotonic_s() + 2;
	int64_t holding;

	while ((holding = ops_holding_stubs(s)) > 0 && monotonic_s() < end &&
	       target_alive(s->pid)) {
		drain(s);
		usleep(1000);
	}
	if (holding > 0 && target_alive(s->pid)) {
		fprintf(stderr, "rfbpf: warning: %lld ops that started while "
			"traced are still running in process %d; its 4 KiB of "
			"callback stubs stay mapped (harmless)\n",
			(long long)holding, s->pid);
		return;
	}
	if (stubs_unmap(&s->stubs, s->pid, err, sizeof(err)))
		fprintf(stderr, "rfbpf: warning: cannot unmap the callback "
			"stubs from process %d: %s\n", s->pid, err);
}

void session_deactivate(struct session *s)
{
	char err[512];

	if (activation_stop(&s->act, err, sizeof(err))) {
		fprintf(stderr, "rfbpf: warning: could not remove the "
			"RecordFunction callback from process %d (%s); run "
			"rfbpf --deactivate -p %d\n", s->pid, err, s->pid);
		return;		/* the stubs are still in use */
	}
	if (s->stubs.addr)
		release_stubs(s);
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

/* The command ended while rfbpf traced it: waitpid gave its status. */
static void record_exit(struct session *s, pid_t r, int st)
{
	s->child_exited = true;
	s->child_code = r != s->pid ? 127 : WIFEXITED(st) ? WEXITSTATUS(st) :
			128 + WTERMSIG(st);
}

/* Waits for the next stop of the traced command. Returns the wait status,
 * or -1 once it has exited. Blocking: before the callback is registered no
 * events flow, and each stop must be cheap. */
static int wait_traced_command(struct session *s)
{
	int st;
	pid_t r;

	do
		r = waitpid(s->pid, &st, __WALL);
	while (r < 0 && errno == EINTR);
	if (r == s->pid && WIFSTOPPED(st))
		return st;
	record_exit(s, r, st);
	return -1;
}

/* Lets the command run (stopping it at every system call of Python's
 * start-up would cost seconds) until it maps libtorch_cpu, checking every
 * millisecond and passing on any signal meanwhile. Returns false if it
 * exited or rfbpf was told to stop first. */
static bool wait_for_torch(struct session *s, char *path, size_t len)
{
	int st;

	while (target_find_libtorch(s->pid, path, len)) {
		pid_t r = waitpid(s->pid, &st, __WALL | WNOHANG);

		if (r == s->pid && WIFSTOPPED(st)) {
			ptrace(PTRACE_CONT, s->pid, 0, (void *)(long)
			       ((st >> 16) == 0 ? WSTOPSIG(st) : 0));
		} else if (r == s->pid || (r < 0 && errno == ECHILD)) {
			record_exit(s, r, st);
			return false;
		} else if (stop_signals) {
			ptrace(PTRACE_DETACH, s->pid, 0, 0);
			return false;
		}
		usleep(1000);
	}
	return true;
}

/* Runs the command's main thread from system call to system call until it
 * enters one that is a safe point (the loader's calls are not). Returns
 * false if it exited on the way. */
static bool run_to_safe_point(struct session *s)
{
	struct __ptrace_syscall_info info;
	int st, sig = 0;

	if (ptrace(PTRACE_INTERRUPT, s->pid, 0, 0))
		return false;
	for (;;) {
		st = wait_traced_command(s);
		if (st < 0)
			return false;
		if (WSTOPSIG(st) != (SIGTRAP | 0x80)) {
			/* A signal for the command: pass it on. Our own
			 * interrupt and group stops carry none. */
			sig = (st >> 16) == 0 ? WSTOPSIG(st) : 0;
		} else if (ptrace(PTRACE_GET_SYSCALL_INFO, s->pid,
				  sizeof(info), &info) > 0 &&
			   info.op == PTRACE_SYSCALL_INFO_ENTRY &&
			   remote_safe_syscall_entry(s->pid, s->pid)) {
			return true;
		}
		if (ptrace(PTRACE_SYSCALL, s->pid, 0, (void *)(long)sig))
			return false;
		sig = 0;
	}
}

void session_launch_activate(struct session *s)
{
	char path[PATH_MAX], err[512];

	if (!wait_for_torch(s, path, sizeof(path)) || !run_to_safe_point(s))
		return;
	/* The loader maps the library in several steps: name the mapping as
	 * it is now that it is done. */
	if (target_find_libtorch(s->pid, path, sizeof(path))) {
		ptrace(PTRACE_DETACH, s->pid, 0, 0);
		return;		/* unmapped again: the async path will see */
	}
	s->act.traced_tid = s->stubs.traced_tid = s->pid;
	s->activation_pending = false;
	s->lib_checked = true;
	if (!s->use_stubs)
		probe_late_library(s, path);
	if (session_activate(s, path, err, sizeof(err)))
		fprintf(stderr, "rfbpf: warning: cannot switch RecordFunction "
			"on: %s; tracing only what the command's own callbacks "
			"record\n", err);
	s->act.traced_tid = s->stubs.traced_tid = 0;
	ptrace(PTRACE_DETACH, s->pid, 0,
	       (void *)(long)remote_take_held_signal());
}

static bool target_gone(struct session *s)
{
	struct pollfd pfd = { .fd = s->pidfd, .events = POLLIN };

	if (s->launched) {
		if (!s->child_exited)
			s->child_exited = launch_reap(&s->launch, false,
						      &s->child_code);
		return s->child_exited;
	}
	if (s->pidfd >= 0)
		return poll(&pfd, 1, 0) > 0;
	return !target_alive(s->pid);
}

/* In launch mode the first Ctrl-C reaches the command too (same process
 * group): keep tracing until it exits. SIGTERM sent to rfbpf alone is
 * passed on. A second signal stops tracing at once. */
static bool should_stop(struct session *s, int *signals_seen)
{
	if (stop_signals == *signals_seen)
		return false;
	*signals_seen = stop_signals;
	if (!s->launched || stop_signals > 1)
		return true;
	kill(s->pid, SIGTERM);
	return false;
}

void session_run(struct session *s)
{
	int signals_seen = 0;
	struct counts bpf;

	s->start_s = monotonic_s();
	for (;;) {
		double now;
		/* Poll fast until the launched command has mapped torch, so a
		 * library found only then is probed and activated early. */
		int err = ring_buffer__poll(s->rb, s->launched &&
					    !s->lib_checked ? 2 : 100);

		if (err < 0 && err != -EINTR) {
			fprintf(stderr, "rfbpf: reading the ring buffer: %s\n",
				strerror(-err));
			break;
		}
		if (s->launched)
			session_check_launched_lib(s);
		session_gpu_poll(s, monotonic_s());
		now = monotonic_s() - s->start_s;
		memset(&bpf, 0, sizeof(bpf));
		if (s->status.enabled)
			probes_read_counters(&s->probes, &bpf);
		status_update(&s->status, now, s->trace.counts.events,
			      s->trace.nr_ops, bpf.drops);
		if (should_stop(s, &signals_seen) || target_gone(s))
			break;
		if (s->opt->duration_s && now >= s->opt->duration_s)
			break;
	}
	status_clear(&s->status);
	/* The agent's last records still need the probes attached. */
	session_gpu_finish(s);
	/* Switch RecordFunction off, detach so the target runs free, then
	 * drain what is left. */
	session_deactivate(s);
	for (int i = s->probes.nr_links - 1; i >= 0; i--)
		bpf_link__destroy(s->probes.links[i]);
	s->probes.nr_links = 0;
	while (ring_buffer__consume(s->rb) > 0)
		;
	probes_read_counters(&s->probes, &s->trace.counts);
	gpu_detach(&s->trace.gpu);
	stacks_detach(&s->trace, s->trace.last_ns > monotonic_ns() ?
		      s->trace.last_ns : monotonic_ns());
}
