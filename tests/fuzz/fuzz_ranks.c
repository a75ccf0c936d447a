/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What rfbpf reads of a distributed job from outside: a process's
 * environment block (/proc/PID/environ, which the job writes: any bytes,
 * NULs anywhere, no NUL at the end) into struct dist_info, and the
 * summaries --all's children hand back (model/rank_summary.c), then the
 * ranks table of what parsed. Nothing may crash or read past the input;
 * every field read must be a NUL-terminated string of its size, every
 * number -1 or a rank below a million, and a summary that parsed must
 * read back the same once written again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/table_ranks.h"
#include "model/distributed.h"
#include "model/rank_summary.h"

static void check_dist(const struct dist_info *d)
{
	char text[512];

	if (d->rank < -1 || d->rank >= 1000000 || d->local_rank < -1 ||
	    d->local_rank >= 1000000 || d->world_size < -1 ||
	    d->world_size >= 1000000)
		abort();
	if (!memchr(d->master_addr, 0, sizeof(d->master_addr)) ||
	    !memchr(d->master_port, 0, sizeof(d->master_port)) ||
	    !memchr(d->run_id, 0, sizeof(d->run_id)) ||
	    !memchr(d->backend, 0, sizeof(d->backend)))
		abort();
	dist_info_describe(d, text, sizeof(text));
	if (!memchr(text, 0, sizeof(text)))
		abort();
}

/* A parsed summary, written as its rfbpf would and parsed again, must be
 * the same. */
static void round_trip(const struct rank_summary *r)
{
	struct trace t;
	struct collectives c;
	struct collective_row row = { .calls = r->coll_calls,
				       .dur_ns = r->coll_ns };
	struct collective_step st = { .number = 1, .dur_ns = r->step_ns,
				      .coll_ns = r->step_coll_ns };
	struct rank_summary back;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	/* Only summaries a writer can produce: one whole step. */
	if (r->steps != (r->step_ns ? 1 : 0) || r->max_step_ns != r->step_ns ||
	    strchr(r->comm, ' ') || !r->comm[0])
		return;
	trace_init(&t, (uint32_t)r->pid);
	snprintf(t.process_name, sizeof(t.process_name), "%s", r->comm);
	t.dist = r->dist;
	t.first_ns = 1;
	t.last_ns = 1 + r->span_ns;
	collectives_init(&c);
	c.rows = &row;
	c.nr = 1;
	c.steps = &st;
	c.nr_steps = 1;
	if (!(f = open_memstream(&text, &len)))
		abort();
	rank_summary_write(f, &t, &c);
	fclose(f);
	if (!rank_summary_parse(text, &back) || back.steps != r->steps ||
	    back.coll_ns != r->coll_ns || back.span_ns != r->span_ns ||
	    back.dist.rank != r->dist.rank ||
	    strcmp(back.dist.run_id, r->dist.run_id))
		abort();
	free(text);
	trace_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dist_info d;
	struct rank_summary r[2];
	char *text = malloc(size + 1);
	size_t nr = 0;
	FILE *out;

	if (!text)
		return 0;
	/* The block exactly as read: no NUL added. */
	dist_info_init(&d);
	dist_info_from_environ(&d, (const char *)data, size);
	check_dist(&d);
	memcpy(text, data, size);
	text[size] = 0;
	dist_info_saw_collective(&d, text);
	check_dist(&d);
	if (rank_summary_parse(text, &r[0])) {
		check_dist(&r[0].dist);
		round_trip(&r[0]);
		nr++;
	}
	/* The same summary twice: one job of two ranks. */
	if (nr) {
		r[1] = r[0];
		nr++;
	}
	out = fopen("/dev/null", "w");
	if (out) {
		print_rank_table(out, r, nr);
		fclose(out);
	}
	free(text);
	return 0;
}
