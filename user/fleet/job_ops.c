// SPDX-License-Identifier: BSD-2-Clause
/* A job's per-op counters (see job.h): pure logic over struct job, apart
 * from job.c's session, so the unit tests can build them by hand. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "fleet/job.h"

/* The counters of op name id: a series of its own while the job has
 * fewer than --max-ops, else the shared "[other]" one (index max_ops),
 * so a job with unbounded op names cannot grow the metrics without end. */
struct job_op *job_op_row(struct job *j, uint32_t name)
{
	uint64_t *known = u64map_get(&j->series, (uint64_t)name + 1);
	size_t i = known ? *known : j->nr_series < j->opt.max_ops ?
		   j->nr_series : j->opt.max_ops;

	if (i >= j->cap_ops) {
		size_t cap = i + 1 > 2 * j->cap_ops ? i + 1 : 2 * j->cap_ops;
		struct job_op *ops = realloc(j->ops, cap * sizeof(*ops));
		uint32_t *names = realloc(j->series_name,
					  cap * sizeof(*names));

		if (ops)
			j->ops = ops;
		if (names)
			j->series_name = names;
		if (!ops || !names)
			return NULL;
		memset(ops + j->cap_ops, 0, (cap - j->cap_ops) * sizeof(*ops));
		j->cap_ops = cap;
	}
	if (!known && i < j->opt.max_ops) {
		if (!u64map_put(&j->series, (uint64_t)name + 1, i))
			return NULL;
		j->series_name[i] = name;
		j->nr_series++;
	}
	if (i + 1 > j->nr_ops)
		j->nr_ops = i + 1;
	return &j->ops[i];
}

const char *job_op_name(const struct job *j, size_t i)
{
	return i >= j->opt.max_ops ? "[other]" :
	       names_get(&j->s.trace.names, j->series_name[i]);
}

/* Var(sum of w y) over the ops kept, each with probability 1/w, is
 * estimated without bias by the sum of w (w - 1) y^2 over them
 * (Horvitz-Thompson): y = 1 for calls, the duration for time. An op of
 * a window (w = 1) was certain to be seen and adds nothing. */
void job_op_add(struct job_op *r, double w, uint64_t dur_ns)
{
	double s = dur_ns * 1e-9, v = w * (w - 1);

	r->calls += w;
	r->total_s += w * s;
	r->calls_var += v;
	r->total_var += v * s * s;
	r->latency[agg_latency_bucket(dur_ns)] += w;
}

double job_op_calls_se(const struct job_op *r)
{
	return sqrt(r->calls_var);
}

double job_op_seconds_se(const struct job_op *r)
{
	return sqrt(r->total_var);
}
