// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Kernel side of rfbpf: uprobes on at::RecordFunction::before(...) and
 * at::RecordFunction::end() in libtorch_cpu.so.
 *
 * Why one program per `before` overload: each overload receives the op name
 * in a different shape (a C string, a std::string of either ABI, a
 * FunctionSchema whose first member is the operator name, or a 2.9+
 * std::variant passed on the stack). Decoding it here, in the probe, is the
 * only moment the name is guaranteed to be alive: the caller may free it as
 * soon as before() returns.
 *
 * What is *not* done here: pairing begins with ends. That needs per-thread
 * stacks, async ends and double ends, which the loader handles with full
 * information (user/model/stacks.c). The BPF side stays a cheap, faithful
 * recorder.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "rfbpf.h"
#include "rfbpf_gpu.h"

/* Set by the loader before load. 0 means "any process" (never used by the
 * loader, which always attaches for one pid, but harmless). The pid is as
 * rfbpf sees it: in its own PID namespace. */
const volatile __u32 targ_tgid = 0;
/* rfbpf's PID namespace (device and inode of /proc/self/ns/pid), when it
 * is not the initial one: inside a container (kubectl exec, a DaemonSet
 * without hostPID, unshare --pid) every id is translated into it. */
const volatile __u64 pidns_dev = 0;
const volatile __u64 pidns_ino = 0;
/* Which std::string ABI the probed library uses (for FunctionSchema names). */
const volatile bool old_string_abi = false;
/* Where fwd_thread_id_ is in this build's RecordFunction (0: not read);
 * set by the loader when it attaches to the library. */
volatile __u32 fwd_tid_offset = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	/* Resized by the loader (--ringbuf-mb) before load. */
	__uint(max_entries, 8 * 1024 * 1024);
} events SEC(".maps");

/* --tree-sample (see rfbpf.h): off unless the loader turns it on. */
const volatile bool tree_sample = false;
/* GPU launches are tagged with the op open on their thread. The loader
 * turns this on when it attaches the CUPTI agent's probes, which may be
 * mid-run (the agent loads when the job first uses CUDA): a variable, not
 * a load-time constant. */
volatile bool gpu_tagging = false;

/* Per-thread state lives with the task: created on a thread's first op,
 * freed by the kernel when the thread exits, and costing nothing for
 * threads that never run one (a 65536-entry hash took 39 MB up front). */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct rf_thread_state);
} thread_states SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RF_GEO_TABLE_SIZE);
	__type(key, __u32);
	__type(value, __u32);
} geo_skip SEC(".maps");

/* Wake the loader only once this much is waiting (set by the loader to a
 * fraction of the ring): a wakeup per event costs more than the event. The
 * loader also polls on a short timeout, so nothing waits long. */
const volatile __u64 wakeup_bytes = 1;

/* Per-CPU counters: per-variant hits, drops, name faults (enum rf_counter). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RF_CNT_NR);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &slot);

	if (v)
		*v += 1;
}

/* --children: the target's child processes rfbpf traces too (their tgid,
 * as rfbpf sees it), added by the loader as it finds them. */
volatile bool follow_children = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);	/* memory only when used */
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} traced_children SEC(".maps");

/* Returns the tgid/tid pair, as rfbpf sees them, if this thread belongs
 * to the target (or a child it traces), else 0. */
static __always_inline __u64 target_thread(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid;

	if (pidns_ino) {
		struct bpf_pidns_info ns;

		if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns,
						sizeof(ns)))
			return 0;	/* not visible from rfbpf's namespace */
		id = (__u64)ns.tgid << 32 | ns.pid;
	}
	tgid = id >> 32;
	if (targ_tgid && tgid != targ_tgid &&
	    !(follow_children && bpf_map_lookup_elem(&traced_children, &tgid)))
		return 0;
	return id;
}

/* Wake the loader as the backlog crosses wakeup_bytes (see
 * RF_WAKEUP_WINDOW in rfbpf.h). */
static __always_inline __u64 wakeup_flag(void)
{
	__u64 waiting = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);

	return waiting >= wakeup_bytes &&
	       waiting < wakeup_bytes + RF_WAKEUP_WINDOW ?
	       BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
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

/*
 * Each thread's open RecordFunctions are tracked here when --tree-sample
 * needs to know where a tree ends, or when GPU launches must be tagged
 * with the op open on the launching thread at that moment.
 */
static __always_inline bool tracking_ops(void)
{
	return tree_sample || gpu_tagging;
}

/*
 * An op that ends on another thread than the one it began on (async ops:
 * futures, RPC) would stay on its first thread's stack for ever: that
 * thread's trees would never end (--tree-sample would keep or skip all of
 * them) and its GPU launches would be tagged with it. The end is noted
 * here, and each thread drops such ops from its own stack the next time
 * it opens an op after one happened (a global count says when).
 */
struct async_end_key {
	__u64 rf;
	__u32 tgid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct async_end_key);
	__type(value, __u8);
} ended_elsewhere SEC(".maps");

volatile __u64 async_ends = 0;

static __always_inline void note_ended_elsewhere(__u64 rf, __u32 tgid)
{
	struct async_end_key k = { .rf = rf, .tgid = tgid };
	__u8 one = 1;

	bpf_map_update_elem(&ended_elsewhere, &k, &one, BPF_ANY);
	__sync_fetch_and_add(&async_ends, 1);
}

struct drop_ctx {
	struct rf_thread_state *st;
	__u32 tgid;
	__u32 kept;
};

static long drop_one(__u32 i, void *data)
{
	struct drop_ctx *c = data;
	struct rf_thread_state *st = c->st;
	struct async_end_key k = { .tgid = c->tgid };

	if (i >= st->depth)
		return 1;
	k.rf = st->stack[i & (RF_TREE_MAX_DEPTH - 1)];
	if (!bpf_map_delete_elem(&ended_elsewhere, &k))
		return 0;	/* it ended elsewhere: drop it */
	st->stack[c->kept & (RF_TREE_MAX_DEPTH - 1)] = k.rf;
	c->kept++;
	return 0;
}

/* bpf_loop: the verifier checks the body once, not 64 times per caller. */
static __always_inline void drop_ended_elsewhere(struct rf_thread_state *st,
						 __u32 tgid)
{
	struct drop_ctx c = { .st = st, .tgid = tgid };
	__u64 now = async_ends;

	if (st->seen_async_ends == now)
		return;
	st->seen_async_ends = now;
	bpf_loop(RF_TREE_MAX_DEPTH, drop_one, &c, 0);
	st->depth = c.kept;
}

/* before(): pushes the op; with --tree-sample, says whether its tree is
 * kept (decided when a tree opens at depth 0). */
static __always_inline bool op_opened(__u64 rf, __u32 tgid)
{
	struct rf_thread_state *st = thread_state(true);
	__u32 d;

	if (!st)
		return true;	/* map full: record rather than lose */
	drop_ended_elsewhere(st, tgid);
	if (tree_sample && st->depth == 0) {
		count(RF_CNT_TREES_SEEN);
		if (st->skip == 0) {
			st->keep = 1;
			st->skip = draw_skip();
			count(RF_CNT_TREES_KEPT);
		} else {
			st->skip--;
			st->keep = 0;
		}
	}
	d = st->depth;
	if (d < RF_TREE_MAX_DEPTH) {
		st->stack[d & (RF_TREE_MAX_DEPTH - 1)] = rf;
		st->depth = d + 1;
	} else {
		count(RF_CNT_TREE_TOO_DEEP);
	}
	return !tree_sample || st->keep;
}

/* end(): pops the op (and any left open above it) if it is on this
 * thread's stack. Ends of unknown ops follow the current tree's fate on
 * the entry path, where most are of RecordFunctions that never began. On
 * the callback path every end is of an op that began, so an unknown one
 * began on another thread. */
static __always_inline bool op_closed(__u64 rf, __u32 tgid,
				      bool began_somewhere)
{
	struct rf_thread_state *st = thread_state(false);
	bool found = false;
	__u32 keep;

	if (!st) {	/* no before() seen on this thread */
		if (began_somewhere)
			note_ended_elsewhere(rf, tgid);
		return began_somewhere || !tree_sample;
	}
	keep = !tree_sample || st->keep;
	for (int i = 0; i < RF_TREE_MAX_DEPTH; i++) {
		int j = (int)st->depth - 1 - i;

		if (j < 0)
			break;
		if (st->stack[j & (RF_TREE_MAX_DEPTH - 1)] == rf) {
			st->depth = j;
			found = true;
			break;
		}
	}
	/* An op that began on another thread: its tree's fate is unknown
	 * here, so its end goes to the loader, which pairs it if its
	 * before() was kept (and counts it unmatched if not). */
	if (!found && began_somewhere) {
		note_ended_elsewhere(rf, tgid);
		return true;
	}
	return keep;
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

/* Copy a NUL-terminated string of unknown length. */
static __always_inline void read_cstr(struct rf_before_event *e, const char *p)
{
	long n = bpf_probe_read_user_str(e->name, RF_NAME_MAX, p);
	char next = 0;

	if (n <= 0) {
		e->name[0] = 0;
		e->hdr.flags |= RF_F_NAME_FAULT;
		return;
	}
	e->hdr.name_len = n - 1;
	/* A full buffer may hold exactly RF_NAME_MAX-1 chars, or be cut: the
	 * byte after the last copied one tells which. */
	if (n == RF_NAME_MAX &&
	    (bpf_probe_read_user(&next, 1, p + RF_NAME_MAX - 1) || next))
		e->hdr.flags |= RF_F_NAME_TRUNCATED;
}

/* n < RF_NAME_MAX, in a way the verifier sees: clang knows the value is
 * already in range and drops a plain `n &= RF_NAME_MAX - 1`. */
static __always_inline __u64 name_bound(__u64 n)
{
	asm volatile("%0 &= %1" : "+r"(n) : "i"(RF_NAME_MAX - 1));
	return n;
}

/* Copy a string whose length is known (std::string, string_view). */
static __always_inline void read_sized(struct rf_before_event *e,
				       const char *p, __u64 len)
{
	__u64 n = len;

	if (n > RF_NAME_MAX - 1) {
		n = RF_NAME_MAX - 1;
		e->hdr.flags |= RF_F_NAME_TRUNCATED;
	}
	n = name_bound(n);
	if (bpf_probe_read_user(e->name, n, p)) {
		n = 0;
		e->hdr.flags |= RF_F_NAME_FAULT;
	}
	e->name[name_bound(n)] = 0;
	e->hdr.name_len = n;
}

/* std::string at user address s, in the ABI the library was built with.
 * C++11: {char *data; size_t len; ...}. Old ABI: {char *data}, with the
 * length stored 24 bytes before the characters. */
static __always_inline void read_std_string(struct rf_before_event *e,
					    const void *s, bool old_abi)
{
	const char *data = NULL;
	__u64 len = 0;

	if (bpf_probe_read_user(&data, sizeof(data), s))
		goto fault;
	if (old_abi) {
		if (bpf_probe_read_user(&len, sizeof(len),
					data - RF_OLD_STRING_LEN_BACK))
			goto fault;
	} else if (bpf_probe_read_user(&len, sizeof(len), s + 8)) {
		goto fault;
	}
	read_sized(e, data, len);
	return;
fault:
	e->name[0] = 0;
	e->hdr.flags |= RF_F_NAME_FAULT;
}

/* Backward ops only (the rest carry 0): the forward op's thread. */
static __always_inline void read_fwd_thread_id(struct rf_before_event *e,
					       void *rf)
{
	if (e->hdr.scope == RF_SCOPE_BACKWARD && fwd_tid_offset &&
	    bpf_probe_read_user(&e->fwd_thread_id, sizeof(e->fwd_thread_id),
				rf + fwd_tid_offset))
		e->fwd_thread_id = 0;
}

static __always_inline struct rf_before_event *
begin_before_of(struct pt_regs *ctx, __u8 variant, void *rf, bool read_scope)
{
	struct rf_before_event *e;
	__u64 id = target_thread();

	if (!id)
		return NULL;
	count(variant);
	if (tracking_ops() && !op_opened((__u64)rf, id >> 32))
		return NULL;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(RF_CNT_DROPS);
		return NULL;
	}
	fill_hdr(&e->hdr, id, RF_EV_BEFORE, variant, (__u64)rf);
	e->thread_id = 0;
	e->fwd_thread_id = 0;
	if (read_scope) {
		/* One read brings thread_id_ and the scope after it. */
		__u64 w[2];

		if (bpf_probe_read_user(w, sizeof(w),
					rf + RF_THREAD_ID_OFFSET)) {
			e->hdr.scope = 0xff;
		} else {
			e->thread_id = w[0];
			e->hdr.scope = (__u8)w[(RF_SCOPE_OFFSET -
					       RF_THREAD_ID_OFFSET) / 8];
			read_fwd_thread_id(e, rf);
		}
	}
	return e;
}

/* before(): `this` is the first argument. */
static __always_inline struct rf_before_event *
begin_before(struct pt_regs *ctx, __u8 variant)
{
	return begin_before_of(ctx, variant, (void *)PT_REGS_PARM1(ctx), true);
}

/*
 * --python-stacks (rfbpf.h): the Python stack of the thread at the op's
 * start, sent right after the op's before event.
 */
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

static __always_inline __u64 read_u64(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

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

static __always_inline void emit_py_stack(const struct rf_event_hdr *h)
{
	struct py_walk w = { .hash = 0xcbf29ce484222325ull };
	struct rf_py_thread *pt;
	__u64 tstate, cframe, size;
	__u32 zero = 0;

	pt = bpf_task_storage_get(&py_threads, bpf_get_current_task_btf(),
				  0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	w.e = bpf_map_lookup_elem(&py_scratch, &zero);
	if (!pt || !w.e)
		return;
	tstate = py_thread_state(pt);
	if (!tstate) {
		count(RF_CNT_PY_NO_THREAD);
		pt->last_hash = 0;
		return;
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
		return;
	}
	pt->last_hash = w.hash;
	pt->last_n = w.n;
}

/*
 * --shapes (rfbpf.h): the op's inputs, as PyTorch boxed them into the
 * RecordFunction for its callbacks, sent right after the op's before event
 * (and its Python stack).
 */
volatile struct rf_inputs_config in_cfg;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rf_inputs_event);
} in_scratch SEC(".maps");

/* Elements read per list: a list of hundreds of tensors (a foreach op's
 * parameters) must leave room for the inputs after it. */
#define IN_MAX_ELEMS 32

struct in_walk {
	struct rf_inputs_event *e;
	__u64 next_input;	/* the next of the op's IValues */
	__u64 next_elem;	/* in a list: its next element */
	__u32 inputs_left;
	__u32 elems_left;
	__u32 list_hdr;		/* the open list's header word */
	__u32 n;		/* words written */
	__u32 flags;		/* RF_INPUTS_F_* */
};

/* Whether need more words fit; if not, the record ends here. */
static __always_inline bool in_room(struct in_walk *w, __u32 need)
{
	if (w->n + need <= RF_IN_MAX_WORDS)
		return true;
	w->flags |= RF_INPUTS_F_CUT;
	return false;
}

/* A tensor at word i: its dtype, then its sizes and strides, read from
 * the TensorImpl's SizesAndStrides (inline up to 5 dims). */
static __always_inline bool in_tensor(struct in_walk *w, __u64 impl, __u32 i)
{
	__u64 sas[1 + 2 * RF_SIZES_INLINE], ndim, keep, p;
	__u16 dtype = 0;
	__u32 flags = 0;
	__u64 *out;

	if (bpf_probe_read_user(sas, sizeof(sas),
				(void *)(impl + in_cfg.impl_sizes)) ||
	    bpf_probe_read_user(&dtype, sizeof(dtype),
				(void *)(impl + in_cfg.impl_dtype))) {
		w->e->w[i] = RF_IN_HDR(RF_IN_TENSOR, RF_IN_F_FAULT, 0, 0, 0);
		w->flags |= RF_INPUTS_F_FAULT;
		w->n++;
		return true;
	}
	ndim = sas[0];
	keep = ndim > RF_IN_MAX_DIMS ? RF_IN_MAX_DIMS : ndim;
	asm volatile("%0 &= %1" : "+r"(keep) : "i"(2 * RF_IN_MAX_DIMS - 1));
	if (keep < ndim)
		flags |= RF_IN_F_CUT;
	if (!in_room(w, 1 + 2 * keep))
		return false;
	out = &w->e->w[i + 1];
	if (ndim <= RF_SIZES_INLINE) {
		for (__u32 k = 0; k < RF_SIZES_INLINE; k++) {
			if (k >= keep)
				break;
			out[k] = sas[1 + k];
			out[keep + k] = sas[1 + RF_SIZES_INLINE + k];
		}
	} else {
		p = sas[1];
		if (bpf_probe_read_user(out, keep * 8, (void *)p) ||
		    bpf_probe_read_user(out + keep, keep * 8,
					(void *)(p + ndim * 8))) {
			flags |= RF_IN_F_FAULT;
			w->flags |= RF_INPUTS_F_FAULT;
		}
	}
	w->e->w[i] = RF_IN_HDR(RF_IN_TENSOR, flags, dtype, ndim, keep);
	w->n += 1 + keep * 2;
	return true;
}

/* A list at word i: its element type and length; its elements follow as
 * the next values the walk reads. */
static __always_inline void in_list(struct in_walk *w, __u64 impl, __u32 i)
{
	__u64 vec[2] = {}, type = 0, count;
	__u32 kind = 0, flags = 0;

	if (bpf_probe_read_user(vec, sizeof(vec),
				(void *)(impl + in_cfg.list_vector)) ||
	    vec[1] < vec[0]) {
		flags = RF_IN_F_FAULT;
		w->flags |= RF_INPUTS_F_FAULT;
		vec[1] = vec[0];
	}
	type = read_u64(impl + in_cfg.list_type);
	if (type)
		bpf_probe_read_user(&kind, sizeof(kind),
				    (void *)(type + RF_TYPE_KIND));
	count = (vec[1] - vec[0]) / RF_IVALUE_SIZE;
	w->elems_left = count > IN_MAX_ELEMS ? IN_MAX_ELEMS : count;
	if (w->elems_left < count)
		flags |= RF_IN_F_CUT;
	w->next_elem = vec[0];
	w->list_hdr = i;
	w->e->w[i] = RF_IN_HDR(RF_IN_LIST, flags, kind, count, 0);
	w->n++;
}

/* One value: an input of the op, or an element of the list before it. */
static long in_walk_one(__u32 k, void *data)
{
	struct in_walk *w = data;
	bool elem = w->elems_left > 0;
	__u64 v[2], addr;
	__u32 i, tag, kind;

	if (elem) {
		addr = w->next_elem;
		w->next_elem += RF_IVALUE_SIZE;
		w->elems_left--;
	} else if (w->inputs_left) {
		addr = w->next_input;
		w->next_input += RF_IVALUE_SIZE;
		w->inputs_left--;
	} else {
		return 1;
	}
	if (!in_room(w, 1))
		return 1;
	i = w->n & (RF_IN_MAX_WORDS - 1);
	if (bpf_probe_read_user(v, sizeof(v), (void *)addr)) {
		w->e->w[i] = RF_IN_HDR(RF_IN_OTHER, RF_IN_F_FAULT, 0, 0, 0);
		w->flags |= RF_INPUTS_F_FAULT;
		w->n++;
	} else if ((tag = (__u32)v[1]) == in_cfg.tag_tensor) {
		if (!in_tensor(w, v[0], i))
			return 1;
	} else if (tag == in_cfg.tag_int || tag == in_cfg.tag_double ||
		   tag == in_cfg.tag_bool) {
		if (!in_room(w, 2))
			return 1;
		kind = tag == in_cfg.tag_int ? RF_IN_INT :
		       tag == in_cfg.tag_double ? RF_IN_DOUBLE : RF_IN_BOOL;
		w->e->w[i] = RF_IN_HDR(kind, 0, 0, 0, 0);
		w->e->w[i + 1] = v[0];
		w->n += 2;
	} else if (tag == in_cfg.tag_list && !elem) {
		in_list(w, v[0], i);
	} else {
		w->e->w[i] = RF_IN_HDR(tag == in_cfg.tag_none ? RF_IN_NONE :
				       RF_IN_OTHER, 0, 0, 0, 0);
		w->n++;
	}
	if (elem)	/* one more element follows its list's header */
		w->e->w[w->list_hdr & (RF_IN_MAX_WORDS - 1)] += 1ull << 48;
	return 0;
}

static __always_inline void emit_inputs(const struct rf_event_hdr *h)
{
	struct in_walk w = {};
	__u64 args[2] = {}, size;
	__u32 zero = 0, n;

	w.e = bpf_map_lookup_elem(&in_scratch, &zero);
	if (!w.e)
		return;
	if (bpf_probe_read_user(args, sizeof(args),
				(void *)(h->rf_addr + in_cfg.rf_inputs)))
		w.flags |= RF_INPUTS_F_FAULT;
	w.next_input = args[0];
	w.inputs_left = args[1] > 0xffff ? 0xffff : args[1];
	w.e->hdr = *h;
	w.e->hdr.kind = RF_EV_INPUTS;
	w.e->hdr.name_len = 0;
	w.e->nr_inputs = w.inputs_left;
	bpf_loop(RF_IN_MAX_VALUES, in_walk_one, &w, 0);
	if (w.inputs_left || w.elems_left)
		w.flags |= RF_INPUTS_F_CUT;
	n = w.n > RF_IN_MAX_WORDS ? RF_IN_MAX_WORDS : w.n;
	w.e->nr_words = n;
	w.e->in_flags = w.flags;
	if (w.flags & RF_INPUTS_F_CUT)
		count(RF_CNT_INPUTS_CUT);
	if (w.flags & RF_INPUTS_F_FAULT)
		count(RF_CNT_INPUTS_FAULTS);
	size = n;
	asm volatile("%0 &= %1" : "+r"(size) : "i"(2 * RF_IN_MAX_WORDS - 1));
	size = RF_INPUTS_SIZE(size > RF_IN_MAX_WORDS ? RF_IN_MAX_WORDS : size);
	if (bpf_ringbuf_output(&events, w.e, size, wakeup_flag()))
		count(RF_CNT_DROPS);
}

static __always_inline void submit_before(struct rf_before_event *e)
{
	struct rf_event_hdr h;
	bool py = py_cfg.runtime, in = in_cfg.enabled;

	if (e->hdr.flags & RF_F_NAME_FAULT)
		count(RF_CNT_NAME_FAULTS);
	if (py || in)	/* e is the ring's once submitted */
		h = e->hdr;
	submit(e);
	if (py)
		emit_py_stack(&h);
	if (in)
		emit_inputs(&h);
}

SEC("uprobe")
int BPF_KPROBE(before_cstr, void *rf, const char *name, __s64 seq)
{
	struct rf_before_event *e = begin_before(ctx, RF_V_CSTR);

	if (!e)
		return 0;
	e->seq = seq;
	read_cstr(e, name);
	submit_before(e);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(before_string, void *rf, const void *str, __s64 seq)
{
	struct rf_before_event *e = begin_before(ctx, RF_V_STRING);

	if (!e)
		return 0;
	e->seq = seq;
	read_std_string(e, str, false);
	submit_before(e);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(before_string_old, void *rf, const void *str, __s64 seq)
{
	struct rf_before_event *e = begin_before(ctx, RF_V_STRING_OLD);

	if (!e)
		return 0;
	e->seq = seq;
	read_std_string(e, str, true);
	submit_before(e);
	return 0;
}

/* FunctionSchema's first member is OperatorName, whose first member is the
 * name std::string ("aten::add"). */
SEC("uprobe")
int BPF_KPROBE(before_schema, void *rf, const void *schema, __s64 seq)
{
	struct rf_before_event *e = begin_before(ctx, RF_V_SCHEMA);

	if (!e)
		return 0;
	e->seq = seq;
	read_std_string(e, schema, old_string_abi);
	submit_before(e);
	return 0;
}

/*
 * 2.9+: before(FunctionDescriptor, int64_t) where FunctionDescriptor is
 * std::variant<std::string_view, reference_wrapper<const FunctionSchema>>.
 * The 24-byte variant is passed in memory at [rsp+8]; the alternative index
 * is the byte at +16. Index 0: string_view {len, ptr}. Index 1: the schema
 * pointer in the first word. The sequence number moves to rsi.
 */
static __always_inline int descriptor(struct pt_regs *ctx, __u8 variant)
{
	struct { __u64 w0, w1; __u8 index; } v;
	struct rf_before_event *e = begin_before(ctx, variant);

	if (!e)
		return 0;
	e->seq = (__s64)PT_REGS_PARM2(ctx);
	if (bpf_probe_read_user(&v, sizeof(v), (void *)PT_REGS_SP(ctx) + 8)) {
		e->name[0] = 0;
		e->hdr.flags |= RF_F_NAME_FAULT;
	} else if (v.index == 0) {
		read_sized(e, (const char *)v.w1, v.w0);
	} else if (v.index == 1) {
		read_std_string(e, (const void *)v.w0, old_string_abi);
	} else {	/* valueless variant: nothing to name */
		e->name[0] = 0;
		e->hdr.flags |= RF_F_NAME_FAULT;
	}
	submit_before(e);
	return 0;
}

SEC("uprobe")
int before_descriptor(struct pt_regs *ctx)
{
	return descriptor(ctx, RF_V_DESCRIPTOR);
}

SEC("uprobe")
int before_descriptor_dk(struct pt_regs *ctx)
{
	return descriptor(ctx, RF_V_DESCRIPTOR_DK);
}

/*
 * A C++11 std::string already copied from user memory at user address
 * `at`: {char *data; size_t len; char sso[16]}. Short names live in the
 * object itself (data == at + 16), and then need no further read.
 */
static __always_inline void name_from_cxx11_string(struct rf_before_event *e,
						   const __u64 *s, __u64 at)
{
	__u64 len = s[1];

	if (s[0] == at + 16 && len < 16) {
		__builtin_memcpy(e->name, &s[2], 16);
		e->name[len & 15] = 0;
		e->hdr.name_len = len;
		return;
	}
	read_sized(e, (const char *)s[0], len);
}

/* FunctionSchema's first member is OperatorName, whose first member is
 * the name std::string: read that string object, then its characters if
 * they are not inside it. */
static __always_inline void name_from_schema(struct rf_before_event *e,
					     const void *schema)
{
	__u64 s[4];

	if (old_string_abi) {
		read_std_string(e, schema, true);
	} else if (bpf_probe_read_user(s, sizeof(s), schema)) {
		e->name[0] = 0;
		e->hdr.flags |= RF_F_NAME_FAULT;
	} else {
		name_from_cxx11_string(e, s, (__u64)schema);
	}
}

/*
 * The safe points for calls into the target (user/attach/safe_point.h).
 * While the loader looks for one, the first thread rfbpf has seized that
 * passes takes the one token and is sent stop_signal; rfbpf sees it as a
 * ptrace stop there and swallows it. Two places call stop_if_chosen: the
 * safe_point program, attached for the search on the entry of the
 * function the dispatcher calls at the start of every op, and rfbpf's own
 * start callback once stop_in_callback is set (a callback of rfbpf's is
 * in: only sampled ops pay for the search, and nothing is attached).
 */
volatile __u32 stop_signal = 0;
volatile bool stop_every_thread = false;
volatile bool stop_in_callback = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);	/* memory only when used */
	__uint(max_entries, 4096);
	__type(key, __u32);		/* tid, as rfbpf sees it */
	__type(value, __u8);
} stoppable SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} stop_token SEC(".maps");

static __always_inline void stop_if_chosen(void)
{
	__u64 id = target_thread();
	__u32 tid = (__u32)id, zero = 0;

	if (!id)
		return;
	/* A thread blocking the signal now would take the token and not
	 * stop here (the signal would come later, elsewhere): it passes.
	 * Read here rather than by the loader from /proc, since a thread
	 * starts with every signal blocked (glibc's pthread_create) and
	 * sets its own mask only as it begins to run. */
	if (stop_signal > 0 && stop_signal <= 64 &&
	    bpf_get_current_task_btf()->blocked.sig[0] &
	    (1ull << (stop_signal - 1)))
		return;
	/* Deleting is atomic: exactly one thread wins the token, or, once
	 * every thread is to stop, each thread its own entry, once. */
	if (stop_every_thread ? bpf_map_delete_elem(&stoppable, &tid) :
	    !bpf_map_lookup_elem(&stoppable, &tid) ||
	    bpf_map_delete_elem(&stop_token, &zero))
		return;
	bpf_send_signal_thread(stop_signal);
}

SEC("uprobe")
int safe_point(struct pt_regs *ctx)
{
	stop_if_chosen();
	return 0;
}

/*
 * Optimized path (user/attach/stub_page.S): rfbpf's own start callback,
 * called by RecordFunction::before for each sampled op with the
 * RecordFunction in rsi (rdi is the hidden return slot). The name is read
 * from the object, whose fn_ variant holds it.
 */
static __always_inline void record_callback_start(struct pt_regs *ctx,
						   void *rf)
{
	__u64 w[RF_WINDOW_LEN / 8];
	struct rf_before_event *e;
	const __u64 *fn = &w[(RF_FN_OFFSET - RF_WINDOW_START) / 8];
	__u8 index;

	e = begin_before_of(ctx, RF_V_CALLBACK, rf, false);
	if (!e)
		return;
	/* Every separate read of user memory costs: one read brings scope,
	 * fn_, its index and the sequence number. */
	if (bpf_probe_read_user(w, sizeof(w), rf + RF_WINDOW_START)) {
		e->hdr.scope = 0xff;
		e->seq = -1;
		e->name[0] = 0;
		e->hdr.flags |= RF_F_NAME_FAULT;
		submit_before(e);
		return;
	}
	e->thread_id = w[0];
	e->hdr.scope = (__u8)w[(RF_SCOPE_OFFSET - RF_WINDOW_START) / 8];
	read_fwd_thread_id(e, rf);
	if (old_string_abi) {
		index = (__u8)w[(RF_FN_INDEX_OFFSET_OLD - RF_WINDOW_START) / 8];
		e->seq = (__s64)w[(RF_SEQ_OFFSET_OLD - RF_WINDOW_START) / 8];
	} else {
		index = (__u8)w[(RF_FN_INDEX_OFFSET_CXX11 - RF_WINDOW_START) / 8];
		e->seq = (__s64)w[(RF_SEQ_OFFSET_CXX11 - RF_WINDOW_START) / 8];
	}
	if (index == 0 && old_string_abi)
		read_std_string(e, rf + RF_FN_OFFSET, true);
	else if (index == 0)
		name_from_cxx11_string(e, fn, (__u64)rf + RF_FN_OFFSET);
	else if (index == 1)
		name_from_schema(e, (const void *)fn[0]);
	else {		/* valueless variant: nothing to name */
		e->name[0] = 0;
		e->hdr.flags |= RF_F_NAME_FAULT;
	}
	submit_before(e);
}

SEC("uprobe")
int BPF_KPROBE(callback_start, void *ret_slot, void *rf)
{
	record_callback_start(ctx, rf);
	/* After the op's start is on its way: the op is seen whole. */
	if (stop_in_callback)
		stop_if_chosen();
	return 0;
}

static __always_inline int emit_end(void *rf, bool began_somewhere)
{
	struct rf_end_event *e;
	__u64 id = target_thread();

	if (!id)
		return 0;
	count(RF_V_END);
	if (tracking_ops() && !op_closed((__u64)rf, id >> 32, began_somewhere))
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(RF_CNT_DROPS);
		return 0;
	}
	fill_hdr(&e->hdr, id, RF_EV_END, RF_V_END, (__u64)rf);
	if (began_somewhere)
		e->hdr.flags |= RF_F_BEGAN;
	submit(e);
	return 0;
}

/* The end callback: rdi = RecordFunction. */
SEC("uprobe")
int BPF_KPROBE(callback_end, void *rf)
{
	return emit_end(rf, true);
}

/*
 * --children with callback stubs: a forked child's calls into the stubs,
 * at their check of child_on (STUB_*_CHILD_CHECK, user/attach/stub_page.h),
 * which every call in a child reaches: its copy of `on` is wiped at fork.
 * These are attached once, for every process that maps the page (the
 * target and its descendants), so a child's ops are recorded from its
 * first, with process_fork marking it traced before it runs: nothing
 * waits for the loader to see the fork and probe the child. The target
 * itself reaches the check only while its `on` is clear (not tracing):
 * skipped.
 */
static __always_inline bool in_traced_child(void)
{
	__u64 id = target_thread();

	return id && (__u32)(id >> 32) != targ_tgid;
}

/* Set by the loader while it traces: a descendant that calls the stubs
 * untraced then (only where BPF cannot mark it at its fork: rfbpf in a PID
 * namespace of its own, or traced_children full) has its ops counted as
 * missed. Clear from detach on, as the loader lets its children go. */
volatile bool count_child_misses = false;

SEC("uprobe")
int BPF_KPROBE(child_callback_start, void *ret_slot, void *rf)
{
	if (in_traced_child())
		record_callback_start(ctx, rf);
	else if (count_child_misses && !target_thread())
		count(RF_CNT_CHILD_OPS_MISSED);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(child_callback_end, void *rf)
{
	return in_traced_child() ? emit_end(rf, true) : 0;
}

SEC("uprobe")
int BPF_KPROBE(end, void *rf)
{
	return emit_end(rf, false);
}

/* Each traced thread's comm as it exited, by thread id. The loader names
 * a thread from /proc when it reads the thread's first record; a thread
 * already gone by then (a short job's records are read as it exits, since
 * wakeups are batched) is named from here. sched_process_exit runs before
 * the task leaves /proc, so whenever /proc has no name this map has it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, char[16]);
} exited_comms SEC(".maps");

/* A thread of the target exits: the loader closes whatever it left open.
 * The tracepoint runs in the exiting task, so the current ids are its own.
 * A raw tracepoint attaches by name, without tracefs (not mounted here). */
SEC("raw_tp/sched_process_exit")
int thread_exit(void *ctx)
{
	struct rf_thread_exit_event *e;
	__u64 id = target_thread();
	char comm[16] = {};
	__u32 tid = (__u32)id;

	if (!id || !targ_tgid)
		return 0;
	bpf_get_current_comm(comm, sizeof(comm));
	bpf_map_update_elem(&exited_comms, &tid, comm, BPF_ANY);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(RF_CNT_DROPS);
		return 0;
	}
	fill_hdr(&e->hdr, id, RF_EV_THREAD_EXIT, 0, 0);
	__builtin_memcpy(e->comm, comm, sizeof(e->comm));
	submit(e);
	return 0;
}

/*
 * --off-cpu (rfbpf.h): when a traced thread leaves the CPU, why, and who
 * woke it; one record when it runs again.
 */
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

/* --children: a traced process forked a new process. The loader is woken
 * at once to probe it, so that little of the child's work goes untraced. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(process_fork, struct task_struct *parent,
	     struct task_struct *child)
{
	struct rf_event_hdr *e;
	__u64 id = target_thread();

	if (!id || child->pid != child->tgid)	/* not a new process */
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(RF_CNT_DROPS);
		return 0;
	}
	/* The child's pid as the kernel sees it: rfbpf's, unless rfbpf runs
	 * in a PID namespace of its own (then the loader looks in /proc). */
	fill_hdr(e, id, RF_EV_FORK, 0, pidns_ino ? 0 : (__u64)child->pid);
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	/* Traced before it runs (this runs before the child is woken): its
	 * first ops reach child_callback_*. In a PID namespace of rfbpf's
	 * own the child's id there is not known here: the loader adds it. */
	if (!pidns_ino) {
		__u32 tgid = child->tgid;
		__u8 one = 1;

		bpf_map_update_elem(&traced_children, &tgid, &one, BPF_ANY);
	}
	return 0;
}

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
	/* As read_launch: the first layout always, name_addr when the
	 * agent's size covers it. */
	e->act.name_addr = 0;
	if (bpf_probe_read_user(&e->act, RF_GPU_ACTIVITY_SIZE_V1, arg) ||
	    e->act.abi_version != RF_GPU_ABI_VERSION ||
	    e->act.size < RF_GPU_ACTIVITY_SIZE_V1 ||
	    (e->act.size >= sizeof(e->act) &&
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
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(RF_CNT_DROPS);
		return 0;
	}
	fill_hdr(e, id, RF_EV_CUPTI_CALL, 0, bpf_get_attach_cookie(ctx));
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
