// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "bench_probes.h"
#include "empty.skel.h"
#include "rfbpf.skel.h"

static void *reader_main(void *arg)
{
	struct bench_probes *b = arg;

	while (!b->stop) {
		int n = 0;

		if (b->paused)
			usleep(1000);
		else if (b->spin)	/* records below the wakeup mark */
			n = ring_buffer__consume(b->rb);
		else
			n = ring_buffer__poll(b->rb, 10);
		if (n > 0)
			b->consumed += n;
	}
	return NULL;
}

int bench_probes_open(struct bench_probes *b, pid_t pid, unsigned ring_mb,
		      ring_buffer_sample_fn fn, void *ctx)
{
	char err[256];
	ssize_t n;
	int ret;

	memset(b, 0, sizeof(*b));
	b->pid = pid;
	n = readlink("/proc/self/exe", b->exe, sizeof(b->exe) - 1);
	if (n < 0)
		return -errno;
	b->exe[n] = 0;
	b->empty = empty_bpf__open_and_load();
	if (!b->empty)
		return -errno;
	/* rfbpf's loader code: targ_tgid, string ABI, wakeup threshold. */
	ret = probes_load(&b->rf, pid, ring_mb, false, 1.0, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "bench: %s\n", err);
		return ret;
	}
	b->rb = ring_buffer__new(probes_events_fd(&b->rf), fn, ctx, NULL);
	if (!b->rb)
		return -errno;
	return -pthread_create(&b->reader, NULL, reader_main, b);
}

struct bpf_program *bench_probes_program(const struct bench_probes *b,
					 enum bench_prog prog,
					 enum probe_site site, int end)
{
	if (prog == PROG_EMPTY)
		return b->empty->progs.empty;
	if (prog != PROG_RFBPF && prog != PROG_RFBPF_GPU)
		return NULL;
	if (site == SITE_CALLBACK)
		return end ? b->rf.skel->progs.callback_end :
			     b->rf.skel->progs.callback_start;
	return end ? b->rf.skel->progs.end : b->rf.skel->progs.before_cstr;
}

int bench_probes_attach(struct bench_probes *b, enum bench_prog prog,
			enum probe_site site)
{
	if (prog == PROG_NONE)
		return 0;
	b->rf.skel->bss->gpu_tagging = prog == PROG_RFBPF_GPU;
	for (int i = 0; i < 2; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, opts,
			    .func_name = site_symbols[site][i]);

		b->links[i] = bpf_program__attach_uprobe_opts(
			bench_probes_program(b, prog, site, i), b->pid, b->exe,
			0, &opts);
		if (!b->links[i])
			return -errno;
	}
	return 0;
}

void bench_probes_detach(struct bench_probes *b)
{
	for (int i = 0; i < 2; i++) {
		bpf_link__destroy(b->links[i]);
		b->links[i] = NULL;
	}
}

void bench_probes_wait_consumed(struct bench_probes *b, uint64_t expected)
{
	for (int i = 0; i < 2000 && b->consumed < expected; i++)
		usleep(1000);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

double bench_probes_drain(struct bench_probes *b, uint64_t expected)
{
	double t0 = now_s();

	b->spin = true;
	b->paused = false;
	while (b->consumed < expected && now_s() - t0 < 60)
		;
	return now_s() - t0;
}

uint64_t bench_probes_drops(const struct bench_probes *b)
{
	struct counts c = {};

	probes_read_counters(&b->rf, &c);
	return c.drops;
}

double bench_probes_reader_cpu(const struct bench_probes *b)
{
	struct timespec ts;
	clockid_t cid;

	if (pthread_getcpuclockid(b->reader, &cid) ||
	    clock_gettime(cid, &ts))
		return 0;
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void bench_probes_close(struct bench_probes *b)
{
	bench_probes_detach(b);
	if (b->rb) {
		b->reader_cpu_s = bench_probes_reader_cpu(b);
		b->stop = true;
		pthread_join(b->reader, NULL);
		ring_buffer__free(b->rb);
	}
	probes_destroy(&b->rf);
	empty_bpf__destroy(b->empty);
}
