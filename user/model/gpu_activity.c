// SPDX-License-Identifier: BSD-2-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpu_activity.h"

void gpu_init(struct gpu *g)
{
	memset(g, 0, sizeof(*g));
}

void gpu_free(struct gpu *g)
{
	free(g->launches);
	free(g->acts);
	u64map_free(&g->pending);
	memset(g, 0, sizeof(*g));
}

static bool grow(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap * 2 : 256;
	void *p;

	if (need <= *cap)
		return true;
	while (n < need)
		n *= 2;
	p = realloc(*arr, n * size);
	if (!p)
		return false;
	*arr = p;
	*cap = n;
	return true;
}

/* Correlation ids start at 1 but 0 is the map's empty key: shift by one. */
static uint64_t pending_key(uint32_t correlation_id)
{
	return (uint64_t)correlation_id + 1;
}

bool gpu_add_launch(struct gpu *g, struct names *names, uint64_t ts_ns,
		    uint32_t tid, int32_t op, const struct rf_gpu_launch_event *e)
{
	struct gpu_launch *l;
	size_t len = strnlen(e->api_name, sizeof(e->api_name));
	uint64_t *prev;

	g->counts.launches++;
	if (!grow((void **)&g->launches, &g->cap_launches, g->nr_launches + 1,
		  sizeof(*g->launches)))
		return false;
	l = &g->launches[g->nr_launches];
	memset(l, 0, sizeof(*l));
	l->ts_ns = ts_ns;
	l->tid = tid;
	l->op = op;
	l->correlation_id = e->correlation_id;
	l->api_name = names_intern(names, e->api_name, len);
	l->domain = e->domain;
	l->flags = e->launch_flags;
	l->outside_ops = op < 0 && !e->hdr.rf_addr;
	if (l->outside_ops)
		g->counts.launches_outside_ops++;
	else if (op < 0)
		g->counts.launches_op_unknown++;
	l->driver_correlation_id = e->driver_correlation_id;
	/* A reused correlation id replaces an older launch still waiting. */
	prev = u64map_get(&g->pending, pending_key(e->correlation_id));
	if (prev && !g->launches[*prev].activities)
		g->counts.launches_evicted_unmatched++;
	if (!u64map_put(&g->pending, pending_key(e->correlation_id),
			g->nr_launches))
		return false;
	/* Records of copies and sets carry the nested driver call's id:
	 * the launch waits under both. */
	if (e->driver_correlation_id &&
	    !u64map_put(&g->pending, pending_key(e->driver_correlation_id),
			g->nr_launches))
		return false;
	g->nr_launches++;
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
		      const struct rf_gpu_activity_event *e)
{
	const struct rf_gpu_activity *in = &e->act;
	struct gpu_activity *a;
	uint64_t *idx;

	g->counts.activities++;
	if (e->hdr.flags & RF_F_NAME_TRUNCATED)
		g->counts.names_truncated++;
	if (e->hdr.flags & RF_F_NAME_FAULT)
		g->counts.name_faults++;
	if (!grow((void **)&g->acts, &g->cap_acts, g->nr_acts + 1,
		  sizeof(*g->acts)))
		return false;
	a = &g->acts[g->nr_acts];
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
	idx = u64map_get(&g->pending, pending_key(in->correlation_id));
	if (idx) {
		a->launch = (int32_t)*idx;
		g->launches[*idx].activities++;
	} else {
		a->launch = -1;
		g->counts.activities_unmatched++;
	}
	g->nr_acts++;
	return true;
}

void gpu_evict(struct gpu *g, uint64_t now_ns)
{
	uint64_t horizon;

	if (now_ns < GPU_PENDING_NS)
		return;
	horizon = now_ns - GPU_PENDING_NS;
	/* Launches are kept in arrival order: walk from the oldest not yet
	 * looked at, so each launch is visited once over the whole run. */
	while (g->evict_next < g->nr_launches &&
	       g->launches[g->evict_next].ts_ns < horizon) {
		const struct gpu_launch *l = &g->launches[g->evict_next];
		uint64_t key = pending_key(l->correlation_id);
		uint64_t *idx = u64map_get(&g->pending, key);

		/* Still the pending entry for its id (not replaced)? */
		if (idx && *idx == g->evict_next) {
			if (!l->activities)
				g->counts.launches_evicted_unmatched++;
			u64map_del(&g->pending, key);
		}
		key = pending_key(l->driver_correlation_id);
		idx = l->driver_correlation_id ?
		      u64map_get(&g->pending, key) : NULL;
		if (idx && *idx == g->evict_next)
			u64map_del(&g->pending, key);
		g->evict_next++;
	}
}

void gpu_detach(struct gpu *g)
{
	for (size_t i = 0; i < g->pending.cap; i++) {
		const struct u64map_slot *s = &g->pending.slots[i];
		const struct gpu_launch *l;

		if (!s->key)
			continue;
		l = &g->launches[s->value];
		/* Once per launch: skip its second (driver id) entry. */
		if (!l->activities &&
		    s->key == pending_key(l->correlation_id))
			g->counts.launches_unmatched_at_end++;
	}
	u64map_free(&g->pending);
}

int32_t gpu_activity_op(const struct gpu *g, const struct gpu_activity *a)
{
	return a->launch >= 0 ? g->launches[a->launch].op : -1;
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
