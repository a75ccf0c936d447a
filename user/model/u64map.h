/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A small open-addressing hash map from non-zero u64 keys to u64 values.
 * The loader keys threads by tid and open ops by RecordFunction address,
 * both never zero, so 0 marks an empty slot and no tombstones are needed:
 * deletion shifts the following cluster back (linear probing).
 */
#ifndef RFBPF_U64MAP_H
#define RFBPF_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct u64map_slot {
	uint64_t key;
	uint64_t value;
};

struct u64map {
	struct u64map_slot *slots;
	size_t cap;	/* power of two, or 0 before the first insert */
	size_t len;
};

/* Returns a pointer to the value for key, or NULL. Valid until the next
 * insert or delete. */
uint64_t *u64map_get(const struct u64map *m, uint64_t key);
/* Inserts or overwrites. Returns false on allocation failure or key 0. */
bool u64map_put(struct u64map *m, uint64_t key, uint64_t value);
/* Removes key; returns whether it was present. */
bool u64map_del(struct u64map *m, uint64_t key);
void u64map_free(struct u64map *m);

#endif
