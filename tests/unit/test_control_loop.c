// SPDX-License-Identifier: BSD-2-Clause
/*
 * The control thread's code (user/attach/control_loop.c) as the job runs
 * it: these are the page's own bytes, mapped here as rfbpf maps them in a
 * job, with the block in the page's data, the thread started with
 * pthread_create at the page's entry and PyTorch's two functions played
 * by this file. What each test would catch in the job:
 * - bursts: a callback switched at the wrong time, left on, or
 *   registered with sampling (p must be 1 in a burst);
 * - a burst past its end is skipped, never switched on;
 * - a counting burst registering the traced callback (or the reverse),
 *   and the ops and CPU a burst reports not being its own;
 * - the lease: a killed rfbpf's callback must go, and the thread with it;
 * - the fork gate: a fork copying PyTorch's lock held (prepare returns
 *   while the thread is in a call), or the thread calling during a fork;
 * - the exit gate: a call into PyTorch while the job is exiting;
 * - the thread's name and its signal mask (all blocked but glibc's 32
 *   and 33, which setuid() in a threaded job needs).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "attach/control_block.h"
#include "attach/stub_page.h"

static unsigned char *page;
static struct control_block *blk;
static atomic_int adds, removes, in_call;
static atomic_int call_ms;	/* how long a call takes */
static uint64_t last_handle;
static double bad_prob;
/* The start callback registered now (0: none), and each one added */
static _Atomic uint64_t current_start;
static uint64_t added_start[8];

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void sleep_ms(int ms)
{
	usleep(ms * 1000);
}

static uint64_t fake_add(struct rf_callback_abi cb)
{
	in_call = 1;
	if (cb.sampling_prob != 1.0)
		bad_prob = cb.sampling_prob;
	if (call_ms)
		sleep_ms(call_ms);
	if (adds < 8)
		added_start[adds] = cb.start;
	adds++;		/* before the callback is seen: calls[adds - 1] */
	current_start = cb.start;
	in_call = 0;
	return ++last_handle;
}

static void fake_remove(uint64_t handle)
{
	in_call = 1;
	if (handle != last_handle)
		bad_prob = -1;
	if (call_ms)
		sleep_ms(call_ms);
	current_start = 0;
	removes++;
	in_call = 0;
}

/* A fresh page with the thread started on it, as rfbpf starts it. */
static pthread_t start(void)
{
	pthread_t t;
	pthread_attr_t a;

	/* a page each (a parked thread keeps its own) */
	page = mmap(NULL, STUB_MAP_SIZE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memcpy(page, stub_page_code, STUB_PAGE_SIZE);
	mprotect(page, STUB_PAGE_SIZE, PROT_READ | PROT_EXEC);
	blk = (struct control_block *)(page + STUB_CONTROL);
	adds = removes = 0;
	call_ms = 0;
	last_handle = 100;
	bad_prob = 0;
	blk->lease_ns = mono_ns() + 5000000000ull;
	blk->add_fn = (uint64_t)fake_add;
	blk->remove_fn = (uint64_t)fake_remove;
	blk->cb.sampling_prob = 1.0;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, CONTROL_STACK_SIZE);
	pthread_create(&t, &a, (void *(*)(void *))(page + STUB_CONTROL_MAIN),
		       NULL);
	pthread_attr_destroy(&a);
	for (int i = 0; i < 1000 && blk->state != CONTROL_RUNNING; i++)
		sleep_ms(1);
	return t;
}

static void burst_of(uint64_t on, uint64_t off, bool count_only)
{
	uint64_t k = blk->written;

	blk->burst[k % CONTROL_BURSTS] = (struct control_burst){
		on, off, count_only };
	__atomic_store_n(&blk->written, k + 1, __ATOMIC_RELEASE);
}

static void burst(uint64_t on, uint64_t off)
{
	burst_of(on, off, false);
}

static void finish(pthread_t t)
{
	__atomic_store_n(&blk->lease_ns, 0, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
}

static void (*entry(unsigned off))(void)
{
	return (void (*)(void))(page + off);
}

TEST(bursts_switch_on_and_off_at_their_times)
{
	pthread_t t = start();
	uint64_t now = mono_ns();

	CHECK(blk->state == CONTROL_RUNNING);
	/* written ahead by more than the thread's longest sleep, as rfbpf
	 * writes them */
	for (int i = 0; i < 3; i++)
		burst(now + (120 + 40 * i) * 1000000ull,
		      now + (130 + 40 * i) * 1000000ull);
	for (int i = 0; i < 500 && blk->done < 3; i++)
		sleep_ms(1);
	CHECK(blk->done == 3);
	CHECK(adds == 3 && removes == 3);
	CHECK(blk->handle == 0);
	CHECK(bad_prob == 0);
	CHECK(blk->switches == 6);
	for (int i = 0; i < 3; i++) {
		struct control_result *r = &blk->result[i];

		CHECK(r->seq == (uint64_t)i + 1);
		CHECK(r->on_ns >= blk->burst[i].on_ns);
		CHECK(r->off_ns >= blk->burst[i].off_ns);
		CHECK(r->off_ns > r->on_ns);
	}
	finish(t);
	CHECK(blk->state == CONTROL_EXITED);
}

/* PyTorch's side of a burst: each op calls the start callback
 * registered now, as RecordFunction does (the result slot in rdi). */
static uint64_t play_ops_until(uint64_t done, uint64_t *calls)
{
	typedef void (*start_fn)(uint64_t *slot, void *rf);
	uint64_t slot, spent = 0;

	while (__atomic_load_n(&blk->done, __ATOMIC_ACQUIRE) < done) {
		uint64_t fn = current_start;

		if (fn) {
			((start_fn)fn)(&slot, NULL);
			calls[adds - 1]++;
		}
		for (volatile int i = 0; i < 2000; i++)	/* the op */
			spent += i;
	}
	return spent;
}

TEST(a_burst_reports_its_ops_and_the_jobs_cpu)
{
	pthread_t t = start();
	uint64_t now = mono_ns(), calls[2] = { 0, 0 };

	blk->cb.start = (uint64_t)(page + STUB_START_OFFSET);
	blk->cb_count = blk->cb;
	blk->cb_count.start = (uint64_t)(page + STUB_COUNT_START_OFFSET);
	burst_of(now + 120000000, now + 170000000, false);	/* traced */
	burst_of(now + 200000000, now + 250000000, true);	/* counting */
	play_ops_until(2, calls);
	CHECK(added_start[0] == blk->cb.start);
	CHECK(added_start[1] == blk->cb_count.start);
	CHECK(blk->ops == calls[0] + calls[1]);
	for (int i = 0; i < 2; i++) {
		struct control_result *r = &blk->result[i];

		printf("  burst %d: %llu ops of %llu, %.1f ms CPU in %.1f ms\n",
		       i, (unsigned long long)r->ops,
		       (unsigned long long)calls[i], r->cpu_ns / 1e6,
		       (r->off_ns - r->on_ns) / 1e6);
		/* ops called after the count was read at the removal are
		 * the next burst's (a few at most) */
		CHECK(calls[i] >= 100);
		CHECK(r->ops <= calls[i] && r->ops + 5 >= calls[i]);
		/* this thread spun the whole burst: its CPU is the job's */
		CHECK(r->cpu_ns >= (r->off_ns - r->on_ns) / 2);
		CHECK(r->cpu_ns <= 4 * (r->off_ns - r->on_ns) + 20000000);
	}
	finish(t);
}

TEST(a_burst_already_over_is_skipped)
{
	pthread_t t = start();
	uint64_t now = mono_ns();

	burst(now - 20000000, now - 10000000);
	for (int i = 0; i < 300 && blk->done < 1; i++)
		sleep_ms(1);
	CHECK(blk->done == 1);
	CHECK(blk->result[0].on_ns == 0 && blk->result[0].off_ns == 0);
	CHECK(adds == 0);
	finish(t);
}

/* What control_thread_end_burst does to a burst that is on (an
 * on-demand capture whose steps are in): the thread switches off within
 * its longest sleep, and reports the burst done. */
TEST(a_burst_brought_forward_ends_at_the_next_wakeup)
{
	pthread_t t = start();
	uint64_t now = mono_ns(), cut;

	burst(now, now + 60000000000ull);		/* 60 s */
	burst(now + 61000000000ull, now + 62000000000ull);
	for (int i = 0; i < 300 && !blk->handle; i++)
		sleep_ms(1);
	CHECK(blk->handle != 0);
	sleep_ms(50);
	cut = mono_ns();
	__atomic_store_n(&blk->burst[0].off_ns, cut, __ATOMIC_RELEASE);
	for (int i = 0; i < 1000 && blk->done < 1; i++)
		sleep_ms(1);
	CHECK(blk->done == 1);
	CHECK(blk->handle == 0);
	CHECK(adds == 1 && removes == 1);
	CHECK(blk->result[0].off_ns >= cut);
	CHECK(blk->result[0].off_ns - cut <=
	      CONTROL_MAX_SLEEP_NS + 50000000ull);
	/* The next burst is left as it was: still waiting for its on. */
	sleep_ms(150);
	CHECK(blk->done == 1 && adds == 1);
	finish(t);
}

TEST(the_lease_ends_a_burst_and_the_thread)
{
	pthread_t t = start();
	uint64_t now = mono_ns();

	burst(now, now + 10000000000ull);	/* 10 s */
	for (int i = 0; i < 300 && !blk->handle; i++)
		sleep_ms(1);
	CHECK(blk->handle != 0);
	blk->lease_ns = mono_ns() + 50000000;	/* rfbpf stops renewing */
	pthread_join(t, NULL);
	CHECK(mono_ns() - now < 1000000000ull);
	CHECK(blk->handle == 0);
	CHECK(adds == 1 && removes == 1);
	CHECK(blk->state == CONTROL_EXITED);
}

TEST(a_fork_waits_for_a_call_and_holds_the_next)
{
	pthread_t t = start();
	uint64_t now = mono_ns(), t0;

	call_ms = 100;
	burst(now, now + 10000000000ull);
	for (int i = 0; i < 300 && !in_call; i++)
		sleep_ms(1);
	CHECK(in_call);
	t0 = mono_ns();
	entry(STUB_CONTROL_PREPARE)();		/* a fork starts */
	CHECK(!in_call);			/* ...after the call */
	CHECK(adds == 1);
	CHECK(mono_ns() - t0 >= 20000000);
	CHECK((blk->gate & GATE_FORKS) == 1);
	/* a second handler (registered again in a traced child) */
	entry(STUB_CONTROL_PREPARE)();
	CHECK((blk->gate & GATE_FORKS) == 2);
	/* the burst ends: no removal while the fork is under way */
	call_ms = 0;
	blk->burst[0].off_ns = mono_ns();
	sleep_ms(CONTROL_MAX_SLEEP_NS / 1000000 + 50);
	CHECK(removes == 0);
	CHECK(blk->gate_busy > 0);
	entry(STUB_CONTROL_PARENT)();
	entry(STUB_CONTROL_PARENT)();
	CHECK(blk->gate == 0);
	for (int i = 0; i < 300 && !removes; i++)
		sleep_ms(1);
	CHECK(removes == 1);
	finish(t);
}

TEST(after_the_exit_handler_nothing_is_called)
{
	pthread_t t = start();
	uint64_t now = mono_ns();

	burst(now, now + 10000000000ull);
	for (int i = 0; i < 300 && !blk->handle; i++)
		sleep_ms(1);
	((void (*)(void *))(page + STUB_CONTROL_EXIT))(NULL);
	CHECK(blk->gate & GATE_CLOSED);
	blk->lease_ns = 0;	/* it would remove the callback: not now */
	for (int i = 0; i < 300 && blk->state != CONTROL_PARKED; i++)
		sleep_ms(1);
	CHECK(blk->state == CONTROL_PARKED);
	CHECK(removes == 0);
	/* a fork during the exit does not wait */
	entry(STUB_CONTROL_PREPARE)();
	entry(STUB_CONTROL_PARENT)();
	pthread_detach(t);	/* parked: it waits for exit_group */
}

static bool task_line(pid_t tid, const char *file, const char *key,
		      char *out, size_t len)
{
	char path[128], line[256];
	FILE *f;
	bool found = false;

	snprintf(path, sizeof(path), "/proc/self/task/%d/%s", tid, file);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key))) {
			snprintf(out, len, "%s", line + strlen(key));
			out[strcspn(out, "\n")] = 0;
			found = true;
			break;
		}
	fclose(f);
	return found;
}

TEST(the_thread_is_named_and_blocks_signals)
{
	pthread_t t = start();
	char v[64] = "";

	CHECK(blk->tid > 0);
	CHECK(task_line((pid_t)blk->tid, "comm", "", v, sizeof(v)));
	CHECK(!strcmp(v, CONTROL_THREAD_NAME));
	CHECK(task_line((pid_t)blk->tid, "status", "SigBlk:\t", v,
			sizeof(v)));
	/* all but 32, 33 (and KILL, STOP, which the kernel never blocks) */
	CHECK(!strcmp(v, "fffffffe7ffbfeff"));
	finish(t);
}

RUN_TESTS()
