/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The probe variants the per-event benchmarks compare on one producer:
 * nothing attached, the empty program (bench/empty.bpf.c), or rfbpf's own
 * programs loaded by rfbpf's own code (user/attach/probes.c: the same rodata,
 * ring-buffer size and wakeup threshold as `rfbpf` uses) and attached the
 * way rfbpf attaches them: callback_start/callback_end on the nop5 pair,
 * before_cstr/end on the entry pair.
 *
 * A reader thread consumes rfbpf's ring buffer while the producer runs,
 * with the callback the caller gives (trivial for the per-event cost, the
 * loader's real pairing for the throughput bench).
 */
#ifndef BENCH_PROBES_H
#define BENCH_PROBES_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <bpf/libbpf.h>
#include "attach/probes.h"
#include "producer.h"

/* PROG_RFBPF_GPU: rfbpf's programs with GPU launch tagging on (as when the
 * CUPTI agent's probes are attached): every op also updates its thread's
 * stack of open RecordFunctions in BPF. */
enum bench_prog { PROG_NONE, PROG_EMPTY, PROG_RFBPF, PROG_RFBPF_GPU };

struct empty_bpf;

struct bench_probes {
	pid_t pid;
	char exe[4096];			/* the producer's binary */
	struct empty_bpf *empty;
	struct probes rf;
	struct ring_buffer *rb;
	struct bpf_link *links[2];
	pthread_t reader;
	volatile bool stop;
	volatile bool paused;		/* the reader leaves the ring alone */
	volatile bool spin;		/* read without waiting for wakeups */
	volatile uint64_t consumed;	/* records read by the reader */
	double reader_cpu_s;		/* its CPU time, at close */
};

/* Loads both objects for pid and starts the reader with fn(ctx,...). */
int bench_probes_open(struct bench_probes *b, pid_t pid, unsigned ring_mb,
		      ring_buffer_sample_fn fn, void *ctx);
/* The program of a variant for the pair's start (end = 0) or end. */
struct bpf_program *bench_probes_program(const struct bench_probes *b,
					 enum bench_prog prog,
					 enum probe_site site, int end);
int bench_probes_attach(struct bench_probes *b, enum bench_prog prog,
			enum probe_site site);
void bench_probes_detach(struct bench_probes *b);
/* Waits (up to 2 s) until the reader has read `expected` records. */
void bench_probes_wait_consumed(struct bench_probes *b, uint64_t expected);
/* Resumes a paused reader, which then reads without waiting for wakeups,
 * and returns the seconds until it has read `expected` records in all
 * (up to 60 s). */
double bench_probes_drain(struct bench_probes *b, uint64_t expected);
/* rfbpf's drop counter (ring buffer full), summed over CPUs. */
uint64_t bench_probes_drops(const struct bench_probes *b);
/* CPU seconds the reader thread has used so far. */
double bench_probes_reader_cpu(const struct bench_probes *b);
void bench_probes_close(struct bench_probes *b);

#endif
