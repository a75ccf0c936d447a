// SPDX-License-Identifier: BSD-2-Clause
/*
 * --memory in the Chrome trace, as Kineto writes profile_memory=True:
 * each allocation and free is a "[memory]" instant on the thread that
 * made it (Addr, Bytes, Total Allocated, Total Reserved, Device Type,
 * Device Id), so Perfetto, HTA and TensorBoard's memory view read it; a
 * counter track of each device's live bytes draws the timeline (and of a
 * GPU's reserved bytes, the caching allocator's segments). At the
 * end, otherData gets the blocks still live (the leak view).
 */
#include <stdlib.h>
#include "chrome_events.h"

void chrome_write_memory(struct chrome_writer *w, const struct trace *t,
			 const struct mem_change *c)
{
	FILE *f = w->f;

	fprintf(f, "%s{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"s\":\"t\","
		"\"name\":\"[memory]\",\"pid\":%u,\"tid\":%u,\"ts\":",
		chrome_next(w), c->pid, c->tid);
	chrome_ts(w, c->ts_ns);
	fprintf(f, ",\"args\":{\"Total Reserved\":%llu,\"Total Allocated\":"
		"%llu,\"Bytes\":%lld,\"Addr\":%llu,\"Device Type\":%d,"
		"\"Device Id\":%d", (unsigned long long)c->total_reserved,
		(unsigned long long)c->total_allocated, (long long)c->bytes,
		(unsigned long long)c->addr, c->device_type, c->device_index);
	if (c->op_name != UINT32_MAX) {
		fputs(",\"op\":", f);
		json_string(f, names_get(&t->names, c->op_name));
		fprintf(f, ",\"External id\":%lld", (long long)c->op_id + 1);
	}
	fputs("}}", f);
	/* The live-bytes counter: one track per device, in the process. */
	fprintf(f, "%s{\"ph\":\"C\",\"cat\":\"memory\",\"name\":\"Live bytes "
		"(%s", chrome_next(w), memory_device_name(c->device_type));
	if (c->device_index >= 0)
		fprintf(f, ":%d", c->device_index);
	fprintf(f, ")\",\"pid\":%u,\"ts\":", c->pid);
	chrome_ts(w, c->ts_ns);
	fprintf(f, ",\"args\":{\"bytes\":%llu}}", (unsigned long long)c->live);
	if (c->device_type == RF_DEVICE_CPU)
		return;
	/* A device allocator's segments: what it holds from the driver. */
	fprintf(f, "%s{\"ph\":\"C\",\"cat\":\"memory\",\"name\":\"Reserved "
		"bytes (%s:%d)\",\"pid\":%u,\"ts\":", chrome_next(w),
		memory_device_name(c->device_type), c->device_index, c->pid);
	chrome_ts(w, c->ts_ns);
	fprintf(f, ",\"args\":{\"bytes\":%llu}}",
		(unsigned long long)c->total_reserved);
}

void chrome_write_live_blocks(FILE *f, const struct trace *t)
{
	struct mem_leak *g;
	long n;

	if (!t->mem.on || (n = memory_leaks(&t->mem, &g)) < 0)
		return;
	fputs(",\"rfbpf_live_blocks\":[", f);
	for (long i = 0; i < n; i++) {
		const struct mem_leak *l = &g[i];

		fprintf(f, "%s{\"bytes\":%llu,\"blocks\":%llu,\"device\":\"%s\"",
			i ? ",\n" : "\n", (unsigned long long)l->bytes,
			(unsigned long long)l->blocks,
			memory_device_name(l->device_type));
		if (l->op_name != UINT32_MAX) {
			fputs(",\"op\":", f);
			json_string(f, names_get(&t->names, l->op_name));
		}
		if (l->scope_name != UINT32_MAX) {
			fputs(",\"scope\":", f);
			json_string(f, names_get(&t->names, l->scope_name));
		}
		if (l->py_frame != UINT32_MAX) {
			fputs(",\"python\":", f);
			json_string(f, names_get(&t->names, l->py_frame));
		}
		fputc('}', f);
	}
	fputc(']', f);
	free(g);
}
