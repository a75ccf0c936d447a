// SPDX-License-Identifier: BSD-2-Clause
#include <inttypes.h>
#include <string.h>
#include "rank_summary.h"

#define MAGIC "rfbpf-rank-summary 1"

void rank_summary_write(FILE *f, const struct trace *t,
			const struct collectives *c)
{
	const struct dist_info *d = &t->dist;
	uint64_t coll_ns = 0, calls = 0, steps = 0, step_ns = 0, in = 0,
		 max = 0;

	for (size_t i = 0; i < c->nr; i++) {
		coll_ns += c->rows[i].dur_ns;
		calls += c->rows[i].calls;
	}
	for (size_t i = 0; i < c->nr_steps; i++) {
		const struct collective_step *s = &c->steps[i];

		if (!s->dur_ns)		/* not ended: not whole */
			continue;
		steps++;
		step_ns += s->dur_ns;
		in += s->coll_ns;
		if (s->dur_ns > max)
			max = s->dur_ns;
	}
	fprintf(f, MAGIC "\npid %u\ncomm %.15s\nrank %d %d %d %s\n"
		"span %" PRIu64 "\ncollectives %" PRIu64 " %" PRIu64 "\n"
		"steps %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n"
		"job %s %s %s\n",
		t->pid, t->process_name[0] ? t->process_name : "?", d->rank,
		d->local_rank, d->world_size, d->backend[0] ? d->backend : "-",
		t->last_ns > t->first_ns ? t->last_ns - t->first_ns : 0,
		coll_ns, calls, steps, step_ns, in, max,
		d->run_id[0] ? d->run_id : "-",
		d->master_addr[0] ? d->master_addr : "-",
		d->master_port[0] ? d->master_port : "-");
}

bool rank_summary_parse(const char *text, struct rank_summary *r)
{
	unsigned pid;
	char backend[16], run[64], addr[64], port[16];
	const char *job;

	memset(r, 0, sizeof(*r));
	dist_info_init(&r->dist);
	if (strncmp(text, MAGIC "\n", sizeof(MAGIC)))
		return false;
	if (sscanf(text + sizeof(MAGIC), "pid %u\ncomm %15s\nrank %d %d %d "
		   "%15s\nspan %" SCNu64 "\ncollectives %" SCNu64 " %" SCNu64
		   "\nsteps %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64,
		   &pid, r->comm, &r->dist.rank, &r->dist.local_rank,
		   &r->dist.world_size, backend, &r->span_ns, &r->coll_ns,
		   &r->coll_calls, &r->steps, &r->step_ns, &r->step_coll_ns,
		   &r->max_step_ns) != 13)
		return false;
	/* Times under 2^62 ns (146 years), as any run's; a number past
	 * UINT64_MAX reads as that (ERANGE) and is no summary's. */
	if (r->span_ns >> 62 || r->coll_ns >> 62 || r->coll_calls >> 62 ||
	    r->steps >> 62 || r->step_ns >> 62 || r->step_coll_ns >> 62 ||
	    r->max_step_ns >> 62)
		return false;
	/* As dist_info_from_environ leaves them: -1 or below a million. */
	if (r->dist.rank < -1 || r->dist.rank >= 1000000 ||
	    r->dist.local_rank < -1 || r->dist.local_rank >= 1000000 ||
	    r->dist.world_size < -1 || r->dist.world_size >= 1000000)
		return false;
	r->pid = (pid_t)pid;
	if (strcmp(backend, "-"))
		snprintf(r->dist.backend, sizeof(r->dist.backend), "%s",
			 backend);
	/* Values hold no spaces: torchrun's are ids, hosts and numbers. */
	if (!(job = strstr(text, "\njob ")) ||
	    sscanf(job, "\njob %63s %63s %15s", run, addr, port) != 3)
		return false;
#define SET(field, v) \
	snprintf(r->dist.field, sizeof(r->dist.field), "%s", \
		 strcmp(v, "-") ? v : "")
	SET(run_id, run);
	SET(master_addr, addr);
	SET(master_port, port);
#undef SET
	return true;
}

double rank_summary_wait(const struct rank_summary *r, bool per_step)
{
	if (per_step)
		return r->steps ? (double)r->step_coll_ns / r->steps : 0;
	return (double)r->coll_ns;
}

bool rank_summary_same_job(const struct rank_summary *a,
			   const struct rank_summary *b)
{
	return !strcmp(a->dist.run_id, b->dist.run_id) &&
	       !strcmp(a->dist.master_addr, b->dist.master_addr) &&
	       !strcmp(a->dist.master_port, b->dist.master_port);
}

struct straggler rank_summary_straggler(const struct rank_summary *r,
					size_t nr)
{
	struct straggler s = { .per_step = true, .index = -1 };
	size_t with = 0;
	double total = 0;

	for (size_t i = 0; i < nr; i++) {
		if (r[i].coll_calls)
			with++;
		if (!r[i].steps)
			s.per_step = false;
	}
	if (nr < 2 || with < nr)
		return s;
	for (size_t i = 0; i < nr; i++) {
		double w = rank_summary_wait(&r[i], s.per_step);

		total += w;
		if (s.index < 0 ||
		    w < rank_summary_wait(&r[s.index], s.per_step))
			s.index = (int)i;
	}
	s.others_wait_ns = (total - rank_summary_wait(&r[s.index],
						       s.per_step)) /
			   (double)(nr - 1) -
			   rank_summary_wait(&r[s.index], s.per_step);
	return s;
}
