// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "model/clocks.h"
#include "model/profile_sink.h"
#include "attach/privileges.h"
#include "attach/ptrace_denied.h"
#include "attach/state_dir.h"
#include "attach/safe_point.h"
#include "attach/target.h"
#include "export/atomic_file.h"
#include "export/pprof.h"
#include "fleet/budget.h"
#include "attach/calibrate.h"
#include "fleet/daemon.h"
#include "fleet/discovery.h"
#include "fleet/fleet_metrics.h"
#include "fleet/http.h"
#include "fleet/job.h"
#include "fleet/job_recorder.h"
#include "fleet/lease_keeper.h"

/* New processes are looked for this often (the bar is 2 s). */
#define SCAN_S 1.0
/* A process that refused is tried again after 2, 4, 8... s, up to this. */
#define RETRY_MAX_S 600.0
#define MAX_REFUSED 4096

/* A process that refused activation: when to try again, and whether it
 * was logged (once, never in a loop). */
struct refusal {
	pid_t pid;
	unsigned long long start_ticks;
	double next_try, backoff;
};

struct daemon {
	struct options opt;
	unsigned recorder_dumps;	/* SIGUSR1s answered */
	int argc;
	char **argv;
	struct job **jobs;	/* changed with keeper's lock held */
	size_t nr_jobs;
	struct lease_keeper keeper;	/* --bursts: renews the leases */
	bool pid_said[CLI_MAX_PIDS];	/* -p PID not traceable: logged */
	struct refusal refused[MAX_REFUSED];
	size_t nr_refused;
	struct calibration cal;
	struct http_server *http;
	/* This interval's stacks of every job, with their own names and
	 * values already scaled to estimates. */
	struct names names;
	struct py_frames py;	/* the Python frames among names' ids */
	struct stack_profile profile;
	double interval_start, next_scan;
	int64_t interval_wall_ns;
	/* ?seconds=N: a profile of every window from on_demand_start on. */
	struct stack_profile on_demand;
	double on_demand_start;
	unsigned on_demand_secs;
	struct prom_buf prom;
	struct fleet_stats st;
	double cpu_at_interval;
	double own_cpu_at_interval;	/* CLOCK_PROCESS_CPUTIME_ID, s */
	double one_off_cpu_s;	/* of it since, starting and ending jobs */
	double own_rest_s;	/* the rest an interval, smoothed */
	unsigned said_no_window;	/* an interval without a profile */
};

static void logf_(const char *fmt, ...)
{
	va_list ap;

	fputs("rfbpf: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static double wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Where files go must be writable before any process is touched: a file
 * is made there and removed (access() would say yes to root on a
 * read-only or special file system). */
static int check_dir(const char *dir, const char *what, char *err,
		     size_t len)
{
	char path[4200];
	struct stat st;
	int fd;

	if (stat(dir, &st))
		return snprintf(err, len, "%s %s: %s", what, dir,
				strerror(errno)), -1;
	if (!S_ISDIR(st.st_mode))
		return snprintf(err, len, "%s %s: not a directory", what,
				dir), -1;
	snprintf(path, sizeof(path), "%s/.rfbpf-check-XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		return snprintf(err, len, "%s %s is not writable: %s", what,
				dir, strerror(errno)), -1;
	close(fd);
	unlink(path);
	return 0;
}

static int check_outputs(const struct options *o, char *err, size_t len)
{
	char dir[4096], *slash;
	struct stat st;

	if (o->pprof_dir && check_dir(o->pprof_dir, "--pprof-dir", err, len))
		return -1;
	if (o->trace_dir && check_dir(o->trace_dir, "--trace-dir", err, len))
		return -1;
	/* The file is replaced by a rename each interval: over /dev/full
	 * (or any device, FIFO or directory) that would swap the node
	 * itself for a regular file. */
	if (o->prom_file && !stat(o->prom_file, &st) && !S_ISREG(st.st_mode))
		return snprintf(err, len, "--prom-file %s: not a regular file "
				"(rfbpf replaces the file each interval; name "
				"a file in node_exporter's textfile directory)",
				o->prom_file), -1;
	if (o->prom_file) {
		snprintf(dir, sizeof(dir), "%s", o->prom_file);
		slash = strrchr(dir, '/');
		if (!slash)
			snprintf(dir, sizeof(dir), ".");
		else
			slash[slash == dir] = 0;
		if (check_dir(dir, "the directory of --prom-file", err, len))
			return -1;
	}
	return 0;
}

static struct job *find_job(const struct daemon *d, pid_t pid)
{
	for (size_t i = 0; i < d->nr_jobs; i++)
		if (d->jobs[i]->proc.pid == pid)
			return d->jobs[i];
	return NULL;
}

static struct refusal *find_refusal(struct daemon *d,
				    const struct torch_process *p)
{
	for (size_t i = 0; i < d->nr_refused; i++)
		if (d->refused[i].pid == p->pid &&
		    d->refused[i].start_ticks == p->start_ticks)
			return &d->refused[i];
	return NULL;
}

static void refuse(struct daemon *d, const struct torch_process *p,
		   const char *why, double now)
{
	struct refusal *r = find_refusal(d, p);

	d->st.activation_failures++;
	if (r) {
		r->backoff = fmin(r->backoff * 2, RETRY_MAX_S);
		r->next_try = now + r->backoff;
		return;
	}
	d->st.processes_refused++;
	logf_("pid %d (%s): not traced: %s; retrying with backoff, logged "
	      "once", p->pid, p->comm, why);
	if (d->nr_refused == MAX_REFUSED)	/* forget the oldest */
		memmove(d->refused, d->refused + 1,
			--d->nr_refused * sizeof(*r));
	d->refused[d->nr_refused++] = (struct refusal){
		.pid = p->pid, .start_ticks = p->start_ticks,
		.next_try = now + 2, .backoff = 2,
	};
}

/* A process this young that reached no safe point is most likely still
 * importing torch: not a refusal yet. */
#define YOUNG_S 30.0

static double process_age_s(const struct torch_process *p)
{
	double up;
	FILE *f = fopen("/proc/uptime", "re");

	if (!f)
		return 0;
	if (fscanf(f, "%lf", &up) != 1)
		up = 0;
	fclose(f);
	return up - (double)p->start_ticks / sysconf(_SC_CLK_TCK);
}

/* Is p still that process, with libtorch_cpu mapped? */
static bool still_torch(const struct torch_process *p)
{
	struct torch_process again;

	return !discovery_read("/proc", p->pid, &again) &&
	       again.start_ticks == p->start_ticks;
}

static void start_job_now(struct daemon *d, const struct torch_process *p,
			  double now)
{
	struct refusal *r = find_refusal(d, p);
	struct job *j, **jobs;
	char err[768];

	if ((r && now < r->next_try) || find_job(d, p->pid))
		return;
	j = calloc(1, sizeof(*j));
	lease_keeper_lock(&d->keeper);
	jobs = realloc(d->jobs, (d->nr_jobs + 1) * sizeof(*jobs));
	if (jobs)
		d->jobs = jobs;
	lease_keeper_unlock(&d->keeper);
	if (!j || !jobs) {
		free(j);
		return;
	}
	if (job_start(j, p, &d->opt, BUDGET_FIRST_PROB, now, err,
		      sizeof(err))) {
		bool young = j->setup_err == -ETIMEDOUT &&
			     process_age_s(p) < YOUNG_S;

		free(j);
		/* One that exited meanwhile refused nothing (killed, it is
		 * still alive while exiting, its mappings already gone), and
		 * one still importing torch (no op yet) is tried at the next
		 * scan. */
		if (!still_torch(p))
			d->st.jobs_gone_early++;
		else if (young)
			d->st.not_yet++;
		else
			refuse(d, p, err, now);
		return;
	}
	/* Its times less the probe cost calibrated at the daemon's start
	 * (on the callback path, which jobs take when the kernel allows),
	 * unless --raw-times (the budget still prices ops with it). */
	if (j->s.use_stubs && d->cal.ns_per_sampled_op > 0 &&
	    !d->opt.raw_times)
		calibration_probe_cost(&d->cal, &j->s.trace.probe_cost);
	lease_keeper_lock(&d->keeper);
	d->jobs[d->nr_jobs++] = j;
	lease_keeper_unlock(&d->keeper);
	d->st.jobs_started++;
	if (j->bursts)
		logf_("pid %d (%s%s%s): traced in bursts (by its thread "
		      "rfbpf-control)", p->pid, p->comm,
		      p->container[0] ? ", " : "", p->container);
	else
		logf_("pid %d (%s%s%s): traced, sampling p=%g%s", p->pid,
		      p->comm, p->container[0] ? ", " : "", p->container,
		      j->p, j->fixed_p ? " (its CUPTI agent's callback)" :
		      "");
}

static void end_job_now(struct daemon *d, size_t i, const char *why)
{
	struct job *j = d->jobs[i];

	/* out of the keeper's sight before its control thread is stopped */
	lease_keeper_lock(&d->keeper);
	d->jobs[i] = d->jobs[--d->nr_jobs];
	lease_keeper_unlock(&d->keeper);
	logf_("pid %d (%s): %s", j->proc.pid, j->proc.comm, why);
	if (d->http && job_capture_holds_bursts(j)) {
		static const char gone[] = "the job ended during the capture\n";

		http_answer_trace(d->http, j->proc.pid, 410, gone,
				  strlen(gone));
	}
	job_stop(j);
	free(j);
	d->st.jobs_ended++;
}

/* Starting and ending a job (the attach stop, loading and verifying its
 * BPF object, the detach) are one-off costs, not charged to the budgets
 * as a rate (own_cpu_rest_s). */
static void start_job(struct daemon *d, const struct torch_process *p,
		      double now)
{
	double t0 = process_cpu_s();

	start_job_now(d, p, now);
	d->one_off_cpu_s += process_cpu_s() - t0;
}

static void end_job(struct daemon *d, size_t i, const char *why)
{
	double t0 = process_cpu_s();

	end_job_now(d, i, why);
	d->one_off_cpu_s += process_cpu_s() - t0;
}

/* Why a process named with -p cannot be sampled (yet), in one log line. */
static void say_unreadable(pid_t pid, int err)
{
	struct ptrace_facts f;
	char why[400];

	if (err == -EACCES || err == -EPERM) {
		ptrace_facts_read(pid, &f);
		ptrace_denied_why(&f, false, why, sizeof(why));
		logf_("pid %d: cannot read its maps: %s; %s", pid,
		      strerror(-err), why);
		return;
	}
	logf_("pid %d: %s", pid, err == -ENOEXEC ? "no libtorch_cpu mapped "
	      "(yet): waiting for it" : err == -ENOENT ? "gone" :
	      strerror(-err));
}

/* Finds new processes and lets go of those that exited. */
static void scan(struct daemon *d, double now)
{
	struct torch_process *found = NULL, one;
	size_t nr = 0;

	for (size_t i = d->nr_jobs; i-- > 0;) {
		struct job *j = d->jobs[i];

		if (job_gone(j)) {
			end_job(d, i, "exited, let go");
		} else if (j->bursts && control_thread_lapsed(&j->s.control)) {
			/* Its lease ran out (every thread of the daemon held
			 * up, stopped): the thread removed the callback and
			 * ended. Let go, and traced again just below. */
			d->st.leases_lapsed++;
			end_job(d, i, "its control thread ended, its lease "
				"having run out (the daemon was held up): let "
				"go, to be traced again");
		}
	}
	if (d->opt.all) {
		if (discovery_scan("/proc", &found, &nr))
			return;
		for (size_t i = 0; i < nr && !stop_signals; i++)
			start_job(d, &found[i], now);
		free(found);
		return;
	}
	for (int i = 0; i < d->opt.nr_pids && !stop_signals; i++) {
		pid_t pid = d->opt.pids[i];
		int err;

		if (find_job(d, pid))
			continue;
		err = discovery_read("/proc", pid, &one);
		if (!err)
			start_job(d, &one, now);
		else if (!d->pid_said[i])	/* once, not every second */
			say_unreadable(pid, err);
		d->pid_said[i] = err != 0;
	}
}

/* A job's stacks into a daemon profile: names translated, values scaled
 * by k. */
static void merge_rows(struct daemon *d, struct stack_profile *into,
		       const struct job *j, const struct stack_profile *from,
		       double k)
{
	const struct names *jn = &j->s.trace.names;

	for (size_t i = 0; k > 0 && i < from->nr; i++) {
		const struct stack_row *r = &from->rows[i];
		uint32_t frames[r->depth ? r->depth : 1];
		const char *tn = names_get(jn, r->thread_name);
		const char *dims = r->shapes ? names_get(jn, r->shapes - 1) :
				   NULL;
		struct stack_key key = {
			.pid = r->pid, .tid = r->tid, .frames = frames,
			.depth = r->depth,
			.thread_name = names_intern(&d->names, tn, strlen(tn)),
			.shapes = dims ? names_intern(&d->names, dims,
						      strlen(dims)) + 1 : 0,
		};
		struct stack_values v = {
			.calls = llround(r->v.calls * k),
			.self_ns = llround(r->v.self_ns * k),
			.gpu_ns = llround(r->v.gpu_ns * k),
			.off_cpu_ns = llround(r->v.off_cpu_ns * k),
			.alloc_blocks = llround(r->v.alloc_blocks * k),
			.alloc_bytes = llround(r->v.alloc_bytes * k),
			.inuse_blocks = llround(r->v.inuse_blocks * k),
			.inuse_bytes = llround(r->v.inuse_bytes * k),
		};

		for (uint32_t f = 0; f < r->depth; f++) {
			const char *n = names_get(jn, r->frames[f]);
			const struct py_loc *py = py_frames_loc(
				&j->s.trace.py, r->frames[f]);

			frames[f] = py ? py_frames_add_loc(&d->py, &d->names,
				names_get(jn, py->func),
				names_get(jn, py->file), py->line) :
				names_intern(&d->names, n, strlen(n));
		}
		stack_profile_add(into, &key, &v);
	}
}

/* A job's window stacks, scaled by its T/L, and (--memory) its live
 * blocks by stack, weighed as they were made. */
static void merge_stacks(struct daemon *d, struct stack_profile *into,
			 struct job *j)
{
	merge_rows(d, into, j, &j->window_stacks, j->window_scale);
	if (!j->s.trace.mem.on)
		return;
	stack_profile_reset(&j->inuse_stacks);
	profile_add_inuse(&j->inuse_stacks, &j->s.trace);
	merge_rows(d, into, j, &j->inuse_stacks, 1);
}

static const struct pprof_process *process_labels(void *ctx, uint32_t pid)
{
	static struct pprof_process p;
	struct job *j = find_job(ctx, pid);

	if (!j)
		return NULL;
	p = (struct pprof_process){ j->proc.comm, j->proc.container,
				    j->proc.cmdline,
				    j->s.trace.torch_version,
				    j->s.trace.dist.rank >= 0,
				    j->s.trace.dist.rank };
	return &p;
}

static const char ESTIMATOR[] = "rfbpf: calls and self_cpu from full-trace "
	"windows at a uniformly random moment of each interval, scaled by "
	"interval/window per job (unbiased); values are estimates for all ops. "
	"Standard errors of calls and inclusive time (sampled ops scaled by "
	"1/p) are in the metrics: rfbpf_op_calls_stderr, "
	"rfbpf_op_seconds_stderr";
static const char MEMORY_ESTIMATOR[] = "; alloc_objects and alloc_space: "
	"byte-sampled blocks (each weighed 1/(1-exp(-size/mean))) made in the "
	"windows, scaled alike; inuse_objects and inuse_space: those of them "
	"still live, made in a burst's measured part, each weighed as its "
	"part; blocks made outside ops or before rfbpf traced the job are in "
	"rfbpf_job_alloc_bytes_total and rfbpf_job_live_bytes only";

static int encode(struct daemon *d, const struct stack_profile *p,
		  double seconds, uint8_t **gz, size_t *len)
{
	static char comment[sizeof(ESTIMATOR) + sizeof(MEMORY_ESTIMATOR)];
	bool gpu = false;
	struct pprof_meta m = {
		.time_nanos = d->interval_wall_ns,
		.duration_nanos = seconds * 1e9, .scale = 1, .comment = comment,
		.process = process_labels, .ctx = d,
	};

	snprintf(comment, sizeof(comment), "%s%s", ESTIMATOR,
		 d->opt.memory ? MEMORY_ESTIMATOR : "");

	for (size_t i = 0; i < d->nr_jobs; i++)
		gpu |= d->jobs[i]->s.trace.gpu.counts.agent_seen;
	m.gpu = gpu;
	m.off_cpu = d->opt.off_cpu;
	m.memory = d->opt.memory;
	m.py = &d->py;
	return pprof_encode(p, &d->names, &m, gz, len);
}

static void write_pprof(struct daemon *d, const uint8_t *gz, size_t len)
{
	char path[4200], stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	int err;

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(path, sizeof(path), "%s/profile-%s-%llu.pb.gz",
		 d->opt.pprof_dir, stamp, (unsigned long long)d->st.intervals);
	err = atomic_write_file(path, gz, len);
	if (err) {
		if (!d->st.pprof_errors++)
			logf_("cannot write %s: %s (logged once)", path,
			      strerror(-err));
		return;
	}
	d->st.pprof_written++;
	pprof_prune(d->opt.pprof_dir, d->opt.pprof_keep);
}

static void publish_metrics(struct daemon *d)
{
	prom_reset(&d->prom);
	d->st.jobs = d->nr_jobs;
	prom_process_read(&d->st.process);
	fleet_metrics_write(&d->prom, d->jobs, d->nr_jobs, &d->st);
	if (d->opt.prom_file && prom_write_file(d->opt.prom_file, &d->prom) &&
	    !d->st.prom_errors++)
		logf_("cannot write %s (logged once)", d->opt.prom_file);
	if (d->http && !d->prom.oom)
		http_set_metrics(d->http, d->prom.data, d->prom.len);
}

/* Once per job: its sampled figures are skewed by threads it starts
 * (trace_sampler_bias_note); the metrics carry the counts. */
static void log_sampler_bias(struct job *j)
{
	char why[512];

	if (j->bias_logged ||
	    !trace_sampler_bias_note(&j->s.trace, why, sizeof(why)))
		return;
	j->bias_logged = true;
	logf_("pid %d (%s): %s", j->proc.pid, j->proc.comm, why);
}

/* rfbpf's own CPU seconds in the interval beyond reading the jobs'
 * events (charged per op already) and starting or ending jobs: its
 * scans, polls, lease renewals and exports, shared by the jobs. */
static double own_cpu_rest_s(struct daemon *d)
{
	double now = process_cpu_s(), read = 0, rest;

	for (size_t i = 0; i < d->nr_jobs; i++)
		read += d->jobs[i]->read_cpu_s;
	rest = now - d->own_cpu_at_interval - read - d->one_off_cpu_s;
	d->own_cpu_at_interval = now;
	d->one_off_cpu_s = 0;
	if (rest < 0)
		rest = 0;
	/* smoothed like the other measured costs: one interval's spike (a
	 * large profile encoded) does not take a whole interval's tracing */
	d->own_rest_s = d->own_rest_s > 0 ? 0.7 * d->own_rest_s + 0.3 * rest :
			rest;
	return d->nr_jobs ? d->own_rest_s / d->nr_jobs : 0;
}

static void end_interval(struct daemon *d, double now)
{
	struct budget_input in = {
		.budget = d->opt.budget_pct / 100,
		.interval_s = d->opt.interval_s,
	};
	struct prom_process self;
	uint8_t *gz = NULL;
	bool estimated = false;
	double own_rest = own_cpu_rest_s(d);
	size_t len;

	for (size_t i = 0; i < d->nr_jobs; i++) {
		struct job *j = d->jobs[i];
		struct counts c = { 0 };
		struct budget_plan plan;
		uint64_t mem_hits;

		job_end_interval(j, now);
		estimated |= j->window_scale > 0;
		log_sampler_bias(j);
		session_read_counters(&j->s, &c);
		j->drops_prev = c.drops;
		/* BPF's --python-stacks counts, for the metrics. */
		j->s.trace.counts.py_no_thread = c.py_no_thread;
		j->s.trace.counts.py_truncated = c.py_truncated;
		j->s.trace.counts.py_faults = c.py_faults;
		/* ... and --shapes' and --off-cpu's. */
		j->s.trace.counts.off_cpu_switches = c.off_cpu_switches;
		j->s.trace.counts.inputs_cut = c.inputs_cut;
		j->s.trace.counts.inputs_faults = c.inputs_faults;
		/* ... and --memory's. */
		j->s.trace.counts.mem_alloc_hits = c.mem_alloc_hits;
		j->s.trace.counts.mem_free_hits = c.mem_free_hits;
		j->s.trace.counts.mem_sampled_full = c.mem_sampled_full;
		merge_stacks(d, &d->profile, j);
		if (d->on_demand_secs)
			merge_stacks(d, &d->on_demand, j);
		/* The op's cost in the job, calibrated, and to rfbpf,
		 * measured. */
		in.cost_ns = d->cal.ns_per_sampled_op + j->loader_ns_per_op;
		in.op_rate = j->op_rate;
		in.cpu_rate = j->cpu_rate;
		/* Whatever is traced: --off-cpu costs every switch of the
		 * job's threads, and rfbpf its own CPU. Only --bursts jobs
		 * are charged the latter so far: in the sampled mode, at
		 * --interval 1, tests/e2e/test_fleet.py's call estimates
		 * were then 25% off (within 4% without it), for a reason
		 * not yet found. */
		mem_hits = c.mem_alloc_hits + c.mem_free_hits;
		in.fixed_share = j->cpu_rate > 0 ?
			((c.off_cpu_switches - j->switches_prev) *
			 BUDGET_OFF_CPU_NS_PER_SWITCH * 1e-9 +
			 (mem_hits - j->mem_hits_prev) *
			 BUDGET_MEMORY_NS_PER_HIT * 1e-9 +
			 (j->bursts ? own_rest : 0)) /
			d->opt.interval_s / j->cpu_rate : 0;
		j->switches_prev = c.off_cpu_switches;
		j->mem_hits_prev = mem_hits;
		in.hold_s = j->hold_s;
		budget_plan(&in, &plan);
		job_plan(j, &plan, d->opt.interval_s, now);
	}
	d->st.intervals++;
	if ((d->opt.pprof_dir || d->http) &&
	    !encode(d, &d->profile, now - d->interval_start, &gz, &len)) {
		if (d->opt.pprof_dir && estimated)
			write_pprof(d, gz, len);
		else if (d->opt.pprof_dir && !d->said_no_window++)
			logf_("interval %llu: no profile written: no job has a "
			      "full-trace window to estimate from yet (a job's "
			      "first interval measures its op rate; a window "
			      "that stands for several intervals gives the "
			      "last of them its profile); said once",
			      (unsigned long long)d->st.intervals);
		if (d->http)
			http_set_profile(d->http, gz, len);
		free(gz);
	}
	stack_profile_reset(&d->profile);
	prom_process_read(&self);
	d->st.last_interval_cpu_s = self.cpu_seconds - d->cpu_at_interval;
	d->st.last_interval_rss = self.resident_bytes;
	d->cpu_at_interval = self.cpu_seconds;
	publish_metrics(d);
	d->interval_start = now;
	d->interval_wall_ns = wall_ns();
}

/* ?seconds=N: collect from now on; answer once N seconds and at least
 * one interval (one window per job) have passed. */
static void serve_on_demand(struct daemon *d, double now)
{
	unsigned want = http_window_wanted(d->http);
	uint8_t *gz;
	size_t len;

	if (!d->on_demand_secs && want) {
		stack_profile_reset(&d->on_demand);
		d->on_demand_start = now;
		d->on_demand_secs = want;
		return;
	}
	if (!d->on_demand_secs || now < d->on_demand_start +
	    d->on_demand_secs || d->interval_start <= d->on_demand_start)
		return;
	if (!encode(d, &d->on_demand, now - d->on_demand_start, &gz, &len)) {
		http_set_window_profile(d->http, gz, len, d->on_demand_start,
					now - d->on_demand_start);
		free(gz);
	}
	d->on_demand_secs = 0;
}

/* SIGUSR1: every job's flight recorder to --trace-dir. */
static void dump_recorders(struct daemon *d)
{
	char tag[32];

	d->recorder_dumps++;
	snprintf(tag, sizeof(tag), "sigusr1-%u", d->recorder_dumps);
	for (size_t i = 0; i < d->nr_jobs; i++) {
		struct job *j = d->jobs[i];

		if (job_recorder_dump(j, tag, "SIGUSR1"))
			logf_("pid %d (%s): cannot write its flight recorder: "
			      "%s", j->proc.pid, j->proc.comm, strerror(errno));
		else
			logf_("pid %d (%s): flight recorder written to "
			      "%s/rfbpf-%d.%s.json.gz", j->proc.pid,
			      j->proc.comm, d->opt.trace_dir, j->proc.pid,
			      tag);
	}
}

/* GET /debug/rfbpf/trace: new requests start (or join) a capture of
 * their job; finished captures answer every request for their job. */
static void serve_traces(struct daemon *d)
{
	struct http_trace_request req[16];
	int n = http_trace_requests(d->http, req, 16);
	char line[200];

	for (int i = 0; i < n; i++) {
		struct job *j = find_job(d, req[i].pid);

		if (!j) {
			snprintf(line, sizeof(line), "pid %d is not a job this "
				 "daemon traces (see /metrics: "
				 "rfbpf_job_torch_info)\n", req[i].pid);
			http_answer_trace(d->http, req[i].pid, 404, line,
					  strlen(line));
		} else if (!j->bursts) {
			snprintf(line, sizeof(line), "pid %d has no rfbpf "
				 "control thread (--sampled, or its CUPTI agent "
				 "owns the callback): no capture\n",
				 req[i].pid);
			http_answer_trace(d->http, req[i].pid, 409, line,
					  strlen(line));
		} else if (job_capture_start(j, req[i].seconds,
					     req[i].steps)) {
			logf_("pid %d (%s): capturing a full trace of %u %s "
			      "(asked over HTTP)", j->proc.pid, j->proc.comm,
			      req[i].steps ? req[i].steps : req[i].seconds,
			      req[i].steps ? "steps" : "s");
		}
	}
	for (size_t i = 0; i < d->nr_jobs; i++) {
		struct job *j = d->jobs[i];
		unsigned status;
		uint8_t *body;
		size_t len;

		if (!job_capture_poll(j))
			continue;
		job_capture_take(j, &status, &body, &len);
		logf_("pid %d (%s): capture done: %u, %zu bytes%s",
		      j->proc.pid, j->proc.comm, status, len,
		      status == 200 ? " gzipped" : "");
		http_answer_trace(d->http, j->proc.pid, status, body, len);
		free(body);
	}
}

/* SIGHUP: the options again (--config may have changed); what applies
 * to a running daemon is taken, the rest needs a restart. */
static void reload(struct daemon *d)
{
	struct options o;
	char err[512];

	if (reparse_options(d->argc, d->argv, &o, err, sizeof(err)) ||
	    check_outputs(&o, err, sizeof(err))) {
		logf_("SIGHUP: keeping the running options: %s", err);
		return;
	}
	d->opt.interval_s = o.interval_s;
	d->opt.budget_pct = o.budget_pct;
	d->opt.pprof_dir = o.pprof_dir;
	d->opt.pprof_keep = o.pprof_keep;
	d->opt.prom_file = o.prom_file;
	d->opt.max_ops = o.max_ops;
	d->st.interval_s = o.interval_s;
	d->st.budget = o.budget_pct / 100;
	logf_("SIGHUP: options re-read (interval %gs, budget %g%%); --listen "
	      "and the processes chosen need a restart", o.interval_s,
	      o.budget_pct);
}

static int start(struct daemon *d, char *err, size_t len)
{
	char why[512];

	if (!have_tracing_privileges(why, sizeof(why)) ||
	    state_dir_prepare(why, sizeof(why)))
		return snprintf(err, len, "%s", why), -1;
	if (check_outputs(&d->opt, err, len))
		return -1;
	for (int i = 0; i < d->opt.nr_pids; i++)
		if (!target_alive(d->opt.pids[i]))
			return snprintf(err, len, "no process with PID %d (is "
					"it running?)", d->opt.pids[i]), -1;
	if (d->opt.listen && http_start(d->opt.listen, &d->http, err, len))
		return -1;
	if (calibrate_sampled_op_cost(&d->cal, why, sizeof(why)))
		return snprintf(err, len, "cannot calibrate the cost of "
				"tracing an op on this host: %s", why), -1;
	logf_("one traced op costs a job %.0f ns on this host (calibrated, %s "
	      "uprobes); budget %g%% of each job's CPU", d->cal.ns_per_sampled_op,
	      d->cal.optimized ? "optimized" : "trapping", d->opt.budget_pct);
	return 0;
}

/* Events are read every 20 ms (the ring buffer holds far more), sooner
 * when a window opens or closes: a window must last what the budget
 * allows, not a multiple of the poll period. A --bursts job between its
 * bursts has nothing to read: the daemon then sleeps until the next
 * burst's edge, the next scan or the interval's end, and at most
 * IDLE_POLL_S, which keeps the CUPTI agents looked for (the control
 * threads' leases are the lease keeper's). Every wakeup is CPU taken from
 * the jobs: on a small host the daemon preempts one of their threads each
 * time. */
#define BUSY_POLL_S	0.02
#define IDLE_POLL_S	0.5

static void sleep_until_due(const struct daemon *d)
{
	double now = monotonic_s(), due = now + IDLE_POLL_S;

	if (d->next_scan < due)
		due = d->next_scan;
	if (d->interval_start + d->opt.interval_s < due)
		due = d->interval_start + d->opt.interval_s;
	for (size_t i = 0; i < d->nr_jobs; i++) {
		double w = job_next_wakeup(d->jobs[i]);

		if (!d->jobs[i]->bursts && now + BUSY_POLL_S < w)
			w = now + BUSY_POLL_S;
		if (w < due)
			due = w;
	}
	if (due > now)
		usleep((useconds_t)((due - now) * 1e6));
}

static volatile sig_atomic_t hup;

static void on_hup(int sig)
{
	(void)sig;
	hup = 1;
}

int fleet_run(const struct options *opt, int argc, char **argv)
{
	static struct daemon d;
	int dumps_seen = dump_signals;
	char err[768];
	double now;
	int ret;

	d.opt = *opt;
	d.argc = argc;
	d.argv = argv;
	d.st.interval_s = opt->interval_s;
	d.st.budget = opt->budget_pct / 100;
	stack_profile_init(&d.profile);
	stack_profile_init(&d.on_demand);
	prom_init(&d.prom);
	srand48(getpid() ^ (long)wall_ns());
	signal(SIGHUP, on_hup);
	if (start(&d, err, sizeof(err))) {
		fprintf(stderr, "rfbpf: %s\n", err);
		http_stop(d.http);
		return 1;
	}
	d.st.op_cost_s = d.cal.ns_per_sampled_op * 1e-9;
	now = monotonic_s();
	d.interval_start = now;
	if (d.opt.bursts && (ret = lease_keeper_start(&d.keeper, &d.jobs,
							&d.nr_jobs))) {
		fprintf(stderr, "rfbpf: cannot start the thread that renews "
			"the control threads' leases: %s\n", strerror(-ret));
		http_stop(d.http);
		return 1;
	}
	d.own_cpu_at_interval = process_cpu_s();
	d.interval_wall_ns = wall_ns();
	publish_metrics(&d);
	logf_("continuous: %s, every %gs%s%s%s%s", d.opt.all ? "every PyTorch "
	      "process" : "the processes named", d.opt.interval_s,
	      d.opt.pprof_dir ? ", pprof to " : "",
	      d.opt.pprof_dir ? d.opt.pprof_dir : "",
	      d.opt.listen ? ", serving " : "", d.opt.listen ? d.opt.listen :
	      "");
	while (!stop_signals) {
		now = monotonic_s();
		if (hup) {
			hup = 0;
			reload(&d);
		}
		if (now >= d.next_scan) {
			scan(&d, now);
			d.next_scan = now + SCAN_S;
		}
		for (size_t i = 0; i < d.nr_jobs; i++)
			job_poll(d.jobs[i], now);
		safe_point_poll_late();
		if (now >= d.interval_start + d.opt.interval_s)
			end_interval(&d, now);
		if (d.http) {
			serve_on_demand(&d, now);
			serve_traces(&d);
		}
		if (dump_signals != dumps_seen) {
			dumps_seen = dump_signals;
			dump_recorders(&d);
		}
		sleep_until_due(&d);
	}
	logf_("stopping: switching %zu process%s off", d.nr_jobs,
	      d.nr_jobs == 1 ? "" : "es");
	stop_signals = 0;	/* the detach must not be cancelled */
	while (d.nr_jobs)
		end_job(&d, d.nr_jobs - 1, "switched off");
	lease_keeper_stop(&d.keeper);
	/* --prom-file keeps the last interval's figures. */
	http_stop(d.http);
	free(d.jobs);
	stack_profile_free(&d.profile);
	stack_profile_free(&d.on_demand);
	names_free(&d.names);
	py_frames_free(&d.py);
	prom_free(&d.prom);
	return 0;
}
