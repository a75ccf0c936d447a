// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "gen/perfetto_trace.pb-c.h"
#include "export/perfetto.h"

typedef Perfetto__Protos__TracePacket Packet;
typedef Perfetto__Protos__TrackEvent Event;
typedef Perfetto__Protos__DebugAnnotation Annotation;
typedef Perfetto__Protos__InternedData Interned;
typedef Perfetto__Protos__EventName EventName;
typedef Perfetto__Protos__EventCategory EventCategory;
typedef Perfetto__Protos__DebugAnnotationName AnnotationName;

#define SEQ_INCREMENTAL_STATE_CLEARED	1
#define SEQ_NEEDS_INCREMENTAL_STATE	2
#define CLOCK_MONOTONIC_ID		3
#define CLOCK_BOOTTIME_ID		6
#define CLOCK_INCREMENTAL_ID		64	/* sequence-local */
#define GLOBAL_SEQUENCE			1

#define SLICE_BEGIN PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN
#define SLICE_END PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END
#define INSTANT PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT

/* Track uuids: the kind in the top bits, so none collide. */
#define UUID_PROCESS(pid)	(1ull << 40 | (pid))
#define UUID_THREAD(tid)	(2ull << 40 | (tid))
#define UUID_GPU(dev)		(3ull << 40 | (dev))
#define UUID_STREAM(dev, s)	(4ull << 40 | (uint64_t)(dev) << 24 | \
				 ((s) & 0xffffff))
#define UUID_ASYNC(n)		(5ull << 40 | (n))
#define UUID_RFBPF		(6ull << 40)
/* --memory: a process's live bytes on a device (type, index). */
#define UUID_MEMORY(pid, type, index) \
	(7ull << 40 | (uint64_t)(uint8_t)(type) << 32 | \
	 (uint64_t)(uint8_t)(index) << 24 | ((pid) & 0xffffff))

/* Flow ids: a launch's by its process and correlation id, a fwdbwd pair
 * by a counter (the top bit tells them apart). */
#define FLOW_CALL(pid, corr)	(1ull << 63 | (uint64_t)(pid) << 32 | (corr))

/* Categories and annotation names, interned with these iids (index + 1)
 * on every sequence that uses them. */
static const char *const categories[] = {
	"cpu_op", "user_annotation", "nvtx", "cuda_runtime", "cuda_driver",
	"kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "off_cpu",
	"fwdbwd", "rfbpf", "cpu_instant_event",
};
enum { CAT_CPU_OP, CAT_USER, CAT_NVTX, CAT_RUNTIME, CAT_DRIVER, CAT_KERNEL,
       CAT_MEMCPY, CAT_MEMSET, CAT_SYNC, CAT_OFF_CPU, CAT_FWDBWD, CAT_RFBPF,
       CAT_INSTANT, CAT_NR };

static const char *const annotation_names[] = {
	"Sequence number", "Fwd thread id", "correlation", "cbid", "device",
	"stream", "bytes", "truncated", "grid", "block",
	"registers per thread", "shared memory", "launched by", "step marker",
	"Bytes", "Addr", "Total Allocated", "Total Reserved",
};
enum { ANN_SEQ, ANN_FWD_THREAD, ANN_CORRELATION, ANN_CBID, ANN_DEVICE,
       ANN_STREAM, ANN_BYTES, ANN_TRUNCATED, ANN_GRID, ANN_BLOCK,
       ANN_REGISTERS, ANN_SHARED, ANN_LAUNCHED_BY, ANN_STEP,
       ANN_MEM_BYTES, ANN_MEM_ADDR, ANN_MEM_ALLOCATED, ANN_MEM_RESERVED,
       ANN_NR };

struct pf_event;

struct pf_seq {
	uint32_t id;
	bool incremental;	/* timestamps are deltas on clock 64 */
	uint64_t last_ts;	/* that clock's value */
	struct u64map names;	/* name id + 1 -> iid sent */
	uint64_t next_iid;
	uint32_t cats_sent, anns_sent;	/* bit per iid - 1 */
	struct pf_event *held;	/* events of the open tree (hold) */
	size_t nr_held, cap_held;
	uint32_t next_order;
};

bool perfetto_path(const char *path)
{
	size_t n = strlen(path);

	return (n >= 15 && !strcmp(path + n - 15, ".perfetto-trace")) ||
	       (n >= 8 && !strcmp(path + n - 8, ".pftrace"));
}

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Trace.packet (field 1, length-delimited), packed and written. */
static void write_packet(struct perfetto_writer *w, Packet *p)
{
	uint8_t small[512], *buf = small, head[11];
	size_t len = perfetto__protos__trace_packet__get_packed_size(p), n = 0;
	uint64_t v = len;

	if (len > sizeof(small) && !(buf = malloc(len))) {
		w->oom = true;
		return;
	}
	perfetto__protos__trace_packet__pack(p, buf);
	head[n++] = 0x0a;
	do {
		head[n++] = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
		v >>= 7;
	} while (v);
	fwrite(head, 1, n, w->f);
	fwrite(buf, 1, len, w->f);
	if (buf != small)
		free(buf);
	w->packets++;
}

static struct pf_seq *new_seq(struct perfetto_writer *w, bool incremental)
{
	struct pf_seq *s = calloc(1, sizeof(*s));

	if (!s) {
		w->oom = true;
		return NULL;
	}
	s->id = GLOBAL_SEQUENCE + (uint32_t)w->nr_threads +
		(w->global ? 1 : 0);
	s->incremental = incremental;
	s->next_iid = 1;
	return s;
}

/* Sequence 1's first packet: the clocks, MONOTONIC as the trace's. */
static void start_global(struct perfetto_writer *w)
{
	Perfetto__Protos__ClockSnapshot__Clock mono =
		PERFETTO__PROTOS__CLOCK_SNAPSHOT__CLOCK__INIT,
		boot = PERFETTO__PROTOS__CLOCK_SNAPSHOT__CLOCK__INIT;
	Perfetto__Protos__ClockSnapshot__Clock *clocks[] = { &boot, &mono };
	Perfetto__Protos__ClockSnapshot snap =
		PERFETTO__PROTOS__CLOCK_SNAPSHOT__INIT;
	Perfetto__Protos__TracePacketDefaults defaults =
		PERFETTO__PROTOS__TRACE_PACKET_DEFAULTS__INIT;
	Packet p = PERFETTO__PROTOS__TRACE_PACKET__INIT;

	mono.has_clock_id = boot.has_clock_id = true;
	mono.clock_id = CLOCK_MONOTONIC_ID;
	boot.clock_id = CLOCK_BOOTTIME_ID;
	mono.has_timestamp = boot.has_timestamp = true;
	boot.timestamp = clock_ns(CLOCK_BOOTTIME);
	mono.timestamp = clock_ns(CLOCK_MONOTONIC);
	snap.n_clocks = 2;
	snap.clocks = clocks;
	snap.has_primary_trace_clock = true;
	snap.primary_trace_clock = CLOCK_MONOTONIC_ID;
	defaults.has_timestamp_clock_id = true;
	defaults.timestamp_clock_id = CLOCK_MONOTONIC_ID;
	p.clock_snapshot = &snap;
	p.trace_packet_defaults = &defaults;
	p.has_timestamp = true;
	p.timestamp = mono.timestamp;
	p.has_timestamp_clock_id = true;
	p.timestamp_clock_id = CLOCK_MONOTONIC_ID;
	p.has_trusted_packet_sequence_id = true;
	p.trusted_packet_sequence_id = GLOBAL_SEQUENCE;
	p.has_sequence_flags = true;
	p.sequence_flags = SEQ_INCREMENTAL_STATE_CLEARED;
	write_packet(w, &p);
}

static void begin(struct perfetto_writer *w, FILE *f)
{
	memset(w, 0, sizeof(*w));
	w->f = f;
	w->global = new_seq(w, false);
	if (w->global)
		start_global(w);
}

void perfetto_begin(struct perfetto_writer *w, FILE *f)
{
	begin(w, f);
}

int perfetto_open(struct perfetto_writer *w, const char *path)
{
	struct output_file file;

	/* Opened in place: its stream keeps &w->file.out, which begin's
	 * clearing of w must leave as it was. */
	if (output_file_open(&w->file, path, false))
		return -1;
	file = w->file;
	begin(w, file.out.f);
	w->file = file;
	w->own_file = true;
	return 0;
}

/* A track's descriptor on sequence 1, once per uuid. */
static void describe(struct perfetto_writer *w, uint64_t uuid,
		     uint64_t parent, const char *name, int pid, int64_t tid,
		     const char *process_name, bool again)
{
	Perfetto__Protos__TrackDescriptor d =
		PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__ProcessDescriptor proc =
		PERFETTO__PROTOS__PROCESS_DESCRIPTOR__INIT;
	Perfetto__Protos__ThreadDescriptor thread =
		PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;
	Packet p = PERFETTO__PROTOS__TRACE_PACKET__INIT;

	if (!again && u64map_get(&w->tracks, uuid))
		return;
	if (!again && !u64map_put(&w->tracks, uuid, 1)) {
		w->oom = true;
		return;
	}
	d.has_uuid = true;
	d.uuid = uuid;
	if (parent) {
		d.has_parent_uuid = true;
		d.parent_uuid = parent;
	}
	if (process_name) {
		proc.has_pid = true;
		proc.pid = pid;
		proc.process_name = (char *)process_name;
		d.process = &proc;
	} else if (tid >= 0) {
		thread.has_pid = thread.has_tid = true;
		thread.pid = pid;
		thread.tid = tid;
		thread.thread_name = (char *)name;
		d.thread = &thread;
	} else {
		d.name = (char *)name;
	}
	p.track_descriptor = &d;
	p.has_trusted_packet_sequence_id = true;
	p.trusted_packet_sequence_id = GLOBAL_SEQUENCE;
	write_packet(w, &p);
}

static const char *thread_name(const struct trace *t, const struct thread *th)
{
	return th ? names_get(&t->names, th->comm_name) : "";
}

static void describe_process(struct perfetto_writer *w, const struct trace *t,
			     uint32_t pid)
{
	char name[96];

	if (pid == t->pid)
		snprintf(name, sizeof(name), "%s", t->process_name);
	else
		snprintf(name, sizeof(name), "child of %u", t->pid);
	describe(w, UUID_PROCESS(pid), 0, NULL, (int)pid, -1, name, false);
}

/* The sequence of thread tid, made (and its track described) on first
 * sight: its first packet sets the thread's track as the default and
 * starts its incremental clock at ts. */
static struct pf_seq *thread_seq(struct perfetto_writer *w,
				 const struct trace *t, uint32_t tid,
				 uint64_t ts)
{
	uint64_t *found = u64map_get(&w->thread_seq, tid);
	Perfetto__Protos__ClockSnapshot__Clock inc =
		PERFETTO__PROTOS__CLOCK_SNAPSHOT__CLOCK__INIT,
		mono = PERFETTO__PROTOS__CLOCK_SNAPSHOT__CLOCK__INIT;
	Perfetto__Protos__ClockSnapshot__Clock *clocks[] = { &inc, &mono };
	Perfetto__Protos__ClockSnapshot snap =
		PERFETTO__PROTOS__CLOCK_SNAPSHOT__INIT;
	Perfetto__Protos__TrackEventDefaults ted =
		PERFETTO__PROTOS__TRACK_EVENT_DEFAULTS__INIT;
	Perfetto__Protos__TracePacketDefaults defaults =
		PERFETTO__PROTOS__TRACE_PACKET_DEFAULTS__INIT;
	Packet p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	long k = trace_thread_index(t, tid);
	const struct thread *th = k >= 0 ? &t->threads[k] : NULL;
	uint32_t pid = trace_pid_of(t, tid);
	struct pf_seq *s;

	if (found)
		return w->threads[*found - 1];
	if (w->nr_threads == w->cap_threads) {
		size_t cap = w->cap_threads ? 2 * w->cap_threads : 16;
		void *m = realloc(w->threads, cap * sizeof(*w->threads));

		if (!m) {
			w->oom = true;
			return NULL;
		}
		w->threads = m;
		w->cap_threads = cap;
	}
	if (!(s = new_seq(w, true)) ||
	    !u64map_put(&w->thread_seq, tid, w->nr_threads + 1)) {
		free(s);
		w->oom = true;
		return NULL;
	}
	w->threads[w->nr_threads++] = s;
	describe_process(w, t, pid);
	describe(w, UUID_THREAD(tid), UUID_PROCESS(pid), thread_name(t, th),
		 (int)pid, tid, NULL, false);
	inc.has_clock_id = mono.has_clock_id = true;
	inc.clock_id = CLOCK_INCREMENTAL_ID;
	mono.clock_id = CLOCK_MONOTONIC_ID;
	inc.has_timestamp = mono.has_timestamp = true;
	inc.timestamp = mono.timestamp = ts;
	inc.has_is_incremental = true;
	inc.is_incremental = true;
	snap.n_clocks = 2;
	snap.clocks = clocks;
	ted.has_track_uuid = true;
	ted.track_uuid = UUID_THREAD(tid);
	defaults.has_timestamp_clock_id = true;
	defaults.timestamp_clock_id = CLOCK_INCREMENTAL_ID;
	defaults.track_event_defaults = &ted;
	p.clock_snapshot = &snap;
	p.trace_packet_defaults = &defaults;
	p.has_timestamp = true;
	p.timestamp = ts;
	p.has_timestamp_clock_id = true;
	p.timestamp_clock_id = CLOCK_MONOTONIC_ID;
	p.has_trusted_packet_sequence_id = true;
	p.trusted_packet_sequence_id = s->id;
	p.has_sequence_flags = true;
	p.sequence_flags = SEQ_INCREMENTAL_STATE_CLEARED;
	write_packet(w, &p);
	s->last_ts = ts;
	return s;
}

/* One event, as plain data: written at once, or kept in its thread's
 * sequence until its tree closes (see hold). */
struct pf_ann {
	uint8_t id;		/* ANN_* */
	uint8_t kind;		/* 0 int, 1 static string, 2 name id */
	int64_t i;
	const char *s;
};

struct pf_event {
	uint64_t ts;
	uint32_t order;		/* to keep ties in the order they came */
	Perfetto__Protos__TrackEvent__Type type;
	uint64_t track;		/* 0: the sequence's default */
	uint32_t name;		/* id in trace.names, UINT32_MAX: none */
	char *name_str;		/* else this (owned), not interned */
	int cat;		/* -1: none */
	uint32_t nr_anns;
	struct pf_ann anns[4];
	uint64_t flow, end_flow;	/* 0: none */
	int64_t counter_value;		/* TYPE_COUNTER's */
};

static void add_int(struct pf_event *e, int ann, int64_t v)
{
	e->anns[e->nr_anns++] = (struct pf_ann){ .id = ann, .i = v };
}

static void add_str(struct pf_event *e, int ann, const char *v)
{
	e->anns[e->nr_anns++] = (struct pf_ann){ .id = ann, .kind = 1,
						 .s = v };
}

static void add_name(struct pf_event *e, int ann, uint32_t name)
{
	e->anns[e->nr_anns++] = (struct pf_ann){ .id = ann, .kind = 2,
						 .i = name };
}

/* Writes e on s, interning what s has not seen yet in the same packet. */
static void write_event(struct perfetto_writer *w, const struct trace *t,
			struct pf_seq *s, const struct pf_event *e)
{
	Packet p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Event ev = PERFETTO__PROTOS__TRACK_EVENT__INIT;
	Interned in = PERFETTO__PROTOS__INTERNED_DATA__INIT;
	EventName name = PERFETTO__PROTOS__EVENT_NAME__INIT;
	EventCategory cat = PERFETTO__PROTOS__EVENT_CATEGORY__INIT;
	EventName *names[1] = { &name };
	EventCategory *cats[1] = { &cat };
	AnnotationName ann_names[4], *ann_name_ptrs[4];
	Annotation anns[4], *ann_ptrs[4];
	uint64_t cat_iid, flow = e->flow, end_flow = e->end_flow;

	if (!s)
		return;
	if (e->name != UINT32_MAX) {
		uint64_t *sent = u64map_get(&s->names, (uint64_t)e->name + 1);
		uint64_t iid = sent ? *sent : 0;

		if (!iid) {
			iid = s->next_iid++;
			if (!u64map_put(&s->names, (uint64_t)e->name + 1, iid))
				w->oom = true;
			name.has_iid = true;
			name.iid = iid;
			name.name = (char *)names_get(&t->names, e->name);
			in.n_event_names = 1;
			in.event_names = names;
		}
		ev.has_name_iid = true;
		ev.name_iid = iid;
	} else if (e->name_str) {
		ev.name = e->name_str;
	}
	if (e->cat >= 0) {
		cat_iid = (uint64_t)e->cat + 1;
		if (!(s->cats_sent & 1u << e->cat)) {
			s->cats_sent |= 1u << e->cat;
			cat.has_iid = true;
			cat.iid = cat_iid;
			cat.name = (char *)categories[e->cat];
			in.n_event_categories = 1;
			in.event_categories = cats;
		}
		ev.n_category_iids = 1;
		ev.category_iids = &cat_iid;
	}
	for (uint32_t i = 0; i < e->nr_anns; i++) {
		const struct pf_ann *a = &e->anns[i];
		Annotation *d = &anns[i];

		perfetto__protos__debug_annotation__init(d);
		d->has_name_iid = true;
		d->name_iid = (uint64_t)a->id + 1;
		if (a->kind == 0) {
			d->has_int_value = true;
			d->int_value = a->i;
		} else {
			d->string_value = (char *)(a->kind == 1 ? a->s :
				names_get(&t->names, (uint32_t)a->i));
		}
		ann_ptrs[i] = d;
		if (!(s->anns_sent & 1u << a->id)) {
			AnnotationName *n = &ann_names[in.n_debug_annotation_names];

			s->anns_sent |= 1u << a->id;
			perfetto__protos__debug_annotation_name__init(n);
			n->has_iid = true;
			n->iid = (uint64_t)a->id + 1;
			n->name = (char *)annotation_names[a->id];
			ann_name_ptrs[in.n_debug_annotation_names++] = n;
		}
	}
	in.debug_annotation_names = ann_name_ptrs;
	ev.n_debug_annotations = e->nr_anns;
	ev.debug_annotations = ann_ptrs;
	ev.has_type = true;
	ev.type = e->type;
	if (e->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER) {
		ev.has_counter_value = true;
		ev.counter_value = e->counter_value;
	}
	if (e->track) {
		ev.has_track_uuid = true;
		ev.track_uuid = e->track;
	}
	if (flow) {
		ev.n_flow_ids = 1;
		ev.flow_ids = &flow;
	}
	if (end_flow) {
		ev.n_terminating_flow_ids = 1;
		ev.terminating_flow_ids = &end_flow;
	}
	p.has_timestamp = true;
	if (s->incremental && e->ts >= s->last_ts) {
		p.timestamp = e->ts - s->last_ts;
		s->last_ts = e->ts;
	} else {
		/* Earlier than the clock's last value (deltas are unsigned):
		 * this one time is absolute, and the clock keeps its value. */
		p.timestamp = e->ts;
		p.has_timestamp_clock_id = s->incremental;
		p.timestamp_clock_id = CLOCK_MONOTONIC_ID;
		w->absolute_times += s->incremental;
	}
	p.track_event = &ev;
	if (in.n_event_names || in.n_event_categories ||
	    in.n_debug_annotation_names)
		p.interned_data = &in;
	p.has_trusted_packet_sequence_id = true;
	p.trusted_packet_sequence_id = s->id;
	p.has_sequence_flags = true;
	p.sequence_flags = SEQ_NEEDS_INCREMENTAL_STATE;
	write_packet(w, &p);
}

static int by_time(const void *x, const void *y)
{
	const struct pf_event *a = x, *b = y;

	return a->ts != b->ts ? (a->ts > b->ts) - (a->ts < b->ts) :
	       (a->order > b->order) - (a->order < b->order);
}

/* Writes what s holds, in time order. */
static void flush(struct perfetto_writer *w, const struct trace *t,
		  struct pf_seq *s)
{
	qsort(s->held, s->nr_held, sizeof(*s->held), by_time);
	for (size_t i = 0; i < s->nr_held; i++) {
		write_event(w, t, s, &s->held[i]);
		free(s->held[i].name_str);
	}
	s->nr_held = 0;
}

/* An event of a thread's sequence waits there until the op tree it is
 * in closes (flush): then the tree's events go out in time order, so
 * each takes a small delta on the sequence's clock rather than an
 * absolute time (an op closes after its children but began before
 * them). A tree of more than PF_HOLD_MAX events is written in parts. */
#define PF_HOLD_MAX 65536

static void hold(struct perfetto_writer *w, const struct trace *t,
		 struct pf_seq *s, const struct pf_event *e)
{
	if (!s)
		return;
	if (s->nr_held == s->cap_held) {
		size_t cap = s->cap_held ? 2 * s->cap_held : 64;
		void *m = s->nr_held < PF_HOLD_MAX ?
			  realloc(s->held, cap * sizeof(*s->held)) : NULL;

		if (!m) {
			flush(w, t, s);
		} else {
			s->held = m;
			s->cap_held = cap;
		}
	}
	s->held[s->nr_held] = *e;
	s->held[s->nr_held].order = s->next_order++;
	s->nr_held++;
}

/* A slice: BEGIN at start, END at end (with e's annotations and its
 * terminating flow), held on s, or written at once on sequence 1. */
static void add_slice(struct perfetto_writer *w, const struct trace *t,
		      struct pf_seq *s, const struct pf_event *e,
		      uint64_t start, uint64_t end)
{
	struct pf_event b = *e, x = *e;

	b.ts = start;
	b.type = SLICE_BEGIN;
	b.nr_anns = 0;
	b.end_flow = 0;
	x.ts = end;
	x.type = SLICE_END;
	x.name = UINT32_MAX;
	x.name_str = NULL;
	x.cat = -1;
	x.flow = 0;
	w->slices++;
	if (s && s->incremental) {
		hold(w, t, s, &b);
		hold(w, t, s, &x);
		return;
	}
	write_event(w, t, s, &b);
	write_event(w, t, s, &x);
	free(b.name_str);
}

static char *dup_name(struct perfetto_writer *w, const char *name)
{
	char *d = strdup(name);

	if (!d)
		w->oom = true;
	return d;
}

static int scope_cat(uint8_t scope)
{
	return scope == RF_SCOPE_NVTX ? CAT_NVTX :
	       !strcmp(scope_category(scope), "user_annotation") ? CAT_USER :
	       CAT_CPU_OP;
}

/* The forward op of a backward one: an instant at its start, on its
 * thread, where the flow begins (Kineto's "s"). The flow's id, or 0. */
static uint64_t fwdbwd_flow(struct perfetto_writer *w, const struct trace *t,
			    uint32_t pid, const struct op *o)
{
	struct fwd_op fwd;

	fwdbwd_forward(&w->fwdbwd, pid, o);
	if (!o->fwd_thread || !fwdbwd_backward(&w->fwdbwd, pid, o, &fwd))
		return 0;
	{
		struct pf_event e = { .ts = fwd.start_ns, .type = INSTANT,
				      .name = UINT32_MAX, .cat = CAT_FWDBWD,
				      .flow = ++w->flows };
		struct pf_seq *s = thread_seq(w, t, fwd.tid, fwd.start_ns);

		/* Its tree was written long ago: an absolute time. */
		e.name_str = dup_name(w, "fwdbwd");
		hold(w, t, s, &e);
		return e.flow;
	}
}

static void on_op(void *ctx, struct trace *t, const struct closed_op *c)
{
	struct perfetto_writer *w = ctx;
	const struct op *o = c->op;
	struct pf_seq *s;
	struct pf_event e = { .name = UINT32_MAX, .cat = -1 };

	e.name = o->name;
	e.cat = scope_cat(o->scope);
	if (o->seq >= 0) {
		add_int(&e, ANN_SEQ, o->seq);
		if (o->fwd_thread)
			add_int(&e, ANN_FWD_THREAD, (int64_t)o->fwd_thread);
	}
	if (o->flags & OP_TRUNCATED)
		add_str(&e, ANN_TRUNCATED, o->flags & OP_OPEN_AT_DETACH ?
			"open at detach" : o->flags & OP_THREAD_EXITED ?
			"thread exited" : o->flags & OP_CLOSED_BY_PARENT ?
			"closed by parent" : "replaced");
	e.end_flow = o->seq >= 0 ? fwdbwd_flow(w, t, c->pid, o) : 0;
	if (o->flags & OP_ASYNC_END) {
		/* Ended on another thread: its own track, so that it
		 * neither closes nor encloses the thread's slices. */
		uint64_t uuid = UUID_ASYNC(++w->async_tracks);
		char label[160];

		snprintf(label, sizeof(label), "async: %s",
			 names_get(&t->names, o->name));
		describe_process(w, t, c->pid);
		describe(w, uuid, UUID_PROCESS(c->pid), label, 0, -1, NULL,
			 false);
		e.track = uuid;
		add_slice(w, t, w->global, &e, o->start_ns, o->end_ns);
		return;
	}
	s = thread_seq(w, t, o->tid, o->start_ns);
	add_slice(w, t, s, &e, o->start_ns, o->end_ns);
	if (s && !o->depth)	/* a tree closed: out, in time order */
		flush(w, t, s);
}

static int gpu_cat(uint32_t kind)
{
	return kind == RF_GPU_ACT_KERNEL ? CAT_KERNEL :
	       kind == RF_GPU_ACT_MEMCPY ? CAT_MEMCPY :
	       kind == RF_GPU_ACT_MEMSET ? CAT_MEMSET : CAT_SYNC;
}

static void on_gpu(void *ctx, struct trace *t, const struct gpu_done *g)
{
	struct perfetto_writer *w = ctx;
	const struct gpu_activity *a = g->act;
	const struct gpu_launch *l = g->launch;
	uint32_t stream = a->stream_id == RF_GPU_SYNC_NONE ? 0xffffff :
			  a->stream_id;
	char dev[32], str[32];
	struct pf_event e = { .name = UINT32_MAX, .cat = -1 };

	snprintf(dev, sizeof(dev), "GPU %u", a->device_id);
	describe(w, UUID_GPU(a->device_id), 0, dev, 0, -1, NULL, false);
	if (stream == 0xffffff)
		snprintf(str, sizeof(str), "context syncs");
	else
		snprintf(str, sizeof(str), "stream %u", stream);
	describe(w, UUID_STREAM(a->device_id, stream), UUID_GPU(a->device_id),
		 str, 0, -1, NULL, false);
	e.track = UUID_STREAM(a->device_id, stream);
	e.name = a->name;
	e.cat = gpu_cat(a->kind);
	add_int(&e, ANN_CORRELATION, l ? l->correlation_id :
		a->correlation_id);
	add_int(&e, ANN_DEVICE, a->device_id);
	if (a->kind == RF_GPU_ACT_MEMCPY || a->kind == RF_GPU_ACT_MEMSET)
		add_int(&e, ANN_BYTES, (int64_t)a->bytes);
	if (l && l->depth)
		add_name(&e, ANN_LAUNCHED_BY, l->op_name);
	if (l)
		e.flow = FLOW_CALL(l->pid, l->correlation_id);
	add_slice(w, t, w->global, &e, a->start_ns, a->end_ns);
}

static void on_gpu_api(void *ctx, struct trace *t,
		       const struct gpu_launch *l)
{
	struct perfetto_writer *w = ctx;
	uint64_t start = l->enter_ns ? l->enter_ns : l->ts_ns;
	struct pf_event e = { .name = UINT32_MAX, .cat = -1 };

	e.name = l->api_name;
	e.cat = l->domain == RF_GPU_API_DRIVER ? CAT_DRIVER : CAT_RUNTIME;
	add_int(&e, ANN_CORRELATION, l->correlation_id);
	add_int(&e, ANN_CBID, l->cbid);
	e.flow = FLOW_CALL(l->pid, l->correlation_id);
	add_slice(w, t, thread_seq(w, t, l->tid, start), &e, start,
		    l->ts_ns);
}

static void on_off_cpu(void *ctx, struct trace *t,
		       const struct off_cpu_interval *iv)
{
	struct perfetto_writer *w = ctx;
	char name[64];
	struct pf_event e = { .name = UINT32_MAX, .cat = -1 };

	snprintf(name, sizeof(name), "off CPU: %s",
		 off_cpu_reason_name(iv->reason));
	e.name_str = dup_name(w, name);
	e.cat = CAT_OFF_CPU;
	add_slice(w, t, thread_seq(w, t, iv->tid, iv->start_ns), &e,
		    iv->start_ns, iv->end_ns);
}

/* The counter track of a process's live bytes on one device. */
static void describe_memory(struct perfetto_writer *w, const struct trace *t,
			    const struct mem_change *c, uint64_t uuid)
{
	Perfetto__Protos__TrackDescriptor d =
		PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__CounterDescriptor counter =
		PERFETTO__PROTOS__COUNTER_DESCRIPTOR__INIT;
	Packet p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	char name[64];

	if (u64map_get(&w->tracks, uuid))
		return;
	if (!u64map_put(&w->tracks, uuid, 1)) {
		w->oom = true;
		return;
	}
	describe_process(w, t, c->pid);
	snprintf(name, sizeof(name), "Live bytes (%s",
		 memory_device_name(c->device_type));
	if (c->device_index >= 0)
		snprintf(name + strlen(name), sizeof(name) - strlen(name),
			 ":%d", c->device_index);
	strcat(name, ")");
	counter.has_unit = true;
	counter.unit = PERFETTO__PROTOS__COUNTER_DESCRIPTOR__UNIT__UNIT_SIZE_BYTES;
	d.has_uuid = d.has_parent_uuid = true;
	d.uuid = uuid;
	d.parent_uuid = UUID_PROCESS(c->pid);
	d.name = name;
	d.counter = &counter;
	p.track_descriptor = &d;
	p.has_trusted_packet_sequence_id = true;
	p.trusted_packet_sequence_id = GLOBAL_SEQUENCE;
	write_packet(w, &p);
}

/* --memory: the [memory] instant on the thread (as Kineto's, with its
 * first four fields), and the device's live bytes on its counter track. */
static void on_memory(void *ctx, struct trace *t, const struct mem_change *c)
{
	struct perfetto_writer *w = ctx;
	uint64_t uuid = UUID_MEMORY(c->pid, c->device_type, c->device_index);
	struct pf_event e = { .name = UINT32_MAX, .cat = CAT_INSTANT,
			      .type = INSTANT, .ts = c->ts_ns };
	struct pf_event n = { .name = UINT32_MAX, .cat = -1,
			      .type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER,
			      .ts = c->ts_ns, .track = uuid };
	struct pf_seq *s = thread_seq(w, t, c->tid, c->ts_ns);

	e.name_str = dup_name(w, "[memory]");
	add_int(&e, ANN_MEM_BYTES, c->bytes);
	add_int(&e, ANN_MEM_ADDR, (int64_t)c->addr);
	add_int(&e, ANN_MEM_ALLOCATED, (int64_t)c->total_allocated);
	add_int(&e, ANN_MEM_RESERVED, (int64_t)c->total_reserved);
	if (s && s->incremental) {
		hold(w, t, s, &e);
	} else {
		write_event(w, t, s, &e);
		free(e.name_str);
	}
	describe_memory(w, t, c, uuid);
	n.counter_value = (int64_t)c->live;
	write_event(w, t, w->global, &n);
	w->counters++;
}

static void on_step(void *ctx, struct trace *t, const struct step *st)
{
	struct perfetto_writer *w = ctx;
	char name[48];
	struct pf_event e = { .name = UINT32_MAX, .cat = -1 };

	if (steps_marker_is_step(t->steps))
		return;
	snprintf(name, sizeof(name), "ProfilerStep#%lld",
		 (long long)st->number);
	e.name_str = dup_name(w, name);
	e.cat = CAT_USER;
	add_str(&e, ANN_STEP, steps_source_name(t->steps));
	add_slice(w, t, thread_seq(w, t, st->tid, st->start_ns), &e,
		    st->start_ns, st->end_ns);
}

struct trace_sink perfetto_sink(struct perfetto_writer *w)
{
	return (struct trace_sink){ .op = on_op, .gpu = on_gpu,
				    .gpu_sync = on_gpu,
				    .gpu_api = on_gpu_api,
				    .off_cpu = on_off_cpu, .step = on_step,
				    .memory = on_memory, .ctx = w };
}

int perfetto_publish(struct perfetto_writer *w)
{
	return w->own_file ? output_file_publish(&w->file) : 0;
}

static void free_state(struct perfetto_writer *w)
{
	for (size_t i = 0; i < w->nr_threads; i++) {
		struct pf_seq *s = w->threads[i];

		for (size_t k = 0; k < s->nr_held; k++)
			free(s->held[k].name_str);
		free(s->held);
		u64map_free(&s->names);
		free(s);
	}
	free(w->threads);
	if (w->global)
		u64map_free(&w->global->names);
	free(w->global);
	u64map_free(&w->thread_seq);
	u64map_free(&w->tracks);
	fwdbwd_free(&w->fwdbwd);
	w->threads = NULL;
	w->global = NULL;
	w->nr_threads = w->cap_threads = 0;
}

bool perfetto_discard(struct perfetto_writer *w)
{
	bool had;

	if (!w->own_file)
		return false;
	w->f = NULL;
	had = output_file_discard(&w->file);
	free_state(w);
	w->own_file = false;
	return had;
}

/* An instant on rfbpf's own track whose annotations are the run's
 * counters, so what was lost is in this file as in the others. */
static void write_counts(struct perfetto_writer *w, const struct trace *t)
{
	Packet p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Event ev = PERFETTO__PROTOS__TRACK_EVENT__INIT;
	Annotation anns[RF_LOSS_NR + 16], *ptrs[RF_LOSS_NR + 16];
	const struct dist_info *d = &t->dist;
	size_t n = 0;

#define COUNTER(label, value) do {					\
		perfetto__protos__debug_annotation__init(&anns[n]);	\
		anns[n].name = (char *)(label);				\
		anns[n].has_uint_value = true;				\
		anns[n].uint_value = (value);				\
		ptrs[n] = &anns[n];					\
		n++;							\
	} while (0)
	COUNTER("events", t->counts.events);
	COUNTER("ops", t->counts.ops);
	COUNTER("slices", w->slices);
	if (t->mem.on) {
		COUNTER("memory_allocations", t->mem.counts.allocs);
		COUNTER("memory_frees", t->mem.counts.frees);
		COUNTER("memory_frees_of_blocks_made_before_tracing",
			t->mem.counts.frees_unknown);
		COUNTER("memory_counter_values", w->counters);
	}
	for (size_t i = 0; i < nr_loss_counters; i++)
		COUNTER(loss_counters[i].json,
			loss_count(&t->counts, &loss_counters[i]));
	COUNTER("ops_outside_steps", t->counts.ops_outside_steps);
	COUNTER("writer_out_of_memory", w->oom);
	/* A distributed job's place, as the JSON's distributedInfo. */
	if (d->rank >= 0)
		COUNTER("rank", d->rank);
	if (d->world_size >= 0)
		COUNTER("world_size", d->world_size);
	if (d->local_rank >= 0)
		COUNTER("local_rank", d->local_rank);
	if (d->backend[0]) {
		perfetto__protos__debug_annotation__init(&anns[n]);
		anns[n].name = "backend";
		anns[n].string_value = (char *)d->backend;
		ptrs[n] = &anns[n];
		n++;
	}
#undef COUNTER
	describe(w, UUID_RFBPF, 0, "rfbpf", 0, -1, NULL, false);
	ev.has_type = true;
	ev.type = INSTANT;
	ev.name = "rfbpf counts";
	ev.has_track_uuid = true;
	ev.track_uuid = UUID_RFBPF;
	ev.n_debug_annotations = n;
	ev.debug_annotations = ptrs;
	p.track_event = &ev;
	p.has_timestamp = true;
	p.timestamp = t->last_ns ? t->last_ns : clock_ns(CLOCK_MONOTONIC);
	p.has_trusted_packet_sequence_id = true;
	p.trusted_packet_sequence_id = GLOBAL_SEQUENCE;
	write_packet(w, &p);
}

int perfetto_finish(struct perfetto_writer *w, const struct trace *t)
{
	int err;

	for (size_t i = 0; i < w->nr_threads; i++)
		flush(w, t, w->threads[i]);
	/* Threads named later than their first event (Python names). */
	for (size_t i = 0; i < t->nr_threads; i++) {
		const struct thread *th = &t->threads[i];

		if (u64map_get(&w->thread_seq, th->tid))
			describe(w, UUID_THREAD(th->tid),
				 UUID_PROCESS(trace_pid_of(t, th->tid)),
				 thread_name(t, th),
				 (int)trace_pid_of(t, th->tid), th->tid,
				 NULL, true);
	}
	write_counts(w, t);
	free_state(w);
	if (w->own_file) {
		w->f = NULL;
		w->own_file = false;
		return output_file_close(&w->file);
	}
	err = ferror(w->f);
	w->f = NULL;
	if (err) {
		errno = EIO;
		return -1;
	}
	return 0;
}
