// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "folded.h"
#include "out_file.h"

/* A frame of its own: ';' separates frames, a line ends a stack, and
 * speedscope's parser also splits at '\r'; an empty frame would leave
 * "a;;b" or a trailing ';'. */
size_t folded_put_frame(char *buf, size_t used, size_t cap, const char *s)
{
	if (used && used < cap)
		buf[used++] = ';';
	if (!*s)
		s = "[no name]";
	for (; *s && used < cap; s++)
		buf[used++] = *s == ';' ? ':' :
			      *s == '\n' || *s == '\r' ? ' ' : *s;
	return used;
}

/* A tree-sampled trace kept each tree with probability p: its weights
 * are estimates for all trees (--sample is refused for stacks). */
static uint64_t estimated(const struct trace *t, uint64_t v)
{
	return (uint64_t)llround(v / trace_keep_prob(t));
}

/* "process;thread [tid];" then the row's frames; the last one prefixed
 * with last_prefix (for GPU frames). The process is the target, or the
 * child it forked (--children). */
static void write_row(FILE *f, const struct trace *t,
		      const struct stack_row *r, const char *last_prefix,
		      uint64_t weight)
{
	static char buf[65536];
	char frame[512];
	size_t used;

	if (r->pid && r->pid != t->pid)
		snprintf(frame, sizeof(frame), "%s [%u]", t->process_name,
			 r->pid);
	else
		snprintf(frame, sizeof(frame), "%s", t->process_name);
	used = folded_put_frame(buf, 0, sizeof(buf) - 1, frame);
	if (r->tid) {
		snprintf(frame, sizeof(frame), "%s [%u]",
			 names_get(&t->names, r->thread_name), r->tid);
		used = folded_put_frame(buf, used, sizeof(buf) - 1, frame);
	}
	for (uint32_t i = 0; i < r->depth; i++) {
		const char *name = names_get(&t->names, r->frames[i]);

		if (i + 1 == r->depth && last_prefix) {
			snprintf(frame, sizeof(frame), "%s%s", last_prefix,
				 name);
			name = frame;
		}
		used = folded_put_frame(buf, used, sizeof(buf) - 1, name);
	}
	fprintf(f, "%.*s %llu\n", (int)used, buf, (unsigned long long)weight);
}

int write_folded(FILE *f, const struct trace *t, const struct stack_profile *p)
{
	for (size_t i = 0; i < p->nr; i++)
		if (p->rows[i].v.self_ns)
			write_row(f, t, &p->rows[i], NULL,
				  estimated(t, p->rows[i].v.self_ns));
	return 0;
}

int write_off_cpu_folded(FILE *f, const struct trace *t,
			 const struct stack_profile *p)
{
	for (size_t i = 0; i < p->nr; i++)
		if (p->rows[i].v.off_cpu_ns)
			write_row(f, t, &p->rows[i], NULL,
				  estimated(t, p->rows[i].v.off_cpu_ns));
	return 0;
}

/* --memory-folded: bytes allocated (not net of frees), as a flame
 * graph of who allocates. */
int write_memory_folded(FILE *f, const struct trace *t,
			const struct stack_profile *p)
{
	for (size_t i = 0; i < p->nr; i++)
		if (p->rows[i].v.alloc_bytes)
			write_row(f, t, &p->rows[i], NULL,
				  p->rows[i].v.alloc_bytes);
	return 0;
}

int write_gpu_folded(FILE *f, const struct trace *t,
		     const struct stack_profile *p)
{
	for (size_t i = 0; i < p->nr; i++)
		if (p->rows[i].v.gpu_ns)
			write_row(f, t, &p->rows[i], "[gpu] ",
				  estimated(t, p->rows[i].v.gpu_ns));
	return 0;
}

static int export(const struct trace *t, const struct stack_profile *p,
		  const char *path,
		  int (*write)(FILE *f, const struct trace *t,
			       const struct stack_profile *p))
{
	struct out_file o;

	if (out_file_open(&o, path))
		return -1;
	if (write(o.f, t, p)) {
		out_file_close(&o);
		errno = ENOMEM;
		return -1;
	}
	return out_file_close(&o);	/* errno: the first failed write's */
}

int export_folded(const struct trace *t, const struct stack_profile *p,
		  const char *path)
{
	return export(t, p, path, write_folded);
}

int export_gpu_folded(const struct trace *t, const struct stack_profile *p,
		      const char *path)
{
	return export(t, p, path, write_gpu_folded);
}

int export_memory_folded(const struct trace *t,
			 const struct stack_profile *p, const char *path)
{
	return export(t, p, path, write_memory_folded);
}

int export_off_cpu_folded(const struct trace *t,
			  const struct stack_profile *p, const char *path)
{
	return export(t, p, path, write_off_cpu_folded);
}
