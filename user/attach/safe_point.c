// SPDX-License-Identifier: BSD-2-Clause
#include <dirent.h>
#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "ptrace_denied.h"
#include "safe_point.h"
#include "target.h"

#define MAX_THREADS 4096
/* How long the op-entry point is preferred before a blocked thread is
 * taken instead. */
#define PREFER_PROBE_MS 100
/* A thread that left its system call as it was interrupted is looked at
 * again after this long. */
#define RETRY_MS 20
/* New threads are looked for this often (those a seized thread starts
 * are seized as they are made: PTRACE_O_TRACECLONE). */
#define RESEIZE_MS 5
/* Seized threads report the threads they start (PTRACE_EVENT_CLONE), and
 * those start seized, stopped before their first instruction: a thread
 * started while rfbpf looks cannot run ops it does not see. Under load,
 * with only the /proc rescans, a job's new threads ran whole training
 * steps before they were seized (and so never stopped at the op-entry
 * point, which launch mode's parking needs). Forks (exit signal SIGCHLD,
 * or vfork) are never reported: only PTRACE_O_TRACECLONE is set. */
#define SEIZE_OPTIONS (PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE)

struct seized {
	pid_t tid;
	bool interrupted;	/* PTRACE_INTERRUPT sent, stop not seen */
	double tried_ms;	/* last look at its system call */
};

static struct seized threads[MAX_THREADS];
static int nr_threads;

/* Threads a release interrupted that had not stopped a second later: in
 * a wait no signal ends (a vfork until its child execs or exits, slow
 * I/O). They are still seized, and stop as soon as the wait ends: each is
 * let go at that stop by safe_point_poll_late(), which the loaders call
 * as they run and every hold calls first. Left alone, such a thread
 * stayed stopped for as long as rfbpf ran, and the next hold failed to
 * seize it. */
static struct late_thread {
	pid_t pid, tid;
	int our_sig;		/* the op-entry signal of its hold */
} late[MAX_THREADS];
static int nr_late;

static const char AT_OP_ENTRY[] = "at the op-entry point";

/* park_others: the other seized threads, and the probe that stops them,
 * until the held thread is let go. */
static struct parking {
	bool on;
	const struct safe_point_probe *probe;
	int sig;
} parking;

/* A signal mask line of /proc/PID/status (SigCgt, SigBlk...), of the
 * process or of one of its threads. */
static uint64_t status_mask(pid_t pid, pid_t tid, const char *key)
{
	char val[64];

	return target_status(pid, tid, key, val, sizeof(val)) ?
	       strtoull(val, NULL, 16) : 0;
}

/* A signal whose default action is to ignore it and that the job does not
 * catch: if rfbpf dies before swallowing it, the job never notices. */
static int choose_signal(pid_t pid)
{
	static const int candidates[] = { SIGURG, SIGWINCH, SIGCHLD };
	uint64_t caught = status_mask(pid, 0, "SigCgt");

	for (size_t i = 0; i < sizeof(candidates) / sizeof(*candidates); i++)
		if (!(caught & (1ull << (candidates[i] - 1))))
			return candidates[i];
	return 0;
}

static bool fd_is_wait_source(pid_t pid, uint64_t fd)
{
	char path[96], link[128];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%llu", pid,
		 (unsigned long long)fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return false;
	link[n] = 0;
	return !strncmp(link, "pipe:", 5) || !strncmp(link, "socket:", 7) ||
	       !strncmp(link, "/dev/pts/", 9) || !strcmp(link, "/dev/tty") ||
	       !strcmp(link, "anon_inode:[eventfd]");
}

bool safe_point_blocking_call_ok(pid_t pid, long nr, const uint64_t *args)
{
	switch (nr) {
	case SYS_futex: {
		int op = args[1] & FUTEX_CMD_MASK;

		return op == FUTEX_WAIT || op == FUTEX_WAIT_BITSET;
	}
	case SYS_poll: case SYS_ppoll: case SYS_select: case SYS_pselect6:
	case SYS_epoll_wait: case SYS_epoll_pwait:
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
#endif
	case SYS_nanosleep: case SYS_clock_nanosleep:
	case SYS_wait4: case SYS_waitid: case SYS_pause:
		return true;
	case SYS_read: case SYS_readv: case SYS_recvfrom: case SYS_recvmsg:
	case SYS_accept: case SYS_accept4:
		return fd_is_wait_source(pid, args[0]);
	default:
		return false;
	}
}

/* The system call tid is blocked in, from /proc (no stop needed): its
 * number and arguments, or -1 (running, or in user space). */
static long blocked_in(pid_t pid, pid_t tid, uint64_t args[6])
{
	char path[96], buf[256];
	unsigned long long a[6];
	long nr;
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fgets(buf, sizeof(buf), f) ? sscanf(buf, "%ld %llx %llx %llx "
		"%llx %llx %llx", &nr, &a[0], &a[1], &a[2], &a[3], &a[4],
		&a[5]) : 0;
	fclose(f);
	if (n != 7)
		return -1;
	for (int i = 0; i < 6; i++)
		args[i] = a[i];
	return nr;
}

static bool is_seized(pid_t tid)
{
	for (int i = 0; i < nr_threads; i++)
		if (threads[i].tid == tid)
			return true;
	for (int i = 0; i < nr_late; i++)
		if (late[i].tid == tid)
			return true;
	return false;
}

static bool blocks(pid_t pid, pid_t tid, int sig)
{
	return status_mask(pid, tid, "SigBlk") & (1ull << (sig - 1));
}

/* Seizes the threads of pid not seized yet (none is stopped); with the
 * probe armed, lets it signal them too. Threads keep appearing (a job's
 * first op may run on a thread it starts after rfbpf began to look).
 * Returns how many are seized, or -EPERM. */
static int seize_new(pid_t pid, const struct safe_point_probe *probe,
		     int sig)
{
	char path[64];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return -ESRCH;
	while ((d = readdir(dir)) && nr_threads < MAX_THREADS) {
		pid_t tid = atoi(d->d_name);

		if (tid <= 0 || is_seized(tid))
			continue;
		if (ptrace(PTRACE_SEIZE, tid, 0, (void *)SEIZE_OPTIONS)) {
			if (errno == EPERM) {
				closedir(dir);
				return -EPERM;
			}
			continue;	/* it exited meanwhile */
		}
		threads[nr_threads++] = (struct seized){ .tid = tid };
		if (probe && !blocks(pid, tid, sig))
			probe->allow(probe->ctx, tid);
	}
	closedir(dir);
	return nr_threads;
}

static void forget(int i)
{
	threads[i] = threads[--nr_threads];
}

static void let_go(pid_t tid, int sig);

/* The thread a seized one just started, from its PTRACE_EVENT_CLONE stop:
 * seized already (and stopped at its start), so it is tracked like the
 * others, and the probe may signal it (BPF passes it over while it blocks
 * the signal: it starts with all blocked); with no room left it is let
 * go. Returns its tid, or 0. */
static pid_t adopt_clone(pid_t parent, const struct safe_point_probe *probe)
{
	unsigned long msg = 0;
	pid_t tid;

	if (ptrace(PTRACE_GETEVENTMSG, parent, 0, &msg) || !msg)
		return 0;
	tid = (pid_t)msg;
	if (is_seized(tid))
		return tid;
	if (nr_threads >= MAX_THREADS) {
		let_go(tid, 0);
		return 0;
	}
	threads[nr_threads++] = (struct seized){ .tid = tid };
	if (probe)
		probe->allow(probe->ctx, tid);
	return tid;
}

/* Was this stop the op-entry signal? (Sent by BPF: SI_KERNEL.) */
static bool from_probe(pid_t tid, int sig, int want)
{
	siginfo_t si;

	return sig == want && !ptrace(PTRACE_GETSIGINFO, tid, 0, &si) &&
	       si.si_code == SI_KERNEL;
}

/* Lets a seized thread go at its current stop, delivering sig. A thread
 * killed while seized is in no stop (the detach fails with ESRCH): its
 * exit is reported to its tracer first, and until rfbpf takes it its
 * parent's wait() does not see it, so a parent reaping a worker it
 * killed would hang for as long as rfbpf (a fleet daemon) runs. */
static void let_go(pid_t tid, int sig)
{
	double end = remote_now_ms() + 1000;
	pid_t r;
	int st;

	if (!ptrace(PTRACE_DETACH, tid, 0, (void *)(long)sig) ||
	    errno != ESRCH)
		return;
	while (remote_now_ms() < end) {
		r = waitpid(tid, &st, __WALL | WNOHANG);
		if (r < 0 && errno != EINTR)
			return;		/* not ours any more */
		if (r == tid && !WIFSTOPPED(st))
			return;		/* its exit, taken */
		if (r == tid && !ptrace(PTRACE_DETACH, tid, 0, 0))
			return;		/* it was stopping after all */
		if (r == 0)
			usleep(1000);
	}
}

/* A seized thread a release interrupted has stopped (or exited, status
 * st): let go, with the signal it stopped for unless that is the probe's
 * own; a thread it started (seized with it) too. */
static void release_stopped(pid_t pid, pid_t tid, int st, int our_sig)
{
	int sig;

	if (WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_CLONE) {
		unsigned long child = 0;

		ptrace(PTRACE_GETEVENTMSG, tid, 0, &child);
		let_go(tid, 0);
		if (child && !is_seized((pid_t)child))
			let_go((pid_t)child, 0);
	} else if (WIFSTOPPED(st)) {
		sig = (st >> 16) == 0 ? WSTOPSIG(st) : 0;
		let_go(tid, from_probe(tid, sig, our_sig) ? 0 : sig);
	} else {
		remote_note_exit(pid, tid, st);
	}
}

/* Lets every seized thread but keep go: all are interrupted at once and
 * detached as each stops, passing on any signal one stopped for except
 * our own, so that none stays stopped longer than the slowest. One that
 * has not stopped within a second is left to safe_point_poll_late(). */
static void release_others(pid_t pid, pid_t keep, int our_sig)
{
	double end = remote_now_ms() + 1000;
	int left = 0;

	for (int i = 0; i < nr_threads; i++) {
		threads[i].interrupted = threads[i].tid != keep &&
			!ptrace(PTRACE_INTERRUPT, threads[i].tid, 0, 0);
		left += threads[i].interrupted;
	}
	while (left && remote_now_ms() < end) {
		for (int i = 0; i < nr_threads; i++) {
			pid_t tid = threads[i].tid, r;
			int st;

			if (!threads[i].interrupted)
				continue;
			r = waitpid(tid, &st, __WALL | WNOHANG);
			if (r == 0 || (r < 0 && errno == EINTR))
				continue;
			if (r == tid)
				release_stopped(pid, tid, st, our_sig);
			threads[i].interrupted = false;	/* or gone */
			left--;
		}
		if (left)
			usleep(50);
	}
	for (int i = 0; i < nr_threads && nr_late < MAX_THREADS; i++)
		if (threads[i].interrupted)
			late[nr_late++] = (struct late_thread){ pid,
				threads[i].tid, our_sig };
	nr_threads = 0;
}

void safe_point_poll_late(void)
{
	for (int i = 0; i < nr_late; i++) {
		struct late_thread *t = &late[i];
		int st;
		pid_t r = waitpid(t->tid, &st, __WALL | WNOHANG);

		if (r == 0 || (r < 0 && errno == EINTR))
			continue;	/* still in its wait */
		if (r == t->tid)
			release_stopped(t->pid, t->tid, st, t->our_sig);
		late[i--] = late[--nr_late];	/* let go, or not ours */
	}
}

/* Point 2: interrupt one thread blocked in an allowed wait (one at a
 * time: every thread stopped is a thread delayed). */
static void interrupt_waiting(pid_t pid)
{
	double now = remote_now_ms();
	uint64_t args[6];

	for (int i = 0; i < nr_threads; i++)
		if (threads[i].interrupted)
			return;		/* its stop is on the way */
	for (int i = 0; i < nr_threads; i++) {
		struct seized *t = &threads[i];
		long nr;

		if (now - t->tried_ms < RETRY_MS)
			continue;
		t->tried_ms = now;
		nr = blocked_in(pid, t->tid, args);
		if (nr >= 0 && safe_point_blocking_call_ok(pid, nr, args) &&
		    !ptrace(PTRACE_INTERRUPT, t->tid, 0, 0)) {
			t->interrupted = true;
			return;
		}
	}
}

/* Is the interrupted thread still inside an allowed wait? */
static bool still_waiting(pid_t pid, struct held_thread *h)
{
	uint64_t args[6] = { h->regs.rdi, h->regs.rsi, h->regs.rdx,
			     h->regs.r10, h->regs.r8, h->regs.r9 };
	long rax = (long)h->regs.rax;

	return (long)h->regs.orig_rax >= 0 &&
	       (rax == -EINTR || (rax <= -512 && rax >= -516)) &&
	       safe_point_blocking_call_ok(pid, (long)h->regs.orig_rax, args);
}

/* The kernel's optimized uprobes (x86-64, on a nop5): the nop5 becomes a
 * call into a [uprobes-trampoline] page, which saves rax, r11 and rcx
 * under the return address and makes the uprobe system call; the BPF
 * program's signal then arrives back in the trampoline, right after that
 * `syscall`, with the nop5's return address 24 bytes up the stack (the
 * kernel's struct uprobe_syscall_args: ax, r11, cx, retaddr). A call made
 * there is as safe as one made right after the nop5: the trampoline only
 * pops its saves and returns there. */
#define TRAMPOLINE_RETADDR_AT	24
#define NOP5_LEN		5

/* Did the stop come from the probe at addr? Right after the probed
 * instruction (an int3 uprobe), or inside the trampoline on its way back
 * there (an optimized one). */
static bool stopped_at(pid_t pid, const struct user_regs_struct *r,
		       uint64_t addr)
{
	uint64_t ret;

	if (r->rip > addr && r->rip <= addr + 16)
		return true;
	return !target_read(pid, r->rsp + TRAMPOLINE_RETADDR_AT, &ret,
			    sizeof(ret)) && ret == addr + NOP5_LEN &&
	       target_addr_in_mapping(pid, r->rip, "[uprobes-trampoline]");
}

/* One stop of a seized thread. Returns true when it is held. */
static bool on_stop(pid_t pid, struct seized *t, int st, int sig,
		    const struct safe_point_probe *probe,
		    struct held_thread *h)
{
	int stopsig = WSTOPSIG(st);
	bool saved;

	if ((st >> 16) == 0 && !from_probe(t->tid, stopsig, sig)) {
		/* Someone else's signal: deliver it now, untouched. */
		ptrace(PTRACE_CONT, t->tid, 0, (void *)(long)stopsig);
		return false;
	}
	if ((st >> 16) == 0) {			/* the op-entry signal */
		h->tid = t->tid;
		saved = !remote_save(h);
		/* Right after the probed instruction? (A signal blocked at
		 * the probe arrives later, elsewhere: swallowed.) */
		if (saved && probe && stopped_at(pid, &h->regs, probe->addr)) {
			h->how = probe->where ? probe->where : AT_OP_ENTRY;
			h->at_op = true;
			return true;
		}
		ptrace(PTRACE_CONT, t->tid, 0, 0);	/* swallowed */
		return false;
	}
	if ((st >> 16) == PTRACE_EVENT_STOP && t->interrupted &&
	    stopsig == SIGTRAP) {		/* our interrupt */
		t->interrupted = false;
		h->tid = t->tid;
		saved = !remote_save(h);
		if (saved && still_waiting(pid, h)) {
			h->how = "blocked in a system call";
			h->at_op = false;
			return true;
		}
		ptrace(PTRACE_CONT, t->tid, 0, 0);	/* it left the wait */
		return false;
	}
	if ((st >> 16) == PTRACE_EVENT_STOP && stopsig != SIGTRAP)
		ptrace(PTRACE_LISTEN, t->tid, 0, 0);	/* a group stop */
	else
		ptrace(PTRACE_CONT, t->tid, 0, 0);
	return false;
}

/* Arms the op-entry probe for the seized threads that do not block sig. */
static int arm_probe(pid_t pid, const struct safe_point_probe *probe,
		     int sig)
{
	static pid_t tids[MAX_THREADS];
	int n = 0;

	for (int i = 0; i < nr_threads; i++)
		if (!blocks(pid, threads[i].tid, sig))
			tids[n++] = threads[i].tid;
	return n ? probe->arm(probe->ctx, pid, sig, tids, n) : -ENOENT;
}

/* The probe whose uprobe the hold disarmed, removed at release. */
static const struct safe_point_probe *reap_later;

/* PTRACE_SEIZE refused: a debugger holds the process, or the kernel's
 * policy (ptrace_denied.h says which part of it). */
static int seize_refused(pid_t pid, char *err, size_t len)
{
	struct ptrace_facts f;
	char tracer[32], why[400];

	if (target_status(pid, 0, "TracerPid", tracer, sizeof(tracer)) &&
	    atoi(tracer))
		return remote_fail(err, len, -EPERM, "cannot ptrace process "
				   "%d: process %s (a debugger) is tracing it; "
				   "detach that first", pid, tracer);
	ptrace_facts_read(pid, &f);
	ptrace_denied_why(&f, true, why, sizeof(why));
	return remote_fail(err, len, -EPERM, "cannot ptrace process %d: %s",
			   pid, why);
}

/* One look at every seized thread: a thread's exit is noted, a new one
 * adopted, a stop at a safe point held (true). */
static bool look_for_stop(pid_t pid, const struct safe_point_probe *probe,
			  bool armed, int sig, struct held_thread *h)
{
	for (int i = 0; i < nr_threads; i++) {
		int st;
		pid_t r = waitpid(threads[i].tid, &st, __WALL | WNOHANG);

		if (r != threads[i].tid)
			continue;
		if (!WIFSTOPPED(st)) {	/* the thread exited */
			remote_note_exit(pid, r, st);
			forget(i--);
			continue;
		}
		if ((st >> 16) == PTRACE_EVENT_CLONE) {
			adopt_clone(r, armed ? probe : NULL);
			ptrace(PTRACE_CONT, r, 0, 0);
			continue;
		}
		if (on_stop(pid, &threads[i], st, sig, probe, h))
			return true;
	}
	return false;
}

/* Why to stop looking, as safe_point_hold's error (0: keep looking). */
static int give_up(pid_t pid, const struct safe_point_opts *o, int sig,
		   double waited_ms, char *err, size_t len)
{
	if (!nr_threads || remote_reaped(pid, &(int){ 0 }))
		return remote_fail(err, len, -ESRCH, "process %d exited", pid);
	if (o->cancel && o->cancel(o->cancel_ctx))
		return remote_fail(err, len, -ECANCELED, "stopped");
	if (o->find_ms > 0 && waited_ms > o->find_ms)
		return remote_fail(err, len, -ETIMEDOUT,
			"no thread of process %d reached a safe point within "
			"%d ms (no op dispatched%s, no thread waiting in a "
			"system call)", pid, o->find_ms,
			sig ? "" : ": it catches SIGURG, SIGWINCH and SIGCHLD");
	return 0;
}

/* After the search: with a thread held at an op and others to park,
 * those reaching an op stop there too until the call is made
 * (safe_point_release); otherwise the others go and the probe is
 * disarmed. */
static void end_search(pid_t pid, const struct safe_point_opts *o,
		       bool armed, bool held, int sig,
		       const struct held_thread *h)
{
	const struct safe_point_probe *probe = o->probe;

	if (held && armed && o->park_others && h->how == AT_OP_ENTRY) {
		parking = (struct parking){ true, probe, sig };
		probe->stop_all(probe->ctx);
		return;
	}
	/* Others first: removing a uprobe takes the kernel tens of ms, and
	 * a thread stopped in a timed wait would lose that time. A signal
	 * the probe sends meanwhile is swallowed, or ignored by the job. */
	release_others(pid, held ? h->tid : 0, sig);
	if (armed)
		probe->disarm(probe->ctx);
	if (armed && !held && probe->reap)
		probe->reap(probe->ctx);
	reap_later = held && armed ? probe : NULL;
}

int safe_point_hold(pid_t pid, struct safe_point_opts *o,
		    struct held_thread *h, char *err, size_t len)
{
	const struct safe_point_probe *probe = o->probe;
	double start = remote_now_ms();
	int sig = probe ? choose_signal(pid) : 0;
	bool armed = false, held = false, waits;
	double seized_ms = start;
	int n, res = 0;

	memset(h, 0, sizeof(*h));
	h->pid = pid;
	h->resume_nr = -1;
	nr_threads = 0;
	safe_point_poll_late();
	n = seize_new(pid, NULL, 0);
	if (n == -EPERM)
		return seize_refused(pid, err, len);
	if (n <= 0)
		return remote_fail(err, len, -ESRCH, "process %d exited", pid);
	if (probe && sig)
		armed = !arm_probe(pid, probe, sig);
	/* Parking (launch mode): every seized thread stops at its first op
	 * from now on, not only the first one to get there. Otherwise the
	 * others run ops while rfbpf takes the first one's stop, none of
	 * them seen (the callback is not in yet): under load, whole
	 * training steps. The first stop seen is held, the rest wait. */
	if (armed && o->park_others)
		probe->stop_all(probe->ctx);
	/* Without the op-entry point, waits will have to do. */
	waits = !o->ops_only || !armed;
	while (!held) {
		double now = remote_now_ms();

		if (now - seized_ms >= RESEIZE_MS) {
			seized_ms = now;
			seize_new(pid, armed ? probe : NULL, sig);
		}
		if (waits && (!armed || now - start >= PREFER_PROBE_MS))
			interrupt_waiting(pid);
		safe_point_poll_late();
		held = look_for_stop(pid, probe, armed, sig, h);
		if (held || (res = give_up(pid, o, sig, now - start, err, len)))
			break;
		remote_idle();
		usleep(100);
	}
	end_search(pid, o, armed, held, sig, h);
	if (held && o->verbose)
		fprintf(stderr, "rfbpf: holding thread %d %s (after %.1f ms)\n",
			h->tid, h->how, remote_now_ms() - start);
	return res;
}

void safe_point_release(struct held_thread *h)
{
	let_go(h->tid, h->held_signal);
	if (parking.on) {
		release_others(h->pid, h->tid, parking.sig);
		parking.probe->disarm(parking.probe->ctx);
		reap_later = parking.probe;
		parking.on = false;
	}
}

/* Any thread of pid traced by rfbpf but the held one was made by a call
 * on it (the others were let go at the hold). */
void safe_point_release_new_threads(struct held_thread *h)
{
	uint32_t *tids;
	size_t n = target_threads(h->pid, &tids);
	char val[32];

	for (size_t i = 0; i < n; i++) {
		pid_t tid = (pid_t)tids[i];
		int st;

		if (tid == h->tid ||
		    !target_status(h->pid, tid, "TracerPid", val,
				   sizeof(val)) || atoi(val) != getpid())
			continue;
		/* its start stop, reported once the clone is done */
		for (int k = 0; k < 1000; k++) {
			pid_t r = waitpid(tid, &st, __WALL | WNOHANG);

			if (r == tid || r < 0)
				break;
			usleep(1000);
		}
		ptrace(PTRACE_DETACH, tid, 0, 0);
	}
	free(tids);
}

void safe_point_reap(void)
{
	const struct safe_point_probe *probe = reap_later;

	reap_later = NULL;
	if (probe && probe->reap)
		probe->reap(probe->ctx);
}
