// SPDX-License-Identifier: BSD-2-Clause
/*
 * The agent's life: InitializeInjection() (called by the CUDA driver from
 * inside cuInit, through CUDA_INJECTION64_PATH) sets everything up once and
 * starts one background thread; an atexit handler flushes and stops it.
 *
 * The thread wakes every ~100 ms (or the flush period, if shorter) and:
 *   - follows the lease: when rfbpf's lease starts it takes CUPTI (sets
 *     up the clock, subscribes, enables the activity kinds); when it runs
 *     out it flushes, disables them and unsubscribes, so an untraced job
 *     records nothing and leaves CUPTI free for torch.profiler or Nsight;
 *   - flushes activity every flush_period_ns while activity is on, so
 *     records reach rfbpf within about a period of the kernel's end;
 *   - answers rfbpf's final flush request (flush, then acknowledge);
 *   - retries the RFBPF_SAMPLE activation until libtorch_cpu shows up.
 * The launching threads never wait for it: the only thing they share is
 * the control block, read with atomics. One thing runs on another
 * thread: leaving CUPTI inside another tool's cuptiSubscribe, from a
 * signal handler (yield_in_call); cupti_lock keeps it and the thread's
 * CUPTI work apart.
 *
 * Failures are counted and described, never returned to the job:
 * InitializeInjection returns 1 and the agent stays loaded even when
 * CUPTI cannot subscribe (e.g. no driver), because the lease logic and the
 * op probes still work.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "agent.h"

#define TICK_NS 100000000ull		/* lease and libtorch checks */
#define FLUSH_MS_MAX 3600000ull

static pthread_t thread;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;
static bool stopping;
static bool thread_running;
static pid_t agent_pid;
static CUpti_SubscriberHandle subscriber;
/* Held by the agent thread around its CUPTI work (rf_agent_tick, the exit)
 * and by a yield inside another tool's call. Never by a launching thread. */
static pthread_mutex_t cupti_lock = PTHREAD_MUTEX_INITIALIZER;

static void read_flush_period(void)
{
	static int once;
	const char *text = getenv("RFBPF_CUPTI_FLUSH_MS");
	unsigned long long ms;
	char *end;

	if (!text)
		return;
	errno = 0;
	ms = strtoull(text, &end, 10);
	if (errno || end == text || *end || !ms || ms > FLUSH_MS_MAX ||
	    text[0] == '-') {
		rf_warn_once(&once, "RFBPF_CUPTI_FLUSH_MS=%s is not a number "
			     "of ms in [1, %llu]: keeping %llu ms", text,
			     FLUSH_MS_MAX,
			     (unsigned long long)(rfbpf_gpu_control
					.flush_period_ns / 1000000));
		return;
	}
	__atomic_store_n(&rfbpf_gpu_control.flush_period_ns, ms * 1000000ull,
			 __ATOMIC_RELAXED);
}

/*
 * CUPTI allows one subscriber per process, and activity buffers, enabled
 * kinds and the timestamp callback are process-wide: holding them for the
 * job's whole life would lock torch.profiler (Kineto) and Nsight out. So
 * the agent takes CUPTI only while a tracer holds the lease, and gives it
 * back (unsubscribes) when the lease ends.
 *
 * The subscription comes first, and nothing process-wide is touched
 * without it: Kineto keeps its subscription for the life of the process
 * once torch.profiler has run, and enabling kinds or registering a clock
 * then would reach into its traces. The holder's name (CUDA 13's
 * cuptiSubscribe_v2 reports it) goes to the control block, for rfbpf to
 * say.
 */
static bool cupti_take(void)
{
	char holder[sizeof(rfbpf_gpu_control.cupti_holder)] = "";
	CUpti_SubscriberParams params = {
		.structSize = CUpti_SubscriberParams_STRUCT_SIZE,
		.subscriberName = "rfbpf",
		.oldSubscriberName = holder,
		.oldSubscriberSize = sizeof(holder),
	};
	static int once;
	CUptiResult r;
	bool loaded;

	rf_api_new_generation();
	loaded = rf_cupti_load();
	/* Known even when refused: rfbpf says which it was. */
	__atomic_store_n(&rfbpf_gpu_control.cupti_version, rf_cupti.version,
			 __ATOMIC_RELEASE);
	if (!loaded) {			/* said once by the loader */
		__atomic_store_n(&rfbpf_gpu_control.cupti_result,
				 (uint32_t)CUPTI_ERROR_NOT_INITIALIZED,
				 __ATOMIC_RELEASE);
		return false;
	}
	/* CUDA 12's CUPTI has only the first: the holder goes unnamed. */
	r = rf_cupti.Subscribe_v2 ?
		rf_cupti.Subscribe_v2(&subscriber, rfbpf_cupti_api_callback,
				      NULL, &params) :
		rf_cupti.Subscribe(&subscriber, rfbpf_cupti_api_callback,
				   NULL);
	holder[sizeof(holder) - 1] = 0;
	memcpy(rfbpf_gpu_control.cupti_holder, holder, sizeof(holder));
	__atomic_store_n(&rfbpf_gpu_control.cupti_result, (uint32_t)r,
			 __ATOMIC_RELEASE);
	if (r != CUPTI_SUCCESS) {
		subscriber = NULL;
		if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
			rf_warn_once(&once, "CUPTI is held by %s: no GPU "
				     "activity while it is", holder[0] ?
				     holder : "another tool");
		else
			rf_cupti_failed(r, "cuptiSubscribe", &once);
		return false;
	}
	/* Before any activity kind is enabled. */
	rf_clock_init();
	/* Buffers are registered even if a callback cannot be: activity
	 * still works without launch reports, and the converse. */
	rf_api_enable_callbacks(subscriber);
	if (RF_CUPTI_CHECK(rf_cupti.ActivityRegisterCallbacks(
		    rfbpf_cupti_buffer_requested,
		    rfbpf_cupti_buffer_completed)))
		__atomic_store_n(&rfbpf_gpu_control.cupti_ok, 1,
				 __ATOMIC_RELEASE);
	return true;
}

static void cupti_give_back(void)
{
	if (subscriber)
		RF_CUPTI_CHECK(rf_cupti.Unsubscribe(subscriber));
	subscriber = NULL;
	__atomic_store_n(&rfbpf_gpu_control.cupti_ok, 0, __ATOMIC_RELEASE);
}

/* CUPTI left to another tool, for the rest of the process's life. */
static bool yielded;

/*
 * Leaving CUPTI for good in this process, either way below. ours_off: the
 * other tool has set up nothing yet, so the agent's kinds go off (after a
 * flush); otherwise the kinds are the process's, now the other tool's,
 * and stay. Buffers of the agent's still with CUPTI then go to the other
 * tool's completion callback: their records are lost to rfbpf (counted).
 */
static void leave_cupti(bool ours_off)
{
	yielded = true;
	if (ours_off)
		rf_activity_set_enabled(false);		/* flushes first */
	else
		__atomic_store_n(&rfbpf_gpu_control.activity_enabled, 0,
				 __ATOMIC_RELEASE);
	rf_count(&rfbpf_gpu_control.buffers_left, rf_activity_buffers_out());
	cupti_give_back();
	__atomic_store_n(&rfbpf_gpu_control.yielded, 1, __ATOMIC_RELEASE);
}

/*
 * rfbpf saw another tool start using CUPTI in the job (a call from
 * another thread to one of RF_CUPTI_WATCHED: torch.profiler, Nsight).
 * The subscription is the only thing that is the agent's alone, so it
 * goes; the activity kinds, buffer callbacks and clock are the process's,
 * now as the other tool sets them, and stay as they are: disabling a kind
 * or flushing would take records from its trace. The agent then takes
 * CUPTI no more in this process: it cannot know when the other tool is
 * done (Kineto keeps CUPTI set up after its session).
 */
static void yield_cupti(void)
{
	static int once;

	leave_cupti(false);
	rf_warn_once(&once, "another tool started using CUPTI: left to it, "
		     "no more GPU activity from rfbpf in this process");
}

/*
 * Leaving CUPTI inside another tool's cuptiSubscribe. Kineto gives up its
 * CUDA activity for the whole process when its subscribe fails (seen on
 * an H200 with torch 2.11: "CUPTI initialization failed - CUDA profiler
 * activities will be missing"), so yield_cupti(), which runs at the
 * agent thread's next tick after rfbpf saw the call, comes too late.
 * rfbpf's probe on cuptiSubscribe therefore also sends the agent's
 * signal (rf_gpu_control.yield_signal) to the calling thread
 * (bpf/gpu.bpf.c, cupti_call), and this handler runs on that thread
 * before the call's second instruction: the other tool has
 * set up nothing yet, so the agent can flush its own records, disable its
 * own kinds and unsubscribe, and the call goes on to succeed.
 *
 * The handler only acts where that probe sent it: a signal from the
 * kernel (SI_KERNEL: bpf_send_signal; a process cannot forge that code
 * for another), on the first instructions of cuptiSubscribe or
 * cuptiSubscribe_v2, in the process that loaded the agent. There the
 * thread holds no lock of CUPTI's, of stdio's or of the agent's. A
 * signal sent by anyone else gets what the job had for it, the default
 * action (the agent takes only a signal left at its default), and one
 * from the kernel found anywhere else is ignored.
 */
#define YIELD_IP_SLACK 16	/* the first instruction is at most 15 bytes */

static bool at_subscribe(uintptr_t ip)
{
	uintptr_t fn[2] = { (uintptr_t)rf_cupti.Subscribe,
			    (uintptr_t)rf_cupti.Subscribe_v2 };

	for (int i = 0; i < 2; i++)
		if (fn[i] && ip > fn[i] && ip <= fn[i] + YIELD_IP_SLACK)
			return true;
	return false;
}

bool rf_agent_yield_in_call(uintptr_t ip)
{
	bool left = false;

	if (getpid() != agent_pid || !at_subscribe(ip))
		return false;
	pthread_mutex_lock(&cupti_lock);
	if (!yielded && subscriber) {
		leave_cupti(true);
		rf_count(&rfbpf_gpu_control.yields_in_call, 1);
		left = true;
	}
	pthread_mutex_unlock(&cupti_lock);
	return left;
}

static void yield_handler(int sig, siginfo_t *info, void *ucontext)
{
	const ucontext_t *uc = ucontext;
	int saved = errno;

	if (info->si_code == SI_KERNEL)
		rf_agent_yield_in_call(
			(uintptr_t)uc->uc_mcontext.gregs[REG_RIP]);
	else {
		/* Not rfbpf's: the default action, as without the agent
		 * (the signal is blocked until this returns). */
		signal(sig, SIG_DFL);
		raise(sig);
	}
	errno = saved;
}

/* At load: the highest real-time signal the job leaves at its default,
 * above the few the C library and threading tools take from the bottom. */
static void install_yield_handler(void)
{
	struct sigaction sa = { .sa_sigaction = yield_handler,
				.sa_flags = SA_SIGINFO | SA_RESTART };

	sigfillset(&sa.sa_mask);
	for (int sig = SIGRTMAX; sig >= SIGRTMIN + 4; sig--) {
		struct sigaction old;

		if (sigaction(sig, NULL, &old) || (old.sa_flags & SA_SIGINFO) ||
		    old.sa_handler != SIG_DFL || sigaction(sig, &sa, NULL))
			continue;
		__atomic_store_n(&rfbpf_gpu_control.yield_handler,
				 (uint64_t)(uintptr_t)yield_handler,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&rfbpf_gpu_control.yield_signal,
				 (uint32_t)sig, __ATOMIC_RELEASE);
		return;
	}
}

/* rfbpf is about to stop: hand over what CUPTI holds while its lease is
 * still valid, then say so (see rf_gpu_control.flush_request). */
static void answer_flush_request(bool activity_on)
{
	uint64_t req = __atomic_load_n(&rfbpf_gpu_control.flush_request,
				       __ATOMIC_ACQUIRE);

	if (req == __atomic_load_n(&rfbpf_gpu_control.flush_done,
				   __ATOMIC_RELAXED))
		return;
	if (activity_on && __atomic_load_n(&rfbpf_gpu_control.activity_enabled,
					   __ATOMIC_RELAXED))
		RF_CUPTI_CHECK(rf_cupti.ActivityFlushAll(
			CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
	__atomic_store_n(&rfbpf_gpu_control.flush_done, req, __ATOMIC_RELEASE);
}

static void agent_exit(void);

/*
 * The exit work (flush what CUPTI holds, kinds off, unsubscribe) must run
 * before CUPTI's own teardown: libcupti is C++, and exit() runs the
 * destructors its statics registered when it was loaded before any
 * handler registered earlier, such as the one InitializeInjection set up
 * before CUPTI was even opened. So the handler is registered once more,
 * once CUPTI has been loaded and set up, and exit() runs it first (the
 * second run finds nothing left to do). tests/gpu/cupti_exit_order.c.
 */
static void exit_before_cupti(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	atexit(agent_exit);
}

static uint64_t tick(bool *activity_on, uint64_t *last_flush);

/* One step of the thread's loop; returns how long to sleep. */
uint64_t rf_agent_tick(bool *activity_on, uint64_t *last_flush,
		       bool *torch_done)
{
	static bool devices_told;
	uint64_t sleep_ns;

	/* Each lease's tracer is told what the GPUs are, before the records
	 * the next flush brings; outside cupti_lock (the driver's locks). */
	if (!*activity_on)
		devices_told = false;
	else if (!devices_told)
		devices_told = rf_devices_report();
	pthread_mutex_lock(&cupti_lock);
	sleep_ns = tick(activity_on, last_flush);
	pthread_mutex_unlock(&cupti_lock);
	/* Outside the lock: it may wait on torch's callback registry. */
	if (!*torch_done)
		*torch_done = rf_torch_activation_poll();
	return sleep_ns;
}

/* The CUPTI part of a tick, under cupti_lock. */
static uint64_t tick(bool *activity_on, uint64_t *last_flush)
{
	uint64_t now = rf_now_ns();
	uint64_t period = __atomic_load_n(&rfbpf_gpu_control.flush_period_ns,
					  __ATOMIC_RELAXED);
	bool leased = rf_lease_active(now);

	if (!yielded && __atomic_load_n(&rfbpf_gpu_control.yield_request,
					__ATOMIC_ACQUIRE))
		yield_cupti();
	if (leased && !*activity_on) {
		/* Kinds only with the subscription (see cupti_take). */
		if (!yielded && cupti_take()) {
			rf_activity_set_enabled(true);
			exit_before_cupti();
		}
		/* Tried once per lease: a failure is not retried (and not
		 * re-counted) every tick until the lease ends. */
		*activity_on = true;
		*last_flush = now;
	} else if (!leased && *activity_on) {
		if (subscriber)		/* kinds of ours to turn off */
			rf_activity_set_enabled(false);	/* flushes first */
		cupti_give_back();
		*activity_on = false;
	} else if (*activity_on && now - *last_flush >= period &&
		   __atomic_load_n(&rfbpf_gpu_control.activity_enabled,
				   __ATOMIC_RELAXED)) {
		RF_CUPTI_CHECK(rf_cupti.ActivityFlushAll(0));
		rf_clock_recalibrate();
		*last_flush = now;
	}
	/* Said only once the clock and activity are set up for it. */
	__atomic_store_n(&rfbpf_gpu_control.lease_seen, leased,
			 __ATOMIC_RELEASE);
	answer_flush_request(*activity_on);
	return period < TICK_NS ? period : TICK_NS;
}

void rf_agent_forget(void)
{
	subscriber = NULL;
	yielded = false;
}

static void *agent_thread(void *arg)
{
	bool activity_on = false, torch_done = false;
	uint64_t last_flush = 0;

	(void)arg;
	pthread_mutex_lock(&lock);
	while (!stopping) {
		uint64_t sleep_ns, deadline;
		struct timespec ts;

		pthread_mutex_unlock(&lock);
		sleep_ns = rf_agent_tick(&activity_on, &last_flush,
					 &torch_done);
		deadline = rf_now_ns() + sleep_ns;
		ts.tv_sec = (time_t)(deadline / 1000000000ull);
		ts.tv_nsec = (long)(deadline % 1000000000ull);
		pthread_mutex_lock(&lock);
		while (!stopping &&
		       pthread_cond_timedwait(&wake, &lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&lock);
	/* At exit, deliver what is in flight while a tracer may still be
	 * listening, then leave CUPTI quiet. */
	pthread_mutex_lock(&cupti_lock);
	if (activity_on && subscriber) {
		rf_activity_set_enabled(false);
		cupti_give_back();
	}
	pthread_mutex_unlock(&cupti_lock);
	return NULL;
}

static void start_thread(void)
{
	static int once;
	pthread_condattr_t attr;
	sigset_t all, old;
	int err;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&wake, &attr);
	pthread_condattr_destroy(&attr);
	/* The job's signals must go to the job's threads, not ours. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&thread, NULL, agent_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		rf_warn_once(&once, "cannot start the agent thread: %s; "
			     "no lease, no activity", strerror(err));
		return;
	}
	pthread_setname_np(thread, "rfbpf-cupti");
	thread_running = true;
}

static void agent_exit(void)
{
	static int once;
	struct timespec limit;

	/* A forked child has no agent thread to join. */
	if (getpid() != agent_pid)
		return;
	if (thread_running) {
		pthread_mutex_lock(&lock);
		stopping = true;
		pthread_cond_signal(&wake);
		pthread_mutex_unlock(&lock);
		/* Never hang the job's exit on CUPTI (a flush into a driver
		 * that is being torn down): give the thread a few seconds. */
		clock_gettime(CLOCK_REALTIME, &limit);
		limit.tv_sec += 3;
		if (pthread_timedjoin_np(thread, NULL, &limit))
			rf_warn_once(&once, "the agent thread did not stop "
				     "within 3 s at exit; leaving it");
		thread_running = false;
	}
}

int InitializeInjection(void)
{
	static int initialized;

	if (__atomic_exchange_n(&initialized, 1, __ATOMIC_ACQ_REL))
		return 1;
	agent_pid = getpid();
	read_flush_period();
	rf_torch_activation_init();
	install_yield_handler();
	start_thread();
	atexit(agent_exit);
	return 1;
}
