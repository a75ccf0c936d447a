// SPDX-License-Identifier: BSD-2-Clause
/*
 * Fleet mode's per-op metrics on jobs built by hand (no session, no BPF):
 * the counters and their standard errors for a known set of ops and 1/p
 * weights, the "[other]" series past --max-ops, the HELP text, and
 * promtool's verdict on the whole exposition.
 *
 * Every expected number is worked out by hand. With w = 1/p, calls add w
 * and w(w-1) to their variance; time adds w d and w(w-1) d^2 (seconds).
 */
#include <math.h>
#include "check.h"
#include "fleet/fleet_metrics.h"
#include "promtool.h"

#define S 1000000000ull		/* ns in a second */

/* Jobs are large (paths, the session): static, zeroed, one at a time. */
static struct job job_a, job_b;

static void job_init(struct job *j, pid_t pid, unsigned max_ops)
{
	memset(j, 0, sizeof(*j));
	j->proc.pid = pid;
	strcpy(j->proc.comm, "python3");
	j->opt.max_ops = max_ops;
}

/* One closed op of `name`, weighed w, of dur_ns. */
static void add_op(struct job *j, const char *name, double w,
		   uint64_t dur_ns)
{
	uint32_t id = names_intern(&j->s.trace.names, name, strlen(name));
	struct job_op *r = job_op_row(j, id);

	CHECK(r != NULL);
	if (r)
		job_op_add(r, w, dur_ns);
}

static void job_free(struct job *j)
{
	names_free(&j->s.trace.names);
	u64map_free(&j->series);
	free(j->ops);
	free(j->series_name);
}

static bool near(double a, double b)
{
	return fabs(a - b) <= 1e-9 * (fabs(b) > 1 ? fabs(b) : 1);
}

/* Job A (--max-ops 2), every op of its own:
 *   aten::mm   w 1 (a window) 1 s, w 4 0.5 s, w 4 2 s
 *              calls 9,  var 0 + 12 + 12 = 24
 *              time  11, var 12 (0.25 + 4) = 51
 *   aten::add  w 10 0.1 s: calls 10, var 90; time 1, var 0.9
 *   aten::relu w 2 1 s and aten::copy_ w 1 3 s: past --max-ops, so
 *              "[other]": calls 3, var 2; time 5, var 2
 * Job B: two ops of a window (w 1): a standard error of 0. */
static void build_jobs(void)
{
	job_init(&job_a, 4321, 2);
	job_a.loader_ns_per_op = 3250;
	add_op(&job_a, "aten::mm", 1, S);
	add_op(&job_a, "aten::mm", 4, S / 2);
	add_op(&job_a, "aten::add", 10, S / 10);
	add_op(&job_a, "aten::mm", 4, 2 * S);
	add_op(&job_a, "aten::relu", 2, S);
	add_op(&job_a, "aten::copy_", 1, 3 * S);
	strcpy(job_a.s.trace.torch_version, "1.13.1");
	strcpy(job_a.s.trace.build, "before(const char*); C++11 string ABI");
	job_init(&job_b, 99, 2);
	strcpy(job_b.s.trace.torch_version, "2.14.1");
	strcpy(job_b.s.trace.build, "before(FunctionDescriptor); C++11 "
	       "string ABI");
	add_op(&job_b, "aten::mm", 1, S);
	add_op(&job_b, "aten::mm", 1, 2 * S);
}

static const struct { const char *op; double calls, calls_se, s, s_se; }
want_a[] = {
	{ "aten::mm", 9, 4.898979485566356 /* sqrt 24 */, 11,
	  7.14142842854285 /* sqrt 51 */ },
	{ "aten::add", 10, 9.486832980505138 /* sqrt 90 */, 1,
	  0.9486832980505138 /* sqrt 0.9 */ },
	{ "[other]", 3, 1.4142135623730951, 5, 1.4142135623730951 },
};

TEST(standard_errors_of_calls_and_time)
{
	build_jobs();
	CHECK_EQ_U64(job_a.nr_ops, 3);
	for (size_t k = 0; k < 3 && job_a.nr_ops == 3; k++) {
		const struct job_op *r = &job_a.ops[k];

		CHECK_STR(job_op_name(&job_a, k), want_a[k].op);
		CHECK(near(r->calls, want_a[k].calls));
		CHECK(near(r->total_s, want_a[k].s));
		CHECK(near(job_op_calls_se(r), want_a[k].calls_se));
		CHECK(near(job_op_seconds_se(r), want_a[k].s_se));
	}
	CHECK_EQ_U64(job_b.nr_ops, 1);
	if (job_b.nr_ops == 1) {
		CHECK(near(job_b.ops[0].calls, 2));
		CHECK(job_op_calls_se(&job_b.ops[0]) == 0);
		CHECK(job_op_seconds_se(&job_b.ops[0]) == 0);
	}
	job_free(&job_a);
	job_free(&job_b);
}

/* The value of name{pid,process,container,op} in text; NAN if absent. */
/* The value of the series whose line starts with prefix (NAN if none). */
static double value_of(const char *text, const char *prefix)
{
	const char *at = strstr(text, prefix);

	return at ? strtod(at + strlen(prefix), NULL) : NAN;
}

static double sample(const char *text, const char *name, pid_t pid,
		     const char *op)
{
	char prefix[256];

	snprintf(prefix, sizeof(prefix), "\n%s{pid=\"%d\",process=\"python3\","
		 "container=\"\",op=\"%s\"} ", name, pid, op);
	return value_of(text, prefix);
}

/* A per-job series' value. */
/* --bursts: the spread between an interval's bursts gives its
 * variance. An op counted 2, 4, 0 and 2 times in 4 bursts, each call
 * standing for 20 calls (the traced bursts held half the ops of the
 * job's untraced time) and 10 times its time: Var = K w^2/(K-1)
 * (sum y^2 - (sum y)^2/K) = 4 * 400 / 3 * (24 - 16) for calls, w = 10
 * for time; its self seconds alike, scaled by 50. */
TEST(bursts_standard_errors_from_the_spread_between_bursts)
{
	static const int y[4] = { 2, 4, 0, 2 };
	struct job j;
	uint32_t id;
	struct job_op *r;

	job_init(&j, 7, 100);
	j.bursts = true;
	id = names_intern(&j.s.trace.names, "aten::mm", 8);
	r = job_op_row(&j, id);
	for (int k = 0; k < 4; k++) {
		for (int c = 0; c < y[k]; c++) {
			job_op_count(r, 20, 10, 1000000);
			job_op_burst_add(&j, r, BURST_CALLS, 1);
			job_op_burst_add(&j, r, BURST_TOTAL, 0.001);
			job_op_burst_add(&j, r, BURST_SELF, 0.0005);
		}
		job_ops_burst_fold(&j);
	}
	job_ops_bursts_variance(&j, 20, 10, 50);
	CHECK(near(r->calls, 160));
	CHECK(near(r->total_s, 0.08));
	CHECK(near(r->latency[agg_latency_bucket(1000000)], 160));
	CHECK(near(r->calls_var, 4 * 400 / 3.0 * 8));
	CHECK(near(r->total_var, 4 * 100 / 3.0 * 8 * 1e-6));
	CHECK(near(job_op_self_se(&j, r),
		   sqrt(4 * 2500 / 3.0 * 8 * 0.25e-6)));
	CHECK(j.bursts_folded == 0 && r->burst_sum[BURST_CALLS] == 0);
	/* without --bursts there is no estimate */
	j.bursts = false;
	CHECK(isnan(job_op_self_se(&j, r)));
	free(j.touched);
	job_free(&j);
}

static double job_value(const char *text, const char *name, pid_t pid)
{
	char prefix[256];

	snprintf(prefix, sizeof(prefix), "\n%s{pid=\"%d\",process=\"python3\","
		 "container=\"\"} ", name, pid);
	return value_of(text, prefix);
}

static size_t count(const char *text, const char *s)
{
	size_t n = 0;

	for (const char *p = strstr(text, s); p; p = strstr(p + 1, s))
		n++;
	return n;
}

TEST(exported_with_the_counters_labels)
{
	struct job *jobs[] = { &job_a, &job_b };
	struct fleet_stats st = { .interval_s = 60, .budget = 0.01 };
	struct prom_buf b;
	const char *text;

	build_jobs();
	prom_init(&b);
	fleet_metrics_write(&b, jobs, 2, &st);
	CHECK(!b.oom && b.data);
	text = b.data ? b.data : "";
	for (size_t k = 0; k < 3; k++) {
		const char *op = want_a[k].op;

		CHECK(near(sample(text, "rfbpf_op_calls_total", 4321, op),
			   want_a[k].calls));
		CHECK(near(sample(text, "rfbpf_op_calls_stderr", 4321, op),
			   want_a[k].calls_se));
		CHECK(near(sample(text, "rfbpf_op_seconds_total", 4321, op),
			   want_a[k].s));
		CHECK(near(sample(text, "rfbpf_op_seconds_stderr", 4321, op),
			   want_a[k].s_se));
	}
	CHECK(sample(text, "rfbpf_op_calls_stderr", 99, "aten::mm") == 0);
	CHECK(sample(text, "rfbpf_op_seconds_stderr", 99, "aten::mm") == 0);
	/* A standard error for every counter series, and none other. */
	CHECK_EQ_U64(count(text, "\nrfbpf_op_calls_stderr{"), 4);
	CHECK_EQ_U64(count(text, "\nrfbpf_op_seconds_stderr{"), 4);
	CHECK_EQ_U64(count(text, "\nrfbpf_op_calls_total{"), 4);
	CHECK(strstr(text, "\n# HELP rfbpf_op_calls_stderr Standard error "
		     "of rfbpf_op_calls_total: in bursts, "));
	CHECK(strstr(text, "with --sampled, from the sampled ops' 1/p "
		     "weights (square root of the sum of w(w-1), w = 1/p)"));
	CHECK(strstr(text, "\n# TYPE rfbpf_op_calls_stderr gauge\n"));
	CHECK(strstr(text, "\n# HELP rfbpf_op_seconds_stderr Standard error "
		     "of rfbpf_op_seconds_total: in bursts as "));
	CHECK(strstr(text, "with --sampled, from the sampled ops' 1/p "
		     "weights (square root of the sum of w(w-1)d^2"));
	CHECK(strstr(text, "\n# TYPE rfbpf_op_seconds_stderr gauge\n"));
	/* Self time says why it has none. */
	const char *self = strstr(text, "# HELP rfbpf_op_self_seconds_total ");
	const char *eol = self ? strchr(self, '\n') : NULL;
	const char *why = self ? strstr(self, "no standard error") : NULL;
	CHECK(why && eol && why < eol);
	/* ...and jobs without --bursts have no series of it */
	CHECK_EQ_U64(count(text, "\nrfbpf_op_self_seconds_stderr{"), 0);
	/* rfbpf's own CPU per op, charged to each job's budget. */
	CHECK(near(job_value(text, "rfbpf_job_loader_seconds_per_op", 4321),
		   3.25e-6));
	CHECK(job_value(text, "rfbpf_job_loader_seconds_per_op", 99) == 0);
	/* Each job's own torch build, as a label of an info series. */
	CHECK(strstr(text, "\nrfbpf_job_torch_info{pid=\"4321\",process=\""
		     "python3\",container=\"\",version=\"1.13.1\",build=\""
		     "before(const char*); C++11 string ABI\"} 1\n"));
	CHECK(strstr(text, "\nrfbpf_job_torch_info{pid=\"99\",process=\""
		     "python3\",container=\"\",version=\"2.14.1\",build=\""
		     "before(FunctionDescriptor); C++11 string ABI\"} 1\n"));
	/* The unpaired ops' reasons, from model/loss_counters.h, in its
	 * order and with the labels dashboards already query. */
	static const char *const reasons[] = {
		"unmatched_end", "repeated_end", "async_end",
		"end_begun_before_tracing", "open_at_thread_exit",
		"closed_by_parent", "replaced", "name_truncated",
		"name_unreadable", "nvtx_pop_unmatched", "out_of_memory",
	};
	const char *at = text;
	char want[160];

	job_a.s.trace.counts.replaced = 3;
	prom_free(&b);
	prom_init(&b);
	fleet_metrics_write(&b, jobs, 2, &st);
	text = b.data ? b.data : "";
	at = text;
	for (size_t k = 0; k < sizeof(reasons) / sizeof(reasons[0]); k++) {
		snprintf(want, sizeof(want), "\nrfbpf_job_ops_unpaired_total{"
			 "pid=\"4321\",process=\"python3\",container=\"\","
			 "reason=\"%s\"} %d\n", reasons[k],
			 !strcmp(reasons[k], "replaced") ? 3 : 0);
		at = at ? strstr(at, want) : NULL;
		CHECK(at != NULL);
	}
	CHECK_EQ_U64(count(text, "\nrfbpf_job_ops_unpaired_total{pid=\"4321\""),
		     sizeof(reasons) / sizeof(reasons[0]));
	if (access(PROMTOOL, X_OK))
		printf("skip promtool on the fleet metrics: no " PROMTOOL
		       " (Debian package prometheus)\n");
	else
		CHECK_EQ_U64(promtool_check(text, strlen(text), false), 0);
	prom_free(&b);
	job_free(&job_a);
	job_free(&job_b);
}


/* rfbpf's own process_* figures are what the caller read, written as
 * given: the writer reads nothing from /proc itself. */
TEST(process_figures_are_the_callers)
{
	struct fleet_stats st = {
		.interval_s = 60, .budget = 0.01,
		.process = { .cpu_seconds = 12.5, .resident_bytes = 4096,
			     .virtual_bytes = 8192, .open_fds = 7,
			     .max_fds = 1024, .start_time_seconds = 1e9 },
	};
	struct prom_buf b;
	const char *text;

	prom_init(&b);
	fleet_metrics_write(&b, NULL, 0, &st);
	CHECK(!b.oom && b.data);
	text = b.data ? b.data : "";
	CHECK(value_of(text, "\nprocess_cpu_seconds_total ") == 12.5);
	CHECK(value_of(text, "\nprocess_resident_memory_bytes ") == 4096);
	CHECK(value_of(text, "\nprocess_virtual_memory_bytes ") == 8192);
	CHECK(value_of(text, "\nprocess_open_fds ") == 7);
	CHECK(value_of(text, "\nprocess_max_fds ") == 1024);
	CHECK(value_of(text, "\nprocess_start_time_seconds ") == 1e9);
	prom_free(&b);
}

RUN_TESTS()
