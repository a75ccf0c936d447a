// SPDX-License-Identifier: BSD-2-Clause
/*
 * GPU events meet the op model here: a call takes the stack (and the id)
 * of the op open on its thread when it happened and is handed to the
 * sinks; a record is joined to its launch and handed to the sinks (which
 * add its time to that op's stack; a sync record, which is no GPU work,
 * goes to their gpu_sync), and a launch that has all of its records is
 * forgotten.
 */
#include "trace.h"

void trace_gpu_launch(struct trace *t, const struct rf_gpu_launch_event *e)
{
	const struct rf_event_hdr *h = &e->hdr;
	int32_t slot = stacks_open_op(t, h->tid, h->rf_addr);
	long th = trace_thread_index(t, h->tid);
	struct gpu_launch_site site = {
		.pid = trace_pid_of(t, h->tid), .tid = h->tid,
		.thread_name = th >= 0 ? t->threads[th].comm_name : UINT32_MAX,
		.op_id = -1,
	};
	const struct gpu_launch *call;

	t->counts.events++;
	/* BPF tracks only ops opened after GPU tagging began (the agent may
	 * load mid-run); the loader knows older ones. */
	if (slot < 0 && !h->rf_addr)
		slot = stacks_innermost_op(t, h->tid);
	if (slot >= 0) {
		site.frames = trace_frames(t, slot, &site.depth);
		site.frame_inputs = trace_frame_inputs(t);
		site.op_id = (int64_t)t->ops[slot].id;
	}
	call = gpu_add_launch(&t->gpu, &t->names, h->ts_ns, &site, e);
	if (!call) {
		t->counts.oom++;
	} else {
		for (int s = 0; s < t->nr_sinks &&
		     trace_passes(t, h->ts_ns); s++)
			if (t->sinks[s].gpu_api)
				t->sinks[s].gpu_api(t->sinks[s].ctx, t, call);
	}
	gpu_evict(&t->gpu, h->ts_ns);
}

void trace_gpu_activity(struct trace *t, const struct rf_gpu_activity_event *e)
{
	struct gpu_activity act;
	struct gpu_done done = { .act = &act, .pid = t->pid };

	t->counts.events++;
	if (!gpu_add_activity(&t->gpu, &t->names, e, &act, &done.launch)) {
		t->counts.oom++;
		return;
	}
	if (done.launch)
		done.pid = done.launch->pid;
	/* Work launched in the window belongs to it, wherever it ran. */
	for (int s = 0; s < t->nr_sinks && trace_passes(t, done.launch ?
			done.launch->ts_ns : act.start_ns); s++) {
		const struct trace_sink *k = &t->sinks[s];
		void (*fn)(void *, struct trace *, const struct gpu_done *) =
			act.kind == RF_GPU_ACT_SYNC ? k->gpu_sync : k->gpu;

		if (fn)
			fn(k->ctx, t, &done);
	}
	gpu_release_if_complete(&t->gpu, done.launch);
}
