// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <math.h>
#include <bpf/libbpf.h>
#include <time.h>
#include "model/clocks.h"
#include "gpu/gpu_session.h"
#include "cli.h"
#include "model/trace.h"
#include "attach/elf_symbols.h"
#include "attach/probes.h"
#include "attach/target.h"
#include "gpu/inject.h"
#include "attach/remote_call.h"

/* Looking for the agent reads the job's maps (thousands of lines for a
 * torch process): it was most of a fleet daemon's CPU on a job without
 * the agent. An agent is preloaded, so mapped at the first look; one
 * dlopen()ed later is found within GPU_LOOK_MAX_S. */
#define GPU_LOOK_FIRST_S 0.5
#define GPU_LOOK_MAX_S 8.0
/* The agent's thread looks at the control block every 100 ms. */
#define GPU_FINAL_FLUSH_S 1.0

void gpu_session_bind(struct gpu_session *gs, const pid_t *pid,
		      const struct options *opt, struct trace *trace,
		      struct probes *probes, struct ring_buffer *const *rb,
		      const bool *use_stubs)
{
	gs->of.pid = pid;
	gs->of.opt = opt;
	gs->of.trace = trace;
	gs->of.probes = probes;
	gs->of.rb = rb;
	gs->of.use_stubs = use_stubs;
}

/* What the agent found when the lease came (it looks every 100 ms):
 * said once, and again if it changes. */
static void note_cupti(struct gpu_session *gs, const struct rf_gpu_control *c)
{
	struct gpu_counts *g = &gs->of.trace->gpu.counts;
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
 * another tool start using it (RF_CUPTI_WATCHED), and on its
 * cuptiSubscribe make the agent leave inside that call (the agent's
 * yield_signal). Tried once; failing is said and tracing goes on without
 * the watch. */
static void watch_cupti(struct gpu_session *gs,
			const struct rf_gpu_control *c)
{
	static const char *const names[] = RF_CUPTI_WATCHED;
	uint64_t offs[RF_CUPTI_WATCHED_NR];
	char path[4096];
	int ret;

	gs->cupti_watched = true;
	probes_set_cupti_yield(gs->of.probes, c->yield_signal,
			       c->yield_handler);
	ret = target_find_library(*gs->of.pid, is_cupti_library_name, path,
				  sizeof(path));
	if (!ret && elf_find_functions(path, names, RF_CUPTI_WATCHED_NR,
				       offs) <= 0)
		ret = -ENOENT;
	if (!ret) {
		ret = probes_attach_cupti_watch(gs->of.probes, *gs->of.pid,
						path, offs,
						RF_CUPTI_WATCHED_NR,
						gs->of.opt->verbose);
		ret = ret > 0 ? 0 : ret ? ret : -ENOENT;
	}
	if (ret)
		fprintf(stderr, "rfbpf: warning: cannot watch the job's "
			"libcupti for another tool starting (%s): if "
			"torch.profiler or Nsight starts during this run, "
			"both may lose GPU records\n", strerror(-ret));
}

void gpu_session_cupti_call(struct gpu_session *gs, unsigned which, int tid)
{
	const char *fn;
	char comm[32] = "";
	int ret;

	if (!gs->attached ||
	    !(fn = gpu_note_cupti_taken(&gs->of.trace->gpu.counts, which, tid)))
		return;
	target_thread_comm(*gs->of.pid, tid, comm, sizeof(comm));
	ret = gpu_agent_request_yield(&gs->agent);
	fprintf(stderr, "rfbpf: GPU: another tool started using CUPTI in the "
		"job (thread %d%s%s%s called %s: torch.profiler or Nsight): "
		"%s\n", tid, comm[0] ? " \"" : "", comm, comm[0] ? "\"" : "",
		fn, ret ? "could not ask the agent to leave CUPTI to it" :
		"the agent leaves CUPTI to it; no GPU activity from here on");
}

static void read_agent_counters(struct gpu_session *gs)
{
	struct rf_gpu_control c;
	struct gpu_counts *g = &gs->of.trace->gpu.counts;

	if (gpu_agent_read_control(&gs->agent, &c)) {
		g->agent_counters_stale = true;	/* kept from the last read */
		return;
	}
	g->agent_counters_stale = false;
	/* The agent counts over the job's life: report this session's. */
	if (!gs->base_read) {
		gs->base = c;
		gs->base_read = true;
	}
	g->agent_launches = c.launches - gs->base.launches;
	g->agent_records = c.records - gs->base.records;
	g->agent_dropped = c.records_dropped - gs->base.records_dropped;
	g->agent_untraced = c.records_untraced - gs->base.records_untraced;
	g->agent_unknown = c.records_unknown - gs->base.records_unknown;
	g->agent_errors = c.errors - gs->base.errors;
	g->agent_no_time = c.records_no_time - gs->base.records_no_time;
	g->agent_buffers_cut = c.buffers_cut - gs->base.buffers_cut;
	g->agent_buffers_refused = c.buffers_refused -
				   gs->base.buffers_refused;
	g->agent_launches_failed = c.launches_failed -
				   gs->base.launches_failed;
	g->agent_launches_captured = c.launches_captured -
				     gs->base.launches_captured;
	g->agent_buffers_left = c.buffers_left - gs->base.buffers_left;
	g->agent_yields_in_call = c.yields_in_call - gs->base.yields_in_call;
	note_cupti(gs, &c);
	if (c.cupti_ok && !gs->cupti_watched)
		watch_cupti(gs, &c);
}

static void attach_agent(struct gpu_session *gs)
{
	struct gpu_agent *a = &gs->agent;
	char why[512] = "";
	int ret = gpu_agent_find(&gs->agent, *gs->of.pid, why, sizeof(why));

	if (ret == -ENOENT)
		return;		/* not loaded (yet) */
	if (!ret)
		ret = probes_attach_gpu(gs->of.probes, *gs->of.pid, a->path,
					&a->probes, gs->of.opt->verbose);
	if (!ret)
		ret = gpu_agent_renew_now(&gs->agent, monotonic_s());
	if (ret) {
		/* GPU tracing is an addition: go on with the ops. */
		fprintf(stderr, "rfbpf: warning: not tracing GPU activity: "
			"%s\n", why[0] ? why : strerror(-ret));
		gpu_agent_close(&gs->agent);
		gs->given_up = true;
		return;
	}
	gs->attached = true;
	gs->of.trace->gpu.counts.agent_seen = true;
	/* Its sync calls then wait for their records. */
	gs->of.trace->gpu.sync_records = a->probes.sync &&
					 a->probes.sync_record;
	read_agent_counters(gs);
	fprintf(stderr, "rfbpf: GPU: CUPTI agent %s found; lease given, "
		"waiting for it to take CUPTI\n", gs->agent.shown);
}

static bool is_nvtx_name(const char *base)
{
	return !strncmp(base, "libnvToolsExt.so", 16);
}

/* The job's NVTX ranges (bpf/nvtx.bpf.c), from its shared NVTX library
 * once it maps one: torch.cuda.nvtx loads it with torch's CUDA part. */
static void look_for_nvtx(struct gpu_session *gs, double now_s)
{
	static const char *const funcs[] = { "nvtxRangePushA",
					     "nvtxRangePop" };
	pid_t pid = *gs->of.pid;
	char path[4096], shown[4096];
	uint64_t off[2];
	int ret;

	if (gs->nvtx_attached || (gs->nvtx_checked_s &&
				  now_s - gs->nvtx_checked_s < gs->nvtx_look_s))
		return;
	/* Ranges are all recorded, ops only when every one is: a sampled
	 * session would weigh them as samples (and fleet mode would pay for
	 * them outside its bursts). */
	if (gs->of.opt->continuous || gs->of.opt->sample_prob < 1.0 ||
	    gs->of.opt->tree_prob < 1.0) {
		gs->nvtx_attached = true;
		return;
	}
	/* The maps are read with the agent's backoff (the top of the
	 * file says why). */
	gs->nvtx_checked_s = now_s;
	gs->nvtx_look_s = !gs->nvtx_look_s ? GPU_LOOK_FIRST_S :
			  fmin(2 * gs->nvtx_look_s, GPU_LOOK_MAX_S);
	if (target_find_library(pid, is_nvtx_name, path, sizeof(path)))
		return;		/* not (yet) mapped */
	gs->nvtx_attached = true;	/* one try */
	target_mapped_name(path, shown, sizeof(shown));
	if (elf_find_functions(path, funcs, 2, off) != 2 || !off[0] ||
	    !off[1]) {
		fprintf(stderr, "rfbpf: warning: %s has no nvtxRangePushA and "
			"nvtxRangePop: NVTX ranges are not traced\n", shown);
		return;
	}
	ret = probes_attach_nvtx(gs->of.probes, pid, path, off[0], off[1],
				 gs->of.opt->verbose);
	if (ret)
		fprintf(stderr, "rfbpf: warning: NVTX ranges are not traced "
			"(%s: %s)\n", shown, strerror(-ret));
	else if (gs->of.opt->verbose)
		fprintf(stderr, "rfbpf: NVTX ranges traced from %s\n", shown);
}

void gpu_session_poll(struct gpu_session *gs, double now_s)
{
	if (!gs->of.opt->gpu || gs->given_up)
		return;
	look_for_nvtx(gs, now_s);
	if (gs->attached) {
		/* Its counters are read as we go: the target may be gone by
		 * the time tracing stops. */
		int ret = gpu_agent_renew(&gs->agent, now_s);

		if (ret > 0)
			read_agent_counters(gs);
		else if (ret < 0 && !target_alive(*gs->of.pid))
			gs->given_up = true;	/* it exited: nothing to do */
		return;
	}
	if (gs->checked_s && now_s - gs->checked_s < gs->look_s)
		return;
	gs->checked_s = now_s;
	gs->look_s = !gs->look_s ? GPU_LOOK_FIRST_S :
			fmin(2 * gs->look_s, GPU_LOOK_MAX_S);
	attach_agent(gs);
}

static void say_not_loaded(pid_t pid, const char *why)
{
	fprintf(stderr, "rfbpf: GPU: process %d uses CUDA, but its CUPTI "
		"agent was not loaded (%s): GPU kernels are not traced\n",
		pid, why);
}

void gpu_session_want_agent(struct gpu_session *gs)
{
	const struct options *opt = gs->of.opt;
	pid_t pid = *gs->of.pid;
	char why[512];
	int ret;

	gs->inject = false;
	if (!opt->gpu || !opt->gpu_inject)
		return;
	ret = gpu_inject_prepare(pid, opt->gpu_agent, &gs->inject_how, why,
				 sizeof(why));
	gs->inject = ret > 0;
	if (ret < 0)
		say_not_loaded(pid, why);
	else if (!ret && opt->verbose)
		fprintf(stderr, "rfbpf: GPU: no CUPTI agent loaded into process "
			"%d: %s\n", pid, why);
}

/* A job whose threads all wait is tried again this often, while it
 * runs ops (each try holds one thread for a moment). */
#define INJECT_RETRY_S 2.0

void gpu_session_inject(struct gpu_session *gs, struct held_thread *h)
{
	pid_t pid = *gs->of.pid;
	char why[512];
	int ret;

	if (!gs->inject)
		return;
	gs->inject = false;
	ret = gpu_inject(h, &gs->inject_how, gs->of.opt->verbose, why,
			 sizeof(why));
	if (ret && !h->at_op) {
		/* Said once; tried again at an op (gpu_session_wants_hold). */
		if (!gs->inject_retry)
			fprintf(stderr, "rfbpf: GPU: process %d uses CUDA; its "
				"CUPTI agent is not loaded yet (%s): rfbpf "
				"tries again when one of its threads runs an "
				"op\n", pid, why);
		gs->inject = gs->inject_retry = true;
		gs->inject_next_s = monotonic_s() + INJECT_RETRY_S;
		gs->inject_ops = gs->of.trace->counts.ops;
		return;
	}
	gs->inject_retry = false;
	if (ret) {
		say_not_loaded(pid, why);
		return;
	}
	fprintf(stderr, "rfbpf: GPU: loaded the CUPTI agent into process %d "
		"(%s); it stays there, idle, after rfbpf detaches\n", pid,
		gs->inject_how.agent);
	gs->checked_s = 0;	/* look for it at the next turn */
	gs->look_s = 0;
}

bool gpu_session_wants_hold(struct gpu_session *gs, double now_s)
{
	if (!gs->inject || !gs->inject_retry || now_s < gs->inject_next_s ||
	    gs->of.trace->counts.ops == gs->inject_ops)
		return false;
	gs->inject_next_s = now_s + INJECT_RETRY_S;
	gs->inject_ops = gs->of.trace->counts.ops;
	return true;
}

void gpu_session_finish(struct gpu_session *gs)
{
	struct rf_gpu_control c;
	double start = monotonic_s();
	uint64_t request;
	bool done = false;

	if (!gs->attached)
		return;
	/* The agent forwards records only under a lease: ask it to flush
	 * what CUPTI holds while the lease is still good, and read on until
	 * it says it has (its thread looks every 100 ms). */
	if (!gpu_agent_renew_now(&gs->agent, monotonic_s()) &&
	    !gpu_agent_request_flush(&gs->agent, &request)) {
		while (monotonic_s() - start < GPU_FINAL_FLUSH_S &&
		       target_alive(*gs->of.pid)) {
			ring_buffer__poll(*gs->of.rb, 20);
			if (!gpu_agent_read_control(&gs->agent, &c) &&
			    c.flush_done >= request) {
				done = true;
				break;
			}
		}
	}
	/* A target that exited flushed at its exit, probes still attached. */
	if (!done && target_alive(*gs->of.pid)) {
		fprintf(stderr, "rfbpf: GPU: the agent did not finish its final "
			"flush within %.0f ms; records still in CUPTI are lost\n",
			1e3 * GPU_FINAL_FLUSH_S);
		gs->of.trace->gpu.counts.final_flush_missed = true;
	} else if (gs->of.opt->verbose && done) {
		fprintf(stderr, "rfbpf: GPU: the agent flushed in %.0f ms\n",
			1e3 * (monotonic_s() - start));
	}
	gpu_agent_release(&gs->agent);
	while (ring_buffer__consume(*gs->of.rb) > 0)
		;
	read_agent_counters(gs);
	gpu_agent_close(&gs->agent);
}

bool gpu_session_agent_activation(struct gpu_session *gs)
{
	const struct options *opt = gs->of.opt;
	struct gpu_agent g = { .mem_fd = -1 };
	struct rf_gpu_control c;
	char why[512] = "";
	bool used = false;
	int ret;

	if (!opt->gpu || gpu_agent_find(&g, *gs->of.pid, why, sizeof(why)) ||
	    gpu_agent_read_control(&g, &c) || !c.torch_callback_handle ||
	    !g.op_start_off || !g.op_end_off)
		goto out;
	/* With entry probes on before()/end() already attached, probing
	 * the agent's callback too would see every op twice. */
	ret = !*gs->of.use_stubs ? 0 :
	      probes_attach_callbacks(gs->of.probes, *gs->of.pid, g.path,
				      g.op_start_off, g.op_end_off,
				      opt->verbose);
	if (ret) {
		fprintf(stderr, "rfbpf: warning: cannot probe the CUPTI "
			"agent's RecordFunction callback (%s); activating "
			"rfbpf's own\n", strerror(-ret));
		goto out;
	}
	if (opt->sample_prob != 1.0 && opt->sample_prob != c.sample_prob)
		fprintf(stderr, "rfbpf: note: the job samples ops with "
			"RFBPF_SAMPLE=%g; --sample %g does not apply\n",
			c.sample_prob, opt->sample_prob);
	gs->of.trace->sample_prob = c.sample_prob > 0 ? c.sample_prob : 1.0;
	if (*gs->of.use_stubs)
		snprintf(gs->of.trace->probes, sizeof(gs->of.trace->probes),
			 "CUPTI agent's callback stubs (optimized uprobes)");
	used = true;
out:
	gpu_agent_close(&g);
	return used;
}

bool gpu_session_read_name(void *ctx, uint32_t pid, uint64_t addr,
			   char *buf, size_t len)
{
	(void)ctx;
	return !target_read((pid_t)pid, addr, buf, len);
}
