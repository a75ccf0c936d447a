// SPDX-License-Identifier: BSD-2-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "demangle.h"
#include "gpu_activity.h"

#define NONE UINT32_MAX

void gpu_init(struct gpu *g)
{
	memset(g, 0, sizeof(*g));
	g->oldest = g->newest = g->free = NONE;
}

static uint32_t slot_of(const struct gpu *g, const struct gpu_launch *l)
{
	return (uint32_t)(l - g->slots);
}

/* Also on a zeroed struct that gpu_init never saw (a session whose setup
 * failed before its trace was made): no slots, nothing linked. */
void gpu_free(struct gpu *g)
{
	for (uint32_t i = g->oldest; g->slots && i != NONE;
	     i = g->slots[i].newer)
		free(g->slots[i].frames);
	free(g->slots);
	u64map_free(&g->pending);
	u64map_free(&g->demangled);
	u64map_free(&g->whole_names);
	u64map_free(&g->context_device);
	free(g->devices);
	memset(g, 0, sizeof(*g));
	g->oldest = g->newest = g->free = NONE;
}

/* A free slot, linked as the newest pending launch; the slots double
 * when none is free (pointers into them move). NONE on ENOMEM. */
static uint32_t take_slot(struct gpu *g)
{
	uint32_t i;

	if (g->free == NONE) {
		uint32_t cap = g->cap ? g->cap * 2 : 256;
		struct gpu_launch *slots;

		if (cap <= g->cap)
			return NONE;
		slots = realloc(g->slots, cap * sizeof(*slots));
		if (!slots)
			return NONE;
		for (uint32_t k = g->cap; k < cap; k++)
			slots[k].newer = k + 1 < cap ? k + 1 : NONE;
		g->free = g->cap;
		g->slots = slots;
		g->cap = cap;
	}
	i = g->free;
	g->free = g->slots[i].newer;
	memset(&g->slots[i], 0, sizeof(g->slots[i]));
	g->slots[i].older = g->newest;
	g->slots[i].newer = NONE;
	if (g->newest != NONE)
		g->slots[g->newest].newer = i;
	else
		g->oldest = i;
	g->newest = i;
	g->live++;
	return i;
}

/* Unlinks slot i and puts it on the free list. */
static void give_slot(struct gpu *g, uint32_t i)
{
	struct gpu_launch *l = &g->slots[i];

	if (l->older != NONE)
		g->slots[l->older].newer = l->newer;
	else
		g->oldest = l->newer;
	if (l->newer != NONE)
		g->slots[l->newer].older = l->older;
	else
		g->newest = l->older;
	free(l->frames);
	l->frames = l->frame_inputs = NULL;
	l->newer = g->free;
	g->free = i;
	g->live--;
}

/* Correlation ids start at 1 but 0 is the map's empty key: shift by one. */
static uint64_t pending_key(uint32_t correlation_id)
{
	return (uint64_t)correlation_id + 1;
}

static void fill_call(struct gpu_launch *l, struct names *names,
		      uint64_t ts_ns, const struct gpu_launch_site *site,
		      const struct rf_gpu_launch_event *e)
{
	size_t len = strnlen(e->api_name, sizeof(e->api_name));

	l->depth = site->depth;
	l->op_name = site->depth ? site->frames[site->depth - 1] : UINT32_MAX;
	l->op_id = site->depth ? site->op_id : -1;
	l->op_inputs = site->depth && site->frame_inputs ?
		       site->frame_inputs[site->depth - 1] : 0;
	l->ts_ns = ts_ns;
	/* An enter after the exit is no enter (a clock that went wrong). */
	l->enter_ns = e->enter_ns <= ts_ns ? e->enter_ns : 0;
	l->pid = site->pid;
	l->tid = site->tid;
	l->thread_name = site->thread_name;
	l->correlation_id = e->correlation_id;
	l->driver_correlation_id = e->driver_correlation_id;
	l->cbid = e->cbid;
	l->api_name = names_intern(names, e->api_name, len);
	l->domain = e->domain;
	l->flags = e->launch_flags;
	l->outside_ops = !site->depth && !e->hdr.rf_addr;
}

/* A call whose record never came: at detach, or evicted (too old, or
 * its correlation id taken by a later call). */
static void count_unmatched(struct gpu *g, const struct gpu_launch *l,
			    bool at_detach)
{
	if (l->flags & RF_GPU_LAUNCH_F_SYNC)
		g->counts.syncs_without_record++;
	else if (at_detach)
		g->counts.launches_unmatched_at_end++;
	else
		g->counts.launches_evicted_unmatched++;
}

/* Without sync records a sync waits for nothing: handed on from one
 * scratch launch, its
 * frames the caller's (valid during the call). */
static const struct gpu_launch *add_sync(struct gpu *g, struct names *names,
					 uint64_t ts_ns,
					 const struct gpu_launch_site *site,
					 const struct rf_gpu_launch_event *e)
{
	struct gpu_launch *l = &g->call;

	g->counts.syncs++;
	memset(l, 0, sizeof(*l));
	fill_call(l, names, ts_ns, site, e);
	l->frames = (uint32_t *)site->frames;
	l->frame_inputs = (uint32_t *)site->frame_inputs;
	l->older = l->newer = NONE;
	return l;
}

const struct gpu_launch *gpu_add_launch(struct gpu *g, struct names *names,
					uint64_t ts_ns,
					const struct gpu_launch_site *site,
					const struct rf_gpu_launch_event *e)
{
	bool sync = e->launch_flags & RF_GPU_LAUNCH_F_SYNC;
	uint32_t depth = site->depth, i;
	struct gpu_launch *l;
	uint64_t *prev;

	if (sync && !g->sync_records)
		return add_sync(g, names, ts_ns, site, e);
	if (sync)
		g->counts.syncs++;
	else
		g->counts.launches++;
	if ((i = take_slot(g)) == NONE)
		return NULL;
	l = &g->slots[i];
	fill_call(l, names, ts_ns, site, e);
	/* A sync's wait is one record. */
	if (sync)
		l->flags |= RF_GPU_LAUNCH_F_ONE_RECORD;
	if (depth) {
		/* The frames, then (--shapes) their input sets. */
		l->frames = malloc((site->frame_inputs ? 2 : 1) * depth *
				   sizeof(*l->frames));
		if (!l->frames) {
			give_slot(g, i);
			return NULL;
		}
		memcpy(l->frames, site->frames, depth * sizeof(*l->frames));
		if (site->frame_inputs) {
			l->frame_inputs = l->frames + depth;
			memcpy(l->frame_inputs, site->frame_inputs,
			       depth * sizeof(*l->frames));
		}
	}
	if (sync)
		;	/* where syncs are, the GPU wait says */
	else if (l->outside_ops)
		g->counts.launches_outside_ops++;
	else if (!depth)
		g->counts.launches_op_unknown++;
	/* A reused correlation id replaces an older launch still waiting. */
	prev = u64map_get(&g->pending, pending_key(e->correlation_id));
	if (prev && !g->slots[*prev].activities)
		count_unmatched(g, &g->slots[*prev], false);
	/* Records of copies and sets carry the nested driver call's id:
	 * the launch waits under both. */
	if (!u64map_put(&g->pending, pending_key(e->correlation_id), i)) {
		give_slot(g, i);
		return NULL;
	}
	if (e->driver_correlation_id &&
	    !u64map_put(&g->pending, pending_key(e->driver_correlation_id),
			i)) {
		/* The slot is not taken: its first entry must not stay, or a
		 * record would join whatever launch takes the slot next. */
		u64map_del(&g->pending, pending_key(e->correlation_id));
		give_slot(g, i);
		return NULL;
	}
	return l;
}

const char *gpu_kind_name(uint32_t kind)
{
	switch (kind) {
	case RF_GPU_ACT_KERNEL: return "kernel";
	case RF_GPU_ACT_MEMCPY: return "gpu_memcpy";
	case RF_GPU_ACT_MEMSET: return "gpu_memset";
	case RF_GPU_ACT_SYNC: return "cuda_sync";
	default: return "gpu_activity";
	}
}

const char *gpu_sync_type_name(uint32_t sync_type)
{
	/* Kineto's names for CUpti_ActivitySynchronizationType. */
	static const char *const names[] = {
		"Unknown Sync", "Event Sync", "Stream Wait Event",
		"Stream Sync", "Context Sync",
	};

	return sync_type < sizeof(names) / sizeof(names[0]) ?
	       names[sync_type] : "Unknown Sync";
}

const char *gpu_copy_kind_name(uint8_t copy_kind)
{
	/* CUPTI_ACTIVITY_MEMCPY_KIND_HTOD = 1 ... _PTOP = 10. */
	static const char *const names[] = {
		NULL, "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD",
		"DtoA", "DtoD", "HtoH", "PtoP",
	};

	return copy_kind < sizeof(names) / sizeof(names[0]) &&
	       names[copy_kind] ? names[copy_kind] : "<unknown>";
}

const char *gpu_memory_kind_name(uint8_t memory_kind)
{
	/* CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN = 0 ... _MANAGED_STATIC = 7. */
	static const char *const names[] = {
		"Unknown", "Pageable", "Pinned", "Device", "Array", "Managed",
		"Device Static", "Managed Static",
	};

	return memory_kind < sizeof(names) / sizeof(names[0]) ?
	       names[memory_kind] : "Unrecognized";
}

/* Longest kernel name read whole from the job (C++ template kernels
 * reach a few KiB; past this the name stays cut). */
#define GPU_WHOLE_NAME_MAX (64u << 10)

/* Is the whole name id the one whose first bytes the event carried? A
 * module unloaded and another loaded could put another name at the same
 * address. */
static bool whole_name_fits(const struct names *names, uint32_t id,
			    const struct rf_gpu_activity *in)
{
	const char *s = names_get(names, id);

	return strlen(s) == in->name_len &&
	       !strncmp(s, in->name, RF_GPU_NAME_MAX - 1);
}

/* A kernel name the event had to cut, read whole from where CUPTI keeps
 * it in the job, once per address: its id, or NONE (no reader, no
 * address, too long, unreadable, or not the name the event began). */
static uint32_t whole_name(struct gpu *g, struct names *names,
			   uint32_t pid, const struct rf_gpu_activity *in)
{
	uint64_t *known = u64map_get(&g->whole_names, in->name_addr);
	uint32_t id = NONE;
	char *buf;

	if (known && whole_name_fits(names, (uint32_t)*known, in))
		return (uint32_t)*known;
	if (!g->read_name || !in->name_addr ||
	    in->name_len > GPU_WHOLE_NAME_MAX)
		return NONE;
	buf = malloc(in->name_len + 1);
	if (!buf)
		return NONE;
	if (g->read_name(g->read_ctx, pid, in->name_addr, buf, in->name_len) &&
	    !memchr(buf, 0, in->name_len)) {
		buf[in->name_len] = 0;
		id = names_intern(names, buf, in->name_len);
	}
	free(buf);
	if (id == NONE || !whole_name_fits(names, id, in))
		return NONE;
	u64map_put(&g->whole_names, in->name_addr, id); /* else read again */
	return id;
}

/* A kernel's name as shown: demangled once per distinct name (the map
 * remembers the answer, failures too). *mangled is the name CUPTI gave
 * when it differs. */
static uint32_t kernel_name(struct gpu *g, struct names *names,
			    uint32_t id, uint32_t *mangled)
{
	uint32_t shown;
	uint64_t *known;
	char *d;

	*mangled = UINT32_MAX;
	if (id == UINT32_MAX)
		return id;
	known = u64map_get(&g->demangled, (uint64_t)id + 1);
	if (known) {
		shown = (uint32_t)*known;
	} else {
		d = cxx_demangle(names_get(names, id));
		shown = d ? names_intern(names, d, strlen(d)) : id;
		free(d);
		if (shown == UINT32_MAX)
			shown = id;
		/* Not remembered on ENOMEM: it is tried again next time. */
		u64map_put(&g->demangled, (uint64_t)id + 1, shown);
	}
	if (shown != id)
		*mangled = id;
	return shown;
}

/* Copies and sets have no name of their own: label them as Kineto does.
 * A kernel's name cut in the event is read whole when it can be (*cut
 * then cleared). */
static uint32_t activity_name(struct gpu *g, struct names *names,
			      uint32_t pid, const struct rf_gpu_activity *in,
			      bool *cut, uint32_t *mangled)
{
	char label[96];

	*mangled = UINT32_MAX;
	if (in->kind == RF_GPU_ACT_KERNEL) {
		uint32_t id = *cut ? whole_name(g, names, pid, in) : NONE;

		if (id != NONE) {
			*cut = false;
			g->counts.names_read_whole++;
		} else {
			id = names_intern(names, in->name,
					  strnlen(in->name, sizeof(in->name)));
		}
		return kernel_name(g, names, id, mangled);
	}
	if (in->kind == RF_GPU_ACT_MEMCPY)
		snprintf(label, sizeof(label), "Memcpy %s (%s -> %s)",
			 gpu_copy_kind_name(in->copy_kind),
			 gpu_memory_kind_name(in->src_kind),
			 gpu_memory_kind_name(in->dst_kind));
	else if (in->kind == RF_GPU_ACT_MEMSET)
		snprintf(label, sizeof(label), "Memset (%s)",
			 gpu_memory_kind_name(in->dst_kind));
	else if (in->kind == RF_GPU_ACT_SYNC)
		snprintf(label, sizeof(label), "%s",
			 gpu_sync_type_name(in->sync_type));
	else
		snprintf(label, sizeof(label), "GPU activity %u", in->kind);
	return names_intern(names, label, strlen(label));
}

/* No machine has more; a bigger ordinal is a bad report. */
#define GPU_DEVICES_MAX 64

bool gpu_set_device(struct gpu *g, const struct rf_gpu_device *d)
{
	uint32_t id = d->device_id;

	if (id >= GPU_DEVICES_MAX)
		return true;
	if (id >= g->nr_devices) {
		struct rf_gpu_device *more = realloc(g->devices, (id + 1) *
						     sizeof(*more));

		if (!more)
			return false;
		memset(more + g->nr_devices, 0,
		       (id + 1 - g->nr_devices) * sizeof(*more));
		g->devices = more;
		g->nr_devices = id + 1;
	}
	g->devices[id] = *d;
	g->devices[id].name[sizeof(d->name) - 1] = 0;
	return true;
}

const struct rf_gpu_device *gpu_device(const struct gpu *g, uint32_t id)
{
	return id < g->nr_devices && g->devices[id].size ? &g->devices[id] :
	       NULL;
}

/* A sync record names no device: it is on its context's, learnt from
 * the records that name both (device 0 until one has). */
static void context_device(struct gpu *g, struct gpu_activity *a)
{
	uint64_t key = (uint64_t)a->context_id + 1, *dev;

	if (a->kind != RF_GPU_ACT_SYNC) {
		dev = u64map_get(&g->context_device, key);
		if (!dev || *dev != (uint64_t)a->device_id + 1)
			u64map_put(&g->context_device, key,
				   (uint64_t)a->device_id + 1);
		return;
	}
	g->counts.sync_records++;
	dev = u64map_get(&g->context_device, key);
	a->device_id = dev ? (uint32_t)(*dev - 1) : 0;
}

bool gpu_add_activity(struct gpu *g, struct names *names,
		      const struct rf_gpu_activity_event *e,
		      struct gpu_activity *a, const struct gpu_launch **launch)
{
	const struct rf_gpu_activity *in = &e->act;
	bool cut = e->hdr.flags & RF_F_NAME_TRUNCATED;
	uint64_t *seq;

	g->counts.activities++;
	if (e->hdr.flags & RF_F_NAME_FAULT)
		g->counts.name_faults++;
	memset(a, 0, sizeof(*a));
	a->start_ns = in->start_ns;
	a->end_ns = in->end_ns;
	a->kind = in->kind;
	a->correlation_id = in->correlation_id;
	a->device_id = in->device_id;
	a->context_id = in->context_id;
	a->stream_id = in->stream_id;
	a->name = activity_name(g, names, e->hdr.pid, in, &cut,
				&a->mangled_name);
	if (cut)
		g->counts.names_truncated++;
	memcpy(a->grid, in->grid, sizeof(a->grid));
	memcpy(a->block, in->block, sizeof(a->block));
	a->registers_per_thread = in->registers_per_thread;
	a->static_shared_bytes = in->static_shared_bytes;
	a->dynamic_shared_bytes = in->dynamic_shared_bytes;
	a->bytes = in->bytes;
	a->copy_kind = in->copy_kind;
	a->src_kind = in->src_kind;
	a->dst_kind = in->dst_kind;
	a->name_truncated = cut;
	a->graph_id = in->graph_id;
	a->graph_node_id = in->graph_node_id;
	a->sync_type = in->sync_type;
	a->cuda_event_id = in->cuda_event_id;
	context_device(g, a);
	if (a->kind == RF_GPU_ACT_KERNEL && gpu_device(g, a->device_id))
		a->occupancy_known = gpu_estimate_occupancy(
			gpu_device(g, a->device_id), a->grid, a->block,
			a->registers_per_thread,
			a->static_shared_bytes + a->dynamic_shared_bytes,
			&a->occupancy);
	seq = u64map_get(&g->pending, pending_key(in->correlation_id));
	*launch = seq ? &g->slots[*seq] : NULL;
	if (seq)
		g->slots[*seq].activities++;
	else
		g->counts.activities_unmatched++;
	return a->name != UINT32_MAX;
}

/* Drops the launch in slot i, with its pending entries if still its own
 * (a later launch may have taken its id); counted if it never had a
 * record. */
static void drop_launch(struct gpu *g, uint32_t i, bool at_detach)
{
	struct gpu_launch *l = &g->slots[i];
	uint64_t key = pending_key(l->correlation_id);
	uint64_t *seq = u64map_get(&g->pending, key);

	if (seq && *seq == i) {
		if (!l->activities)
			count_unmatched(g, l, at_detach);
		u64map_del(&g->pending, key);
	}
	key = pending_key(l->driver_correlation_id);
	seq = l->driver_correlation_id ? u64map_get(&g->pending, key) : NULL;
	if (seq && *seq == i)
		u64map_del(&g->pending, key);
	give_slot(g, i);
}

void gpu_release_if_complete(struct gpu *g, const struct gpu_launch *l)
{
	if (!l || l == &g->call)
		return;		/* none, or a sync */
	if ((l->flags & RF_GPU_LAUNCH_F_ONE_RECORD) && l->activities >= 1)
		drop_launch(g, slot_of(g, l), false);
}

void gpu_evict(struct gpu *g, uint64_t now_ns)
{
	if (now_ns < GPU_PENDING_NS)
		return;
	while (g->oldest != NONE &&
	       g->slots[g->oldest].ts_ns < now_ns - GPU_PENDING_NS)
		drop_launch(g, g->oldest, false);
}

void gpu_detach(struct gpu *g)
{
	while (g->oldest != NONE)
		drop_launch(g, g->oldest, true);
	u64map_free(&g->pending);
}

void gpu_format_losses(const struct gpu_counts *c, uint64_t bad_records,
		       char *buf, size_t len)
{
	snprintf(buf, len,
		 "GPU: %llu launches, %llu records, %llu syncs (%llu sync "
		 "records, syncs with no record %llu); records with "
		 "no launch %llu; launches with no record %llu (evicted %llu, "
		 "at detach %llu); launches outside any op %llu, in an "
		 "unrecorded op %llu; kernel names truncated %llu, "
		 "unreadable %llu; bad records %llu; agent: dropped by "
		 "CUPTI %llu, untraced %llu, errors %llu, records with no "
		 "time %llu, buffers cut short %llu, buffers refused %llu, "
		 "failed launches %llu, launches captured into graphs %llu, "
		 "buffers left to another tool %llu%s%s",
		 (unsigned long long)c->launches,
		 (unsigned long long)c->activities,
		 (unsigned long long)c->syncs,
		 (unsigned long long)c->sync_records,
		 (unsigned long long)c->syncs_without_record,
		 (unsigned long long)c->activities_unmatched,
		 (unsigned long long)(c->launches_evicted_unmatched +
				      c->launches_unmatched_at_end),
		 (unsigned long long)c->launches_evicted_unmatched,
		 (unsigned long long)c->launches_unmatched_at_end,
		 (unsigned long long)c->launches_outside_ops,
		 (unsigned long long)c->launches_op_unknown,
		 (unsigned long long)c->names_truncated,
		 (unsigned long long)c->name_faults,
		 (unsigned long long)bad_records,
		 (unsigned long long)c->agent_dropped,
		 (unsigned long long)c->agent_untraced,
		 (unsigned long long)c->agent_errors,
		 (unsigned long long)c->agent_no_time,
		 (unsigned long long)c->agent_buffers_cut,
		 (unsigned long long)c->agent_buffers_refused,
		 (unsigned long long)c->agent_launches_failed,
		 (unsigned long long)c->agent_launches_captured,
		 (unsigned long long)c->agent_buffers_left,
		 c->agent_counters_stale ? " (as last read before the "
		 "target exited)" : "",
		 c->final_flush_missed ? "; THE AGENT'S FINAL FLUSH WAS "
		 "MISSED" : "");
}

/* CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (cupti_result.h): the
 * loader does not link CUPTI, so the one code it explains is named here. */
#define CUPTI_MULTIPLE_SUBSCRIBERS 39
/* CUPTI_ERROR_NOT_INITIALIZED: what the agent reports when it has no
 * libcupti it can use (none found, or a version it does not read). */
#define CUPTI_NOT_INITIALIZED 15

const char *gpu_note_cupti_taken(struct gpu_counts *c, unsigned which,
				 int tid)
{
	static const char *const names[] = RF_CUPTI_WATCHED;
	const char *fn = which < RF_CUPTI_WATCHED_NR ? names[which] : "?";

	if (c->cupti_taken)
		return NULL;
	c->cupti_taken = true;
	c->cupti_taken_tid = tid;
	snprintf(c->cupti_taken_by, sizeof(c->cupti_taken_by), "%s", fn);
	return fn;
}

const char *gpu_cupti_state(const struct gpu_counts *c)
{
	if (c->cupti_taken || c->cupti_yielded)
		return "taken by another tool";
	if (!c->cupti_known)
		return "unknown";
	if (!c->cupti_result)
		return "subscribed";
	return c->cupti_result == CUPTI_MULTIPLE_SUBSCRIBERS ?
	       "held by another tool" : "failed";
}

static const char *clock_name(uint32_t source)
{
	switch (source) {
	case 1: return "CLOCK_MONOTONIC through CUPTI's timestamp callback";
	case 2: return "CUPTI's clock, offset to CLOCK_MONOTONIC";
	default: return "unconverted (no clock)";
	}
}

/* "CUPTI 13 (API 130001)", "CUPTI 12 (API 22)", or "" when unknown. */
static void cupti_name(uint32_t version, char *buf, size_t len)
{
	unsigned major = version >= 130000 ? version / 10000 :
			 version >= 19 && version <= 28 ? 12 : 0;

	if (!version)
		snprintf(buf, len, "CUPTI");
	else if (major)
		snprintf(buf, len, "CUPTI %u (API %u)", major, version);
	else
		snprintf(buf, len, "CUPTI (API %u)", version);
}

void gpu_format_cupti(const struct gpu_counts *c, char *buf, size_t len)
{
	char name[48];

	cupti_name(c->cupti_version, name, sizeof(name));
	if (c->cupti_taken)
		snprintf(buf, len, "%s: subscribed, then another tool started "
			 "using it (thread %d called %s; torch.profiler or "
			 "Nsight): GPU activity stops there, CUPTI left to it%s",
			 name, c->cupti_taken_tid, c->cupti_taken_by,
			 c->agent_yields_in_call ? " inside that call, the "
			 "agent's records flushed first" : "");
	else if (c->cupti_yielded)
		snprintf(buf, len, "%s: left to another tool that started "
			 "using it during an earlier rfbpf run: no GPU "
			 "activity recorded", name);
	else if (!c->cupti_known)
		snprintf(buf, len, "CUPTI: unknown (the agent did not answer "
			 "the lease)");
	else if (!c->cupti_result)
		snprintf(buf, len, "%s: subscribed; GPU times in %s", name,
			 clock_name(c->clock_source));
	else if (c->cupti_result == CUPTI_MULTIPLE_SUBSCRIBERS)
		snprintf(buf, len, "%s: held by %s (torch.profiler and "
			 "Nsight keep it): no GPU activity recorded, and "
			 "theirs left untouched", name,
			 c->cupti_holder[0] ? c->cupti_holder :
			 "another tool");
	else if (c->cupti_result == CUPTI_NOT_INITIALIZED && c->cupti_version)
		snprintf(buf, len, "%s: not one the agent reads (CUDA 12 and "
			 "13 only): no GPU activity recorded", name);
	else if (c->cupti_result == CUPTI_NOT_INITIALIZED)
		snprintf(buf, len, "CUPTI: the agent found no usable libcupti "
			 "in the job (the job's stderr says why; "
			 "RFBPF_CUPTI_LIB names one): no GPU activity "
			 "recorded");
	else
		snprintf(buf, len, "%s: the agent could not subscribe "
			 "(CUptiResult %u): no GPU activity recorded", name,
			 c->cupti_result);
}
