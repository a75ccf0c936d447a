/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What every rfbpf BPF object needs to name the current thread and send
 * a record: the ids as rfbpf sees them (in its own PID namespace, when it
 * runs in one), the common record header and when to wake the reader.
 * Kernel side only.
 */
#ifndef RFBPF_IDS_BPF_H
#define RFBPF_IDS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "rfbpf.h"

/* The tgid/tid pair of the current thread in the PID namespace (dev,
 * ino), or the kernel's when ino is 0; 0 if rfbpf's namespace cannot see
 * the thread. */
static __always_inline __u64 current_ids(__u64 ns_dev, __u64 ns_ino)
{
	struct bpf_pidns_info ns;

	if (!ns_ino)
		return bpf_get_current_pid_tgid();
	if (bpf_get_ns_current_pid_tgid(ns_dev, ns_ino, &ns, sizeof(ns)))
		return 0;
	return (__u64)ns.tgid << 32 | ns.pid;
}

static __always_inline void fill_hdr(struct rf_event_hdr *h, __u64 id,
				     __u8 kind, __u8 variant, __u64 rf_addr)
{
	h->ts_ns = bpf_ktime_get_ns();
	h->rf_addr = rf_addr;
	h->pid = id >> 32;
	h->tid = (__u32)id;
	h->kind = kind;
	h->variant = variant;
	h->scope = 0;
	h->flags = 0;
	h->name_len = 0;
}

/* The submit flag that wakes a ring's reader as its backlog crosses
 * wakeup_bytes, and only then (RF_WAKEUP_WINDOW in rfbpf.h): a wakeup
 * per record costs more than the record. */
static __always_inline __u64 ring_wakeup_flag(void *ring, __u64 wakeup_bytes)
{
	__u64 waiting = bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA);

	return waiting >= wakeup_bytes &&
	       waiting < wakeup_bytes + RF_WAKEUP_WINDOW ?
	       BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

#endif /* RFBPF_IDS_BPF_H */
