// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * NVTX ranges the job pushes and pops on a thread (torch.cuda.nvtx's
 * range_push/range_pop, a library's own), from uprobes on nvtxRangePushA
 * and nvtxRangePop of the shared NVTX library the job maps
 * (libnvToolsExt.so.1). No CUPTI and no NVTX injection is needed, so
 * ranges pushed by a job rfbpf attached to are seen too.
 *
 * A range is sent as an op (RF_EV_BEFORE, then RF_EV_END) of scope
 * RF_SCOPE_NVTX, named by its message, at the address RF_NVTX_ADDR(its
 * depth among the thread's ranges): the loader nests it with the ops of
 * its thread like any op, so it reaches the table, the trace and the
 * folded stacks. A pop with no range pushed since the attach is counted.
 */
#include "common.bpf.h"

/* Each thread's NVTX depth (ranges pushed since the attach, not popped). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u32);
} nvtx_depth SEC(".maps");

SEC("uprobe")
int BPF_KPROBE(nvtx_push, const char *message)
{
	struct rf_before_event *e;
	__u64 id = target_thread();
	__u32 tid = (__u32)id, depth = 1, *d;
	char next = 0;
	long n;

	if (!id)
		return 0;
	d = bpf_map_lookup_elem(&nvtx_depth, &tid);
	if (d)
		depth = *d + 1;
	bpf_map_update_elem(&nvtx_depth, &tid, &depth, BPF_ANY);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(RF_CNT_DROPS);
		return 0;
	}
	fill_hdr(&e->hdr, id, RF_EV_BEFORE, RF_V_CSTR, RF_NVTX_ADDR(depth));
	e->hdr.scope = RF_SCOPE_NVTX;
	e->seq = -1;
	e->thread_id = 0;
	e->fwd_thread_id = 0;
	n = bpf_probe_read_user_str(e->name, RF_NAME_MAX, message);
	if (n <= 0) {
		e->name[0] = 0;
		e->hdr.flags |= RF_F_NAME_FAULT;
	} else {
		e->hdr.name_len = n - 1;
		/* Full: exactly RF_NAME_MAX - 1 bytes, or cut. */
		if (n == RF_NAME_MAX &&
		    (bpf_probe_read_user(&next, 1, message + RF_NAME_MAX - 1) ||
		     next))
			e->hdr.flags |= RF_F_NAME_TRUNCATED;
	}
	submit(e);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(nvtx_pop)
{
	struct rf_end_event *e;
	__u64 id = target_thread();
	__u32 tid = (__u32)id, depth, *d;

	if (!id)
		return 0;
	d = bpf_map_lookup_elem(&nvtx_depth, &tid);
	if (!d || !*d) {
		count(RF_CNT_NVTX_POPS_UNMATCHED);
		return 0;
	}
	depth = *d;
	*d = depth - 1;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(RF_CNT_DROPS);
		return 0;
	}
	fill_hdr(&e->hdr, id, RF_EV_END, RF_V_END, RF_NVTX_ADDR(depth));
	submit(e);
	return 0;
}
