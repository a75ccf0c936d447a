// SPDX-License-Identifier: BSD-2-Clause
#include <stdlib.h>
#include <string.h>
#include "names.h"

static uint64_t hash_bytes(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;	/* FNV-1a */

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

static uint32_t *find_slot(uint32_t *index, size_t cap, char **strs,
			   const char *name, size_t len)
{
	size_t i = hash_bytes(name, len) & (cap - 1);

	for (;; i = (i + 1) & (cap - 1)) {
		uint32_t v = index[i];

		if (!v)
			return &index[i];
		if (!strncmp(strs[v - 1], name, len) && !strs[v - 1][len])
			return &index[i];
	}
}

static int grow_index(struct names *n)
{
	size_t cap = n->index_cap ? n->index_cap * 2 : 256;
	uint32_t *index = calloc(cap, sizeof(*index));

	if (!index)
		return -1;
	for (size_t id = 0; id < n->nr; id++) {
		const char *s = n->strs[id];
		*find_slot(index, cap, n->strs, s, strlen(s)) = id + 1;
	}
	free(n->index);
	n->index = index;
	n->index_cap = cap;
	return 0;
}

uint32_t names_intern(struct names *n, const char *name, size_t len)
{
	uint32_t *slot;
	char *copy;

	/* A name is a C string: one with a NUL inside its len bytes (a
	 * record whose name was cut or half read) is kept up to the NUL,
	 * and found by it, or the lookup compares past the stored copy. */
	len = strnlen(name, len);
	if ((n->nr + 1) * 2 > n->index_cap && grow_index(n))
		return UINT32_MAX;
	slot = find_slot(n->index, n->index_cap, n->strs, name, len);
	if (*slot)
		return *slot - 1;
	if (n->nr == n->cap) {
		size_t cap = n->cap ? n->cap * 2 : 256;
		char **strs = realloc(n->strs, cap * sizeof(*strs));

		if (!strs)
			return UINT32_MAX;
		n->strs = strs;
		n->cap = cap;
	}
	copy = strndup(name, len);
	if (!copy)
		return UINT32_MAX;
	n->strs[n->nr] = copy;
	*slot = ++n->nr;
	return n->nr - 1;
}

void names_free(struct names *n)
{
	for (size_t i = 0; i < n->nr; i++)
		free(n->strs[i]);
	free(n->strs);
	free(n->index);
	memset(n, 0, sizeof(*n));
}
