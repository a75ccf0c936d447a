/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Op names, interned: each distinct name is stored once and referred to by
 * a small id everywhere else (ops, aggregates, exporters). A training step
 * runs thousands of ops with a few dozen distinct names.
 */
#ifndef RFBPF_NAMES_H
#define RFBPF_NAMES_H

#include <stddef.h>
#include <stdint.h>

struct names {
	char **strs;		/* id -> NUL-terminated name */
	size_t nr, cap;
	uint32_t *index;	/* open addressing: id + 1, 0 = empty */
	size_t index_cap;
};

/* Returns the id of name[0..len), adding it if new; UINT32_MAX on ENOMEM. */
uint32_t names_intern(struct names *n, const char *name, size_t len);
static inline const char *names_get(const struct names *n, uint32_t id)
{
	return id < n->nr ? n->strs[id] : "?";
}
void names_free(struct names *n);

#endif
