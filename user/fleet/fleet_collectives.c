// SPDX-License-Identifier: BSD-2-Clause
#include <stdio.h>
#include <string.h>
#include "fleet/fleet_collectives.h"
#include "fleet/job_labels.h"
#include "fleet/job_ops.h"
#include "model/collectives.h"

/* The backend of the job's collectives (model/distributed.c's rule),
 * "" before any. */
static const char *backend(const struct job *j, struct dist_info *d)
{
	dist_info_init(d);
	for (size_t o = 0; o < j->nr_ops && !d->backend[0]; o++)
		dist_info_saw_collective(d, job_op_name(j, o));
	return d->backend;
}

static void rank_info(struct prom_buf *b, struct job *const *jobs,
		      size_t nr)
{
	static const char *const name = "rfbpf_job_rank_info";

	prom_family(b, name, "gauge", "1 for each job with a rank: its "
		    "RANK, LOCAL_RANK, WORLD_SIZE and TORCHELASTIC_RUN_ID "
		    "(as torchrun sets them) and the backend of its "
		    "collectives; join on pid to label other series by rank");
	for (size_t i = 0; i < nr; i++) {
		const struct dist_info *d = &jobs[i]->s.trace.dist;
		struct dist_info seen;
		struct prom_label l[JOB_LABELS + 5];
		char pid[16], rank[16], local[16], world[16];

		if (!dist_info_known(d))
			continue;
		job_labels(jobs[i], l, pid, sizeof(pid));
		snprintf(rank, sizeof(rank), "%d", d->rank);
		snprintf(local, sizeof(local), "%d", d->local_rank);
		snprintf(world, sizeof(world), "%d", d->world_size);
		l[JOB_LABELS] = (struct prom_label){ "rank",
						 d->rank >= 0 ? rank : "" };
		l[JOB_LABELS + 1] = (struct prom_label){
			"local_rank", d->local_rank >= 0 ? local : "" };
		l[JOB_LABELS + 2] = (struct prom_label){
			"world_size", d->world_size >= 0 ? world : "" };
		l[JOB_LABELS + 3] = (struct prom_label){ "backend",
						     backend(jobs[i], &seen) };
		l[JOB_LABELS + 4] = (struct prom_label){ "run_id", d->run_id };
		prom_sample(b, name, l, JOB_LABELS + 5, 1);
	}
}

struct coll_family {
	const char *name, *help;
	double (*value)(const struct job_op *r);
};

static double v_seconds(const struct job_op *r) { return r->total_s; }
static double v_calls(const struct job_op *r) { return r->calls; }
static double v_bytes(const struct job_op *r) { return r->bytes; }

static const struct coll_family families[] = {
	{ "rfbpf_collective_seconds_total", "Estimated time of the job's "
	  "collectives (gloo:*, nccl:*, record_param_comms), each from its "
	  "start to its completion, the wait for the slowest rank included "
	  "(as rfbpf_op_seconds_total); group is the process group where "
	  "the collective names it (2.x's record_param_comms), else empty",
	  v_seconds },
	{ "rfbpf_collective_calls_total", "Estimated calls of the job's "
	  "collectives (as rfbpf_op_calls_total)", v_calls },
	{ "rfbpf_collective_bytes_total", "Estimated bytes of the "
	  "collectives' tensors, of the calls whose sizes were read, "
	  "weighed as rfbpf_collective_calls_total", v_bytes },
};

static void collectives(struct prom_buf *b, struct job *const *jobs,
			size_t nr, const struct coll_family *f)
{
	prom_family(b, f->name, "counter", f->help);
	for (size_t i = 0; i < nr; i++) {
		const struct job *j = jobs[i];
		struct prom_label l[JOB_LABELS + 2];
		char pid[16];

		job_labels(j, l, pid, sizeof(pid));
		for (size_t o = 0; o < j->nr_ops; o++) {
			const char *name = job_op_name(j, o);

			if (!(j->ops[o].calls > 0) || !collective_name(name))
				continue;
			l[JOB_LABELS] = (struct prom_label){ "collective", name };
			l[JOB_LABELS + 1] = (struct prom_label){ "group", "" };
			prom_sample(b, f->name, l, JOB_LABELS + 2,
				    f->value(&j->ops[o]));
		}
	}
}

/* The job's estimated steps: the calls of its ProfilerStep#N scopes if
 * it has them, else of its busiest optimizer's step (model/steps.h's
 * order of markers). */
static double steps_of(const struct job *j)
{
	double profiler = 0, optimizer = 0;

	for (size_t o = 0; o < j->nr_ops; o++) {
		const char *name = job_op_name(j, o);

		if (!strncmp(name, "ProfilerStep#", 13))
			profiler += j->ops[o].calls;
		else if (!strncmp(name, "Optimizer.step#", 15) &&
			 j->ops[o].calls > optimizer)
			optimizer = j->ops[o].calls;
	}
	return profiler > 0 ? profiler : optimizer;
}

static void steps(struct prom_buf *b, struct job *const *jobs, size_t nr,
		  double interval_s)
{
	static const char *const total = "rfbpf_job_steps_total";
	static const char *const secs = "rfbpf_job_step_seconds";

	prom_family(b, total, "counter", "Estimated training steps: calls "
		    "of the job's ProfilerStep#N scopes, else of its "
		    "optimizer's step (weighed as rfbpf_op_calls_total)");
	for (size_t i = 0; i < nr; i++) {
		struct prom_label l[JOB_LABELS];
		char pid[16];
		double n = steps_of(jobs[i]);

		if (!(n > 0))
			continue;
		job_labels(jobs[i], l, pid, sizeof(pid));
		prom_sample(b, total, l, JOB_LABELS, n);
	}
	prom_family(b, secs, "gauge", "Mean time of the job's steps in the "
		    "last interval: the interval over its estimated steps "
		    "then (none while fewer than one step was estimated)");
	for (size_t i = 0; i < nr; i++) {
		struct job *j = jobs[i];
		struct prom_label l[JOB_LABELS];
		char pid[16];
		double n = steps_of(j), d = n - j->steps_exported;

		j->steps_exported = n;
		if (!(d >= 1))
			continue;
		job_labels(j, l, pid, sizeof(pid));
		prom_sample(b, secs, l, JOB_LABELS, interval_s / d);
	}
}

void fleet_collectives_write(struct prom_buf *b, struct job *const *jobs,
			     size_t nr, double interval_s)
{
	rank_info(b, jobs, nr);
	for (size_t k = 0; k < sizeof(families) / sizeof(families[0]); k++)
		collectives(b, jobs, nr, &families[k]);
	steps(b, jobs, nr, interval_s);
}
