// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * GPU activity from the CUPTI agent (bpf/rfbpf_gpu.h): its launches,
 * tagged with the op open on the launching thread; its kernels' records;
 * what its GPUs are; and CUPTI calls made by another tool.
 */
#include "common.bpf.h"

/* The agent's launch struct as far as its size says it wrote it: the
 * first layout always, the appended fields when size covers them (zero
 * otherwise). 0, or -1 for a version or size we cannot read. */
static __always_inline int read_launch(struct rf_gpu_launch *l,
				       const struct rf_gpu_launch *arg)
{
	const __u32 v1 = RF_GPU_LAUNCH_SIZE_V1;

	__builtin_memset(l, 0, sizeof(*l));
	if (bpf_probe_read_user(l, v1, arg) ||
	    l->abi_version != RF_GPU_ABI_VERSION || l->size < v1)
		return -1;
	if (l->size >= sizeof(*l) &&
	    bpf_probe_read_user((char *)l + v1, sizeof(*l) - v1,
				(const char *)arg + v1))
		return -1;
	return 0;
}

/*
 * GPU activity from the CUPTI agent (bpf/rfbpf_gpu.h). A launch is tagged
 * here, on the launching thread, with the innermost open RecordFunction:
 * later, in the loader, only the correlation id links it to its kernels.
 * The same program takes the agent's sync probe (flags say which).
 */
SEC("uprobe")
int BPF_KPROBE(gpu_launch, const struct rf_gpu_launch *arg)
{
	struct rf_gpu_launch l;
	struct rf_gpu_launch_event *e;
	struct rf_thread_state *st;
	__u64 id = target_thread();
	__u64 op = 0;
	__u32 depth = 0;

	if (!id)
		return 0;
	count(RF_CNT_GPU_LAUNCHES);
	if (read_launch(&l, arg)) {
		count(RF_CNT_GPU_BAD_RECORD);
		return 0;
	}
	st = thread_state(false);
	if (st) {
		depth = st->depth;
		if (depth > 0 && depth <= RF_TREE_MAX_DEPTH)
			op = st->stack[(depth - 1) & (RF_TREE_MAX_DEPTH - 1)];
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(RF_CNT_DROPS);
		return 0;
	}
	fill_hdr(&e->hdr, id, RF_EV_GPU_LAUNCH, 0, op);
	e->correlation_id = l.correlation_id;
	e->cbid = l.cbid;
	e->domain = l.domain;
	e->launch_flags = l.flags;
	e->driver_correlation_id = l.driver_correlation_id;
	e->depth = depth;
	e->enter_ns = l.enter_ns;
	__builtin_memcpy(e->api_name, l.api_name, sizeof(e->api_name));
	e->api_name[sizeof(e->api_name) - 1] = 0;
	submit(e);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(gpu_activity, const struct rf_gpu_activity *arg)
{
	struct rf_gpu_activity_event *e;
	__u64 id = target_thread();

	if (!id)
		return 0;
	count(RF_CNT_GPU_RECORDS);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(RF_CNT_DROPS);
		return 0;
	}
	fill_hdr(&e->hdr, id, RF_EV_GPU_ACTIVITY, 0, 0);
	/* As read_launch: the first layout always, then as much of the
	 * appended tail as the agent's size covers (the rest stays 0). */
	__builtin_memset((char *)&e->act + RF_GPU_ACTIVITY_SIZE_V1, 0,
			 sizeof(e->act) - RF_GPU_ACTIVITY_SIZE_V1);
	if (bpf_probe_read_user(&e->act, RF_GPU_ACTIVITY_SIZE_V1, arg) ||
	    e->act.abi_version != RF_GPU_ABI_VERSION ||
	    e->act.size < RF_GPU_ACTIVITY_SIZE_V1 ||
	    (e->act.size >= sizeof(e->act) ?
	     bpf_probe_read_user(&e->act.name_addr, sizeof(e->act) -
				 RF_GPU_ACTIVITY_SIZE_V1, &arg->name_addr) :
	     e->act.size >= RF_GPU_ACTIVITY_SIZE_V2 &&
	     bpf_probe_read_user(&e->act.name_addr, sizeof(e->act.name_addr),
				 &arg->name_addr))) {
		bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
		count(RF_CNT_GPU_BAD_RECORD);
		return 0;
	}
	e->act.name[RF_GPU_NAME_MAX - 1] = 0;
	if (e->act.name_len >= RF_GPU_NAME_MAX)
		e->hdr.flags |= RF_F_NAME_TRUNCATED;
	submit(e);
	return 0;
}

/* What a GPU is (struct rf_gpu_device), from the agent's thread. */
SEC("uprobe")
int BPF_KPROBE(gpu_device, const struct rf_gpu_device *arg)
{
	struct rf_gpu_device_event *e;
	__u64 id = target_thread();

	if (!id)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(RF_CNT_DROPS);
		return 0;
	}
	fill_hdr(&e->hdr, id, RF_EV_GPU_DEVICE, 0, 0);
	if (bpf_probe_read_user(&e->dev, sizeof(e->dev), arg) ||
	    e->dev.abi_version != RF_GPU_ABI_VERSION ||
	    e->dev.size < sizeof(e->dev)) {
		bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
		count(RF_CNT_GPU_BAD_RECORD);
		return 0;
	}
	e->dev.name[RF_GPU_DEVICE_NAME_MAX - 1] = 0;
	submit(e);
	return 0;
}

/* The agent's handler for leaving CUPTI inside another tool's
 * cuptiSubscribe (rf_gpu_control.yield_signal and yield_handler), set by
 * rfbpf once the agent holds CUPTI; 0 for an agent without one. */
volatile __u32 cupti_yield_signal = 0;
volatile __u64 cupti_yield_handler = 0;

/* RF_CUPTI_WATCHED's first two: cuptiSubscribe, cuptiSubscribe_v2. */
#define RF_CUPTI_SUBSCRIBES 2

/*
 * Sends the agent's signal to this thread, which is at the entry of
 * cuptiSubscribe: delivered as the probe returns, before the call's
 * second instruction. Only while the thread's handler for it is still the
 * agent's (the job may have taken the signal since) and the thread does
 * not block it (it would come later, anywhere).
 */
static __always_inline void yield_in_call(void)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u32 sig = cupti_yield_signal;
	__u64 at, handler = 0;

	if (sig < 1 || sig > 64 || !cupti_yield_handler ||
	    t->blocked.sig[0] & (1ull << (sig - 1)))
		return;
	at = (__u64)t->sighand +
	     bpf_core_field_offset(struct sighand_struct, action) +
	     ((sig - 1) & 63) * bpf_core_type_size(struct k_sigaction) +
	     bpf_core_field_offset(struct k_sigaction, sa) +
	     bpf_core_field_offset(struct sigaction, sa_handler);
	if (bpf_probe_read_kernel(&handler, sizeof(handler), (void *)at) ||
	    handler != cupti_yield_handler)
		return;
	bpf_send_signal_thread(sig);
}

/*
 * A CUPTI call the agent relies on (RF_CUPTI_WATCHED, bpf/rfbpf_gpu.h)
 * made by another thread than the agent's: another tool is starting to
 * use CUPTI. The uprobe's cookie says which function. Rare by nature
 * (tools call these when they start and stop), so no rate limit.
 */
SEC("uprobe")
int cupti_call(struct pt_regs *ctx)
{
	static const char agent[] = RF_GPU_AGENT_THREAD;
	struct rf_event_hdr *e;
	char comm[16];
	__u64 id = target_thread();
	bool ours = true;

	if (!id)
		return 0;
	/* The agent's thread is named by the agent; a thread name is
	 * the same in every PID namespace, where its tid is not. */
	if (bpf_get_current_comm(comm, sizeof(comm)))
		ours = false;
	for (int i = 0; i < (int)sizeof(agent); i++)
		if (comm[i & 15] != agent[i & 15])
			ours = false;
	if (ours)
		return 0;
	if (bpf_get_attach_cookie(ctx) < RF_CUPTI_SUBSCRIBES)
		yield_in_call();
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(RF_CNT_DROPS);
		return 0;
	}
	fill_hdr(e, id, RF_EV_CUPTI_CALL, 0, bpf_get_attach_cookie(ctx));
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}
