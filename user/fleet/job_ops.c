// SPDX-License-Identifier: BSD-2-Clause
/* A job's per-op counters (see job.h): pure logic over struct job, apart
 * from job.c's session, so the unit tests can build them by hand. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "fleet/job_ops.h"

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

void job_op_count(struct job_op *r, double w_calls, double w_time,
		  uint64_t dur_ns)
{
	r->calls += w_calls;
	r->total_s += w_time * dur_ns * 1e-9;
	r->latency[agg_latency_bucket(dur_ns)] += w_calls;
}

/* Var(sum of w y) over the ops kept, each with probability 1/w, is
 * estimated without bias by the sum of w (w - 1) y^2 over them
 * (Horvitz-Thompson): y = 1 for calls, the duration for time. An op of
 * a window (w = 1) was certain to be seen and adds nothing. */
void job_op_add(struct job_op *r, double w, uint64_t dur_ns)
{
	double s = dur_ns * 1e-9, v = w * (w - 1);

	job_op_count(r, w, w, dur_ns);
	r->calls_var += v;
	r->total_var += v * s * s;
}

double job_op_calls_se(const struct job_op *r)
{
	return sqrt(r->calls_var);
}

double job_op_seconds_se(const struct job_op *r)
{
	return sqrt(r->total_var);
}

double job_op_self_se(const struct job *j, const struct job_op *r)
{
	return j->bursts ? sqrt(r->self_var) : NAN;
}

void job_op_burst_add(struct job *j, struct job_op *r, int what, double v)
{
	r->in_burst[what] += v;
	if (r->touched)
		return;
	if (j->nr_touched == j->cap_touched) {
		size_t cap = j->cap_touched ? 2 * j->cap_touched : 64;
		uint32_t *t = realloc(j->touched, cap * sizeof(*t));

		if (!t)
			return;		/* counted, not in the variance */
		j->touched = t;
		j->cap_touched = cap;
	}
	r->touched = true;
	j->touched[j->nr_touched++] = (uint32_t)(r - j->ops);
}

void job_ops_burst_fold(struct job *j)
{
	for (size_t i = 0; i < j->nr_touched; i++) {
		struct job_op *r = &j->ops[j->touched[i]];

		for (int k = 0; k < 3; k++) {
			r->burst_sum[k] += r->in_burst[k];
			r->burst_sum2[k] += r->in_burst[k] * r->in_burst[k];
			r->in_burst[k] = 0;
		}
		r->touched = false;
	}
	j->nr_touched = 0;
	j->bursts_folded++;
}

/*
 * The interval's estimate of a total is Y = w * sum of y_k over its K
 * bursts (y_k: the op's count or seconds in burst k, 0 where it had
 * none). Taking z_k = K w y_k as K estimates of Y, each from one burst,
 * Var(Y) is estimated by sum (z_k - mean z)^2 / (K (K - 1)) =
 * K w^2 / (K - 1) * (sum y_k^2 - (sum y_k)^2 / K). The bursts are one
 * per stratum, not drawn independently over the whole interval, so this
 * errs on the large side when the job changes over the interval.
 */
static double spread(double sum, double sum2, double k, double w)
{
	double v = sum2 - sum * sum / k;

	return v > 0 ? k * w * w / (k - 1) * v : 0;
}

void job_ops_bursts_variance(struct job *j, double w_calls, double w_time,
			     double w_self)
{
	double k = j->bursts_folded;

	for (size_t i = 0; i < j->nr_ops; i++) {
		struct job_op *r = &j->ops[i];

		if (k >= 2) {
			r->calls_var += spread(r->burst_sum[BURST_CALLS],
					       r->burst_sum2[BURST_CALLS], k,
					       w_calls);
			r->total_var += spread(r->burst_sum[BURST_TOTAL],
					       r->burst_sum2[BURST_TOTAL], k,
					       w_time);
			r->self_var += spread(r->burst_sum[BURST_SELF],
					      r->burst_sum2[BURST_SELF], k,
					      w_self);
		}
		memset(r->burst_sum, 0, sizeof(r->burst_sum));
		memset(r->burst_sum2, 0, sizeof(r->burst_sum2));
	}
	j->bursts_folded = 0;
}
