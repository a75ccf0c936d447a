// SPDX-License-Identifier: BSD-2-Clause
/*
 * The GPU half of the Chrome trace, laid out as Kineto does so Perfetto and
 * chrome://tracing show it the way torch.profiler users know: a process per
 * device with a track per stream holding kernels, copies and sets, and a
 * flow ("cat":"ac2g") from the op that launched each one to it.
 */
#include <stdlib.h>
#include "chrome_events.h"
#include "json_writer.h"

/* Devices become processes with ids far from any real pid. */
#define GPU_PID_BASE 0x7fff0000u

static unsigned gpu_pid(uint32_t device_id)
{
	return GPU_PID_BASE + device_id;
}

/* Process and track names, the first time a device or stream appears. */
static void name_tracks(struct chrome_writer *w, const struct gpu_activity *a)
{
	uint64_t dev = (uint64_t)a->device_id << 32 | UINT32_MAX;
	uint64_t stream = ((uint64_t)a->device_id << 32 | a->stream_id) + 1;
	FILE *f = w->f;

	if (!u64map_get(&w->tracks, dev) && u64map_put(&w->tracks, dev, 1)) {
		fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\","
			"\"pid\":%u,\"tid\":0,\"args\":{\"name\":\"GPU %u\"}},"
			"\n{\"ph\":\"M\",\"name\":\"process_sort_index\","
			"\"pid\":%u,\"tid\":0,\"args\":{\"sort_index\":%u}}",
			chrome_next(w), gpu_pid(a->device_id), a->device_id,
			gpu_pid(a->device_id), 1000 + a->device_id);
		w->events++;
	}
	if (!u64map_get(&w->tracks, stream) &&
	    u64map_put(&w->tracks, stream, 1))
		fprintf(f, "%s{\"ph\":\"M\",\"name\":\"thread_name\","
			"\"pid\":%u,\"tid\":%u,\"args\":{\"name\":"
			"\"stream %u\"}}", chrome_next(w),
			gpu_pid(a->device_id), a->stream_id, a->stream_id);
}

static void write_activity(struct chrome_writer *w, const struct trace *t,
			   const struct gpu_done *g)
{
	const struct gpu_activity *a = g->act;
	const struct gpu_launch *l = g->launch;
	FILE *f = w->f;

	fprintf(f, "%s{\"ph\":\"X\",\"cat\":", chrome_next(w));
	json_string(f, gpu_kind_name(a->kind));	fputs(",\"name\":", f);
	json_string(f, names_get(&t->names, a->name));
	fprintf(f, ",\"pid\":%u,\"tid\":%u,\"ts\":", gpu_pid(a->device_id),
		a->stream_id);
	chrome_ts(w, a->start_ns);
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
	if (l && l->depth) {
		fputs(",\"launched by\":", f);
		json_string(f, names_get(&t->names, l->op_name));
	}
	fputs("}}", f);
}

/* Flow v1: "s" binds to the op's slice enclosing the launch time on its
 * thread, "f" with "bp":"e" to the kernel's slice. One flow per record (a
 * graph launch fans out), the correlation id in args as Kineto has it. */
static void write_flow(struct chrome_writer *w, const struct gpu_done *g)
{
	const struct gpu_activity *a = g->act;
	const struct gpu_launch *l = g->launch;
	uint64_t id = ++w->flows;
	FILE *f = w->f;

	fprintf(f, "%s{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\","
		"\"id\":%llu,\"pid\":%u,\"tid\":%u,\"ts\":", chrome_next(w),
		(unsigned long long)id, l->pid, l->tid);
	chrome_ts(w, l->ts_ns);
	fprintf(f, ",\"args\":{\"correlation\":%u}}", l->correlation_id);
	fprintf(f, "%s{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"ac2g\","
		"\"name\":\"ac2g\",\"id\":%llu,\"pid\":%u,\"tid\":%u,\"ts\":",
		chrome_next(w), (unsigned long long)id, gpu_pid(a->device_id),
		a->stream_id);
	chrome_ts(w, a->start_ns);
	fprintf(f, ",\"args\":{\"correlation\":%u}}", l->correlation_id);
}

void chrome_write_gpu(struct chrome_writer *w, const struct trace *t,
		      const struct gpu_done *g)
{
	name_tracks(w, g->act);
	write_activity(w, t, g);
	if (g->launch && g->launch->depth)
		write_flow(w, g);
}
