// SPDX-License-Identifier: BSD-2-Clause
#include <stdlib.h>
#include <string.h>
#include "table.h"
#include "table_ranks.h"

/* By job (run id, master), then rank, then pid. */
static int by_job_and_rank(const void *a, const void *b)
{
	const struct rank_summary *x = a, *y = b;
	int c = strcmp(x->dist.run_id, y->dist.run_id);

	if (!c)
		c = strcmp(x->dist.master_addr, y->dist.master_addr);
	if (!c)
		c = strcmp(x->dist.master_port, y->dist.master_port);
	if (!c)
		c = (x->dist.rank > y->dist.rank) - (x->dist.rank < y->dist.rank);
	return c ? c : (x->pid > y->pid) - (x->pid < y->pid);
}

/* A time in ns as format_duration takes it: a double past 2^63 (a
 * summary's sums gone wild) has no uint64_t, and none is that long. */
static uint64_t ns_of(double ns)
{
	return ns > 0 ? ns < 9e18 ? (uint64_t)ns : 9000000000000000000ull : 0;
}

/* One job's ranks, r[0..nr). */
static void print_job(FILE *f, const struct rank_summary *r, size_t nr)
{
	struct straggler s = rank_summary_straggler(r, nr);
	char step[32], wait[32], max[32], others[32], rank[16], job[160] = "";
	const struct dist_info *d = &r[0].dist;

	if (d->run_id[0] || d->master_addr[0])
		snprintf(job, sizeof(job), " of %s%s%s%s%s%s%s",
			 d->run_id[0] ? "run " : "", d->run_id,
			 d->run_id[0] && d->master_addr[0] ? " " : "",
			 d->master_addr[0] ? "(master " : "", d->master_addr,
			 d->master_addr[0] && d->master_port[0] ? ":" : "",
			 d->master_addr[0] ? d->master_port : "");
	if (d->master_addr[0])
		snprintf(job + strlen(job), sizeof(job) - strlen(job), ")");
	fprintf(f, "\nRanks%s: %zu process%s traced; collective time %s\n",
		job, nr, nr == 1 ? "" : "es", s.per_step ?
		"per step (mean over each rank's whole steps)" :
		"over the whole trace (not every rank had whole steps)");
	fprintf(f, "%6s  %8s  %-15s  %6s  %12s  %12s  %14s\n", "Rank", "PID",
		"Process", "Steps", "Step (mean)", "Step (max)",
		"In collectives");
	for (size_t i = 0; i < nr; i++) {
		if (r[i].dist.rank >= 0)
			snprintf(rank, sizeof(rank), "%d", r[i].dist.rank);
		else
			snprintf(rank, sizeof(rank), "-");
		format_duration(r[i].steps ? r[i].step_ns / r[i].steps : 0,
				step, sizeof(step));
		format_duration(r[i].max_step_ns, max, sizeof(max));
		format_duration(ns_of(rank_summary_wait(&r[i], s.per_step)),
				wait, sizeof(wait));
		fprintf(f, "%6s  %8d  %-15s  %6llu  %12s  %12s  %14s%s\n",
			rank, r[i].pid, r[i].comm,
			(unsigned long long)r[i].steps,
			r[i].steps ? step : "-", r[i].steps ? max : "-", wait,
			(int)i == s.index ? "  <- straggler" : "");
	}
	if (s.index < 0) {
		fprintf(f, "Straggler: none told (it takes 2 ranks or more, "
			"each with collectives traced)\n");
		return;
	}
	format_duration(ns_of(s.others_wait_ns), others, sizeof(others));
	if (r[s.index].dist.rank >= 0)
		snprintf(rank, sizeof(rank), "rank %d", r[s.index].dist.rank);
	else
		snprintf(rank, sizeof(rank), "PID %d", r[s.index].pid);
	fprintf(f, "Straggler: %s (PID %d): the other ranks spent %s more "
		"%s in collectives than it did, waiting for it\n", rank,
		r[s.index].pid, others, s.per_step ? "a step" : "in all");
}

void print_rank_table(FILE *f, struct rank_summary *r, size_t nr)
{
	size_t from = 0;

	qsort(r, nr, sizeof(*r), by_job_and_rank);
	for (size_t i = 1; i <= nr; i++)
		if (i == nr || !rank_summary_same_job(&r[from], &r[i])) {
			print_job(f, r + from, i - from);
			from = i;
		}
}
