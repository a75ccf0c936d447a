/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One tracing run: the ring-buffer loop that feeds events to the stacks,
 * the live status, the stop conditions (signal, duration, target exit),
 * and the final drain and detach.
 */
#ifndef RFBPF_SESSION_H
#define RFBPF_SESSION_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include "attach/activation.h"
#include "attach/control_thread.h"
#include "cli.h"
#include "gpu/gpu_session.h"
#include "attach/launch.h"
#include "attach/probes.h"
#include "session/status.h"
#include "attach/torch_symbols.h"
#include "session/off_cpu.h"
#include "session/outputs.h"
#include "python/py_session.h"
#include "model/trace.h"

struct ring_buffer;
struct bpf_link;

#define SESSION_MAX_CHILDREN 256
/* --off-cpu follows the target and every child it traces. */
_Static_assert(OFF_CPU_MAX_PROCS == SESSION_MAX_CHILDREN + 1,
	       "session/off_cpu.h holds the target and each traced child");

/* A child process of the target traced with --children. */
struct child_proc {
	pid_t pid;
	int nr_links;
	struct bpf_link *links[RF_V_NR];
};

struct session {
	const struct options *opt;
	pid_t pid;
	struct trace trace;
	struct outputs out;	/* what the run writes (one-shot modes) */
	struct probes probes;
	struct ring_buffer *rb;
	struct launch launch;
	bool launched;		/* launch mode, child forked */
	bool child_exited;
	int child_code;		/* exit code of the launched command */
	int pidfd;		/* attach mode: readable when the target exits */
	bool lib_checked;	/* launch mode: the mapped library was checked */
	struct activation act;	/* the callback registered in the target */
	bool use_stubs;		/* optimized probes on rfbpf's page's stubs */
	/* Fleet --bursts: no callback registered at the attach stop; a
	 * control thread in the job switches it on for the bursts rfbpf
	 * writes (attach/control_thread.h). */
	bool want_control;
	struct control_thread control;
	struct safe_point_probe safe_point;	/* BPF side of safe points */
	struct safe_point_probe callback_point;	/* ... inside the callback */
	bool detach_failed;	/* the callback could not be removed */
	/* When the callback was registered (clock ticks after boot, as
	 * process start times): children forked since have it. */
	unsigned long long activated_ticks;
	struct child_proc children[SESSION_MAX_CHILDREN];	/* --children */
	int nr_children;
	bool fork_seen;		/* BPF saw a traced process fork */
	double children_scanned_s;
	bool child_stubs_probed;	/* children's side of the stubs, for
					 * every process (session/children.c) */
	char child_lib[PATH_MAX];	/* entry probes for children: the */
	struct torch_symbols child_syms;	/* library and its symbols */
	bool activation_pending;/* launch mode: register once torch loads */
	struct status status;
	double start_s;
	double launch_s;	/* launch mode: when rfbpf began to wait */
	struct gpu_session gpu;	/* the CUPTI agent (gpu/gpu_session.h) */
	struct py_session py;	/* --python-stacks (python/py_session.h) */
	/* A read of the ring returns to its caller by this time, however
	 * fast events come (0: it reads until the ring is empty), so that
	 * a loader slower than the job still stops at -d or a signal. */
	double read_until_s;
	unsigned since_clock;	/* events since the clock was read */
	char error[768];	/* why session_setup() failed, one line */
	int activation_err;	/* ...and -errno if activation failed */
	int attach_find_ms;	/* how long to look for a safe point (0:
				 * ATTACH_FIND_MS) */
	bool gil_found;		/* --off-cpu: the GIL's address is in BPF */
	struct off_cpu_procs off_cpu;	/* --off-cpu: who, and what counted */
};

/* Sets the session up for opt (session/setup.c): claims the target or
 * forks the command, probes, switches RecordFunction on. 0, or -1 with a
 * one-line reason in s->error (undo with session_abort). */
int session_setup(struct session *s, struct options *opt);
/* -p PID: the process exists, and no other rfbpf is on it (0 or -1). */
/* The libtorch_cpu mapped in the running target s->pid, or -1 with one
 * line in s->error (not mapped, or why its maps cannot be read). */
int session_library_of_target(struct session *s, char *path, size_t len);
int session_claim_target(struct session *s, pid_t pid);
/* Undoes a setup that failed part-way: removes a callback it registered,
 * releases the lock, kills a command not yet started, frees probes. */
void session_abort(struct session *s);

/* Frees what a session holds, once it is finished or aborted. */
void session_free(struct session *s);

/* Set by the signal handlers in main.c. */
extern volatile sig_atomic_t stop_signals;
/* SIGUSR1s so far: --flight-recorder writes its window on each. */
extern volatile sig_atomic_t dump_signals;

/* Lets activation stop threads at the op-entry safe point (the BPF
 * object must be loaded). */
void session_init_safe_point(struct session *s);
/* Creates the ring buffer reader. Returns 0 or -errno. */
int session_open_ring(struct session *s);
/* Reads events for at most about budget_s, waiting up to timeout_ms for
 * the first (< 0: reading what is there, as ring_buffer__consume); what
 * libbpf returns, with an early return after budget_s not an error. */
int session_read(struct session *s, int timeout_ms, double budget_s);
/* Polls until a stop condition, then drains, detaches and closes every
 * still-open op. */
void session_run(struct session *s);
/* The end of a run: switches RecordFunction off, detaches, drains what is
 * left and closes every still-open op (session_run calls it). */
void session_finish(struct session *s);
/* The BPF counts of the session: its op programs' and its context
 * switches'. */
void session_read_counters(struct session *s, struct counts *c);
/* A CUDA job whose threads all waited at the attach got no agent: once
 * it runs ops, holds a thread at one now and then and loads it there
 * (gpu_session_wants_hold). Called on every loop turn. */
void session_retry_gpu_inject(struct session *s);
/* Re-registers the callback with a new sampling probability, in one stop
 * of one thread. 0, or -errno with a reason in err. */
int session_set_sample_prob(struct session *s, double p,
			    struct replace_times *times, char *err, size_t len);
/* Launch mode: once the command maps a libtorch_cpu rfbpf did not probe
 * before exec, resolve and probe it too; and switch RecordFunction on. */
void session_check_launched_lib(struct session *s);
/* Launch mode: once the command maps libtorch_cpu (checked every
 * millisecond; the rest of `import torch` takes far longer), register the
 * callback at the first op any of its threads dispatches (safe_point.h),
 * so that op and every later one is traced; or at a thread waiting in a
 * system call, if the command waits before its first op. */
void session_launch_activate(struct session *s);
/* Registers the callback in the target (-p mode, or launch mode once
 * torch is loaded). Returns 0 or -errno with a one-line reason in err. */
int session_activate(struct session *s, const char *lib, char *err,
		     size_t len);
/* Launch mode: has the command exited (block: wait until it has)? Sets
 * child_exited and child_code. */
bool session_reap_command(struct session *s, bool block);
/* Removes it; says so on stderr if that fails. */
void session_deactivate(struct session *s);
/* --python-stacks: once, before RecordFunction is switched on, so the
 * first op has its stack (py_session.h); one warning if the target runs
 * no interpreter rfbpf reads. */
void session_python_start(struct session *s);
/* What the session knows of the torch build it probes (the first library
 * it attaches): where fwd_thread_id_ is, and for --shapes where the
 * inputs are (a warning if the build's layout is not known). */
void session_set_build(struct session *s, const char *path,
		       const struct torch_symbols *syms);

#endif
