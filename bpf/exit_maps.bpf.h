/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The maps the thread-exit object (thread_exits.bpf.c) shares with each
 * session's object (rfbpf.bpf.c, whose fork program routes new
 * children): their types, declared once; the loader hands the session's
 * object the exit object's maps (bpf_map__reuse_fd). Kernel side only.
 */
#ifndef RFBPF_EXIT_MAPS_BPF_H
#define RFBPF_EXIT_MAPS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "rfbpf.h"

/* By tgid: the session a traced process belongs to. */
struct rf_exit_routes_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, RF_EXIT_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct rf_exit_route);
};

/* Bit tgid % 64 of word tgid / 64: the process has a route. Sized by the
 * loader before load, and mapped by it. */
struct rf_exit_bits_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
};

/* Sets tgid's bit (atomically: the loader sets and clears others of the
 * same word meanwhile). */
static __always_inline void exit_bit_set(struct rf_exit_bits_map *bits,
					 __u32 tgid)
{
	__u32 word = tgid / 64;
	__u64 *w = bpf_map_lookup_elem(bits, &word);

	if (w)
		__sync_fetch_and_or(w, 1ull << (tgid % 64));
}

#endif /* RFBPF_EXIT_MAPS_BPF_H */
