// SPDX-License-Identifier: BSD-2-Clause
#include <pthread.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "producer.h"
#include "rfbpf.h"

/* probe_target.S */
void *bench_cb_start(void **ret_slot, void *rf);
void bench_cb_end(void *rf, void *ctx);
void bench_entry_before(void *rf, const char *name, long seq);
void bench_entry_end(void *rf);

const char *const site_symbols[2][2] = {
	[SITE_CALLBACK] = { "bench_cb_start", "bench_cb_end" },
	[SITE_ENTRY] = { "bench_entry_before", "bench_entry_end" },
};

struct command {
	int site;
	int threads;		/* each runs iters / threads pairs */
	uint64_t iters, pace_ns;
};

/* A typical ATen name length (aten::add is shorter, backward nodes are
 * longer): the programs copy these bytes on every before event. */
static const char op_name[] = "aten::bench_synthetic_op";

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The RecordFunction-shaped object (see producer.h). */
static void fake_record_function(unsigned char *rf)
{
	const char *data = op_name;
	uint64_t len = sizeof(op_name) - 1;
	int64_t seq = 42;

	/* Touch the name: a forked child has no page-table entry for this
	 * file page until it reads it, and the programs' user-memory reads
	 * cannot fault it in (they would fail, slowly, and record no name). */
	len = strlen(*(const char *volatile *)&data);
	memset(rf, 0, 256);
	rf[RF_SCOPE_OFFSET] = 0;	/* at::RecordScope::FUNCTION */
	memcpy(rf + RF_FN_OFFSET, &data, sizeof(data));
	memcpy(rf + RF_FN_OFFSET + 8, &len, sizeof(len));
	rf[RF_FN_INDEX_OFFSET_CXX11] = 0;	/* the std::string alternative */
	memcpy(rf + RF_SEQ_OFFSET_CXX11, &seq, sizeof(seq));
}

/* Spins until the wall clock reaches t: pacing must not sleep, or the
 * rate would be the scheduler's, not ours. */
static void wait_until(uint64_t t)
{
	while (now_ns() < t)
		;
}

static uint64_t run_loop(const struct command *c, unsigned char *rf)
{
	void *slot;
	uint64_t t0 = now_ns();

	for (uint64_t i = 0; i < c->iters; i++) {
		if (c->pace_ns)
			wait_until(t0 + i * c->pace_ns);
		if (c->site == SITE_CALLBACK) {
			bench_cb_start(&slot, rf);
			bench_cb_end(rf, NULL);
		} else {
			bench_entry_before(rf, op_name, (long)i);
			bench_entry_end(rf);
		}
	}
	return now_ns() - t0;
}

#define MAX_THREADS 8

struct loop_thread {
	pthread_t thread;
	struct command c;
	unsigned char rf[256] __attribute__((aligned(16)));
};

static void *loop_main(void *arg)
{
	struct loop_thread *t = arg;

	run_loop(&t->c, t->rf);
	return NULL;
}

/* The command on c.threads threads at once, each with its own
 * RecordFunction object (as ops on different threads have); returns the
 * wall time until the last one finished. */
static uint64_t run_threads(const struct command *c)
{
	static struct loop_thread t[MAX_THREADS];
	int n = c->threads < 1 ? 1 : c->threads > MAX_THREADS ? MAX_THREADS :
		c->threads;
	uint64_t t0 = now_ns();

	for (int i = 0; i < n; i++) {
		t[i].c = *c;
		t[i].c.iters = c->iters / n;
		fake_record_function(t[i].rf);
		if (i && pthread_create(&t[i].thread, NULL, loop_main, &t[i]))
			_exit(1);
	}
	loop_main(&t[0]);
	for (int i = 1; i < n; i++)
		pthread_join(t[i].thread, NULL);
	return now_ns() - t0;
}

static void child_main(int cmd_fd, int res_fd)
{
	static unsigned char rf[256] __attribute__((aligned(16)));
	struct command c;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	fake_record_function(rf);
	while (read(cmd_fd, &c, sizeof(c)) == sizeof(c)) {
		uint64_t dt = c.threads > 1 ? run_threads(&c) :
					     run_loop(&c, rf);

		if (write(res_fd, &dt, sizeof(dt)) != sizeof(dt))
			break;
	}
	_exit(0);
}

int producer_start(struct producer *p)
{
	int cmd[2], res[2];

	if (pipe(cmd) || pipe(res))
		return -errno;
	p->pid = fork();
	if (p->pid < 0)
		return -errno;
	if (p->pid == 0) {
		close(cmd[1]);
		close(res[0]);
		child_main(cmd[0], res[1]);
	}
	close(cmd[0]);
	close(res[1]);
	p->cmd_fd = cmd[1];
	p->res_fd = res[0];
	return 0;
}

int producer_run(struct producer *p, enum probe_site site, uint64_t iters,
		 uint64_t pace_ns, uint64_t *elapsed_ns)
{
	return producer_run_threads(p, site, iters, 1, elapsed_ns, pace_ns);
}

int producer_run_threads(struct producer *p, enum probe_site site,
			 uint64_t iters, int threads, uint64_t *elapsed_ns,
			 uint64_t pace_ns)
{
	struct command c = { .site = site, .threads = threads, .iters = iters,
			     .pace_ns = pace_ns };

	if (write(p->cmd_fd, &c, sizeof(c)) != sizeof(c))
		return -1;
	return read(p->res_fd, elapsed_ns, sizeof(*elapsed_ns)) ==
	       sizeof(*elapsed_ns) ? 0 : -1;
}

void producer_stop(struct producer *p)
{
	close(p->cmd_fd);
	close(p->res_fd);
	waitpid(p->pid, NULL, 0);
}
