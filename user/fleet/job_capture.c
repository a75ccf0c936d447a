// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "attach/control_block.h"
#include "attach/control_thread.h"
#include "export/chrome.h"
#include "fleet/http.h"
#include "fleet/job_capture.h"
#include "fleet/job_state.h"
#include "model/clocks.h"

/* The thread sleeps at most CONTROL_MAX_SLEEP_NS between looks at its
 * block: a burst written now can start that much later. */
#define CAPTURE_START_NS	(CONTROL_MAX_SLEEP_NS + 20000000ull)
/* Events of the capture's last ops reach rfbpf this much after its end. */
#define CAPTURE_DRAIN_NS	200000000ull

static struct job_capture *cap(struct job *j)
{
	return &j->capture;
}

bool job_capture_start(struct job *j, unsigned seconds, unsigned steps)
{
	struct job_capture *c = cap(j);

	if (c->state != CAPTURE_IDLE)
		return false;
	c->state = CAPTURE_WAITING;
	c->seconds = steps ? CAPTURE_STEPS_MAX_S : seconds;
	c->steps = steps;
	c->ops = 0;
	return true;
}

bool job_capture_holds_bursts(const struct job *j)
{
	return j->capture.state == CAPTURE_WAITING ||
	       j->capture.state == CAPTURE_RUNNING;
}

bool job_capture_owns(const struct job *j, uint64_t seq)
{
	return j->capture.seq && seq == j->capture.seq;
}

static void fail(struct job_capture *c, unsigned status, const char *why)
{
	free(c->body);
	c->body = (uint8_t *)strdup(why);
	c->len = c->body ? strlen(why) : 0;
	c->status = status;
	c->state = CAPTURE_DONE;
	c->resuming = true;
}

/* The writer, gzipping into a memfd (its pages are not rfbpf's heap). */
static int open_writer(struct job *j)
{
	struct job_capture *c = cap(j);
	struct timespec mono, wall;

	c->memfd = memfd_create("rfbpf-capture", MFD_CLOEXEC);
	if (c->memfd < 0)
		return -1;
	if (out_file_dup_gzip(&c->out, c->memfd)) {
		close(c->memfd);
		c->memfd = -1;
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &wall);
	chrome_begin(&c->w, c->out.f,
		     mono.tv_sec * 1000000000ull + mono.tv_nsec,
		     wall.tv_sec * 1000000000ull + wall.tv_nsec);
	if (c->steps) {
		/* No gate: the job's other sinks see every op as before;
		 * the capture keeps what began in the steps. */
		steps_init(&c->step_tracker, NULL, -1, c->steps, false);
		j->s.trace.steps = &c->step_tracker;
	}
	return 0;
}

static void start_burst(struct job *j)
{
	struct job_capture *c = cap(j);
	uint64_t now = monotonic_ns();
	bool room;

	/* The thread runs its bursts in order: the capture's goes once
	 * the ones handed before are done. */
	if (control_thread_room(&j->s.control) < CONTROL_BURSTS)
		return;
	if (open_writer(j)) {
		fail(c, 503, "cannot hold a trace in memory\n");
		return;
	}
	c->on_ns = now + CAPTURE_START_NS;
	c->off_ns = c->on_ns + (uint64_t)c->seconds * 1000000000ull;
	c->seq = j->s.control.written + 1;
	if (j->nr_capture_seqs == j->cap_capture_seqs) {
		size_t cap = j->cap_capture_seqs ? 2 * j->cap_capture_seqs : 8;
		void *m = realloc(j->capture_seqs,
				  cap * sizeof(*j->capture_seqs));

		if (m) {
			j->capture_seqs = m;
			j->cap_capture_seqs = cap;
		}
	}
	/* Without room to note its number, the planned periods' results
	 * could not be told from it: no capture rather than wrong bursts. */
	room = j->nr_capture_seqs < j->cap_capture_seqs;
	if (!room ||
	    control_thread_add_burst(&j->s.control, c->on_ns, c->off_ns, 0)) {
		c->seq = 0;
		chrome_finish(&c->w, &j->s.trace, NULL);
		out_file_close(&c->out);
		close(c->memfd);
		c->memfd = -1;
		fail(c, 503, room ? "cannot reach the job's control thread\n" :
		     "out of memory noting the capture's burst\n");
		return;
	}
	j->capture_seqs[j->nr_capture_seqs++] = c->seq;
	c->state = CAPTURE_RUNNING;
}

/* The file, read back from the memfd. */
static void finish(struct job *j)
{
	struct job_capture *c = cap(j);
	char extra[160];
	struct stat st;
	uint8_t *body = NULL;
	ssize_t got = -1;

	snprintf(extra, sizeof(extra), ",\"capture\":{\"seconds\":%u,"
		 "\"steps\":%u,\"whole_steps\":%llu,\"ops\":%llu}",
		 c->steps ? 0 : c->seconds, c->steps,
		 (unsigned long long)(c->steps ? c->step_tracker.done : 0),
		 (unsigned long long)c->ops);
	c->w.extra_other = extra;
	chrome_finish(&c->w, &j->s.trace, NULL);
	j->s.trace.steps = NULL;
	if (out_file_close(&c->out) == 0 && !fstat(c->memfd, &st) &&
	    (body = malloc(st.st_size ? st.st_size : 1)))
		got = pread(c->memfd, body, st.st_size, 0);
	close(c->memfd);
	c->memfd = -1;
	if (got < 0 || (c->steps && !c->step_tracker.done)) {
		free(body);
		if (got < 0)
			fail(c, 503, "cannot write the trace\n");
		else
			fail(c, 504, "no whole step within the wait: no "
			     "ProfilerStep#N or Optimizer.step#... scope "
			     "ended in the job\n");
		return;
	}
	free(c->body);
	c->body = body;
	c->len = (size_t)got;
	c->status = 200;
	c->state = CAPTURE_DONE;
	c->resuming = true;
	c->total++;
}

bool job_capture_poll(struct job *j)
{
	struct job_capture *c = cap(j);

	if (c->state == CAPTURE_WAITING)
		start_burst(j);
	if (c->state == CAPTURE_RUNNING && c->steps &&
	    steps_finished(&c->step_tracker) && c->off_ns > monotonic_ns()) {
		/* Its steps are in: the burst ends now, not at its cap. */
		c->off_ns = monotonic_ns();
		control_thread_end_burst(&j->s.control, c->seq, c->off_ns);
	}
	if (c->state == CAPTURE_RUNNING &&
	    monotonic_ns() >= c->off_ns + CAPTURE_DRAIN_NS)
		finish(j);
	return c->state == CAPTURE_DONE;
}

void job_capture_take(struct job *j, unsigned *status, uint8_t **body,
		      size_t *len)
{
	struct job_capture *c = cap(j);

	*status = c->status;
	*body = c->body;
	*len = c->len;
	c->body = NULL;
	c->len = 0;
	c->state = CAPTURE_IDLE;
}

void job_capture_abort(struct job *j)
{
	struct job_capture *c = cap(j);

	if (c->state == CAPTURE_RUNNING) {
		chrome_finish(&c->w, &j->s.trace, NULL);
		out_file_close(&c->out);
		close(c->memfd);
		c->memfd = -1;
		j->s.trace.steps = NULL;
	}
	free(c->body);
	c->body = NULL;
	c->state = CAPTURE_IDLE;
}

/* Whether what began at ts is in the capture (with ?steps, in its
 * whole steps). */
static bool in_capture(struct job *j, uint64_t ts)
{
	struct job_capture *c = cap(j);

	return c->state == CAPTURE_RUNNING && ts >= c->on_ns &&
	       ts < c->off_ns &&
	       (!c->steps || steps_in_window(&c->step_tracker, ts));
}

static void on_op(void *ctx, struct trace *t, const struct closed_op *o)
{
	struct job *j = ctx;

	if (!in_capture(j, o->op->start_ns))
		return;
	j->capture.ops++;
	chrome_sink(&j->capture.w).op(&j->capture.w, t, o);
}

static void on_gpu(void *ctx, struct trace *t, const struct gpu_done *g)
{
	struct job *j = ctx;

	if (in_capture(j, g->launch ? g->launch->ts_ns : g->act->start_ns))
		chrome_sink(&j->capture.w).gpu(&j->capture.w, t, g);
}

static void on_gpu_api(void *ctx, struct trace *t,
		       const struct gpu_launch *l)
{
	struct job *j = ctx;

	if (in_capture(j, l->ts_ns))
		chrome_sink(&j->capture.w).gpu_api(&j->capture.w, t, l);
}

static void on_step(void *ctx, struct trace *t, const struct step *st)
{
	struct job *j = ctx;

	if (j->capture.state == CAPTURE_RUNNING && j->capture.steps)
		chrome_sink(&j->capture.w).step(&j->capture.w, t, st);
}

struct trace_sink job_capture_sink(struct job *j)
{
	return (struct trace_sink){ .op = on_op, .gpu = on_gpu,
				    .gpu_sync = on_gpu,
				    .gpu_api = on_gpu_api, .step = on_step,
				    .ctx = j };
}
