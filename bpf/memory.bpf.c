// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --memory: every block PyTorch's allocators make and free on the
 * target's threads (rfbpf.h says which functions and why those). Each
 * probe sends one small record; the loader charges it to the op open on
 * the thread, and pairs frees with their blocks (model/memory.c).
 */
#include "common.bpf.h"

static __always_inline void send_mem(__u64 id, __u8 source, __u64 ptr,
				     __s64 bytes, __u64 allocated,
				     __u64 reserved, __s8 type, __s8 index)
{
	struct rf_mem_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(RF_CNT_DROPS);
		return;
	}
	fill_hdr(&e->hdr, id, RF_EV_MEMORY, source, ptr);
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

	if (!id || !nbytes || !ptr)
		return 0;
	count(RF_CNT_MEM_ALLOCS);
	send_mem(id, RF_MEM_CPU_ALLOC, (__u64)ptr, (__s64)nbytes, 0, 0,
		 RF_DEVICE_CPU, -1);
	return 0;
}

/* ProfiledCPUMemoryReporter::Delete(this, ptr). */
SEC("uprobe")
int BPF_KPROBE(mem_cpu_free, void *reporter, void *ptr)
{
	__u64 id = target_thread();

	if (!id || !ptr)
		return 0;
	count(RF_CNT_MEM_FREES);
	send_mem(id, RF_MEM_CPU_FREE, (__u64)ptr, 0, 0, 0, RF_DEVICE_CPU, -1);
	return 0;
}

/* c10::reportMemoryUsageToProfiler(ptr, alloc_size, total_allocated,
 * total_reserved, Device): the Device (a DeviceType byte and an index
 * byte) comes in the fifth register. */
SEC("uprobe")
int BPF_KPROBE(mem_device_report, void *ptr, __s64 bytes, __u64 allocated,
	       __u64 reserved, __u64 device)
{
	__u64 id = target_thread();
	__s8 type = (__s8)(device & 0xff), index = (__s8)((device >> 8) & 0xff);

	if (!id || type == RF_DEVICE_CPU || !bytes)
		return 0;
	count(bytes > 0 ? RF_CNT_MEM_ALLOCS : RF_CNT_MEM_FREES);
	send_mem(id, RF_MEM_DEVICE, (__u64)ptr, bytes, allocated, reserved,
		 type, index);
	return 0;
}
