// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --off-cpu (rfbpf.h): when a traced thread leaves the CPU, why, and who
 * woke it; one record when it runs again. The scheduler's tracepoints run
 * for every task on the machine, so this is an object of its own, loaded
 * once per rfbpf process (user/attach/off_cpu_hooks.c) for all the
 * processes it traces: a fleet daemon with 32 jobs runs one program per
 * switch, not 32. A task rfbpf does not trace costs a bit test.
 *
 * Ids are the kernel's: the loader allows --off-cpu only when rfbpf sees
 * the traced processes' own pid namespace.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "rfbpf.h"
#include "ids.bpf.h"

struct off_cpu_state {
	__u64 start_ns;		/* left the CPU, 0: running */
	__u64 wake_ns;
	__u32 reason;
	__u32 waker_tid, waker_pid;
	char waker_comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct off_cpu_state);
} off_cpu_states SEC(".maps");

/* Bit tgid % 64 of word tgid / 64: traced. Sized by the loader to the
 * machine's pid_max before load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} traced_bits SEC(".maps");

/* A traced tgid's ring buffer: the one its op events go to. All rings of
 * one rfbpf process have the size of this template (set by the loader). */
struct ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, RF_OFF_CPU_MAX_JOBS);
	__type(key, __u32);
	__array(values, struct ring);
} job_rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RF_OFF_CPU_MAX_JOBS);
	__type(key, __u32);
	__type(value, struct rf_off_cpu_job);
} job_settings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, RF_OFF_CPU_MAX_JOBS);
	__type(key, __u32);
	__type(value, struct rf_off_cpu_counts);
} job_counts SEC(".maps");

static __always_inline bool traced_task(const struct task_struct *t)
{
	__u32 tgid = t->tgid, word = tgid / 64;
	__u64 *bits = bpf_map_lookup_elem(&traced_bits, &word);

	return bits && (*bits >> (tgid % 64) & 1);
}

static __always_inline struct rf_off_cpu_counts *counts_of(__u32 tgid)
{
	return bpf_map_lookup_elem(&job_counts, &tgid);
}

/* Room for one record of size in tgid's ring (NULL: no ring, or full,
 * counted as a drop). */
static __always_inline void *reserve(__u32 tgid, __u64 size, void **ring)
{
	struct rf_off_cpu_counts *c;
	void *e = NULL;

	*ring = bpf_map_lookup_elem(&job_rings, &tgid);
	if (*ring)
		e = bpf_ringbuf_reserve(*ring, size, 0);
	if (!e && (c = counts_of(tgid)))
		c->drops++;
	return e;
}

/* Wake the loader as the backlog crosses its threshold, as the op
 * programs do. */
static __always_inline void submit(void *e, void *ring, __u32 tgid)
{
	struct rf_off_cpu_job *job = bpf_map_lookup_elem(&job_settings, &tgid);

	bpf_ringbuf_submit(e, job ? ring_wakeup_flag(ring, job->wakeup_bytes)
				  : BPF_RB_NO_WAKEUP);
}

/* A thread that sleeps in futex(2) on an address inside its process's
 * GIL state (the loader finds it in the interpreter) waits for the GIL:
 * its registers at the system call say where. */
static __always_inline bool waits_for_gil(struct task_struct *prev)
{
	__u32 tgid = prev->tgid;
	struct rf_off_cpu_job *job = bpf_map_lookup_elem(&job_settings, &tgid);
	__u64 uaddr, gil_addr = job ? job->gil_addr : 0;
	struct pt_regs *regs;

	if (!gil_addr)
		return false;
	regs = (struct pt_regs *)bpf_task_pt_regs(prev);
	if (!regs || BPF_CORE_READ(regs, orig_ax) != 202)	/* futex */
		return false;
	uaddr = BPF_CORE_READ(regs, di);
	return uaddr >= gil_addr && uaddr < gil_addr + RF_GIL_STATE_SIZE;
}

static __always_inline __u32 off_reason(bool preempt,
					struct task_struct *prev,
					unsigned int prev_state)
{
	if (preempt || !(prev_state & 3))
		return RF_OFF_PREEMPTED;
	if (prev_state & 1)
		return waits_for_gil(prev) ? RF_OFF_GIL : RF_OFF_SLEEP;
	return BPF_CORE_READ_BITFIELD(prev, in_iowait) ? RF_OFF_BLOCK_IO :
	       RF_OFF_UNINTERRUPTIBLE;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(off_cpu_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	bool out = traced_task(prev), in = traced_task(next);
	struct rf_off_cpu_counts *c;
	struct rf_off_cpu_event *e;
	struct off_cpu_state *st;
	__u32 tgid;
	void *ring;
	__u64 now;

	if (!out && !in)
		return 0;
	now = bpf_ktime_get_ns();
	if (out) {
		if ((c = counts_of(prev->tgid)))
			c->switches++;
		st = bpf_task_storage_get(&off_cpu_states, prev, 0,
					  BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (st) {
			st->start_ns = now;
			st->wake_ns = 0;
			st->waker_tid = st->waker_pid = 0;
			st->reason = off_reason(preempt, prev, prev_state);
		}
	}
	if (!in)
		return 0;
	st = bpf_task_storage_get(&off_cpu_states, next, 0, 0);
	if (!st || !st->start_ns)
		return 0;
	tgid = next->tgid;
	e = reserve(tgid, sizeof(*e), &ring);
	if (!e) {
		st->start_ns = 0;
		return 0;
	}
	__builtin_memset(&e->hdr, 0, sizeof(e->hdr));
	e->hdr.ts_ns = now;
	e->hdr.pid = tgid;
	e->hdr.tid = next->pid;
	e->hdr.kind = RF_EV_OFF_CPU;
	e->start_ns = st->start_ns;
	e->wake_ns = st->wake_ns;
	e->reason = st->reason;
	e->waker_tid = st->waker_tid;
	e->waker_pid = st->waker_pid;
	__builtin_memcpy(e->waker_comm, st->waker_comm, sizeof(e->waker_comm));
	st->start_ns = 0;
	submit(e, ring, tgid);
	return 0;
}

/* In an interrupt or softirq handler, current is only the task it
 * interrupted. x86-64 runs a handler that interrupted the kernel on the
 * CPU's IRQ stack, not on the task's: a local variable's address tells.
 * One that interrupted user code runs on the task's stack, but the
 * registers saved at that entry say "interrupt": orig_ax holds ~vector,
 * where a system call leaves its number. (preempt_count would say all of
 * this, but per-CPU variables are not visible to BPF without
 * CONFIG_KALLSYMS_ALL.) */
static __always_inline bool in_interrupt_context(struct task_struct *cur)
{
	__u64 base = (__u64)BPF_CORE_READ(cur, stack), here = 0;
	void *local = &base;
	struct pt_regs *regs;

	/* The address as a number (the verifier keeps stack pointers
	 * apart from scalars): read from where it is stored. */
	bpf_probe_read_kernel(&here, sizeof(here), &local);
	if (here - base >= 4 * 16384)		/* beyond any THREAD_SIZE */
		return true;
	regs = (struct pt_regs *)bpf_task_pt_regs(cur);
	return regs && (long)BPF_CORE_READ(regs, orig_ax) < 0;
}

/* Runs in the waker's context (sched_wakeup may run on the woken task's
 * CPU, in whatever ran there). A wakeup from an interrupt (a timer, an
 * I/O completion) has no waking task: it is noted as such. */
SEC("tp_btf/sched_waking")
int BPF_PROG(off_cpu_waking, struct task_struct *p)
{
	struct task_struct *waker = bpf_get_current_task_btf();
	struct off_cpu_state *st;
	struct rf_wake_event *e;
	__u32 tgid;
	void *ring;

	if (!traced_task(p))
		return 0;
	st = bpf_task_storage_get(&off_cpu_states, p, 0, 0);
	if (!st || !st->start_ns || st->wake_ns)
		return 0;
	st->wake_ns = bpf_ktime_get_ns();
	if (in_interrupt_context(waker)) {
		st->waker_tid = st->waker_pid = 0;
		__builtin_memcpy(st->waker_comm, "[interrupt]", 12);
		return 0;
	}
	st->waker_tid = waker->pid;
	st->waker_pid = waker->tgid;
	bpf_get_current_comm(st->waker_comm, sizeof(st->waker_comm));
	if (!traced_task(waker))
		return 0;
	/* The waker's op is the one open on it now: the loader looks it up
	 * in this record's order among the waker's own events, in the
	 * waker's ring. */
	tgid = waker->tgid;
	e = reserve(tgid, sizeof(*e), &ring);
	if (!e)
		return 0;
	__builtin_memset(&e->hdr, 0, sizeof(e->hdr));
	e->hdr.ts_ns = st->wake_ns;
	e->hdr.pid = tgid;
	e->hdr.tid = waker->pid;
	e->hdr.kind = RF_EV_WAKE;
	e->woken_tid = p->pid;
	e->pad = 0;
	submit(e, ring, tgid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
