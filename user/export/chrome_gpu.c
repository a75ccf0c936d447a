// SPDX-License-Identifier: BSD-2-Clause
/*
 * The GPU half of the Chrome trace, laid out as Kineto does so Perfetto and
 * chrome://tracing show it the way torch.profiler users know: a process per
 * device with a track per stream holding kernels, copies and sets, and a
 * flow ("cat":"ac2g") from the op that launched each one to it.
 */
#include <stdlib.h>
#include "chrome.h"
#include "json_writer.h"

/* Devices become processes with ids far from any real pid. */
#define GPU_PID_BASE 0x7fff0000u

static unsigned gpu_pid(uint32_t device_id)
{
	return GPU_PID_BASE + device_id;
}

static bool seen(const uint64_t *keys, size_t n, uint64_t key)
{
	for (size_t i = 0; i < n; i++)
		if (keys[i] == key)
			return true;
	return false;
}

/* Process and track names, once per device and per stream (a handful). */
static void write_gpu_metadata(FILE *f, const struct gpu *g)
{
	uint64_t *keys = calloc(2 * g->nr_acts + 1, sizeof(*keys));
	size_t n = 0;

	if (!keys)
		return;		/* the tracks just go unnamed */
	for (size_t i = 0; i < g->nr_acts; i++) {
		const struct gpu_activity *a = &g->acts[i];
		uint64_t dev = (uint64_t)a->device_id << 32 | UINT32_MAX;
		uint64_t stream = (uint64_t)a->device_id << 32 | a->stream_id;

		if (!seen(keys, n, dev)) {
			keys[n++] = dev;
			fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"process_name\","
				"\"pid\":%u,\"tid\":0,\"args\":{\"name\":"
				"\"GPU %u\"}},\n{\"ph\":\"M\",\"name\":"
				"\"process_sort_index\",\"pid\":%u,\"tid\":0,"
				"\"args\":{\"sort_index\":%u}}",
				gpu_pid(a->device_id), a->device_id,
				gpu_pid(a->device_id), 1000 + a->device_id);
		}
		if (!seen(keys, n, stream)) {
			keys[n++] = stream;
			fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\","
				"\"pid\":%u,\"tid\":%u,\"args\":{\"name\":"
				"\"stream %u\"}}", gpu_pid(a->device_id),
				a->stream_id, a->stream_id);
		}
	}
	free(keys);
}

static void write_activity(FILE *f, const struct trace *t,
			   const struct gpu_activity *a)
{
	int32_t op = gpu_activity_op(&t->gpu, a);
	const struct gpu_launch *l = a->launch >= 0 ?
				     &t->gpu.launches[a->launch] : NULL;

	fputs(",\n{\"ph\":\"X\",\"cat\":", f);
	json_string(f, gpu_kind_name(a->kind));
	fputs(",\"name\":", f);
	json_string(f, names_get(&t->names, a->name));
	fprintf(f, ",\"pid\":%u,\"tid\":%u,\"ts\":", gpu_pid(a->device_id),
		a->stream_id);
	json_us(f, a->start_ns);
	fputs(",\"dur\":", f);
	json_us(f, gpu_duration(a));
	/* As Kineto: the launching API call's id (a set's own record has
	 * the nested driver call's). */
	fprintf(f, ",\"args\":{\"correlation\":%u,\"device\":%u,\"context\":%u,"
		"\"stream\":%u", l ? l->correlation_id : a->correlation_id,
		a->device_id, a->context_id, a->stream_id);
	if (l && l->correlation_id != a->correlation_id)
		fprintf(f, ",\"record correlation\":%u", a->correlation_id);
	if (a->kind == RF_GPU_ACT_KERNEL)
		fprintf(f, ",\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d],"
			"\"registers per thread\":%u,\"shared memory\":%u",
			a->grid[0], a->grid[1], a->grid[2], a->block[0],
			a->block[1], a->block[2], a->registers_per_thread,
			a->static_shared_bytes + a->dynamic_shared_bytes);
	else
		fprintf(f, ",\"bytes\":%llu", (unsigned long long)a->bytes);
	if (a->name_truncated)
		fputs(",\"name_truncated\":true", f);
	if (a->graph_id)
		fprintf(f, ",\"graph id\":%llu",
			(unsigned long long)a->graph_id);
	if (l) {
		fputs(",\"launch api\":", f);
		json_string(f, names_get(&t->names, l->api_name));
		fprintf(f, ",\"launch tid\":%u", l->tid);
	}
	if (op >= 0) {
		fputs(",\"launched by\":", f);
		json_string(f, names_get(&t->names, t->ops[op].name));
	}
	fputs("}}", f);
}

/* Flow v1: "s" binds to the op's slice enclosing the launch time on its
 * thread, "f" with "bp":"e" to the kernel's slice. One flow per record (a
 * graph launch fans out), the correlation id in args as Kineto has it. */
static void write_flow(FILE *f, const struct trace *t,
		       const struct gpu_activity *a, size_t id)
{
	const struct gpu_launch *l = &t->gpu.launches[a->launch];

	fprintf(f, ",\n{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\","
		"\"id\":%zu,\"pid\":%u,\"tid\":%u,\"ts\":", id,
		trace_pid_of(t, l->tid), l->tid);
	json_us(f, l->ts_ns);
	fprintf(f, ",\"args\":{\"correlation\":%u}}", l->correlation_id);
	fprintf(f, ",\n{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"ac2g\","
		"\"name\":\"ac2g\",\"id\":%zu,\"pid\":%u,\"tid\":%u,\"ts\":",
		id, gpu_pid(a->device_id), a->stream_id);
	json_us(f, a->start_ns);
	fprintf(f, ",\"args\":{\"correlation\":%u}}", l->correlation_id);
}

void write_chrome_gpu_events(FILE *f, const struct trace *t)
{
	const struct gpu *g = &t->gpu;

	write_gpu_metadata(f, g);
	for (size_t i = 0; i < g->nr_acts; i++) {
		const struct gpu_activity *a = &g->acts[i];

		write_activity(f, t, a);
		if (gpu_activity_op(g, a) >= 0)
			write_flow(f, t, a, i + 1);
	}
}
