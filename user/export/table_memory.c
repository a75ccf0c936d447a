// SPDX-License-Identifier: BSD-2-Clause
/* The table's memory block: see table_memory.h. */
#include <stdlib.h>
#include "table_memory.h"
#include "text_cell.h"

#define OP_W 32
#define SCOPE_W 24

static const char *name_or(const struct trace *t, uint32_t id,
			   const char *none)
{
	return id == UINT32_MAX ? none : names_get(&t->names, id);
}

static void print_devices(FILE *f, const struct memory *m)
{
	for (int i = 0; i < m->nr_devices; i++) {
		const struct mem_device *d = &m->devices[i];
		char live[32], peak[32], reserved[32];

		memory_format((int64_t)d->live, live, sizeof(live));
		memory_format((int64_t)d->peak, peak, sizeof(peak));
		fprintf(f, "Memory on %s", memory_device_name(d->type));
		if (d->index >= 0)
			fprintf(f, ":%d", d->index);
		fprintf(f, ": %s live at the end of what was made while "
			"traced, peak %s", live, peak);
		if (d->type != RF_DEVICE_CPU) {
			memory_format((int64_t)d->total_reserved, reserved,
				      sizeof(reserved));
			fprintf(f, "; the allocator's reserved segments %s",
				reserved);
		}
		fputc('\n', f);
	}
}

static void print_group(FILE *f, const struct trace *t,
			const struct mem_leak *g)
{
	char bytes[32];

	memory_format((int64_t)g->bytes, bytes, sizeof(bytes));
	fprintf(f, "%12s  %8llu  %-6s  ", bytes,
		(unsigned long long)g->blocks,
		memory_device_name(g->device_type));
	print_cell(f, name_or(t, g->op_name, "[no op]"), OP_W, 0);
	fputs("  ", f);
	print_cell(f, name_or(t, g->scope_name, "-"), SCOPE_W, 0);
	fprintf(f, "  %s\n", name_or(t, g->py_frame, "-"));
}

void print_memory(FILE *f, const struct trace *t, int top)
{
	struct mem_leak *g;
	long n;
	uint64_t bytes = 0, blocks = 0;

	if (!t->mem.on)
		return;
	n = memory_leaks(&t->mem, &g);
	if (n < 0) {
		fprintf(f, "rfbpf: out of memory grouping the live blocks\n");
		return;
	}
	for (long i = 0; i < n; i++) {
		bytes += g[i].bytes;
		blocks += g[i].blocks;
	}
	fputc('\n', f);
	print_devices(f, &t->mem);
	if (!n) {
		fprintf(f, "Live at the end: no block made while traced\n");
		free(g);
		return;
	}
	{
		char total[32];

		memory_format((int64_t)bytes, total, sizeof(total));
		fprintf(f, "Live at the end: %s in %llu blocks made while "
			"traced and not freed, by what made them%s:\n", total,
			(unsigned long long)blocks, t->py_resolver.gen ? "" :
			" (--python-stacks adds the Python line)");
	}
	fprintf(f, "%12s  %8s  %-6s  %-*s  %-*s  %s\n", "Bytes", "Blocks",
		"Device", OP_W, "Op", SCOPE_W, "Scope", "Python");
	for (long i = 0; i < n && (!top || i < top); i++)
		print_group(f, t, &g[i]);
	if (top && n > top)
		fprintf(f, "(%ld more groups not shown: --top 0 shows all)\n",
			n - top);
	free(g);
}
