// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A synthetic producer for the loader-throughput bench: a BPF program run
 * with BPF_PROG_TEST_RUN that writes `pairs` before/end event pairs, in
 * rfbpf's own event format and with rfbpf's wakeup rule, into a ring
 * buffer. It makes events far faster than uprobes can, so the loader, not
 * the producer, is what the bench measures.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "rfbpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 * 1024 * 1024);
} events SEC(".maps");

/* Set by the bench (.bss/.data), read back after each run. */
__u32 pairs;
__u32 threads = 4;		/* pairs rotate over this many fake tids */
__u64 wakeup_bytes = 2 * 1024 * 1024;
__u64 produced, drops;

#define OP_NAME "aten::bench_synthetic_op"

/* The same rule as rfbpf's submit() (bpf/common.bpf.h). */
static __always_inline void submit(void *e)
{
	__u64 waiting = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);

	bpf_ringbuf_submit(e, waiting >= wakeup_bytes &&
			   waiting < wakeup_bytes + RF_WAKEUP_WINDOW ?
			   BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

static __always_inline void hdr(struct rf_event_hdr *h, __u8 kind, __u32 tid,
				__u64 rf)
{
	h->ts_ns = bpf_ktime_get_ns();
	h->rf_addr = rf;
	h->pid = 1;
	h->tid = tid;
	h->kind = kind;
	h->variant = kind == RF_EV_BEFORE ? RF_V_CALLBACK : RF_V_END;
	h->scope = 0;
	h->flags = 0;
	h->name_len = kind == RF_EV_BEFORE ? sizeof(OP_NAME) - 1 : 0;
}

static long one_pair(__u32 i, void *ctx)
{
	__u32 tid = 1000 + i % (threads ? threads : 1);
	__u64 rf = 0x10000 + (__u64)tid * 0x100;
	struct rf_before_event *b;
	struct rf_end_event *e;

	/* A lost before() drops its end() too, as it would leave it
	 * unmatched: both count as drops. */
	b = bpf_ringbuf_reserve(&events, sizeof(*b), 0);
	if (!b) {
		__sync_fetch_and_add(&drops, 2);
		return 0;
	}
	hdr(&b->hdr, RF_EV_BEFORE, tid, rf);
	b->seq = i;
	__builtin_memcpy(b->name, OP_NAME, sizeof(OP_NAME));
	submit(b);
	__sync_fetch_and_add(&produced, 1);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&drops, 1);
		return 0;
	}
	hdr(&e->hdr, RF_EV_END, tid, rf);
	submit(e);
	__sync_fetch_and_add(&produced, 1);
	return 0;
}

SEC("syscall")
int produce(void *ctx)
{
	bpf_loop(pairs, one_pair, NULL, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
