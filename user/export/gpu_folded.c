// SPDX-License-Identifier: BSD-2-Clause
#include "folded.h"

/* The stack an activity hangs under: its op's, or a marker saying why
 * there is none. */
static size_t parent_stack(const struct trace *t, const struct gpu_activity *a,
			   char *buf, size_t cap)
{
	int32_t op = gpu_activity_op(&t->gpu, a);
	size_t used;

	if (op >= 0)
		return folded_stack_of(t, op, buf, cap);
	used = folded_put_frame(buf, 0, cap, t->process_name);
	if (a->launch < 0)
		return folded_put_frame(buf, used, cap, "[no launch seen]");
	return folded_put_frame(buf, used, cap,
				t->gpu.launches[a->launch].outside_ops ?
				"[outside any op]" : "[no op recorded]");
}

int write_gpu_folded(FILE *f, const struct trace *t)
{
	static char buf[65536];
	struct folded fd = {};
	int ret = -1;

	for (size_t i = 0; i < t->gpu.nr_acts; i++) {
		const struct gpu_activity *a = &t->gpu.acts[i];
		size_t used = parent_stack(t, a, buf, sizeof(buf) - 1);
		char frame[RF_GPU_NAME_MAX + 8];

		snprintf(frame, sizeof(frame), "[gpu] %s",
			 names_get(&t->names, a->name));
		used = folded_put_frame(buf, used, sizeof(buf) - 1, frame);
		if (folded_add(&fd, buf, used, gpu_duration(a)))
			goto out;
	}
	folded_write(f, &fd);
	ret = 0;
out:
	folded_free(&fd);
	return ret;
}

int export_gpu_folded(const struct trace *t, const char *path)
{
	return folded_export(t, path, write_gpu_folded);
}
