// SPDX-License-Identifier: BSD-2-Clause
/*
 * The control thread's code, and the job's fork and exit handlers: the
 * only C of rfbpf's that runs inside the traced job (the protocol:
 * control_block.h). It is compiled freestanding, linked at its offset in
 * rfbpf's page and copied into the page's bytes (stub_page.S); the build
 * refuses it if it has data, or calls or refers to anything outside
 * itself but the control block (Makefile: control_loop.bin). So:
 * - no libc: system calls are made inline, and the thread's time is
 *   CLOCK_MONOTONIC from clock_gettime, as BPF's and rfbpf's;
 * - every address comes rip-relative (the block) or from the block
 *   (PyTorch's functions, resolved by rfbpf);
 * - nothing here can throw, and nothing blocks the job's threads: the
 *   handlers wait only for a PyTorch call the thread is in, which holds
 *   PyTorch's lock for microseconds.
 * tests/unit/test_control_loop.c runs these very bytes in a test process.
 */
#include <stdint.h>
#include "control_block.h"

/* Defined by the link (control_loop.lds) at the block's place relative
 * to this code: a rip-relative address wherever the page is mapped. */
extern struct control_block control_block_here
	__attribute__((visibility("hidden")));
#define BLOCK (&control_block_here)

#define SYS_rt_sigprocmask	14
#define SYS_prctl		157
#define SYS_gettid		186
#define SYS_futex		202
#define SYS_clock_gettime	228
#define SYS_clock_nanosleep	230
#define CLOCK_MONOTONIC		1
#define CLOCK_PROCESS_CPUTIME_ID	2
#define TIMER_ABSTIME		1
#define FUTEX_WAIT_PRIVATE	128
#define FUTEX_WAKE_PRIVATE	129
#define PR_SET_NAME		15
#define SIG_SETMASK		2

struct k_timespec {
	long tv_sec, tv_nsec;
};

static inline __attribute__((always_inline)) long
sys4(long nr, long a, long b, long c, long d)
{
	register long r10 __asm__("r10") = d;
	long ret;

	__asm__ volatile("syscall" : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return ret;
}

static inline __attribute__((always_inline)) long
sys6(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;

	__asm__ volatile("syscall" : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10),
			   "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

static inline __attribute__((always_inline)) uint64_t clock_ns(long clock)
{
	struct k_timespec ts = { 0, 0 };

	sys4(SYS_clock_gettime, clock, (long)&ts, 0, 0);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline __attribute__((always_inline)) uint64_t now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static inline __attribute__((always_inline)) void sleep_until(uint64_t ns)
{
	struct k_timespec ts = { (long)(ns / 1000000000ull),
				 (long)(ns % 1000000000ull) };

	/* EINTR cannot happen (every signal is blocked); an early return
	 * only makes the loop look at the block sooner. */
	sys4(SYS_clock_nanosleep, CLOCK_MONOTONIC, TIMER_ABSTIME, (long)&ts,
	     0);
}

static inline __attribute__((always_inline)) void
futex_wait(uint32_t *word, uint32_t val, long timeout_ns)
{
	struct k_timespec ts = { 0, timeout_ns };

	sys6(SYS_futex, (long)word, FUTEX_WAIT_PRIVATE, val, (long)&ts, 0,
	     0);
}

static inline __attribute__((always_inline)) uint32_t load(uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline __attribute__((always_inline)) int
cas(uint32_t *p, uint32_t old, uint32_t val)
{
	return __atomic_compare_exchange_n(p, &old, val, 0, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

/* The thread's side of the gate: into PyTorch only when no fork is under
 * way and the job is not exiting. */
static inline __attribute__((always_inline)) int
gate_enter(struct control_block *b)
{
	return cas(&b->gate, 0, GATE_CALLING);
}

static inline __attribute__((always_inline)) void
gate_leave(struct control_block *b)
{
	/* While the thread calls, the others only add GATE_WAITER. */
	if (__atomic_exchange_n(&b->gate, 0, __ATOMIC_ACQ_REL) & GATE_WAITER)
		sys6(SYS_futex, (long)&b->gate, FUTEX_WAKE_PRIVATE,
		     0x7fffffff, 0, 0, 0);
}

/* A fork or exit waiting for the thread's call to end: sleeps on the
 * gate (10 ms at most a time, so a missed wake-up costs no more). */
static inline __attribute__((always_inline)) void
gate_wait(struct control_block *b, uint32_t v)
{
	if (cas(&b->gate, v, v | GATE_WAITER))
		futex_wait(&b->gate, v | GATE_WAITER, 10000000);
}

typedef uint64_t (*add_fn)(struct rf_callback_abi cb);
typedef void (*remove_fn)(uint64_t handle);

/* When a switch was made: the time, the job's CPU clock, its ops. */
struct switch_at {
	uint64_t ns, cpu_ns, ops;
};

/* Registers cb (on), or removes the callback, if the gate lets it now.
 * Returns 1 if it did, 0 if a fork is under way (tried again 1 ms
 * later), -1 if the job is exiting. */
static inline __attribute__((always_inline)) int
switch_callback(struct control_block *b, const struct rf_callback_abi *cb,
		struct switch_at *at)
{
	uint32_t v = load(&b->gate);

	if (v & GATE_CLOSED)
		return -1;
	if (!gate_enter(b)) {
		b->gate_busy++;
		return 0;
	}
	at->ns = now_ns();
	at->cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	at->ops = __atomic_load_n(&b->ops, __ATOMIC_RELAXED);
	if (cb) {
		b->handle = ((add_fn)b->add_fn)(*cb);
	} else {
		((remove_fn)b->remove_fn)(b->handle);
		b->handle = 0;
	}
	b->switches++;
	gate_leave(b);
	return 1;
}

/* The job is exiting: wait for exit_group, touching nothing of the job. */
static inline __attribute__((always_inline, noreturn)) void
park(struct control_block *b)
{
	b->state = CONTROL_PARKED;
	for (;;)
		sleep_until(now_ns() + 1000000000ull);
}

/* Every signal blocked, but glibc's own two (SIGCANCEL 32 and SIGSETXID
 * 33): a setuid() in the job waits for every thread to take SIGSETXID. */
static inline __attribute__((always_inline)) void block_signals(void)
{
	uint64_t mask = ~((1ull << 31) | (1ull << 32));

	sys4(SYS_rt_sigprocmask, SIG_SETMASK, (long)&mask, 0, 8);
}

/* Names the thread CONTROL_THREAD_NAME, written a byte at a time: a
 * string literal would be data, which this code may not have. */
static inline __attribute__((always_inline)) void set_name(void)
{
	uint64_t name[2] = { 0, 0 };
	char *c = (char *)name;

	c[0] = 'r'; c[1] = 'f'; c[2] = 'b'; c[3] = 'p'; c[4] = 'f';
	c[5] = '-'; c[6] = 'c'; c[7] = 'o'; c[8] = 'n'; c[9] = 't';
	c[10] = 'r'; c[11] = 'o'; c[12] = 'l';
	sys4(SYS_prctl, PR_SET_NAME, (long)name, 0, 0);
}

/* Runs burst k as far as time allows: returns the time to sleep until
 * (0: look again now). */
static inline __attribute__((always_inline)) uint64_t
run_burst(struct control_block *b, uint64_t k, uint64_t now)
{
	struct control_burst w = b->burst[k % CONTROL_BURSTS];
	struct control_result *r = &b->result[k % CONTROL_BURSTS];
	struct switch_at at;
	int ret;

	if (!b->handle) {
		if (now < w.on_ns)
			return w.on_ns;
		if (now >= w.off_ns) {		/* too late: skipped */
			r->on_ns = r->off_ns = r->cpu_ns = r->ops = 0;
			r->seq = k + 1;
			__atomic_store_n(&b->done, k + 1, __ATOMIC_RELEASE);
			return 0;
		}
		ret = switch_callback(b, w.count_only ? &b->cb_count : &b->cb,
				      &at);
		if (ret < 0)
			park(b);
		if (!ret)
			return now + 1000000;
		r->on_ns = at.ns;
		r->cpu_ns = at.cpu_ns;
		r->ops = at.ops;
		return w.off_ns;
	}
	if (now < w.off_ns)
		return w.off_ns;
	ret = switch_callback(b, 0, &at);
	if (ret < 0)
		park(b);
	if (!ret)
		return now + 1000000;
	r->off_ns = at.ns;
	r->cpu_ns = at.cpu_ns - r->cpu_ns;
	r->ops = at.ops - r->ops;
	r->seq = k + 1;
	__atomic_store_n(&b->done, k + 1, __ATOMIC_RELEASE);
	return 0;
}

/* pthread_create's start routine (its argument is unused: the block is
 * found rip-relative). */
void *control_main(void *unused)
{
	struct control_block *b = BLOCK;
	struct switch_at at;

	(void)unused;
	block_signals();
	set_name();
	b->tid = (uint64_t)sys4(SYS_gettid, 0, 0, 0, 0);
	__atomic_store_n(&b->state, CONTROL_RUNNING, __ATOMIC_RELEASE);
	for (;;) {
		uint64_t now = now_ns(), lease, until, k, next;

		lease = __atomic_load_n(&b->lease_ns, __ATOMIC_ACQUIRE);
		if (now >= lease)
			break;
		k = b->done;
		until = now + CONTROL_MAX_SLEEP_NS;
		if (k < __atomic_load_n(&b->written, __ATOMIC_ACQUIRE)) {
			next = run_burst(b, k, now);
			if (!next)
				continue;
			if (next < until)
				until = next;
		}
		if (until > lease)
			until = lease;
		sleep_until(until);
	}
	/* The lease ran out (rfbpf is gone) or rfbpf asked: leave nothing. */
	while (b->handle) {
		int ret = switch_callback(b, 0, &at);

		if (ret < 0)
			park(b);
		if (!ret)
			sleep_until(now_ns() + 1000000);
	}
	__atomic_store_n(&b->state, CONTROL_EXITED, __ATOMIC_RELEASE);
	return 0;
}

/* The job's side of the gate, for a fork (closing 0: one more fork under
 * way) or its exit (closing 1: for good): waits for a call the thread is
 * in, and no call starts after it. */
static inline __attribute__((always_inline)) void
gate_hold(struct control_block *b, int closing)
{
	for (;;) {
		uint32_t v = load(&b->gate);

		if (v & GATE_CLOSED)
			return;
		if (v & GATE_CALLING)
			gate_wait(b, v);
		else if (closing ? cas(&b->gate, v, v | GATE_CLOSED) :
			 (v & GATE_FORKS) == GATE_FORKS ||	/* 65535 at
								 * once: not
								 * counted */
			 cas(&b->gate, v, v + 1))
			return;
	}
}

/* pthread_atfork's prepare: the fork waits for a call in progress, and
 * no call starts until the parent handler. */
void control_fork_prepare(void)
{
	gate_hold(BLOCK, 0);
}

/* ...and its parent: this fork is done. (In the child the data page is
 * wiped, gate included, and no thread of rfbpf's runs there.) */
void control_fork_parent(void)
{
	struct control_block *b = BLOCK;

	for (;;) {
		uint32_t v = load(&b->gate);

		if (!(v & GATE_FORKS) || cas(&b->gate, v, v - 1))
			return;
	}
}

/* An atexit handler (__cxa_atexit), run before the destructors of
 * PyTorch's statics, which were registered earlier: the thread's call in
 * progress ends, and none follows. */
void control_exit(void *unused)
{
	(void)unused;
	gate_hold(BLOCK, 1);
}

/* The entry points, at fixed offsets from the start of the code
 * (STUB_CONTROL_* in stub_page.h). */
__asm__(".pushsection .text.control_entry, \"ax\", @progbits\n"
	"	jmp control_main\n"
	"	.p2align 4, 0xcc\n"
	"	jmp control_fork_prepare\n"
	"	.p2align 4, 0xcc\n"
	"	jmp control_fork_parent\n"
	"	.p2align 4, 0xcc\n"
	"	jmp control_exit\n"
	"	.p2align 4, 0xcc\n"
	".popsection\n");
