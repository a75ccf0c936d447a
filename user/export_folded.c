// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "aggregate.h"
#include "export_folded.h"

/* Appends a frame, with ';' (the separator) replaced. */
static size_t put_frame(char *buf, size_t used, size_t cap, const char *s)
{
	if (used && used < cap)
		buf[used++] = ';';
	for (; *s && used < cap; s++)
		buf[used++] = *s == ';' ? ':' : *s == '\n' ? ' ' : *s;
	return used;
}

/* "process;thread [tid];root;...;op" for op i. */
static size_t stack_of(const struct trace *t, size_t i, char *buf,
		       size_t cap)
{
	const struct thread *th = &t->threads[trace_thread_index(t,
							t->ops[i].tid)];
	int32_t chain[1024];
	size_t used, n = 0;
	char tname[48];

	for (int32_t k = i; k >= 0 && n < 1024; k = t->ops[k].parent)
		chain[n++] = k;
	snprintf(tname, sizeof(tname), "%s [%u]",
		 th->comm[0] ? th->comm : "thread", th->tid);
	used = put_frame(buf, 0, cap, t->process_name);
	used = put_frame(buf, used, cap, tname);
	while (n--)
		used = put_frame(buf, used, cap,
				 names_get(&t->names, t->ops[chain[n]].name));
	return used < cap ? used : cap - 1;
}

int write_folded(FILE *f, const struct trace *t)
{
	uint64_t *self = op_self_times(t), *weight = NULL;
	struct names stacks = {};
	static char buf[65536];
	int ret = -1;

	if (!self)
		return -1;
	/* Same stacks share a line: intern the stack string, sum by id. */
	for (size_t i = 0; i < t->nr_ops; i++) {
		size_t len = stack_of(t, i, buf, sizeof(buf)), known = stacks.nr;
		uint32_t id = names_intern(&stacks, buf, len);

		if (id == UINT32_MAX)
			goto out;
		if (stacks.nr > known) {
			uint64_t *w = realloc(weight,
					      stacks.nr * sizeof(*weight));

			if (!w)
				goto out;
			weight = w;
			weight[id] = 0;
		}
		weight[id] += self[i];
	}
	for (size_t s = 0; s < stacks.nr; s++)
		if (weight[s])
			fprintf(f, "%s %llu\n", stacks.strs[s],
				(unsigned long long)weight[s]);
	ret = 0;
out:
	names_free(&stacks);
	free(weight);
	free(self);
	return ret;
}

int export_folded(const struct trace *t, const char *path)
{
	FILE *f = fopen(path, "we");
	int err;

	if (!f)
		return -1;
	if (write_folded(f, t)) {
		fclose(f);
		errno = ENOMEM;
		return -1;
	}
	err = ferror(f);
	if (fclose(f) || err) {
		errno = err ? EIO : errno;
		return -1;
	}
	return 0;
}
