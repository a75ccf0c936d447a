// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Thread exits (rfbpf.h, rf_exit_route): when a thread of a traced process
 * exits, the loader closes whatever ops it left open. sched_process_exit
 * runs for every thread that exits on the machine, so this is an object of
 * its own, loaded once per rfbpf process (user/attach/exit_hooks.c) for
 * all the processes it traces: an exit elsewhere costs one bit test,
 * however many jobs a fleet daemon traces.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "rfbpf.h"
#include "ids.bpf.h"
#include "exit_maps.bpf.h"

/* rfbpf's PID namespace, when it is not the initial one (as in
 * rfbpf.bpf.c): routes and records name processes as rfbpf sees them. */
const volatile __u64 pidns_dev = 0;
const volatile __u64 pidns_ino = 0;

/* All an exit of an untraced process costs is its bit's test (an array
 * lookup the verifier inlines), not a hash lookup (424 ns a run against
 * 171 on this VM); the loader sets and clears bits with atomics, as the
 * fork program sets them. A session's object shares both maps. */
struct rf_exit_bits_map exit_bits SEC(".maps");
struct rf_exit_routes_map exit_routes SEC(".maps");

/* By session slot: its ring buffer, the one its op events go to. */
struct ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, RF_EXIT_MAX_JOBS);
	__type(key, __u32);
	__array(values, struct ring);
} exit_rings SEC(".maps");

/* By session slot: exits that found its ring full (as RF_CNT_DROPS). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RF_EXIT_MAX_JOBS);
	__type(key, __u32);
	__type(value, __u64);
} exit_drops SEC(".maps");

/* Each traced thread's comm as it exited, by thread id. The loader names
 * a thread from /proc when it reads the thread's first record; a thread
 * already gone by then (a short job's records are read as it exits, since
 * wakeups are batched) is named from here. sched_process_exit runs before
 * the task leaves /proc, so whenever /proc has no name this map has it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, RF_EXIT_MAX_PROCS);
	__type(key, __u32);
	__type(value, char[16]);
} exited_comms SEC(".maps");

static __always_inline void drop(__u32 job)
{
	__u64 *n = bpf_map_lookup_elem(&exit_drops, &job);

	if (n)
		*n += 1;
}

/* The tracepoint runs in the exiting task, so the current ids are its
 * own. A raw tracepoint attaches by name, without tracefs (not mounted
 * here). */
SEC("raw_tp/sched_process_exit")
int thread_exit(void *ctx)
{
	__u64 id = current_ids(pidns_dev, pidns_ino);
	struct rf_thread_exit_event *e;
	struct rf_exit_route *route;
	__u32 tgid = id >> 32, tid = (__u32)id, word = tgid / 64;
	__u64 *bits = bpf_map_lookup_elem(&exit_bits, &word);
	char comm[16] = {};
	void *ring;

	if (!id || !bits || !(*bits >> (tgid % 64) & 1) ||
	    !(route = bpf_map_lookup_elem(&exit_routes, &tgid)))
		return 0;
	bpf_get_current_comm(comm, sizeof(comm));
	bpf_map_update_elem(&exited_comms, &tid, comm, BPF_ANY);
	ring = bpf_map_lookup_elem(&exit_rings, &route->job);
	e = ring ? bpf_ringbuf_reserve(ring, sizeof(*e), 0) : NULL;
	if (!e) {
		drop(route->job);
		return 0;
	}
	fill_hdr(&e->hdr, id, RF_EV_THREAD_EXIT, 0, 0);
	__builtin_memcpy(e->comm, comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, ring_wakeup_flag(ring, route->wakeup_bytes));
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
