/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What rfbpf's BPF files share, kernel side only: the maps and settings
 * every feature uses (defined once, in rfbpf.bpf.c; declared extern here,
 * and resolved when `bpftool gen object` links the files into one object),
 * the small helpers each inlines, and the entry points one feature's file
 * gives the op programs (Python stacks, inputs).
 *
 * bpf/rfbpf.h, the contract with the loader, stays the one header the
 * loader includes; this one never leaves bpf/.
 */
#ifndef RFBPF_COMMON_BPF_H
#define RFBPF_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "rfbpf.h"
#include "rfbpf_gpu.h"
#include "ids.bpf.h"

/* Set by the loader before load. 0 means "any process" (never used by the
 * loader, which always attaches for one pid, but harmless). The pid is as
 * rfbpf sees it: in its own PID namespace. */
extern const volatile __u32 targ_tgid;
/* rfbpf's PID namespace (device and inode of /proc/self/ns/pid), when it
 * is not the initial one: inside a container (kubectl exec, a DaemonSet
 * without hostPID, unshare --pid) every id is translated into it. */
extern const volatile __u64 pidns_dev;
extern const volatile __u64 pidns_ino;
/* Wake the loader only once this much is waiting (set by the loader to a
 * fraction of the ring): a wakeup per event costs more than the event. The
 * loader also polls on a short timeout, so nothing waits long. */
extern const volatile __u64 wakeup_bytes;
/* --children: the target's child processes rfbpf traces too (their tgid,
 * as rfbpf sees it), added by the loader as it finds them. */
extern volatile bool follow_children;
/* --python-stacks' and --shapes' settings (python_stacks.bpf.c,
 * inputs.bpf.c): the op programs look at them to call those files. */
extern volatile struct rf_py_config py_cfg;
extern volatile struct rf_inputs_config in_cfg;

struct rf_events_map {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	/* Resized by the loader (--ringbuf-mb) before load. */
	__uint(max_entries, 8 * 1024 * 1024);
};
extern struct rf_events_map events SEC(".maps");

/* Per-thread state lives with the task: created on a thread's first op,
 * freed by the kernel when the thread exits, and costing nothing for
 * threads that never run one (a 65536-entry hash took 39 MB up front). */
struct rf_thread_states_map {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct rf_thread_state);
};
extern struct rf_thread_states_map thread_states SEC(".maps");

struct rf_geo_skip_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RF_GEO_TABLE_SIZE);
	__type(key, __u32);
	__type(value, __u32);
};
extern struct rf_geo_skip_map geo_skip SEC(".maps");

/* Per-CPU counters: per-variant hits, drops, name faults (enum rf_counter). */
struct rf_counters_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RF_CNT_NR);
	__type(key, __u32);
	__type(value, __u64);
};
extern struct rf_counters_map counters SEC(".maps");

struct rf_traced_children_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);	/* memory only when used */
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
};
extern struct rf_traced_children_map traced_children SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &slot);

	if (v)
		*v += 1;
}

/* Returns the tgid/tid pair, as rfbpf sees them, if this thread belongs
 * to the target (or a child it traces), else 0. */
static __always_inline __u64 target_thread(void)
{
	__u64 id = current_ids(pidns_dev, pidns_ino);
	__u32 tgid = id >> 32;

	if (!id)
		return 0;	/* not visible from rfbpf's namespace */
	if (targ_tgid && tgid != targ_tgid &&
	    !(follow_children && bpf_map_lookup_elem(&traced_children, &tgid)))
		return 0;
	return id;
}

/* Wake the loader as the backlog crosses wakeup_bytes. */
static __always_inline __u64 wakeup_flag(void)
{
	return ring_wakeup_flag(&events, wakeup_bytes);
}

static __always_inline void submit(void *e)
{
	bpf_ringbuf_submit(e, wakeup_flag());
}

static __always_inline __u32 draw_skip(void)
{
	__u32 i = bpf_get_prandom_u32() & (RF_GEO_TABLE_SIZE - 1);
	__u32 *v = bpf_map_lookup_elem(&geo_skip, &i);

	return v ? *v : 0;
}

static __always_inline struct rf_thread_state *thread_state(bool create)
{
	struct rf_thread_state *st;

	st = bpf_task_storage_get(&thread_states, bpf_get_current_task_btf(),
				  0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (st && !st->ready) {		/* created zeroed: draw its skip */
		st->skip = draw_skip();
		st->ready = 1;
	}
	return st;
}

static __always_inline __u64 read_u64(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

/* --python-stacks: the thread's Python stack, sent after the op's before
 * event h (python_stacks.bpf.c). */
int emit_py_stack(const struct rf_event_hdr *h);
/* --shapes: the op's inputs, sent after its before event h (and its
 * Python stack; inputs.bpf.c). */
int emit_inputs(const struct rf_event_hdr *h);

#endif
