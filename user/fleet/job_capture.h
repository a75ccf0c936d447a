/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * On-demand full traces of one job (GET /debug/rfbpf/trace): for the
 * seconds asked, the job's control thread holds the callback on (one
 * long burst, outside the budget: its ops weigh nothing in the metrics
 * unless a planned burst's measured part falls in it, which then gets
 * the ops it would have had), and every op that began in it goes to a
 * Chrome writer that gzips into memory. Normal bursts are held back
 * while a capture waits for the thread's queue to drain and while it
 * runs; those planned meanwhile are dropped, not handed late.
 *
 * ?steps=N: the burst is CAPTURE_STEPS_MAX_S long, and brought forward
 * to its end (control_thread_end_burst) once N whole steps
 * (model/steps.h, tracked on the job's trace without a gate) have
 * completed; only what began in them is written. Fewer steps by then:
 * those that completed; none: 504.
 */
#ifndef RFBPF_FLEET_JOB_CAPTURE_H
#define RFBPF_FLEET_JOB_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "export/chrome_events.h"
#include "export/out_file.h"
#include "model/steps.h"
#include "model/trace.h"

/* The longest a ?steps capture waits for its steps. */
#define CAPTURE_STEPS_MAX_S	120

enum capture_state { CAPTURE_IDLE, CAPTURE_WAITING, CAPTURE_RUNNING,
		     CAPTURE_DONE };

struct job_capture {
	enum capture_state state;
	unsigned seconds, steps;
	uint64_t on_ns, off_ns;		/* its burst */
	uint64_t seq;			/* that burst's number (seq) */
	struct chrome_writer w;
	struct out_file out;
	int memfd;
	struct steps step_tracker;	/* ?steps */
	uint64_t ops;			/* written */
	/* The answer, once DONE: 200 and the gzipped trace, or an error
	 * status and its line. */
	unsigned status;
	uint8_t *body;
	size_t len;
	uint64_t total;			/* captures done, for the log */
	bool resuming;			/* planned bursts due meanwhile are
					 * to be dropped (job_bursts.c) */
};

struct job;
/* Starts a capture of seconds, or of steps; false if one is under way
 * (the request then shares it). */
bool job_capture_start(struct job *j, unsigned seconds, unsigned steps);
/* Moves a capture on: its burst handed to the thread once the queue is
 * empty, its end, its file. Returns true when an answer is ready (taken
 * with job_capture_take). */
bool job_capture_poll(struct job *j);
/* Whether normal bursts must wait (a capture waits or runs). */
bool job_capture_holds_bursts(const struct job *j);
/* The answer; the capture is idle again and the body the caller's. */
void job_capture_take(struct job *j, unsigned *status, uint8_t **body,
		      size_t *len);
/* The sink every op of the job passes (idle: it does nothing). */
struct trace_sink job_capture_sink(struct job *j);
/* A result of the control thread for the capture's burst: not a planned
 * one. */
bool job_capture_owns(const struct job *j, uint64_t seq);
/* The job goes: a capture under way is answered 410. */
void job_capture_abort(struct job *j);

#endif
