// SPDX-License-Identifier: BSD-2-Clause
#include "table.h"
#include "table_ranks.h"

void print_rank_table(FILE *f, const struct rank_summary *r, size_t nr)
{
	struct straggler s = rank_summary_straggler(r, nr);
	char step[32], wait[32], max[32], others[32], rank[16];

	fprintf(f, "\nRanks: %zu process%s traced; collective time %s\n", nr,
		nr == 1 ? "" : "es", s.per_step ?
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
		format_duration((uint64_t)rank_summary_wait(&r[i], s.per_step),
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
	format_duration(s.others_wait_ns > 0 ? (uint64_t)s.others_wait_ns : 0,
			others, sizeof(others));
	if (r[s.index].dist.rank >= 0)
		snprintf(rank, sizeof(rank), "rank %d", r[s.index].dist.rank);
	else
		snprintf(rank, sizeof(rank), "PID %d", r[s.index].pid);
	fprintf(f, "Straggler: %s (PID %d): the other ranks spent %s more "
		"%s in collectives than it did, waiting for it\n", rank,
		r[s.index].pid, others, s.per_step ? "a step" : "in all");
}
