/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The fleet daemon's exposition (user/fleet/fleet_metrics.c) for jobs
 * built from the input as the unit tests build them (no session, no BPF):
 * process names, containers and op names of any bytes, any 1/p weights
 * and durations, any rates and daemon figures (NaN and infinities too).
 * Here the family names and label names are rfbpf's own, so the input
 * reaches the series: the exposition must pass prom_check.h.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet_metrics.h"
#include "fuzz_bytes.h"
#include "prom_check.h"

#define NR_JOBS 2
#define MAX_OPS 12

/* Jobs are large (the session is in them): static, zeroed per input. */
static struct job jobs[NR_JOBS];

static void fuzz_text(struct fuzz_input *in, char *out, size_t cap)
{
	char *s = fuzz_string(in);

	snprintf(out, cap, "%s", s);
	free(s);
}

static void build_job(struct job *j, struct fuzz_input *in)
{
	unsigned nr_ops = fuzz_u8(in) % (MAX_OPS + 1);

	memset(j, 0, sizeof(*j));
	j->proc.pid = (pid_t)fuzz_u32(in);
	fuzz_text(in, j->proc.comm, sizeof(j->proc.comm));
	fuzz_text(in, j->proc.container, sizeof(j->proc.container));
	j->opt.max_ops = fuzz_u8(in) % 8;
	j->p = fuzz_double(in);
	j->est_overhead = fuzz_double(in);
	j->window_s = fuzz_double(in);
	j->op_rate = fuzz_double(in);
	j->cpu_rate = fuzz_double(in);
	j->loader_ns_per_op = fuzz_double(in);
	j->reregistrations = fuzz_u64(in);
	for (unsigned i = 0; i < nr_ops; i++) {
		char *name = fuzz_string(in);
		uint32_t id = names_intern(&j->s.trace.names, name,
					   strlen(name));
		struct job_op *r = id == UINT32_MAX ? NULL : job_op_row(j, id);

		if (!r)
			abort();	/* only ENOMEM fails */
		job_op_add(r, fuzz_double(in), fuzz_u64(in));
		free(name);
	}
}

static void free_job(struct job *j)
{
	names_free(&j->s.trace.names);
	u64map_free(&j->series);
	free(j->ops);
	free(j->series_name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_input in = { data, size };
	struct job *list[NR_JOBS];
	struct fleet_stats st = { .interval_s = 0 };
	struct prom_buf b;
	unsigned nr = fuzz_u8(&in) % (NR_JOBS + 1);
	char why[160];

	for (unsigned i = 0; i < nr; i++) {
		build_job(&jobs[i], &in);
		list[i] = &jobs[i];
	}
	st.interval_s = fuzz_double(&in);
	st.budget = fuzz_double(&in);
	st.op_cost_s = fuzz_double(&in);
	st.jobs = nr;
	st.jobs_started = fuzz_u64(&in);
	st.last_interval_cpu_s = fuzz_double(&in);
	st.last_interval_rss = fuzz_double(&in);
	/* rfbpf's own figures are the caller's input too (not /proc/self,
	 * whose read held this target at ~300 inputs a second). */
	st.process = (struct prom_process){
		fuzz_double(&in), fuzz_double(&in), fuzz_double(&in),
		fuzz_double(&in), fuzz_double(&in), fuzz_double(&in),
	};
	prom_init(&b);
	fleet_metrics_write(&b, list, nr, &st);
	if (!b.oom && prom_check(b.data ? b.data : "", b.len, why,
				 sizeof(why))) {
		fprintf(stderr, "prom_check: %s\n%s", why, b.data);
		abort();
	}
	prom_free(&b);
	for (unsigned i = 0; i < nr; i++)
		free_job(&jobs[i]);
	return 0;
}
