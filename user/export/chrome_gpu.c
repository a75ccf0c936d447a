// SPDX-License-Identifier: BSD-2-Clause
/*
 * The GPU half of the Chrome trace, laid out as Kineto (torch.profiler)
 * writes it, so that Perfetto, chrome://tracing and Holistic Trace
 * Analysis read it as they read Kineto's:
 *
 *   - every CUDA API call the agent reported (launches, copies, sets,
 *     graph launches, synchronize calls) is a slice on the thread that
 *     made it, in its process: "cat":"cuda_runtime" ("cuda_driver" for a
 *     driver call made directly, as Triton's launches are), from the
 *     call's enter to its exit, with its correlation id and cbid;
 *   - a process per device whose pid is the device ordinal ("pid":0 is
 *     GPU 0, as Kineto has it; no traced process has a pid that small,
 *     CPU processes keep their real pids), named "GPU 0", sorted after
 *     the CPU processes, with a track per stream ("stream 7") holding
 *     kernels ("kernel"), copies ("gpu_memcpy") and sets ("gpu_memset"),
 *     and the waits of sync calls as CUPTI timed them ("cuda_sync",
 *     "Stream Sync", "Event Sync"...; a context sync on a track of its
 *     own, tid -1);
 *   - a flow ("cat":"ac2g") from each launch's API slice (its "s" at the
 *     call's enter, on the calling thread, so it binds to that slice) to
 *     each kernel, copy or set the launch made, and from a sync call's
 *     slice to its wait.
 *
 * The op that made a call is named by "External id" on the call and on
 * what it launched: the op's id + 1, the number the op's own slice
 * carries (chrome.c), so tools join op, call and kernel as they do in
 * Kineto's traces. Calls outside any recorded op have none.
 */
#include <math.h>
#include <stdlib.h>
#include "chrome_events.h"
#include "json_writer.h"

/* Kineto's kExceedMaxPid: GPU processes sort after every CPU process. */
#define GPU_SORT_INDEX_BASE 5000000u

static unsigned gpu_pid(uint32_t device_id)
{
	return device_id;
}

/* A record's track in its device: its stream; -1 for a context sync,
 * which has none (as Kineto draws it). */
static long long gpu_tid(const struct gpu_activity *a)
{
	return a->stream_id == RF_GPU_SYNC_NONE ? -1 : (long long)a->stream_id;
}

/* Process and track names, the first time a device or stream appears. */
static void name_tracks(struct chrome_writer *w, const struct gpu_activity *a)
{
	uint64_t dev = (uint64_t)a->device_id << 32 | UINT32_MAX;
	uint64_t stream = ((uint64_t)a->device_id << 32 | a->stream_id) + 1;
	unsigned pid = gpu_pid(a->device_id);
	FILE *f = w->f;

	if (!u64map_get(&w->tracks, dev) && u64map_put(&w->tracks, dev, 1)) {
		fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\","
			"\"pid\":%u,\"tid\":0,\"args\":{\"name\":\"GPU %u\"}}",
			chrome_next(w), pid, a->device_id);
		fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_labels\","
			"\"pid\":%u,\"tid\":0,\"args\":{\"labels\":"
			"\"GPU %u\"}}", chrome_next(w), pid, a->device_id);
		fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_sort_index\","
			"\"pid\":%u,\"tid\":0,\"args\":{\"sort_index\":%u}}",
			chrome_next(w), pid,
			GPU_SORT_INDEX_BASE + a->device_id);
	}
	if (!u64map_get(&w->tracks, stream) &&
	    u64map_put(&w->tracks, stream, 1)) {
		char name[32];

		if (gpu_tid(a) < 0)
			snprintf(name, sizeof(name), "context syncs");
		else
			snprintf(name, sizeof(name), "stream %u", a->stream_id);
		fprintf(f, "%s{\"ph\":\"M\",\"name\":\"thread_name\","
			"\"pid\":%u,\"tid\":%lld,\"args\":{\"name\":"
			"\"%s\"}}", chrome_next(w), pid, gpu_tid(a), name);
		fprintf(f, "%s{\"ph\":\"M\",\"name\":\"thread_sort_index\","
			"\"pid\":%u,\"tid\":%lld,\"args\":{\"sort_index\":"
			"%lld}}", chrome_next(w), pid, gpu_tid(a), gpu_tid(a));
	}
}

/* Where a call's slice (and its flows) start: its enter, or its exit
 * when the agent could not say (an older agent, or a lease that began
 * during the call). */
static uint64_t call_start(const struct gpu_launch *l)
{
	return l->enter_ns ? l->enter_ns : l->ts_ns;
}

static void external_id(FILE *f, const struct gpu_launch *l)
{
	if (l && l->op_id >= 0)
		fprintf(f, "\"External id\":%lld,", (long long)l->op_id + 1);
}

void chrome_write_gpu_api(struct chrome_writer *w, const struct trace *t,
			  const struct gpu_launch *l)
{
	FILE *f = w->f;

	fprintf(f, "%s{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", chrome_next(w),
		l->domain == RF_GPU_API_DRIVER ? "cuda_driver" :
		"cuda_runtime");
	json_string(f, names_get(&t->names, l->api_name));
	fprintf(f, ",\"pid\":%u,\"tid\":%u,\"ts\":", l->pid, l->tid);
	chrome_ts(w, call_start(l));
	fputs(",\"dur\":", f);
	json_us(f, l->ts_ns - call_start(l));
	fputs(",\"args\":{", f);
	external_id(f, l);
	fprintf(f, "\"cbid\":%u,\"correlation\":%u", l->cbid,
		l->correlation_id);
	if (!l->enter_ns)
		fputs(",\"enter_unknown\":true", f);
	fputs("}}", f);
}

/* Kineto's "memory bandwidth (GB/s)": bytes per ns. */
static void bandwidth(FILE *f, const struct gpu_activity *a)
{
	uint64_t ns = gpu_duration(a);

	if (ns)
		fprintf(f, ",\"memory bandwidth (GB/s)\":%.6g",
			(double)a->bytes / (double)ns);
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
	fprintf(f, ",\"pid\":%u,\"tid\":%lld,\"ts\":", gpu_pid(a->device_id),
		gpu_tid(a));
	chrome_ts(w, a->start_ns);
	fputs(",\"dur\":", f);
	json_us(f, gpu_duration(a));
	fputs(",\"args\":{", f);
	external_id(f, l);
	/* As Kineto: the launching API call's id (a set's own record has
	 * the nested driver call's). */
	fprintf(f, "\"correlation\":%u,\"device\":%u,\"context\":%u,"
		"\"stream\":%lld", l ? l->correlation_id : a->correlation_id,
		a->device_id, a->context_id, gpu_tid(a));
	if (l && l->correlation_id != a->correlation_id)
		fprintf(f, ",\"record correlation\":%u", a->correlation_id);
	if (a->kind == RF_GPU_ACT_SYNC) {
		if (a->cuda_event_id != RF_GPU_SYNC_NONE)
			fprintf(f, ",\"cuda_event_id\":%u", a->cuda_event_id);
	} else if (a->kind == RF_GPU_ACT_KERNEL) {
		fprintf(f, ",\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d],"
			"\"registers per thread\":%u,\"shared memory\":%u",
			a->grid[0], a->grid[1], a->grid[2], a->block[0],
			a->block[1], a->block[2], a->registers_per_thread,
			a->static_shared_bytes + a->dynamic_shared_bytes);
		if (a->occupancy_known)
			fprintf(f, ",\"blocks per SM\":%.6g,\"warps per SM\":"
				"%.6g,\"est. achieved occupancy %%\":%ld",
				a->occupancy.blocks_per_sm,
				a->occupancy.warps_per_sm,
				lround(a->occupancy.percent));
	} else {
		fprintf(f, ",\"bytes\":%llu", (unsigned long long)a->bytes);
		bandwidth(f, a);
	}
	if (a->mangled_name != UINT32_MAX) {
		fputs(",\"mangled name\":", f);
		json_string(f, names_get(&t->names, a->mangled_name));
	}
	if (a->name_truncated)
		fputs(",\"name_truncated\":true", f);
	if (a->graph_id)
		fprintf(f, ",\"graph id\":%llu,\"graph node id\":%llu",
			(unsigned long long)a->graph_id,
			(unsigned long long)a->graph_node_id);
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

/* Flow v1: "s" binds to the slice enclosing its time on its thread, the
 * launch's API slice (written when the call came, before this), "f" with
 * "bp":"e" to the kernel's slice. One flow per record (a graph launch
 * fans out), the correlation id in args as Kineto has it. */
static void write_flow(struct chrome_writer *w, const struct gpu_done *g)
{
	const struct gpu_activity *a = g->act;
	const struct gpu_launch *l = g->launch;
	uint64_t id = ++w->flows;
	FILE *f = w->f;

	fprintf(f, "%s{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\","
		"\"id\":%llu,\"pid\":%u,\"tid\":%u,\"ts\":", chrome_next(w),
		(unsigned long long)id, l->pid, l->tid);
	chrome_ts(w, call_start(l));
	fprintf(f, ",\"args\":{\"correlation\":%u}}", l->correlation_id);
	fprintf(f, "%s{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"ac2g\","
		"\"name\":\"ac2g\",\"id\":%llu,\"pid\":%u,\"tid\":%lld,"
		"\"ts\":", chrome_next(w), (unsigned long long)id,
		gpu_pid(a->device_id), gpu_tid(a));
	chrome_ts(w, a->start_ns);
	fprintf(f, ",\"args\":{\"correlation\":%u}}", l->correlation_id);
}

/* Kineto's top-level "deviceProperties": one entry per GPU the agent
 * described (HTA reads them). */
void chrome_write_devices(FILE *f, const struct trace *t)
{
	const char *sep = "";

	if (!t->gpu.nr_devices)
		return;
	fputs(",\"deviceProperties\":[", f);
	for (uint32_t i = 0; i < t->gpu.nr_devices; i++) {
		const struct rf_gpu_device *d = gpu_device(&t->gpu, i);

		if (!d)
			continue;
		fprintf(f, "%s{\"id\":%u,\"name\":", sep, d->device_id);
		json_string(f, d->name);
		fprintf(f, ",\"totalGlobalMem\":%llu,\"computeMajor\":%u,"
			"\"computeMinor\":%u,\"maxThreadsPerBlock\":%u,"
			"\"maxThreadsPerMultiprocessor\":%u,"
			"\"regsPerBlock\":%u,\"regsPerMultiprocessor\":%u,"
			"\"warpSize\":%u,\"sharedMemPerBlock\":%u,"
			"\"sharedMemPerMultiprocessor\":%u,\"numSms\":%u,"
			"\"sharedMemPerBlockOptin\":%u}",
			(unsigned long long)d->total_memory, d->cc_major,
			d->cc_minor, d->max_threads_per_block,
			d->max_threads_per_sm, d->regs_per_block,
			d->regs_per_sm, d->warp_size, d->shared_per_block,
			d->shared_per_sm, d->sm_count,
			d->shared_per_block_optin);
		sep = ",";
	}
	fputs("]", f);
}

void chrome_write_gpu(struct chrome_writer *w, const struct trace *t,
		      const struct gpu_done *g)
{
	name_tracks(w, g->act);
	write_activity(w, t, g);
	if (g->launch)
		write_flow(w, g);
}
