// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --memory: every block PyTorch's allocators make and free on the
 * target's threads (rfbpf.h says which functions and why those), or with
 * byte sampling (mem_sample_bytes, fleet mode) the blocks a Poisson
 * process of sample points falls in, and their frees. Each probe sends
 * one small record; the loader charges it to the op open on the thread,
 * pairs frees with their blocks and weighs samples (model/memory.c).
 */
#include "common.bpf.h"

/* 0: every block. Set by the loader before it attaches the probes. */
volatile __u64 mem_sample_bytes = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RF_MEM_EXP_TABLE_SIZE);
	__type(key, __u32);
	__type(value, __u32);
} mem_exp SEC(".maps");

/* Each thread's bytes to its next sample point (0: not drawn yet). */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __s64);
} mem_countdown SEC(".maps");

/* The sampled blocks still live: their frees are sent, no others. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, RF_MEM_SAMPLED_MAX);
	__type(key, __u64);
	__type(value, __u8);
} mem_sampled SEC(".maps");

static __always_inline __s64 mem_gap(void)
{
	__u32 i = bpf_get_prandom_u32() & (RF_MEM_EXP_TABLE_SIZE - 1);
	__u32 *v = bpf_map_lookup_elem(&mem_exp, &i);

	return RF_MEM_GAP(v ? *v : 1u << RF_MEM_EXP_SHIFT, mem_sample_bytes);
}

/* Whether a block of size bytes is sent: always without sampling; with
 * it, when a sample point falls in it, its address then noted so that
 * its free is sent too. */
static __always_inline bool mem_take(__u64 id, __u64 ptr, __u64 size,
				     __u8 *flags)
{
	__u64 key = ptr ^ (id >> 32 << 48);	/* a child's blocks apart */
	__s64 *left;
	__u8 one = 1;

	if (!mem_sample_bytes)
		return true;
	left = bpf_task_storage_get(&mem_countdown, bpf_get_current_task_btf(),
				    0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!left)
		return false;
	if (!*left)
		*left = mem_gap();
	if (!RF_MEM_COUNTDOWN(*left, size))
		return false;
	*left = mem_gap();
	if (bpf_map_update_elem(&mem_sampled, &key, &one, BPF_NOEXIST)) {
		count(RF_CNT_MEM_SAMPLED_FULL);
		return false;
	}
	*flags |= RF_F_MEM_SAMPLED;
	return true;
}

/* A free is sent without sampling, or when its block was sampled. */
static __always_inline bool mem_take_free(__u64 id, __u64 ptr, __u8 *flags)
{
	__u64 key = ptr ^ (id >> 32 << 48);

	if (!mem_sample_bytes)
		return true;
	if (bpf_map_delete_elem(&mem_sampled, &key))
		return false;
	*flags |= RF_F_MEM_SAMPLED;
	return true;
}

static __always_inline void send_mem(__u64 id, __u8 source, __u8 flags,
				     __u64 ptr, __s64 bytes, __u64 allocated,
				     __u64 reserved, __s8 type, __s8 index)
{
	struct rf_mem_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(RF_CNT_DROPS);
		return;
	}
	fill_hdr(&e->hdr, id, RF_EV_MEMORY, source, ptr);
	e->hdr.flags = flags;
	e->bytes = bytes;
	e->total_allocated = allocated;
	e->total_reserved = reserved;
	e->device_type = type;
	e->device_index = index;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	submit(e);
}

/* ProfiledCPUMemoryReporter::New(this, ptr, nbytes). PyTorch itself
 * reports no block of 0 bytes. */
SEC("uprobe")
int BPF_KPROBE(mem_cpu_alloc, void *reporter, void *ptr, __u64 nbytes)
{
	__u64 id = target_thread();
	__u8 flags = 0;

	if (!id || !nbytes || !ptr)
		return 0;
	count(RF_CNT_MEM_ALLOCS);
	if (mem_take(id, (__u64)ptr, nbytes, &flags))
		send_mem(id, RF_MEM_CPU_ALLOC, flags, (__u64)ptr,
			 (__s64)nbytes, 0, 0, RF_DEVICE_CPU, -1);
	return 0;
}

/* ProfiledCPUMemoryReporter::Delete(this, ptr). */
SEC("uprobe")
int BPF_KPROBE(mem_cpu_free, void *reporter, void *ptr)
{
	__u64 id = target_thread();
	__u8 flags = 0;

	if (!id || !ptr)
		return 0;
	count(RF_CNT_MEM_FREES);
	if (mem_take_free(id, (__u64)ptr, &flags))
		send_mem(id, RF_MEM_CPU_FREE, flags, (__u64)ptr, 0, 0, 0,
			 RF_DEVICE_CPU, -1);
	return 0;
}

/* c10::reportMemoryUsageToProfiler(ptr, alloc_size, total_allocated,
 * total_reserved, Device): the Device (a DeviceType byte and an index
 * byte) comes in the fifth register. A device pointer and a host one
 * never share a value, so one table of sampled blocks serves both. */
SEC("uprobe")
int BPF_KPROBE(mem_device_report, void *ptr, __s64 bytes, __u64 allocated,
	       __u64 reserved, __u64 device)
{
	__u64 id = target_thread();
	__s8 type = (__s8)(device & 0xff), index = (__s8)((device >> 8) & 0xff);
	__u8 flags = 0;
	bool take;

	if (!id || type == RF_DEVICE_CPU || !bytes)
		return 0;
	count(bytes > 0 ? RF_CNT_MEM_ALLOCS : RF_CNT_MEM_FREES);
	take = bytes > 0 ? mem_take(id, (__u64)ptr, (__u64)bytes, &flags) :
	       mem_take_free(id, (__u64)ptr, &flags);
	if (take)
		send_mem(id, RF_MEM_DEVICE, flags, (__u64)ptr, bytes,
			 allocated, reserved, type, index);
	return 0;
}
