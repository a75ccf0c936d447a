// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --off-cpu (rfbpf.h): when a traced thread leaves the CPU, why, and who
 * woke it; one record when it runs again. The scheduler's tracepoints run
 * for every task on the machine: a task rfbpf does not trace costs them
 * a comparison or two.
 */
#include "common.bpf.h"

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

/* The target's threads (and its traced children's), by the kernel's ids:
 * the loader allows --off-cpu only when rfbpf sees the target's own pid
 * namespace. Most tasks are told apart by the first comparison. */
static __always_inline bool traced_task(const struct task_struct *t)
{
	__u32 tgid = t->tgid;

	return tgid == targ_tgid ||
	       (follow_children &&
		bpf_map_lookup_elem(&traced_children, &tgid));
}

/* The target's GIL state (the loader finds it in the interpreter; 0: not
 * Python, or not found). */
volatile __u64 gil_addr = 0;

/* A thread that sleeps in futex(2) on an address inside the GIL's state
 * waits for the GIL: its registers at the system call say where. */
static __always_inline bool waits_for_gil(struct task_struct *prev)
{
	struct pt_regs *regs;
	__u64 uaddr;

	if (!gil_addr || (__u32)prev->tgid != targ_tgid)
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
	struct rf_off_cpu_event *e;
	struct off_cpu_state *st;
	__u64 now;

	if (!out && !in)
		return 0;
	now = bpf_ktime_get_ns();
	if (out) {
		count(RF_CNT_SWITCHES);
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
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(RF_CNT_DROPS);
		st->start_ns = 0;
		return 0;
	}
	__builtin_memset(&e->hdr, 0, sizeof(e->hdr));
	e->hdr.ts_ns = now;
	e->hdr.pid = next->tgid;
	e->hdr.tid = next->pid;
	e->hdr.kind = RF_EV_OFF_CPU;
	e->start_ns = st->start_ns;
	e->wake_ns = st->wake_ns;
	e->reason = st->reason;
	e->waker_tid = st->waker_tid;
	e->waker_pid = st->waker_pid;
	__builtin_memcpy(e->waker_comm, st->waker_comm, sizeof(e->waker_comm));
	st->start_ns = 0;
	submit(e);
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
	 * in this record's order among the waker's own events. */
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(RF_CNT_DROPS);
		return 0;
	}
	__builtin_memset(&e->hdr, 0, sizeof(e->hdr));
	e->hdr.ts_ns = st->wake_ns;
	e->hdr.pid = waker->tgid;
	e->hdr.tid = waker->pid;
	e->hdr.kind = RF_EV_WAKE;
	e->woken_tid = p->pid;
	e->pad = 0;
	submit(e);
	return 0;
}
