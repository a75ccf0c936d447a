// SPDX-License-Identifier: BSD-2-Clause
/*
 * The agent next to another CUPTI tool, against the stand-in libcupti
 * (sim_libcupti.c) that enforces one subscriber per process and keeps
 * kinds and callbacks process-wide. This program plays rfbpf (it writes
 * the lease into the control block) and Kineto (it holds CUPTI the way
 * torch.profiler leaves it held):
 *   1. Kineto holds CUPTI; a lease comes: the agent's subscribe fails, it
 *      names Kineto, and leaves Kineto's kinds, buffers and CUPTI's clock
 *      as they were, during the lease and after it;
 *   2. Kineto lets go; a lease comes: the agent subscribes as "rfbpf",
 *      enables its kinds, leaves CUPTI's clock alone (it converts from
 *      it), enables single callbacks only (no whole domain), and gives
 *      everything back when the lease ends;
 *   3. with SIM_CUPTI_VERSION set by the Makefile's other runs: as CUDA
 *      12.4's CUPTI (22) the above holds as it is; as a CUPTI whose
 *      records the agent does not know (CUDA 11.8's 18, a future 14.0's
 *      140000) it is refused, and nothing is taken;
 *   4. built with SIM_CUDA12 against the stand-in built as CUDA 12's
 *      (libcupti.so.12, no cuptiSubscribe_v2): the same, but the holder
 *      cannot be named;
 *   5. the records CUPTI says it dropped (SIM_CUPTI_DROPPED, handed over
 *      with the buffer the lease's end flushes) are counted, and so are
 *      the agent's buffers another tool gets when it takes CUPTI over.
 * The agent finds the stand-in as the job's own CUPTI: it is mapped
 * before the agent looks (this program links it first).
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <cupti.h>
#include "check.h"
#include "rfbpf_gpu.h"

extern struct rf_gpu_control rfbpf_gpu_control;
static bool callback_clock;	/* RFBPF_CUPTI_CLOCK=callback */
int InitializeInjection(void);

int sim_cupti_other_takes(const char *name);
void sim_cupti_other_leaves(void);
uint64_t sim_cupti_kinds(void);
bool sim_cupti_clock_replaced(void);
bool sim_cupti_buffers_are_other(void);
int sim_cupti_other_starts(const char *name);
int sim_cupti_kineto_starts(void);
const char *sim_cupti_holder(void);
unsigned sim_cupti_domains_enabled(void);
unsigned sim_cupti_callbacks_enabled(void);

#define BIT(k) (1ull << (k))
#define COPIES_AND_KERNELS (BIT(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) | \
	BIT(CUPTI_ACTIVITY_KIND_MEMCPY) | BIT(CUPTI_ACTIVITY_KIND_MEMSET))
#define OURS (COPIES_AND_KERNELS | BIT(CUPTI_ACTIVITY_KIND_MEMCPY2) | \
	BIT(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION))
#define KINETO (COPIES_AND_KERNELS | BIT(CUPTI_ACTIVITY_KIND_RUNTIME))

#ifdef SIM_CUDA12
#define DEFAULT_VERSION 22ul	/* the stand-in as CUDA 12.4's */
#define HOLDER_SEEN ""		/* no cuptiSubscribe_v2: unnamed */
#define OUR_NAME ""		/* and the agent cannot give its own */
#else
#define DEFAULT_VERSION ((unsigned long)CUPTI_API_VERSION)
#define HOLDER_SEEN "Kineto"
#define OUR_NAME "rfbpf"
#endif

/* What the stand-in will say CUPTI dropped (once). */
static uint64_t dropped_said(void)
{
	const char *n = getenv("SIM_CUPTI_DROPPED");

	return n ? strtoull(n, NULL, 10) : 0;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sets or ends the lease and waits until the agent's thread has acted on
 * it (it looks every 100 ms). */
static bool lease(bool on)
{
	uint64_t end = mono_ns() + 3000000000ull;

	__atomic_store_n(&rfbpf_gpu_control.lease_until_ns,
			 on ? mono_ns() + 60000000000ull : 0,
			 __ATOMIC_RELEASE);
	while (mono_ns() < end) {
		if (__atomic_load_n(&rfbpf_gpu_control.lease_seen,
				    __ATOMIC_ACQUIRE) == (uint32_t)on)
			return true;
		usleep(10000);
	}
	return false;
}

TEST(kineto_holds_cupti_and_keeps_all_of_it)
{
	CHECK(sim_cupti_other_takes("Kineto") == 0);
	CHECK(lease(true));
	CHECK_EQ_U64(rfbpf_gpu_control.cupti_ok, 0);
	CHECK_EQ_U64(rfbpf_gpu_control.activity_enabled, 0);
	CHECK_EQ_U64(rfbpf_gpu_control.cupti_result,
		     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
	CHECK_STR(rfbpf_gpu_control.cupti_holder, HOLDER_SEEN);
	CHECK_EQ_U64(sim_cupti_kinds(), KINETO);
	CHECK(!sim_cupti_clock_replaced());
	CHECK(sim_cupti_buffers_are_other());
	CHECK_STR(sim_cupti_holder(), "Kineto");
	CHECK(lease(false));
	CHECK_EQ_U64(sim_cupti_kinds(), KINETO);
	CHECK(!sim_cupti_clock_replaced());
	CHECK(sim_cupti_buffers_are_other());
	sim_cupti_other_leaves();
}

TEST(free_cupti_is_taken_for_the_lease_and_given_back)
{
	uint64_t errors = rfbpf_gpu_control.errors;

	CHECK(sim_cupti_holder() == NULL);
	CHECK(lease(true));
	/* Not one failed call: as CUDA 12.4 (SIM_CUPTI_VERSION=22), the
	 * launch ids only CUDA 13 has are skipped, not errors. */
	CHECK_EQ_U64(rfbpf_gpu_control.errors, errors);
	CHECK_EQ_U64(rfbpf_gpu_control.cupti_ok, 1);
	CHECK_EQ_U64(rfbpf_gpu_control.activity_enabled, 1);
	CHECK_EQ_U64(rfbpf_gpu_control.cupti_result, CUPTI_SUCCESS);
	CHECK_STR(sim_cupti_holder(), OUR_NAME);
	CHECK_EQ_U64(sim_cupti_kinds(), OURS);
	/* CUPTI's clock stays CUPTI's: the agent converts from it; only
	 * RFBPF_CUPTI_CLOCK=callback (the Makefile's last run) replaces it,
	 * for the process's life. */
	if (callback_clock) {
		CHECK(sim_cupti_clock_replaced());
		CHECK_EQ_U64(rfbpf_gpu_control.clock_source, 1);
	} else {
		CHECK(!sim_cupti_clock_replaced());
		CHECK_EQ_U64(rfbpf_gpu_control.clock_source, 2);
	}
	CHECK(!sim_cupti_buffers_are_other());
	CHECK_EQ_U64(sim_cupti_domains_enabled(), 0);	/* single ids only */
	CHECK(sim_cupti_callbacks_enabled() > 0);
	CHECK(lease(false));
	CHECK_EQ_U64(sim_cupti_kinds(), 0);
	CHECK(sim_cupti_holder() == NULL);
	CHECK_EQ_U64(rfbpf_gpu_control.cupti_ok, 0);
	/* The lease's end flushed the buffer CUPTI held back to the agent,
	 * which asked CUPTI what it had dropped. */
	CHECK_EQ_U64(rfbpf_gpu_control.records_dropped, dropped_said());
	CHECK_EQ_U64(rfbpf_gpu_control.buffers_left, 0);
}

/* The agent's handler for leaving CUPTI inside another tool's
 * cuptiSubscribe: a real-time signal the job left at its default. */
TEST(the_agent_handles_a_free_realtime_signal_to_leave_in_a_call)
{
	int sig = (int)rfbpf_gpu_control.yield_signal;
	struct sigaction sa;

	CHECK(sig >= SIGRTMIN + 4 && sig <= SIGRTMAX);
	CHECK(sigaction(sig, NULL, &sa) == 0);
	CHECK(sa.sa_flags & SA_SIGINFO);
	CHECK_EQ_U64((uintptr_t)sa.sa_sigaction,
		     rfbpf_gpu_control.yield_handler);
}

/* As the kernel would send it, but not where rfbpf's probe is (here: the
 * return of a system call): nothing happens, and the job goes on. */
TEST(the_signal_from_the_kernel_elsewhere_changes_nothing)
{
	int sig = (int)rfbpf_gpu_control.yield_signal;
	siginfo_t si = { .si_signo = sig, .si_code = SI_KERNEL };

	CHECK(lease(true));
	CHECK_STR(sim_cupti_holder(), OUR_NAME);
	CHECK(syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), sig,
		      &si) == 0);
	CHECK_STR(sim_cupti_holder(), OUR_NAME);
	CHECK_EQ_U64(sim_cupti_kinds(), OURS);
	CHECK_EQ_U64(rfbpf_gpu_control.yielded, 0);
	CHECK_EQ_U64(rfbpf_gpu_control.yields_in_call, 0);
	CHECK(lease(false));
}

/* Sent by a process (kill): the default action, as without the agent. */
TEST(the_signal_from_a_process_ends_the_job_as_without_the_agent)
{
	int sig = (int)rfbpf_gpu_control.yield_signal, status = 0;
	pid_t child = fork();

	if (!child) {
		kill(getpid(), sig);
		_exit(0);		/* not reached */
	}
	CHECK(waitpid(child, &status, 0) == child);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == sig);
}

/* --yield-in-call (its own process: the agent leaves CUPTI for good).
 * The handler as rfbpf's probe makes it run: from the kernel, on the
 * first instructions of cuptiSubscribe. The agent flushes its records,
 * disables its kinds and unsubscribes there, so Kineto's subscribe, which
 * gives up Kineto's CUDA activity when it fails, succeeds; Kineto's
 * kinds and buffers are then the only ones. */
static int run_yield_in_call(void)
{
	void (*handler)(int, siginfo_t *, void *) =
		(void (*)(int, siginfo_t *, void *))(uintptr_t)
		rfbpf_gpu_control.yield_handler;
	int sig = (int)rfbpf_gpu_control.yield_signal;
	siginfo_t si = { .si_signo = sig, .si_code = SI_KERNEL };
	void *subscribe = dlsym(RTLD_DEFAULT, "cuptiSubscribe");
	ucontext_t uc;
	int bad = 0;

	memset(&uc, 0, sizeof(uc));
	bad += !handler || !subscribe;
	bad += !lease(true);
	bad += sim_cupti_kinds() != OURS;
	if (!bad) {
		/* A forked child (a DataLoader worker) has the handler too,
		 * and CUPTI is no child's to give up: nothing there. */
		pid_t child = fork();
		int status = 1;

		if (!child) {
			uc.uc_mcontext.gregs[REG_RIP] =
				(greg_t)(uintptr_t)subscribe + 4;
			handler(sig, &si, &uc);
			_exit(rfbpf_gpu_control.yields_in_call != 0 ||
			      sim_cupti_holder() == NULL);
		}
		bad += waitpid(child, &status, 0) != child ||
		       !WIFEXITED(status) || WEXITSTATUS(status) != 0;
	}
	if (!bad) {
		/* Past the first instruction (endbr64), where the signal
		 * comes after the probe. Off by far: nothing. */
		uc.uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)subscribe
						+ 4000;
		handler(sig, &si, &uc);
		bad += sim_cupti_holder() == NULL;
		uc.uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)subscribe
						+ 4;
		handler(sig, &si, &uc);
	}
	bad += rfbpf_gpu_control.yields_in_call != 1;
	bad += rfbpf_gpu_control.yielded != 1;
	bad += sim_cupti_holder() != NULL;		/* unsubscribed */
	bad += sim_cupti_kinds() != 0;			/* its kinds off */
	/* Its one buffer came back in the flush: none left over. */
	bad += rfbpf_gpu_control.buffers_left != 0;
	bad += sim_cupti_kineto_starts() != 0;		/* Kineto subscribes */
	bad += sim_cupti_kinds() != KINETO;
	bad += !sim_cupti_buffers_are_other();
	bad += !lease(false);
	bad += sim_cupti_kinds() != KINETO;		/* left to Kineto */
	bad += !sim_cupti_buffers_are_other();
	printf("tests/gpu/cupti_coexist.c (left inside another tool's "
	       "subscribe): %s\n", bad ? "FAILED" : "Kineto subscribed");
	return bad ? 1 : 0;
}

/* --yield (its own process: the agent then leaves CUPTI for good). The
 * agent holds CUPTI; a tool starts that, its subscribe refused, registers
 * its buffers and enables its kinds anyway; rfbpf, which sees that
 * through its uprobes on libcupti, asks the agent to yield (the way left
 * when the signal cannot be used: an agent without one, the signal
 * blocked): the agent unsubscribes and leaves every kind, the buffers and
 * the clock as that tool set them, during the lease and after it, and
 * takes CUPTI no more. */
static int run_yield(void)
{
	uint64_t end;
	int bad = 0;

	bad += !lease(true);
	bad += rfbpf_gpu_control.cupti_ok != 1;
	bad += sim_cupti_kinds() != OURS;
	sim_cupti_other_starts("Kineto");
	__atomic_store_n(&rfbpf_gpu_control.yield_request, 1,
			 __ATOMIC_RELEASE);
	end = mono_ns() + 3000000000ull;
	while (!__atomic_load_n(&rfbpf_gpu_control.yielded,
				__ATOMIC_ACQUIRE) && mono_ns() < end)
		usleep(10000);
	bad += rfbpf_gpu_control.yielded != 1;
	/* The buffer CUPTI held for the agent goes to Kineto now. */
	bad += rfbpf_gpu_control.buffers_left != 1;
	bad += sim_cupti_holder() != NULL;		/* unsubscribed */
	bad += sim_cupti_kinds() != (OURS | KINETO);	/* none disabled */
	bad += !sim_cupti_buffers_are_other();
	bad += sim_cupti_clock_replaced();
	bad += !lease(false);
	bad += sim_cupti_kinds() != (OURS | KINETO);
	bad += !sim_cupti_buffers_are_other();
	/* A later lease: nothing is taken. */
	bad += !lease(true);
	bad += sim_cupti_holder() != NULL;
	bad += rfbpf_gpu_control.cupti_ok != 0;
	bad += !sim_cupti_buffers_are_other();
	bad += !lease(false);
	printf("tests/gpu/cupti_coexist.c (another tool during a lease): %s\n",
	       bad ? "FAILED" : "left to it, untouched");
	return bad ? 1 : 0;
}

/* With the stand-in reporting a CUPTI whose records the agent does not
 * know: it takes nothing at all, and says so. */
static int run_refused(unsigned long version)
{
	int bad = 0;

	bad += !lease(true);
	bad += rfbpf_gpu_control.cupti_ok != 0;
	bad += rfbpf_gpu_control.cupti_result == CUPTI_SUCCESS;
	bad += sim_cupti_holder() != NULL;	/* not even subscribed */
	bad += sim_cupti_kinds() != 0;
	bad += !lease(false);
	printf("tests/gpu/cupti_coexist.c (CUPTI API version %lu): %s\n",
	       version, bad ? "FAILED" : "refused, nothing taken");
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *v = getenv("SIM_CUPTI_VERSION");
	unsigned long version = v ? strtoul(v, NULL, 10) : DEFAULT_VERSION;

	v = getenv("RFBPF_CUPTI_CLOCK");
	callback_clock = v && !strcmp(v, "callback");
	/* The agent as the CUDA driver starts it (its thread runs on). */
	InitializeInjection();
	if (!(version >= 19 && version <= 28) &&
	    !(version >= 130000 && version < 140000))
		return run_refused(version);
	if (argc > 1 && !strcmp(argv[1], "--yield"))
		return run_yield();
	if (argc > 1 && !strcmp(argv[1], "--yield-in-call"))
		return run_yield_in_call();
	return check_run_all(__FILE__);
}
