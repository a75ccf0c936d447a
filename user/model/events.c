// SPDX-License-Identifier: BSD-2-Clause
/* Ring-buffer records into the trace model: see events.h. */
#include <string.h>
#include "events.h"

/* The first record of a thread's own names it (the session reads its
 * comm); it may have been made before, by another thread's record (woken
 * by it, --off-cpu). Every kind of record a thread sends comes here
 * first: one that did not (an off-CPU interval, a Python stack) left
 * the thread named "thread" in every output. */
static void see_thread(struct trace *t, const struct event_hooks *k,
		       uint32_t pid, uint32_t tid)
{
	struct thread *th = trace_thread(t, tid, NULL);

	if (!th || th->seen)
		return;
	th->seen = true;
	th->pid = pid;
	if (k->new_thread)
		k->new_thread(k->ctx, t, th);
	if (pid && pid != t->pid && tid == pid)
		t->counts.child_processes_seen++;
}

static void before(struct trace *t, const struct event_hooks *k,
		   const struct rf_before_event *e)
{
	struct rf_event_hdr hdr = e->hdr;

	/* BPF never sends more, but the name must stay inside the record. */
	if (hdr.name_len >= RF_NAME_MAX)
		hdr.name_len = RF_NAME_MAX - 1;
	see_thread(t, k, hdr.pid, hdr.tid);
	stacks_before_event(t, &hdr, e);
}

static void thread_exit(struct trace *t, const struct rf_thread_exit_event *e)
{
	long i = trace_thread_index(t, e->hdr.tid);
	/* comm is not NUL-terminated when it fills its 16 bytes. */
	char comm[sizeof(e->comm) + 1] = "";

	memcpy(comm, e->comm, sizeof(e->comm));
	if (i >= 0)
		trace_name_thread(t, &t->threads[i], comm);
	stacks_thread_exit(t, e->hdr.tid, e->hdr.ts_ns);
}

static void py_stack(struct trace *t, const struct event_hooks *k,
		     const struct rf_py_stack_event *e, size_t size)
{
	if (!t->py_resolver.gen)	/* --python-stacks is off */
		return;
	see_thread(t, k, e->hdr.pid, e->hdr.tid);
	if (!(e->py_flags & RF_PY_F_SAME) && k->py_stack)
		k->py_stack(k->ctx, t, e);
	stacks_py_stack(t, e, size);
}

void events_dispatch(struct trace *t, const struct event_hooks *k,
		     const void *data, size_t size)
{
	const struct rf_event_hdr *h = data;

	if (size < sizeof(*h))
		return;
	switch (h->kind) {
	case RF_EV_BEFORE:
		if (size >= sizeof(struct rf_before_event))
			before(t, k, data);
		break;
	case RF_EV_END:
		see_thread(t, k, h->pid, h->tid);
		stacks_end(t, h);
		break;
	case RF_EV_THREAD_EXIT:
		if (size >= sizeof(struct rf_thread_exit_event))
			thread_exit(t, data);
		break;
	case RF_EV_GPU_LAUNCH:
		if (size < sizeof(struct rf_gpu_launch_event))
			break;
		see_thread(t, k, h->pid, h->tid);
		trace_gpu_launch(t, data);
		break;
	case RF_EV_CUPTI_CALL:
		if (k->cupti_call)
			k->cupti_call(k->ctx, (unsigned)h->rf_addr, (int)h->tid);
		break;
	case RF_EV_FORK:
		if (k->forked)
			k->forked(k->ctx, (uint32_t)h->rf_addr);
		break;
	case RF_EV_GPU_ACTIVITY:
		if (size >= sizeof(struct rf_gpu_activity_event))
			trace_gpu_activity(t, data);
		break;
	case RF_EV_GPU_DEVICE:
		if (size >= sizeof(struct rf_gpu_device_event) &&
		    !gpu_set_device(&t->gpu,
				    &((const struct rf_gpu_device_event *)
				      data)->dev))
			t->counts.oom++;
		break;
	case RF_EV_OFF_CPU:
		if (size < sizeof(struct rf_off_cpu_event))
			break;
		see_thread(t, k, h->pid, h->tid);
		stacks_off_cpu(t, data);
		break;
	case RF_EV_WAKE:
		if (size < sizeof(struct rf_wake_event))
			break;
		see_thread(t, k, h->pid, h->tid);
		stacks_wake(t, data);
		break;
	case RF_EV_INPUTS:
		if (size >= RF_INPUTS_SIZE(0))
			stacks_inputs(t, data, size);
		break;
	case RF_EV_MEMORY:
		if (size < sizeof(struct rf_mem_event))
			break;
		see_thread(t, k, h->pid, h->tid);
		memory_event(t, data);
		break;
	case RF_EV_PY_STACK:
		if (size >= RF_PY_STACK_SIZE(0))
			py_stack(t, k, data, size);
		break;
	}
}
