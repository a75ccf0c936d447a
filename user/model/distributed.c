// SPDX-License-Identifier: BSD-2-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "distributed.h"

void dist_info_init(struct dist_info *d)
{
	memset(d, 0, sizeof(*d));
	d->rank = d->local_rank = d->world_size = -1;
}

/* A rank or size: a whole number below a million, else -1. */
static int small_number(const char *v)
{
	char *end;
	long n;

	if (!*v)
		return -1;
	n = strtol(v, &end, 10);
	return *end || n < 0 || n >= 1000000 ? -1 : (int)n;
}

static void copy(char *dst, size_t len, const char *v)
{
	snprintf(dst, len, "%s", v);
}

void dist_info_from_environ(struct dist_info *d, const char *env,
			    size_t len)
{
	size_t i = 0;

	while (i < len) {
		const char *s = env + i, *eq;
		size_t n = strnlen(s, len - i);

		i += n + 1;
		if (n == len - (size_t)(s - env))	/* no NUL: cut off */
			break;
		if (!(eq = memchr(s, '=', n)))
			continue;
#define IS(name) ((size_t)(eq - s) == strlen(name) && \
		  !strncmp(s, name, eq - s))
		if (IS("RANK"))
			d->rank = small_number(eq + 1);
		else if (IS("LOCAL_RANK"))
			d->local_rank = small_number(eq + 1);
		else if (IS("WORLD_SIZE"))
			d->world_size = small_number(eq + 1);
		else if (IS("MASTER_ADDR"))
			copy(d->master_addr, sizeof(d->master_addr), eq + 1);
		else if (IS("MASTER_PORT"))
			copy(d->master_port, sizeof(d->master_port), eq + 1);
		else if (IS("TORCHELASTIC_RUN_ID"))
			copy(d->run_id, sizeof(d->run_id), eq + 1);
#undef IS
	}
}

void dist_info_saw_collective(struct dist_info *d, const char *name)
{
	if (d->backend[0])
		return;
	if (!strncmp(name, "gloo:", 5))
		copy(d->backend, sizeof(d->backend), "gloo");
	else if (!strncmp(name, "nccl:", 5))
		copy(d->backend, sizeof(d->backend), "nccl");
}

bool dist_info_known(const struct dist_info *d)
{
	return d->rank >= 0 || d->world_size >= 0 || d->backend[0];
}

void dist_info_describe(const struct dist_info *d, char *buf, size_t len)
{
	size_t at = 0;

#define PUT(...) do { \
	int n_ = snprintf(buf + at, len - at, __VA_ARGS__); \
	if (n_ > 0) at = at + n_ < len ? at + n_ : len - 1; \
} while (0)
	buf[0] = 0;
	if (d->rank >= 0)
		PUT("rank %d", d->rank);
	else
		PUT("rank unknown");
	if (d->world_size >= 0)
		PUT(" of %d", d->world_size);
	if (d->local_rank >= 0)
		PUT(" (local rank %d)", d->local_rank);
	if (d->backend[0])
		PUT(", backend %s", d->backend);
	if (d->master_addr[0])
		PUT(", master %s%s%s", d->master_addr,
		    d->master_port[0] ? ":" : "", d->master_port);
	if (d->run_id[0])
		PUT(", run %s", d->run_id);
#undef PUT
}
