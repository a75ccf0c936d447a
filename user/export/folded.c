// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "model/aggregate.h"
#include "folded.h"

size_t folded_put_frame(char *buf, size_t used, size_t cap, const char *s)
{
	if (used && used < cap)
		buf[used++] = ';';
	for (; *s && used < cap; s++)
		buf[used++] = *s == ';' ? ':' : *s == '\n' ? ' ' : *s;
	return used;
}

size_t folded_stack_of(const struct trace *t, size_t i, char *buf,
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
	used = folded_put_frame(buf, 0, cap, t->process_name);
	used = folded_put_frame(buf, used, cap, tname);
	while (n--)
		used = folded_put_frame(buf, used, cap,
				 names_get(&t->names, t->ops[chain[n]].name));
	return used < cap ? used : cap - 1;
}

int folded_add(struct folded *fd, const char *stack, size_t len,
	       uint64_t weight)
{
	size_t known = fd->stacks.nr;
	uint32_t id = names_intern(&fd->stacks, stack, len);

	if (id == UINT32_MAX)
		return -1;
	if (fd->stacks.nr > known) {
		uint64_t *w = realloc(fd->weight,
				      fd->stacks.nr * sizeof(*fd->weight));

		if (!w)
			return -1;
		fd->weight = w;
		fd->weight[id] = 0;
	}
	fd->weight[id] += weight;
	return 0;
}

void folded_write(FILE *f, const struct folded *fd)
{
	for (size_t s = 0; s < fd->stacks.nr; s++)
		if (fd->weight[s])
			fprintf(f, "%s %llu\n", fd->stacks.strs[s],
				(unsigned long long)fd->weight[s]);
}

void folded_free(struct folded *fd)
{
	names_free(&fd->stacks);
	free(fd->weight);
	memset(fd, 0, sizeof(*fd));
}

int write_folded(FILE *f, const struct trace *t)
{
	uint64_t *self = op_self_times(t);
	struct folded fd = {};
	static char buf[65536];
	int ret = -1;

	if (!self)
		return -1;
	/* Same stacks share a line: intern the stack string, sum by id. */
	for (size_t i = 0; i < t->nr_ops; i++)
		if (folded_add(&fd, buf, folded_stack_of(t, i, buf,
							 sizeof(buf)), self[i]))
			goto out;
	folded_write(f, &fd);
	ret = 0;
out:
	folded_free(&fd);
	free(self);
	return ret;
}

int folded_export(const struct trace *t, const char *path,
		  int (*write)(FILE *f, const struct trace *t))
{
	FILE *f = fopen(path, "we");
	int err;

	if (!f)
		return -1;
	if (write(f, t)) {
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

int export_folded(const struct trace *t, const char *path)
{
	return folded_export(t, path, write_folded);
}
