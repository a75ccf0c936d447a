// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --python-stacks (rfbpf.h): the Python stack of the thread at the op's
 * start, sent right after the op's before event. The op programs
 * (rfbpf.bpf.c) call emit_py_stack(); a global function, verified once
 * for the programs that call it.
 */
#include "common.bpf.h"

volatile struct rf_py_config py_cfg;

/* A thread's PyThreadState, found once, and what it sent last. */
struct rf_py_thread {
	__u64 tstate;		/* 0: not found */
	__u64 head_at_miss;	/* thread list head when it was not found */
	__u64 last_hash;	/* of the last stack sent, 0: none */
	__u32 last_n;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct rf_py_thread);
} py_threads SEC(".maps");

/* Where a stack is put together before it is sent at its own size. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rf_py_stack_event);
} py_scratch SEC(".maps");


/* The current thread's id in its own PID namespace: what CPython's
 * native_thread_id holds (gettid in the job), whatever rfbpf's is. */
static __always_inline __u32 own_ns_tid(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	unsigned int level = BPF_CORE_READ(pid, level);
	struct upid up = {};

	bpf_probe_read_kernel(&up, sizeof(up), &pid->numbers[level & 31]);
	return (__u32)up.nr;
}

struct py_find {
	__u64 t;		/* thread state being looked at */
	__u64 found;
	__u32 tid;
};

static long py_find_one(__u32 i, void *data)
{
	struct py_find *f = data;

	if (!f->t)
		return 1;
	if ((__u32)read_u64(f->t + py_cfg.tstate_native_thread_id) ==
	    f->tid) {
		f->found = f->t;
		return 1;
	}
	f->t = read_u64(f->t + py_cfg.tstate_next);
	return 0;
}

/* The thread's PyThreadState, checked against its id on every use (a
 * thread state can be freed and another made for a new thread). */
static __always_inline __u64 py_thread_state(struct rf_py_thread *pt)
{
	struct py_find f = { .tid = own_ns_tid() };
	__u64 interp, head;

	if (pt->tstate &&
	    (__u32)read_u64(pt->tstate + py_cfg.tstate_native_thread_id) ==
	    f.tid)
		return pt->tstate;
	pt->tstate = 0;
	interp = read_u64(py_cfg.runtime + py_cfg.runtime_interpreters_head);
	head = interp ? read_u64(interp + py_cfg.interp_threads_head) : 0;
	if (!head || head == pt->head_at_miss)
		return 0;
	f.t = head;
	bpf_loop(1024, py_find_one, &f, 0);
	if (!f.found)
		pt->head_at_miss = head;
	pt->tstate = f.found;
	return f.found;
}

struct py_walk {
	struct rf_py_stack_event *e;
	__u64 frame;
	__u64 hash;
	__u32 n;
	__u32 flags;
};

/* One frame: its code and code unit, then on to the one that called it. */
static long py_walk_one(__u32 i, void *data)
{
	struct py_walk *w = data;
	__u8 f[RF_PY_FRAME_WINDOW];
	__u64 code, prev_instr, start;
	__u32 o;

	if (!w->frame)
		return 1;
	if (w->n >= py_cfg.depth || w->n >= RF_PY_MAX_FRAMES) {
		w->flags |= RF_PY_F_TRUNCATED;
		return 1;
	}
	if (bpf_probe_read_user(f, sizeof(f), (void *)w->frame)) {
		w->flags |= RF_PY_F_FAULT;
		return 1;
	}
	o = py_cfg.frame_previous;
	w->frame = o <= RF_PY_FRAME_WINDOW - 8 ? *(__u64 *)&f[o] : 0;
	o = py_cfg.frame_owner;
	if (o < RF_PY_FRAME_WINDOW && (f[o] == py_cfg.owner_cstack ||
				       f[o] == py_cfg.owner_interpreter))
		return 0;	/* a shim or entry frame: no Python code */
	o = py_cfg.frame_code;
	/* 3.14's f_executable is a _PyStackRef: tag in the low bits. */
	code = o <= RF_PY_FRAME_WINDOW - 8 ? *(__u64 *)&f[o] & ~7ull : 0;
	o = py_cfg.frame_prev_instr;
	prev_instr = o <= RF_PY_FRAME_WINDOW - 8 ? *(__u64 *)&f[o] : 0;
	start = code + py_cfg.code_code_adaptive;
	o = w->n & (RF_PY_MAX_FRAMES - 1);
	w->e->frames[o].code = code;
	w->e->frames[o].unit = prev_instr >= start ?
			       (__s32)((prev_instr - start) / 2) : -1;
	w->e->frames[o].pad = 0;
	w->hash = (w->hash ^ code ^ ((__u64)w->e->frames[o].unit << 48)) *
		  0x100000001b3ull;
	w->n++;
	return 0;
}

/* size <= sizeof(struct rf_py_stack_event), in a way the verifier sees. */
static __always_inline __u64 py_size_bound(__u64 n)
{
	asm volatile("%0 &= %1" : "+r"(n) : "i"(RF_PY_MAX_FRAMES * 2 - 1));
	return RF_PY_STACK_SIZE(n > RF_PY_MAX_FRAMES ? RF_PY_MAX_FRAMES : n);
}

__noinline int emit_py_stack(const struct rf_event_hdr *h)
{
	struct py_walk w = { .hash = 0xcbf29ce484222325ull };
	struct rf_py_thread *pt;
	__u64 tstate, cframe, size;
	__u32 zero = 0;

	if (!h)		/* a global function's argument may be NULL */
		return 0;
	pt = bpf_task_storage_get(&py_threads, bpf_get_current_task_btf(),
				  0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	w.e = bpf_map_lookup_elem(&py_scratch, &zero);
	if (!pt || !w.e)
		return 0;
	tstate = py_thread_state(pt);
	if (!tstate) {
		count(RF_CNT_PY_NO_THREAD);
		pt->last_hash = 0;
		return 0;
	}
	w.e->hdr = *h;
	w.e->hdr.kind = RF_EV_PY_STACK;
	w.e->hdr.name_len = 0;
	if (py_cfg.tstate_cframe != RF_PY_NO_FIELD) {
		cframe = read_u64(tstate + py_cfg.tstate_cframe);
		w.frame = cframe ? read_u64(cframe +
					    py_cfg.cframe_current_frame) : 0;
	} else {
		w.frame = read_u64(tstate + py_cfg.cframe_current_frame);
	}
	bpf_loop(RF_PY_MAX_FRAMES + 1, py_walk_one, &w, 0);
	w.hash ^= w.flags;
	w.e->nr_frames = w.n;
	w.e->py_flags = w.flags;
	if (w.flags & RF_PY_F_TRUNCATED)
		count(RF_CNT_PY_TRUNCATED);
	if (w.flags & RF_PY_F_FAULT)
		count(RF_CNT_PY_FAULTS);
	if (w.hash == pt->last_hash && w.n == pt->last_n) {
		w.e->py_flags |= RF_PY_F_SAME;
		size = py_size_bound(0);
	} else {
		size = py_size_bound(w.n);
	}
	if (bpf_ringbuf_output(&events, w.e, size, wakeup_flag())) {
		count(RF_CNT_DROPS);
		pt->last_hash = 0;	/* the next one goes whole */
		return 0;
	}
	pt->last_hash = w.hash;
	pt->last_n = w.n;
	return 0;
}
