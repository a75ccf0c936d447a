// SPDX-License-Identifier: BSD-2-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpu_activity.h"

void gpu_init(struct gpu *g)
{
	memset(g, 0, sizeof(*g));
}

static struct gpu_launch *at(const struct gpu *g, uint64_t seq)
{
	return &g->ring[seq & (g->cap - 1)];
}

void gpu_free(struct gpu *g)
{
	for (uint64_t s = g->head; s < g->tail; s++)
		free(at(g, s)->frames);
	free(g->ring);
	u64map_free(&g->pending);
	memset(g, 0, sizeof(*g));
}

/* Room for one more launch: the ring doubles, keeping sequence numbers. */
static bool make_room(struct gpu *g)
{
	size_t cap = g->cap ? g->cap * 2 : 256;
	struct gpu_launch *ring;

	if (gpu_pending(g) < g->cap)
		return true;
	ring = malloc(cap * sizeof(*ring));
	if (!ring)
		return false;
	for (uint64_t s = g->head; s < g->tail; s++)
		ring[s & (cap - 1)] = *at(g, s);
	free(g->ring);
	g->ring = ring;
	g->cap = cap;
	return true;
}

/* Correlation ids start at 1 but 0 is the map's empty key: shift by one. */
static uint64_t pending_key(uint32_t correlation_id)
{
	return (uint64_t)correlation_id + 1;
}

bool gpu_add_launch(struct gpu *g, struct names *names, uint64_t ts_ns,
		    const struct gpu_launch_site *site,
		    const struct rf_gpu_launch_event *e)
{
	const uint32_t *frames = site->frames;
	uint32_t depth = site->depth;
	struct gpu_launch *l;
	size_t len = strnlen(e->api_name, sizeof(e->api_name));
	uint64_t *prev;

	g->counts.launches++;
	if (!make_room(g))
		return false;
	l = at(g, g->tail);
	memset(l, 0, sizeof(*l));
	if (depth) {
		l->frames = malloc(depth * sizeof(*frames));
		if (!l->frames)
			return false;
		memcpy(l->frames, frames, depth * sizeof(*frames));
	}
	l->depth = depth;
	l->op_name = depth ? frames[depth - 1] : UINT32_MAX;
	l->ts_ns = ts_ns;
	l->pid = site->pid;
	l->tid = site->tid;
	l->thread_name = site->thread_name;
	l->correlation_id = e->correlation_id;
	l->api_name = names_intern(names, e->api_name, len);
	l->domain = e->domain;
	l->flags = e->launch_flags;
	l->outside_ops = !depth && !e->hdr.rf_addr;
	if (l->outside_ops)
		g->counts.launches_outside_ops++;
	else if (!depth)
		g->counts.launches_op_unknown++;
	l->driver_correlation_id = e->driver_correlation_id;
	/* A reused correlation id replaces an older launch still waiting. */
	prev = u64map_get(&g->pending, pending_key(e->correlation_id));
	if (prev && !at(g, *prev)->activities)
		g->counts.launches_evicted_unmatched++;
	/* Records of copies and sets carry the nested driver call's id:
	 * the launch waits under both. */
	if (!u64map_put(&g->pending, pending_key(e->correlation_id),
			g->tail)) {
		free(l->frames);
		return false;
	}
	if (e->driver_correlation_id &&
	    !u64map_put(&g->pending, pending_key(e->driver_correlation_id),
			g->tail)) {
		/* The slot is not taken: its first entry must not stay, or a
		 * record would join whatever launch takes the slot next. */
		u64map_del(&g->pending, pending_key(e->correlation_id));
		free(l->frames);
		return false;
	}
	g->tail++;
	return true;
}

const char *gpu_kind_name(uint32_t kind)
{
	switch (kind) {
	case RF_GPU_ACT_KERNEL: return "kernel";
	case RF_GPU_ACT_MEMCPY: return "gpu_memcpy";
	case RF_GPU_ACT_MEMSET: return "gpu_memset";
	default: return "gpu_activity";
	}
}

const char *gpu_copy_kind_name(uint8_t copy_kind)
{
	static const char *const names[] = {
		"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD",
		"DtoA", "DtoD", "HtoH", "PtoP",
	};

	return copy_kind < sizeof(names) / sizeof(names[0]) ?
	       names[copy_kind] : "Unknown";
}

/* Copies and sets have no name of their own: label them as Kineto does. */
static uint32_t activity_name(struct names *names,
			      const struct rf_gpu_activity_event *e)
{
	char label[64];

	if (e->act.kind == RF_GPU_ACT_KERNEL)
		return names_intern(names, e->act.name,
				    strnlen(e->act.name, sizeof(e->act.name)));
	if (e->act.kind == RF_GPU_ACT_MEMCPY)
		snprintf(label, sizeof(label), "Memcpy %s",
			 gpu_copy_kind_name(e->act.copy_kind));
	else if (e->act.kind == RF_GPU_ACT_MEMSET)
		snprintf(label, sizeof(label), "Memset");
	else
		snprintf(label, sizeof(label), "GPU activity %u", e->act.kind);
	return names_intern(names, label, strlen(label));
}

bool gpu_add_activity(struct gpu *g, struct names *names,
		      const struct rf_gpu_activity_event *e,
		      struct gpu_activity *a, const struct gpu_launch **launch)
{
	const struct rf_gpu_activity *in = &e->act;
	uint64_t *seq;

	g->counts.activities++;
	if (e->hdr.flags & RF_F_NAME_TRUNCATED)
		g->counts.names_truncated++;
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
	a->name = activity_name(names, e);
	memcpy(a->grid, in->grid, sizeof(a->grid));
	memcpy(a->block, in->block, sizeof(a->block));
	a->registers_per_thread = in->registers_per_thread;
	a->static_shared_bytes = in->static_shared_bytes;
	a->dynamic_shared_bytes = in->dynamic_shared_bytes;
	a->bytes = in->bytes;
	a->copy_kind = in->copy_kind;
	a->name_truncated = e->hdr.flags & RF_F_NAME_TRUNCATED;
	a->graph_id = in->graph_id;
	seq = u64map_get(&g->pending, pending_key(in->correlation_id));
	*launch = seq ? at(g, *seq) : NULL;
	if (seq)
		at(g, *seq)->activities++;
	else
		g->counts.activities_unmatched++;
	return a->name != UINT32_MAX;
}

/* Drops the oldest launch, with its pending entries if still its own. */
static void pop_launch(struct gpu *g, bool at_detach)
{
	struct gpu_launch *l = at(g, g->head);
	uint64_t key = pending_key(l->correlation_id);
	uint64_t *seq = u64map_get(&g->pending, key);

	/* Still the pending entry for its id (not replaced)? */
	if (seq && *seq == g->head) {
		if (!l->activities && at_detach)
			g->counts.launches_unmatched_at_end++;
		else if (!l->activities)
			g->counts.launches_evicted_unmatched++;
		u64map_del(&g->pending, key);
	}
	key = pending_key(l->driver_correlation_id);
	seq = l->driver_correlation_id ? u64map_get(&g->pending, key) : NULL;
	if (seq && *seq == g->head)
		u64map_del(&g->pending, key);
	free(l->frames);
	g->head++;
}

void gpu_evict(struct gpu *g, uint64_t now_ns)
{
	if (now_ns < GPU_PENDING_NS)
		return;
	while (g->head < g->tail &&
	       at(g, g->head)->ts_ns < now_ns - GPU_PENDING_NS)
		pop_launch(g, false);
}

void gpu_detach(struct gpu *g)
{
	while (g->head < g->tail)
		pop_launch(g, true);
	u64map_free(&g->pending);
}

void gpu_format_losses(const struct gpu_counts *c, uint64_t bad_records,
		       char *buf, size_t len)
{
	snprintf(buf, len,
		 "GPU: %llu launches, %llu records; records with no launch "
		 "%llu; launches with no record %llu (evicted %llu, at "
		 "detach %llu); launches outside any op %llu, in an "
		 "unrecorded op %llu; kernel names truncated %llu, "
		 "unreadable %llu; bad records %llu; agent: dropped by "
		 "CUPTI %llu, untraced %llu, errors %llu%s%s",
		 (unsigned long long)c->launches,
		 (unsigned long long)c->activities,
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
		 c->agent_counters_stale ? " (as last read before the "
		 "target exited)" : "",
		 c->final_flush_missed ? "; THE AGENT'S FINAL FLUSH WAS "
		 "MISSED" : "");
}
