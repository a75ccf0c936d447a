/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The Chrome writer's state, shared by the op half (chrome.c) and the GPU
 * half (chrome_gpu.c) of the trace: where events go, which threads and
 * GPU tracks are named already, and the separator between events.
 */
#ifndef RFBPF_EXPORT_CHROME_EVENTS_H
#define RFBPF_EXPORT_CHROME_EVENTS_H

#include <stdbool.h>
#include <stdio.h>
#include "model/trace.h"
#include "model/u64map.h"
#include "chrome_fwdbwd.h"
#include "output_file.h"
#include "json_writer.h"
#include "out_file.h"

struct py_thread_slices;

/* --python-stacks: each thread's open Python frames (chrome_python.c). */
struct chrome_py {
	struct py_thread_slices *threads;
	size_t nr, cap;
	struct u64map index;	/* tid -> index in threads */
	uint64_t next_id;	/* "Python id"s given so far */
};

struct chrome_writer {
	FILE *f;
	bool own_file;		/* opened by chrome_open (closed by finish) */
	struct output_file file;	/* the file chrome_open made (f is
					 * its) */
	uint64_t events;	/* written so far */
	struct u64map threads;	/* tids whose name was written */
	struct u64map tracks;	/* GPU devices and streams named */
	uint64_t flows;		/* ids of flows (call-to-kernel, fwdbwd) */
	struct fwdbwd fwdbwd;	/* forward ops awaiting their backward */
	uint64_t fwdbwd_flows;	/* fwdbwd flows written */
	/* Timestamps are written relative to this CLOCK_MONOTONIC instant,
	 * as Kineto does (absolute ns overflow a double's 53 bits of
	 * precision after about 104 days of uptime); the file states it
	 * as wall-clock "baseTimeNanoseconds". */
	uint64_t base_ns;
	struct chrome_py py;
	/* More of otherData, as JSON members each after a comma (the
	 * flight recorder's account), or NULL. */
	const char *extra_other;
};

/* The separator before the next event ("" for the first). */
static inline const char *chrome_next(struct chrome_writer *w)
{
	return w->events++ ? ",\n" : "";
}

/* Writes a CLOCK_MONOTONIC time as microseconds since base_ns. */
static inline void chrome_ts(struct chrome_writer *w, uint64_t ns)
{
	if (ns < w->base_ns) {
		fputc('-', w->f);
		json_us(w->f, w->base_ns - ns);
	} else {
		json_us(w->f, ns - w->base_ns);
	}
}

/* From chrome_gpu.c: a GPU record, its device and stream tracks the first
 * time they appear, and its flow from the call that launched it. */
/* ,"deviceProperties":[...] at the top level, if any GPU was described. */
void chrome_write_devices(FILE *f, const struct trace *t);
void chrome_write_gpu(struct chrome_writer *w, const struct trace *t,
		      const struct gpu_done *g);
/* A CUDA API call (launch or sync) as a cuda_runtime (or cuda_driver)
 * slice on the thread that made it. */
void chrome_write_gpu_api(struct chrome_writer *w, const struct trace *t,
			  const struct gpu_launch *call);

/* From chrome_off_cpu.c: --off-cpu's interval, and the wakeup flow to it
 * from the traced op that woke it. */
void chrome_write_off_cpu(struct chrome_writer *w, const struct trace *t,
			  const struct off_cpu_interval *iv);

/* From chrome_memory.c: --memory's [memory] instant and live-bytes
 * counter for one allocation or free; otherData's live blocks. */
void chrome_write_memory(struct chrome_writer *w, const struct trace *t,
			 const struct mem_change *c);
void chrome_write_live_blocks(FILE *f, const struct trace *t);

#endif
