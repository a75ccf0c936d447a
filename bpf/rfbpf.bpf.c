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
 *
 * This file holds the core programs (ops, thread exits, forks) and the
 * maps and settings every feature shares (declared in common.bpf.h).
 * Each feature has its own file: python_stacks.bpf.c, inputs.bpf.c,
 * gpu.bpf.c; `bpftool gen object` links them into the one object the
 * skeleton is made from. off_cpu.bpf.c is an object of its own, one per
 * rfbpf process for all the processes it traces.
 */
#include "common.bpf.h"
#include "exit_maps.bpf.h"

const volatile __u32 targ_tgid = 0;
const volatile __u64 pidns_dev = 0;
const volatile __u64 pidns_ino = 0;
const volatile __u64 wakeup_bytes = 1;
volatile bool follow_children = false;
struct rf_events_map events SEC(".maps");
struct rf_thread_states_map thread_states SEC(".maps");
struct rf_geo_skip_map geo_skip SEC(".maps");
struct rf_counters_map counters SEC(".maps");
struct rf_traced_children_map traced_children SEC(".maps");

/* Which std::string ABI the probed library uses (for FunctionSchema names). */
const volatile bool old_string_abi = false;
/* Where fwd_thread_id_ is in this build's RecordFunction (0: not read);
 * set by the loader when it attaches to the library. */
volatile __u32 fwd_tid_offset = 0;

/* --tree-sample (see rfbpf.h): off unless the loader turns it on. */
const volatile bool tree_sample = false;
/* GPU launches are tagged with the op open on their thread. The loader
 * turns this on when it attaches the CUPTI agent's probes, which may be
 * mid-run (the agent loads when the job first uses CUDA): a variable, not
 * a load-time constant. */
volatile bool gpu_tagging = false;

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

/* The first 8 bytes of s as one little-endian word, masked to n bytes. */
#define RF_PREFIX_WORD(s, n) \
	((__u64)(s)[0] | (__u64)(s)[1] << 8 | (__u64)(s)[2] << 16 | \
	 (__u64)(s)[3] << 24 | (__u64)(s)[4] << 32 | \
	 ((n) > 5 ? (__u64)(s)[5] << 40 : 0) | \
	 ((n) > 6 ? (__u64)(s)[6] << 48 : 0) | \
	 ((n) > 7 ? (__u64)(s)[7] << 56 : 0))
#define RF_MASK(n) ((n) > 7 ? ~0ull : (1ull << (8 * (n))) - 1)

/* A collective, by its name (in_cfg.collectives): the process group's
 * work ("gloo:all_reduce", "nccl:all_reduce"), which is handed its
 * tensors whatever the callbacks asked for, or 2.x's
 * "record_param_comms". (The dispatcher's "c10d::allreduce_" boxes its
 * inputs only for --shapes.) Two word compares, so every other op pays
 * almost nothing. */
static __always_inline bool is_collective(const struct rf_before_event *e)
{
	__u64 w0, w1;

	if (e->hdr.name_len < 5)
		return false;
	w0 = *(const __u64 *)e->name;
	if ((w0 & RF_MASK(5)) == RF_PREFIX_WORD("gloo:", 5) ||
	    (w0 & RF_MASK(5)) == RF_PREFIX_WORD("nccl:", 5))
		return true;
	if (e->hdr.name_len != 18 || w0 != RF_PREFIX_WORD("record_p", 8))
		return false;
	w1 = *(const __u64 *)(e->name + 8);
	return w1 == RF_PREFIX_WORD("aram_com", 8) &&
	       e->name[16] == 'm' && e->name[17] == 's';
}

static __always_inline void submit_before(struct rf_before_event *e)
{
	struct rf_event_hdr h;
	bool py = py_cfg.runtime, in = in_cfg.enabled;

	if (!in && in_cfg.collectives && is_collective(e))
		in = true;

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

/* Thread exits are traced by one object for the whole rfbpf process
 * (thread_exits.bpf.c), whose routes and bits the loader shares with this
 * object: a child forked here is routed to this session (exit_job, its
 * slot there) before it runs. */
struct rf_exit_routes_map exit_routes SEC(".maps");
struct rf_exit_bits_map exit_bits SEC(".maps");

const volatile __u32 exit_job = 0;

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
		struct rf_exit_route route = {
			.job = exit_job, .wakeup_bytes = wakeup_bytes,
		};
		__u32 tgid = child->tgid;
		__u8 one = 1;

		bpf_map_update_elem(&traced_children, &tgid, &one, BPF_ANY);
		bpf_map_update_elem(&exit_routes, &tgid, &route, BPF_ANY);
		exit_bit_set(&exit_bits, tgid);
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
