// SPDX-License-Identifier: BSD-2-Clause
#include <stdio.h>
#include "table_sort.h"

static const char *const names[] = {
	[SORT_SELF] = "self", [SORT_TOTAL] = "total", [SORT_CALLS] = "calls",
	[SORT_CUDA] = "cuda", [SORT_AVG] = "avg", [SORT_MIN] = "min",
	[SORT_MAX] = "max", [SORT_SELF_CUDA] = "self_cuda",
	[SORT_KERNELS] = "kernels", [SORT_NAME] = "name",
	[SORT_GPU_WAIT] = "gpu_wait",
};

const char *sort_key_name(enum sort_key key)
{
	return (size_t)key < sizeof(names) / sizeof(*names) && names[key] ?
	       names[key] : "?";
}

static bool gpu_key(enum sort_key key)
{
	return key == SORT_CUDA || key == SORT_SELF_CUDA ||
	       key == SORT_KERNELS || key == SORT_GPU_WAIT;
}

/* Why the GPU column key sorts by holds nothing, or NULL if it does. */
static const char *no_gpu_columns(const struct trace *t, enum sort_key key)
{
	if (!t->gpu.counts.agent_seen)
		return "the job had no GPU activity (it never loaded rfbpf's "
		       "CUPTI agent, librfbpf_cupti.so)";
	if (key == SORT_GPU_WAIT && !t->gpu.counts.syncs)
		return "the job made no CUDA synchronize call while traced";
	if (key != SORT_GPU_WAIT && !t->gpu.counts.activities)
		return "the job ran no GPU kernel while traced";
	if (!trace_self_known(t))
		return "GPU columns are not available under --sample";
	return NULL;
}

enum sort_key table_sort_key(const struct trace *t, enum sort_key asked,
			     char *why, size_t len)
{
	enum sort_key instead = trace_self_known(t) ? SORT_SELF : SORT_TOTAL;
	const char *reason;

	if (len)
		why[0] = 0;
	/* Self time under --sample: the default key, so the table's footer
	 * says it, not a warning. */
	if (asked == SORT_SELF && !trace_self_known(t))
		return SORT_TOTAL;
	if (!gpu_key(asked) || !(reason = no_gpu_columns(t, asked)))
		return asked;
	snprintf(why, len, "--sort %s: %s; the table is sorted by %s time "
		 "instead", sort_key_name(asked), reason,
		 instead == SORT_SELF ? "self" : "total");
	return instead;
}
