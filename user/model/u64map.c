// SPDX-License-Identifier: BSD-2-Clause
#include <stdlib.h>
#include "u64map.h"

static size_t slot_of(uint64_t key, size_t cap)
{
	/* Fibonacci hashing: RecordFunction addresses share low bits. */
	return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

uint64_t *u64map_get(const struct u64map *m, uint64_t key)
{
	if (!m->cap || !key)
		return NULL;
	for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i].key == key)
			return &m->slots[i].value;
		if (!m->slots[i].key)
			return NULL;
	}
}

static bool grow(struct u64map *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct u64map_slot *old = m->slots;
	size_t old_cap = m->cap;

	m->slots = calloc(cap, sizeof(*m->slots));
	if (!m->slots) {
		m->slots = old;
		return false;
	}
	m->cap = cap;
	m->len = 0;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].key)
			u64map_put(m, old[i].key, old[i].value);
	free(old);
	return true;
}

bool u64map_put(struct u64map *m, uint64_t key, uint64_t value)
{
	if (!key)
		return false;
	/* Keep the load factor under 1/2 so probe runs stay short. */
	if ((m->len + 1) * 2 > m->cap && !grow(m))
		return false;
	for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i].key == key) {
			m->slots[i].value = value;
			return true;
		}
		if (!m->slots[i].key) {
			m->slots[i].key = key;
			m->slots[i].value = value;
			m->len++;
			return true;
		}
	}
}

bool u64map_del(struct u64map *m, uint64_t key)
{
	size_t mask = m->cap - 1, i, j;

	if (!m->cap || !key)
		return false;
	for (i = slot_of(key, m->cap); m->slots[i].key != key;
	     i = (i + 1) & mask)
		if (!m->slots[i].key)
			return false;
	/* Backward-shift: move later members of the cluster into the hole
	 * when their home slot is not between the hole and them. */
	for (j = i;;) {
		j = (j + 1) & mask;
		if (!m->slots[j].key)
			break;
		size_t home = slot_of(m->slots[j].key, m->cap);
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->slots[i] = m->slots[j];
			i = j;
		}
	}
	m->slots[i].key = 0;
	m->slots[i].value = 0;
	m->len--;
	return true;
}

void u64map_free(struct u64map *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->len = 0;
}
