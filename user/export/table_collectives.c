// SPDX-License-Identifier: BSD-2-Clause
#include <string.h>
#include "table.h"
#include "table_collectives.h"
#include "text_cell.h"

void format_bytes(double bytes, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "kB", "MB", "GB", "TB" };
	unsigned u = 0;

	while (bytes >= 1000 && u < 4) {
		bytes /= 1000;
		u++;
	}
	snprintf(buf, len, u ? "%.3g %s" : "%.0f %s", bytes, unit[u]);
}

void print_collectives(FILE *f, const struct trace *t,
		       struct collectives *c)
{
	char dist[256], time[32], avg[32], bytes[32], bw[40];
	uint64_t unsized = 0;

	if (!c->nr && !dist_info_known(&t->dist))
		return;
	dist_info_describe(&t->dist, dist, sizeof(dist));
	fprintf(f, "\nDistributed: %s\n", dist);
	if (!c->nr) {
		fprintf(f, "Collectives: none ran while traced\n");
		return;
	}
	collectives_sort(c);
	fprintf(f, "%-32s  %8s  %12s  %12s  %10s  %12s\n", "Collective",
		"Calls", "Time", "Avg", "Bytes", "Bandwidth");
	for (size_t i = 0; i < c->nr; i++) {
		const struct collective_row *r = &c->rows[i];
		uint64_t sized = r->calls - r->unsized;

		format_duration(r->dur_ns, time, sizeof(time));
		format_duration(r->dur_ns / r->calls, avg, sizeof(avg));
		format_bytes((double)r->bytes, bytes, sizeof(bytes));
		snprintf(bw, sizeof(bw), "-");
		if (sized && r->bytes && r->dur_ns) {
			/* Over the calls whose sizes are known only. */
			double ns = (double)r->dur_ns * sized / r->calls;

			format_bytes(r->bytes / (ns / 1e9), bw, sizeof(bw));
			snprintf(bw + strlen(bw), sizeof(bw) - strlen(bw),
				 "/s");
		}
		print_cell(f, names_get(&t->names, r->name), 32, 0);
		fprintf(f, "  %8llu  %12s  %12s  %10s  %12s\n",
			(unsigned long long)r->calls, time, avg,
			sized ? bytes : "-", bw);
		unsized += r->unsized;
	}
	fprintf(f, "Time: from a collective's start to its end, waits for "
		"the other ranks included%s\n", unsized ?
		"" : "; bandwidth: its tensors' bytes over that time");
	if (unsized)
		fprintf(f, "Sizes unknown for %llu calls (no input record, or "
			"one cut short): their bytes are not counted\n",
			(unsigned long long)unsized);
}
