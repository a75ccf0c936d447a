// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "export/chrome.h"
#include "export/flight_recorder.h"

/* One callback's events, as the Chrome writer wrote them (without the
 * separator before the first). */
struct flight_record {
	uint64_t ts_ns;		/* when it came: the newest event time seen */
	uint32_t len;
	char bytes[];
};

/* What a record costs beside its bytes: its header, the allocator's,
 * its ring slot. */
#define RECORD_OVERHEAD (sizeof(struct flight_record) + 16 + \
			 sizeof(struct flight_record *))

static uint64_t now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

int flight_recorder_init(struct flight_recorder *r, double seconds,
			 double mb)
{
	memset(r, 0, sizeof(*r));
	r->window_ns = (uint64_t)(seconds * 1e9);
	r->max_bytes = (size_t)(mb * 1024 * 1024);
	r->memf = open_memstream(&r->mem, &r->mem_len);
	if (!r->memf)
		return -1;
	r->holds = "every op traced";
	r->base_ns = now_ns(CLOCK_MONOTONIC);
	r->base_wall_ns = now_ns(CLOCK_REALTIME);
	/* The header goes into the stream too: it is dropped with the
	 * first rewind, before any event. */
	chrome_begin(&r->w, r->memf, r->base_ns, r->base_wall_ns);
	fflush(r->memf);
	rewind(r->memf);
	return 0;
}

static size_t record_cost(const struct flight_record *rec)
{
	return rec->len + RECORD_OVERHEAD;
}

static void drop_oldest(struct flight_recorder *r, uint64_t *counter)
{
	struct flight_record *rec = r->ring[r->head];

	r->bytes -= record_cost(rec);
	free(rec);
	r->head = (r->head + 1) % r->cap;
	r->nr--;
	(*counter)++;
}

static bool grow(struct flight_recorder *r)
{
	size_t cap = r->cap ? 2 * r->cap : 1024;
	struct flight_record **ring = malloc(cap * sizeof(*ring));

	if (!ring)
		return false;
	for (size_t i = 0; i < r->nr; i++)
		ring[i] = r->ring[(r->head + i) % r->cap];
	free(r->ring);
	r->ring = ring;
	r->cap = cap;
	r->head = 0;
	return true;
}

/* Takes what the writer just wrote into the ring, and lets go of what
 * is now too old or too much. */
static void capture(struct flight_recorder *r, const struct trace *t)
{
	struct flight_record *rec;
	const char *b;
	size_t len;

	fflush(r->memf);
	b = r->mem;
	len = r->mem_len;
	rewind(r->memf);
	if (len >= 2 && b[0] == ',' && b[1] == '\n') {
		b += 2;
		len -= 2;
	}
	if (!len)
		return;
	if ((r->nr == r->cap && !grow(r)) ||
	    !(rec = malloc(sizeof(*rec) + len))) {
		r->oom = true;
		return;
	}
	rec->ts_ns = t->last_ns;
	rec->len = (uint32_t)len;
	memcpy(rec->bytes, b, len);
	r->ring[(r->head + r->nr++) % r->cap] = rec;
	r->bytes += record_cost(rec);
	r->events_kept_total++;
	while (r->nr > 1 && r->ring[r->head]->ts_ns + r->window_ns <
	       rec->ts_ns)
		drop_oldest(r, &r->dropped_old);
	while (r->nr > 1 && r->bytes > r->max_bytes)
		drop_oldest(r, &r->dropped_full);
	if (r->bytes > r->peak_bytes)
		r->peak_bytes = r->bytes;
}

/* Each of the Chrome sink's callbacks, then capture. */
static void on_op(void *ctx, struct trace *t, const struct closed_op *c)
{
	struct flight_recorder *r = ctx;

	chrome_sink(&r->w).op(&r->w, t, c);
	capture(r, t);
}

static void on_gpu(void *ctx, struct trace *t, const struct gpu_done *g)
{
	struct flight_recorder *r = ctx;

	chrome_sink(&r->w).gpu(&r->w, t, g);
	capture(r, t);
}

static void on_gpu_sync(void *ctx, struct trace *t, const struct gpu_done *g)
{
	struct flight_recorder *r = ctx;

	chrome_sink(&r->w).gpu_sync(&r->w, t, g);
	capture(r, t);
}

static void on_gpu_api(void *ctx, struct trace *t,
		       const struct gpu_launch *call)
{
	struct flight_recorder *r = ctx;

	chrome_sink(&r->w).gpu_api(&r->w, t, call);
	capture(r, t);
}

static void on_py_stack(void *ctx, struct trace *t, const struct op *o)
{
	struct flight_recorder *r = ctx;

	chrome_sink(&r->w).py_stack(&r->w, t, o);
	capture(r, t);
}

static void on_thread_exit(void *ctx, struct trace *t, uint32_t tid)
{
	struct flight_recorder *r = ctx;

	chrome_sink(&r->w).thread_exit(&r->w, t, tid);
	capture(r, t);
}

static void on_off_cpu(void *ctx, struct trace *t,
		       const struct off_cpu_interval *iv)
{
	struct flight_recorder *r = ctx;

	chrome_sink(&r->w).off_cpu(&r->w, t, iv);
	capture(r, t);
}

static void on_step(void *ctx, struct trace *t, const struct step *s)
{
	struct flight_recorder *r = ctx;

	chrome_sink(&r->w).step(&r->w, t, s);
	capture(r, t);
}

struct trace_sink flight_recorder_sink(struct flight_recorder *r)
{
	return (struct trace_sink){ .op = on_op, .gpu = on_gpu,
				    .gpu_sync = on_gpu_sync,
				    .gpu_api = on_gpu_api,
				    .py_stack = on_py_stack,
				    .thread_exit = on_thread_exit,
				    .off_cpu = on_off_cpu, .step = on_step,
				    .ctx = r };
}

int flight_recorder_dump(struct flight_recorder *r, const char *path,
			 const struct trace *t, const struct aggregate *a,
			 const char *why)
{
	struct chrome_writer d;
	char extra[768];
	uint64_t first = r->nr ? r->ring[r->head]->ts_ns : 0;
	uint64_t last = r->nr ? r->ring[(r->head + r->nr - 1) %
					 r->cap]->ts_ns : 0;

	if (chrome_open_at(&d, path, r->base_ns, r->base_wall_ns))
		return -1;
	chrome_name_threads(&d, t);
	for (size_t i = 0; i < r->nr; i++) {
		const struct flight_record *rec =
			r->ring[(r->head + i) % r->cap];

		fputs(chrome_next(&d), d.f);
		fwrite(rec->bytes, 1, rec->len, d.f);
	}
	snprintf(extra, sizeof(extra), ",\"flight_recorder\":{\"why\":\"%s\","
		 "\"holds\":\"%s\",\"window_s\":%.3f,\"max_mb\":%.1f,\"held_bytes\":%zu,"
		 "\"peak_bytes\":%zu,\"records\":%zu,\"span_s\":%.3f,"
		 "\"let_go_past_window\":%llu,\"let_go_past_memory\":%llu,"
		 "\"not_kept_out_of_memory\":%s}", why, r->holds,
		 r->window_ns / 1e9, r->max_bytes / 1048576.0, r->bytes,
		 r->peak_bytes, r->nr, (last - first) / 1e9,
		 (unsigned long long)r->dropped_old,
		 (unsigned long long)r->dropped_full,
		 r->oom ? "true" : "false");
	d.extra_other = extra;
	r->dumps++;
	return chrome_finish(&d, t, a);
}

void flight_recorder_free(struct flight_recorder *r)
{
	for (size_t i = 0; i < r->nr; i++)
		free(r->ring[(r->head + i) % r->cap]);
	free(r->ring);
	if (r->memf)
		fclose(r->memf);
	free(r->mem);
	u64map_free(&r->w.threads);
	u64map_free(&r->w.tracks);
	fwdbwd_free(&r->w.fwdbwd);
	memset(r, 0, sizeof(*r));
}
