// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <math.h>
#include <bpf/libbpf.h>
#include "session.h"
#include "session_gpu.h"
#include "attach/elf_symbols.h"
#include "attach/probes.h"
#include "attach/target.h"

/* Looking for the agent reads the job's maps (thousands of lines for a
 * torch process): it was most of a fleet daemon's CPU on a job without
 * the agent. An agent is preloaded, so mapped at the first look; one
 * dlopen()ed later is found within GPU_LOOK_MAX_S. */
#define GPU_LOOK_FIRST_S 0.5
#define GPU_LOOK_MAX_S 8.0
/* The agent's thread looks at the control block every 100 ms. */
#define GPU_FINAL_FLUSH_S 1.0

/* What the agent found when the lease came (it looks every 100 ms):
 * said once, and again if it changes. */
static void note_cupti(struct session *s, const struct rf_gpu_control *c)
{
	struct gpu_counts *g = &s->trace.gpu.counts;
	bool known = c->lease_seen &&
		     (c->cupti_ok || c->cupti_result || c->yielded);
	char line[256];

	if (!known || (g->cupti_known && g->cupti_result == c->cupti_result &&
		       g->cupti_version == c->cupti_version &&
		       g->cupti_yielded == (bool)c->yielded &&
		       !strncmp(g->cupti_holder, c->cupti_holder,
				sizeof(g->cupti_holder))))
		return;
	g->cupti_known = true;
	g->cupti_result = c->cupti_result;
	g->clock_source = c->clock_source;
	g->cupti_version = c->cupti_version;
	g->cupti_yielded = c->yielded;
	memcpy(g->cupti_holder, c->cupti_holder, sizeof(g->cupti_holder));
	g->cupti_holder[sizeof(g->cupti_holder) - 1] = 0;
	gpu_format_cupti(g, line, sizeof(line));
	fprintf(stderr, "rfbpf: GPU: %s\n", line);
}

/* Once the agent holds CUPTI: probes on the job's libcupti that see
 * another tool start using it (RF_CUPTI_WATCHED). Tried once; failing is
 * said and tracing goes on without the watch. */
static void watch_cupti(struct session *s)
{
	static const char *const names[] = RF_CUPTI_WATCHED;
	uint64_t offs[RF_CUPTI_WATCHED_NR];
	char path[4096];
	int ret;

	s->cupti_watched = true;
	ret = target_find_library(s->pid, is_cupti_library_name, path,
				  sizeof(path));
	if (!ret && elf_find_functions(path, names, RF_CUPTI_WATCHED_NR,
				       offs) <= 0)
		ret = -ENOENT;
	if (!ret) {
		ret = probes_attach_cupti_watch(&s->probes, s->pid, path, offs,
						RF_CUPTI_WATCHED_NR,
						s->opt->verbose);
		ret = ret > 0 ? 0 : ret ? ret : -ENOENT;
	}
	if (ret)
		fprintf(stderr, "rfbpf: warning: cannot watch the job's "
			"libcupti for another tool starting (%s): if "
			"torch.profiler or Nsight starts during this run, "
			"both may lose GPU records\n", strerror(-ret));
}

void session_gpu_cupti_call(struct session *s, unsigned which, int tid)
{
	const char *fn;
	char comm[32] = "";
	int ret;

	if (!s->gpu_attached ||
	    !(fn = gpu_note_cupti_taken(&s->trace.gpu.counts, which, tid)))
		return;
	target_thread_comm(s->pid, tid, comm, sizeof(comm));
	ret = gpu_agent_request_yield(&s->gpu);
	fprintf(stderr, "rfbpf: GPU: another tool started using CUPTI in the "
		"job (thread %d%s%s%s called %s: torch.profiler or Nsight): "
		"%s\n", tid, comm[0] ? " \"" : "", comm, comm[0] ? "\"" : "",
		fn, ret ? "could not ask the agent to leave CUPTI to it" :
		"the agent leaves CUPTI to it; no GPU activity from here on");
}

static void read_agent_counters(struct session *s)
{
	struct rf_gpu_control c;
	struct gpu_counts *g = &s->trace.gpu.counts;

	if (gpu_agent_read_control(&s->gpu, &c)) {
		g->agent_counters_stale = true;	/* kept from the last read */
		return;
	}
	g->agent_counters_stale = false;
	/* The agent counts over the job's life: report this session's. */
	if (!s->gpu_base_read) {
		s->gpu_base = c;
		s->gpu_base_read = true;
	}
	g->agent_launches = c.launches - s->gpu_base.launches;
	g->agent_records = c.records - s->gpu_base.records;
	g->agent_dropped = c.records_dropped - s->gpu_base.records_dropped;
	g->agent_untraced = c.records_untraced - s->gpu_base.records_untraced;
	g->agent_unknown = c.records_unknown - s->gpu_base.records_unknown;
	g->agent_errors = c.errors - s->gpu_base.errors;
	g->agent_no_time = c.records_no_time - s->gpu_base.records_no_time;
	g->agent_buffers_cut = c.buffers_cut - s->gpu_base.buffers_cut;
	g->agent_buffers_refused = c.buffers_refused -
				   s->gpu_base.buffers_refused;
	g->agent_launches_failed = c.launches_failed -
				   s->gpu_base.launches_failed;
	g->agent_launches_captured = c.launches_captured -
				     s->gpu_base.launches_captured;
	g->agent_buffers_left = c.buffers_left - s->gpu_base.buffers_left;
	note_cupti(s, &c);
	if (c.cupti_ok && !s->cupti_watched)
		watch_cupti(s);
}

static void attach_agent(struct session *s)
{
	char why[512] = "";
	int ret = gpu_agent_find(&s->gpu, s->pid, why, sizeof(why));

	if (ret == -ENOENT)
		return;		/* not loaded (yet) */
	if (!ret)
		ret = probes_attach_gpu(&s->probes, s->pid, s->gpu.path,
					s->gpu.launch_off, s->gpu.activity_off,
					s->gpu.sync_off, s->opt->verbose);
	if (!ret)
		ret = gpu_agent_renew_now(&s->gpu, monotonic_s());
	if (ret) {
		/* GPU tracing is an addition: go on with the ops. */
		fprintf(stderr, "rfbpf: warning: not tracing GPU activity: "
			"%s\n", why[0] ? why : strerror(-ret));
		gpu_agent_close(&s->gpu);
		s->gpu_given_up = true;
		return;
	}
	s->gpu_attached = true;
	s->trace.gpu.counts.agent_seen = true;
	read_agent_counters(s);
	fprintf(stderr, "rfbpf: GPU: CUPTI agent %s found; lease given, "
		"waiting for it to take CUPTI\n", s->gpu.shown);
}

void session_gpu_poll(struct session *s, double now_s)
{
	if (!s->opt->gpu || s->gpu_given_up)
		return;
	if (s->gpu_attached) {
		/* Its counters are read as we go: the target may be gone by
		 * the time tracing stops. */
		int ret = gpu_agent_renew(&s->gpu, now_s);

		if (ret > 0)
			read_agent_counters(s);
		else if (ret < 0 && !target_alive(s->pid))
			s->gpu_given_up = true;	/* it exited: nothing to do */
		return;
	}
	if (s->gpu_checked_s && now_s - s->gpu_checked_s < s->gpu_look_s)
		return;
	s->gpu_checked_s = now_s;
	s->gpu_look_s = !s->gpu_look_s ? GPU_LOOK_FIRST_S :
			fmin(2 * s->gpu_look_s, GPU_LOOK_MAX_S);
	attach_agent(s);
}

void session_gpu_finish(struct session *s)
{
	struct rf_gpu_control c;
	double start = monotonic_s();
	uint64_t request;
	bool done = false;

	if (!s->gpu_attached)
		return;
	/* The agent forwards records only under a lease: ask it to flush
	 * what CUPTI holds while the lease is still good, and read on until
	 * it says it has (its thread looks every 100 ms). */
	if (!gpu_agent_renew_now(&s->gpu, monotonic_s()) &&
	    !gpu_agent_request_flush(&s->gpu, &request)) {
		while (monotonic_s() - start < GPU_FINAL_FLUSH_S &&
		       target_alive(s->pid)) {
			ring_buffer__poll(s->rb, 20);
			if (!gpu_agent_read_control(&s->gpu, &c) &&
			    c.flush_done >= request) {
				done = true;
				break;
			}
		}
	}
	/* A target that exited flushed at its exit, probes still attached. */
	if (!done && target_alive(s->pid)) {
		fprintf(stderr, "rfbpf: GPU: the agent did not finish its final "
			"flush within %.0f ms; records still in CUPTI are lost\n",
			1e3 * GPU_FINAL_FLUSH_S);
		s->trace.gpu.counts.final_flush_missed = true;
	} else if (s->opt->verbose && done) {
		fprintf(stderr, "rfbpf: GPU: the agent flushed in %.0f ms\n",
			1e3 * (monotonic_s() - start));
	}
	gpu_agent_release(&s->gpu);
	while (ring_buffer__consume(s->rb) > 0)
		;
	read_agent_counters(s);
	gpu_agent_close(&s->gpu);
}

bool session_gpu_agent_activation(struct session *s)
{
	struct gpu_agent g = { .mem_fd = -1 };
	struct rf_gpu_control c;
	char why[512] = "";
	bool used = false;
	int ret;

	if (!s->opt->gpu || gpu_agent_find(&g, s->pid, why, sizeof(why)) ||
	    gpu_agent_read_control(&g, &c) || !c.torch_callback_handle ||
	    !g.op_start_off || !g.op_end_off)
		goto out;
	/* With entry probes on before()/end() already attached, probing
	 * the agent's callback too would see every op twice. */
	ret = !s->use_stubs ? 0 :
	      probes_attach_callbacks(&s->probes, s->pid, g.path,
				      g.op_start_off, g.op_end_off,
				      s->opt->verbose);
	if (ret) {
		fprintf(stderr, "rfbpf: warning: cannot probe the CUPTI "
			"agent's RecordFunction callback (%s); activating "
			"rfbpf's own\n", strerror(-ret));
		goto out;
	}
	if (s->opt->sample_prob != 1.0 && s->opt->sample_prob != c.sample_prob)
		fprintf(stderr, "rfbpf: note: the job samples ops with "
			"RFBPF_SAMPLE=%g; --sample %g does not apply\n",
			c.sample_prob, s->opt->sample_prob);
	s->trace.sample_prob = c.sample_prob > 0 ? c.sample_prob : 1.0;
	if (s->use_stubs)
		snprintf(s->trace.probes, sizeof(s->trace.probes),
			 "CUPTI agent's callback stubs (optimized uprobes)");
	used = true;
out:
	gpu_agent_close(&g);
	return used;
}

bool session_gpu_read_name(void *ctx, uint32_t pid, uint64_t addr,
			   char *buf, size_t len)
{
	(void)ctx;
	return !target_read((pid_t)pid, addr, buf, len);
}
