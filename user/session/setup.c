// SPDX-License-Identifier: BSD-2-Clause
/*
 * Setting a session up, step by step: claim the target (or fork the
 * command, held before exec), find the libtorch_cpu it uses, resolve the
 * RecordFunction symbols, load the BPF programs for that pid, attach, and
 * switch RecordFunction on. Every step that fails returns -1 with one line
 * in s->error saying what is wrong and what to do; the caller undoes what
 * was done (session_abort) and the target is left as it was.
 */
#include <errno.h>
#include <glob.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "attach/c10_allocator.h"
#include "attach/elf_symbols.h"
#include "attach/privileges.h"
#include "attach/ptrace_denied.h"
#include "attach/state_dir.h"
#include "attach/target.h"
#include "attach/calibrate.h"
#include "session/session.h"
#include "session/children.h"
#include "gpu/gpu_session.h"

static int setup_error(struct session *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->error, sizeof(s->error), fmt, ap);
	va_end(ap);
	return -1;
}

/* --off-cpu: the scheduler programs' ids are the kernel's, so rfbpf must
 * see the target's own. */
static int start_off_cpu(struct session *s, char *why, size_t len)
{
	int err;

	if (probes_pid_namespaced(&s->probes)) {
		snprintf(why, len, "rfbpf runs in another PID namespace than "
			 "the kernel's (run it in the host's)");
		return -EXDEV;
	}
	err = off_cpu_procs_start(&s->off_cpu, s->pid,
				  probes_ring_fd(&s->probes),
				  probes_wakeup_bytes(&s->probes), why, len);
	if (err == -EPERM)
		snprintf(why + strlen(why), len - strlen(why), " (needs BTF, "
			 "and CAP_BPF with CAP_PERFMON)");
	return err;
}

/* Resolves the library's RecordFunction symbols or explains why not. */
static int resolve_symbols(struct session *s, const char *path,
			    struct torch_symbols *syms)
{
	int n = torch_symbols_resolve(path, syms);

	if (n < 0)
		return setup_error(s, "%s: %s", path, elf_symbols_strerror(n));
	if (!syms->nr_before || !syms->offset[RF_V_END])
		return setup_error(s, "%s: no at::RecordFunction before()/end() symbols;"
			  " not a libtorch_cpu build rfbpf supports (1.13 to "
			  "2.14 are)", path);
	torch_symbols_describe(syms, s->trace.build, sizeof(s->trace.build));
	if (s->opt->verbose)
		fprintf(stderr, "rfbpf: %s: %s\n", path, s->trace.build);
	return 0;
}

/* Launch mode without --lib: libraries the command is likely to load,
 * probed before it runs. Anything else is caught once it is mapped. */
static int default_libraries(glob_t *g)
{
	static const char *const patterns[] = {
		"/usr/lib/*/libtorch_cpu.so*",
		"/usr/lib/libtorch_cpu.so*",
		"/usr/local/lib/libtorch_cpu.so*",
	};
	int flags = 0;

	memset(g, 0, sizeof(*g));
	for (size_t i = 0; i < sizeof(patterns) / sizeof(*patterns); i++) {
		glob(patterns[i], flags, NULL, g);
		flags = GLOB_APPEND;
	}
	return g->gl_pathc;
}

/* The libraries to probe and their symbols, chosen before the BPF object
 * is loaded because the string ABI they use is a load-time constant. */
struct libraries {
	char path[PROBES_MAX_LIBS][PATH_MAX];
	struct torch_symbols syms[PROBES_MAX_LIBS];
	int nr;
};

/* --memory: probes on c10's allocator functions, from the attach on
 * (launch mode: before exec, so the command's first block is seen). */
static int start_memory(struct session *s, const char *torch_path)
{
	uint64_t off[C10_ALLOCATOR_FUNCS] = { 0 };
	char path[PATH_MAX];
	int n;

	if (c10_library(s->launched ? 0 : s->pid, torch_path, path,
			sizeof(path)))
		return setup_error(s, "--memory: no libc10.so beside %s (nor "
				   "mapped in process %d): PyTorch's allocator "
				   "cannot be found", torch_path ? torch_path :
				   "libtorch_cpu.so", s->pid);
	n = c10_allocator_offsets(path, off);
	if (n < 0 || !off[RF_MEM_CPU_ALLOC] || !off[RF_MEM_CPU_FREE])
		return setup_error(s, "--memory: %s has no "
				   "c10::ProfiledCPUMemoryReporter::New/Delete "
				   "(%s): this PyTorch build's CPU allocator "
				   "cannot be traced", path, n < 0 ?
				   elf_symbols_strerror(n) : "not exported");
	if (s->opt->memory_sample_bytes &&
	    (n = probes_set_memory_sampling(&s->probes,
					    s->opt->memory_sample_bytes)))
		return setup_error(s, "--memory: cannot fill the sampler's "
				   "table: %s", strerror(-n));
	s->trace.mem.sample_bytes = s->opt->memory_sample_bytes;
	n = probes_attach_memory(&s->probes, s->pid, path, off,
				 s->opt->verbose);
	if (n < 0)
		return setup_error(s, "--memory: cannot attach uprobes to %s: "
				   "%s", path, strerror(-n));
	s->trace.mem.on = true;
	return 0;
}

/* The libtorch_cpu mapped in a running target, or a one-line reason. */
int session_library_of_target(struct session *s, char *path, size_t len)
{
	struct target_mapping m;
	int err = target_find_mapping_at("/proc", s->pid, is_libtorch_cpu_name,
					 &m);

	if (err == -ENOENT)
		return setup_error(s, "process %d (%s) has no libtorch_cpu.so mapped: "
			  "not a PyTorch process, or torch not imported yet "
			  "(name the library with --lib)", s->pid,
			  s->trace.process_name);
	if (err == -EACCES || err == -EPERM) {
		struct ptrace_facts f;
		char why[512];

		ptrace_facts_read(s->pid, &f);
		ptrace_denied_why(&f, false, why, sizeof(why));
		return setup_error(s, "cannot read /proc/%d/maps (%s): %s; %s",
				   s->pid, s->trace.process_name,
				   strerror(-err), why);
	}
	if (err)
		return setup_error(s, "cannot read /proc/%d/maps: %s", s->pid,
			  strerror(-err));
	err = target_mapping_path(s->pid, &m, path, len);
	if (err == -EPERM)
		return setup_error(s, "process %d maps %s, %s since it was "
			  "loaded: the copy it runs can be read only through "
			  "/proc/%d/map_files, which needs CAP_SYS_ADMIN (or "
			  "CAP_CHECKPOINT_RESTORE)", s->pid, m.file, m.deleted ?
			  "deleted or replaced on disk" : "not the file at "
			  "that path now", s->pid);
	if (err)
		return setup_error(s, "process %d maps %s, which rfbpf cannot "
			  "open: %s", s->pid, m.file, strerror(-err));
	return 0;
}

static bool already_chosen(const struct libraries *libs, const char *path)
{
	char a[PATH_MAX], b[PATH_MAX];

	if (!realpath(path, a))
		return false;
	for (int i = 0; i < libs->nr; i++)
		if (realpath(libs->path[i], b) && !strcmp(a, b))
			return true;
	return false;
}

/* Launch mode without --lib: the usual candidates that are real torch
 * builds; session_check_launched_lib() catches any other once mapped. */
static void launch_candidates(struct session *s, struct libraries *libs)
{
	glob_t g;
	size_t nr = default_libraries(&g);
	char desc[256];

	for (size_t i = 0; i < nr && libs->nr < PROBES_MAX_LIBS; i++) {
		struct torch_symbols *syms = &libs->syms[libs->nr];
		bool ok;

		if (already_chosen(libs, g.gl_pathv[i]))
			continue;	/* a symlink to one we have */
		ok = torch_symbols_resolve(g.gl_pathv[i], syms) > 0 &&
		     syms->nr_before && syms->offset[RF_V_END];

		if (ok) {
			torch_symbols_describe(syms, desc, sizeof(desc));
			if (!s->trace.build[0])
				snprintf(s->trace.build, sizeof(s->trace.build),
					 "%s", desc);
			snprintf(libs->path[libs->nr++], PATH_MAX, "%s",
				 g.gl_pathv[i]);
		}
		if (s->opt->verbose)
			fprintf(stderr, "rfbpf: candidate %s: %s\n",
				g.gl_pathv[i], ok ? desc :
				"not a supported libtorch_cpu, skipped");
	}
	globfree(&g);
}

static int choose_libraries(struct session *s, struct libraries *libs)
{
	char path[PATH_MAX];

	libs->nr = 0;
	if (!s->opt->lib && s->launched) {
		launch_candidates(s, libs);
		return 0;
	}
	if (s->opt->lib)
		snprintf(path, sizeof(path), "%s", s->opt->lib);
	else if (session_library_of_target(s, path, sizeof(path)))
		return -1;
	if (resolve_symbols(s, path, &libs->syms[0]))
		return -1;
	snprintf(libs->path[0], PATH_MAX, "%s", path);
	libs->nr = 1;
	return 0;
}

/* The library as the target sees it: without our /proc/PID/root prefix,
 * and through symlinks (libtorch_cpu.so -> libtorch_cpu.so.1.13.0). */
static void describe_path(struct session *s, const char *path)
{
	char real[PATH_MAX];

	if (!strncmp(path, "/proc/", 6))	/* map_files/ or root/ */
		target_mapped_name(path, real, sizeof(real));
	else if (!realpath(path, real))
		snprintf(real, sizeof(real), "%s", path);
	snprintf(s->trace.library, sizeof(s->trace.library), "%s", real);
}

/*
 * Did the -p target die, so that its death is why a step failed? A
 * process killed while rfbpf works on it loses its mappings first and
 * only then becomes a zombie (and its pidfd readable): a step that
 * failed on a vanished map_files/ link is given a moment to see it.
 * One message for every step: "process N exited during attach".
 */
#define EXIT_GRACE_MS 300

static bool target_exited(struct session *s)
{
	struct pollfd pfd = { .fd = s->pidfd, .events = POLLIN };

	if (s->launched)
		return false;
	if (s->pidfd >= 0)
		return poll(&pfd, 1, EXIT_GRACE_MS) > 0;
	for (int ms = 0; ms < EXIT_GRACE_MS; ms += 10) {
		if (!target_alive(s->pid))
			return true;
		usleep(10000);
	}
	return !target_alive(s->pid);
}

static int attach_libraries(struct session *s, const struct libraries *libs)
{
	for (int i = 0; i < libs->nr; i++) {
		int n = probes_attach_lib(&s->probes, s->pid, libs->path[i],
					  &libs->syms[i], s->opt->verbose);

		if (n < 0 && target_exited(s))
			return setup_error(s, "process %d exited during attach",
				  s->pid);
		if (n < 0)
			return setup_error(s, "cannot attach uprobes to %s: %s",
				  libs->path[i], strerror(-n));
		if (n > 0 && !s->trace.library[0])
			describe_path(s, libs->path[i]);
		if (n > 0 && !s->child_lib[0]) {	/* --children */
			snprintf(s->child_lib, sizeof(s->child_lib), "%s",
				 libs->path[i]);
			s->child_syms = libs->syms[i];
		}
	}
	return 0;
}

/* -p PID: the process exists, and no other rfbpf is on it. A pidfd held
 * from the start (session_setup) tells a process that was there and
 * died from one that never was. */
int session_claim_target(struct session *s, pid_t pid)
{
	struct pollfd pfd = { .fd = s->pidfd, .events = POLLIN };
	char why[256];

	if (s->pidfd >= 0 && (poll(&pfd, 1, 0) > 0 || !target_alive(pid)))
		return setup_error(s, "process %d exited during attach", pid);
	if (!target_alive(pid))
		return setup_error(s, "no process with PID %d (is it running?)", pid);
	s->pid = pid;
	if (activation_lock(&s->act, pid, why, sizeof(why)))
		return setup_error(s, "%s", why);
	return 0;
}

/* The note for times left raw because the probes are on the entry path. */
static const char entry_path_note[] =
	"entry probes: the calibration measures the callback path";

/* What rfbpf's probes add to each op's times on this host, measured as
 * perf measures its own overhead: in rfbpf's own process, before it
 * attaches (fleet jobs take the daemon's). A failed calibration leaves
 * the times raw and says why in note. */
static void calibrate_probe_cost(const struct options *opt,
				 struct probe_cost *cost, char *note,
				 size_t len)
{
	struct calibration cal;

	memset(cost, 0, sizeof(*cost));
	if (opt->raw_times)
		snprintf(note, len, "--raw-times");
	else if (opt->continuous)
		snprintf(note, len, "not calibrated for this job");
	else if (!opt->activate || opt->probes == PROBES_ENTRY)
		snprintf(note, len, "%s", entry_path_note);
	else if (!calibrate_sampled_op_cost(&cal, note, len))
		calibration_probe_cost(&cal, cost);
}

/* Before anything is forked (see calibrate.h); said with -v. */
static void calibrate(const struct options *opt, struct probe_cost *cost,
		      char *note, size_t len)
{
	if (opt->verbose)
		fprintf(stderr, "rfbpf: calibrating the probe cost\n");
	calibrate_probe_cost(opt, cost, note, len);
	if (opt->verbose && (cost->inside_ns || cost->outside_ns))
		fprintf(stderr, "rfbpf: probe cost calibrated: %.3fus in each "
			"op, %.3fus more for each op nested in it\n",
			cost->inside_ns / 1e3,
			(cost->inside_ns + cost->outside_ns) / 1e3);
	else if (opt->verbose)
		fprintf(stderr, "rfbpf: probe cost not calibrated: %s\n",
			note[0] ? note : "no reason given");
}

/* -p PID: claimed; a command: started, held before exec. */
static int take_target(struct session *s, const struct options *opt)
{
	int err;

	if (opt->pid) {
		if (session_claim_target(s, opt->pid))
			return -1;
	} else {
		err = launch_prepare(&s->launch, opt->command);
		if (err)
			return setup_error(s, "cannot start %s: %s", opt->command[0],
				  strerror(-err));
		s->launched = true;
		s->pid = s->launch.pid;
		s->act.pid = s->pid;
		/* Registered once the command has loaded torch. */
		s->activation_pending = opt->activate;
	}
	return 0;
}

/* The job's rank and the rest (model/distributed.h) from its
 * environment as it was at exec: /proc/PID/environ, or in launch mode
 * rfbpf's own, which the command inherits. */
static void read_dist_info(struct session *s, const struct options *opt)
{
	if (opt->pid) {
		target_read_dist_info(s->pid, &s->trace.dist);
		return;
	}
	for (char **e = environ; *e; e++)
		dist_info_from_environ(&s->trace.dist, *e, strlen(*e) + 1);
}

/* The trace and its outputs, named after the process. */
static int start_trace(struct session *s, const struct options *opt,
		       const struct probe_cost *cost, const char *cost_note)
{
	/* --shapes: PyTorch boxes an op's inputs only for a callback that
	 * asks for them. */
	s->act.needs_inputs = opt->shapes;
	trace_init(&s->trace, s->pid);
	s->trace.gpu.read_name = gpu_session_read_name;
	s->trace.probe_cost = *cost;
	snprintf(s->trace.probe_cost_note, sizeof(s->trace.probe_cost_note),
		 "%s", cost_note);
	if (outputs_start(&s->out, &s->trace, opt))
		return setup_error(s, "cannot create %s: %s", s->out.bad_path,
			  strerror(errno));
	read_dist_info(s, opt);
	if (opt->pid)
		target_comm(s->pid, s->trace.process_name,
			    sizeof(s->trace.process_name));
	else
		snprintf(s->trace.process_name, sizeof(s->trace.process_name),
			 "%s", strrchr(opt->command[0], '/') ?
			 strrchr(opt->command[0], '/') + 1 : opt->command[0]);
	return 0;
}

/* Optimized probes need the callback, so they come with activation;
 * entry probes are attached now (launch mode: before exec). */
static void choose_probe_path(struct session *s, const struct options *opt)
{
	s->use_stubs = opt->activate && (opt->probes == PROBES_CALLBACK ||
		(opt->probes == PROBES_AUTO && probes_kernel_optimizes_nop()));
	snprintf(s->trace.probes, sizeof(s->trace.probes), "%s",
		 s->use_stubs ? "callback stubs (optimized uprobes)" :
		 "RecordFunction::before/end entry (int3 uprobes)");
	if (!s->use_stubs && s->trace.probe_cost.inside_ns) {
		memset(&s->trace.probe_cost, 0, sizeof(s->trace.probe_cost));
		snprintf(s->trace.probe_cost_note,
			 sizeof(s->trace.probe_cost_note), "%s",
			 entry_path_note);
	}
}

/* Switches RecordFunction on in a running target (not a launched one:
 * that waits for torch to load), unless its CUPTI agent already did. */
static int activate_target(struct session *s, const struct options *opt,
			   const char *lib)
{
	char why[512];

	if (!s->launched && opt->activate && gpu_session_agent_activation(&s->gpu))
		fprintf(stderr, "rfbpf: the job's CUPTI agent switched "
			"RecordFunction on (RFBPF_SAMPLE): no ptrace needed\n");
	else if (!s->launched && opt->activate &&
		 (s->activation_err = session_activate(s, lib, why,
						       sizeof(why)))) {
		/* Its death is the reason, whichever step noticed it (its
		 * map_files/ link vanishing, or its threads). */
		if (target_exited(s))
			return setup_error(s, "process %d exited during attach",
					   s->pid);
		return setup_error(s, "cannot switch RecordFunction on in "
				   "process %d: %s; nothing was changed",
				   s->pid, why);
	}
	return 0;
}

int session_setup(struct session *s, struct options *opt)
{
	static struct libraries libs;
	struct probe_cost cost;
	char why[512], cost_note[sizeof(s->trace.probe_cost_note)];
	int err;

	gpu_session_bind(&s->gpu, &s->pid, opt, &s->trace, &s->probes, &s->rb,
			 &s->use_stubs);
	if (!have_tracing_privileges(why, sizeof(why)) ||
	    state_dir_prepare(why, sizeof(why)))
		return setup_error(s, "%s", why);
	/* Held before the calibration's second: a target that dies from
	 * here on "exited during attach", and a reused PID is not it. */
	if (opt->pid && target_alive(opt->pid))
		s->pidfd = syscall(SYS_pidfd_open, opt->pid, 0);
	calibrate(opt, &cost, cost_note, sizeof(cost_note));
	if (take_target(s, opt) || start_trace(s, opt, &cost, cost_note) ||
	    choose_libraries(s, &libs))
		return -1;
	err = probes_load(&s->probes, s->pid, opt->ringbuf_mb,
			  libs.nr && libs.syms[0].old_string_abi,
			  opt->tree_prob, why, sizeof(why));
	if (err)
		return setup_error(s, "%s", why);
	if (libs.nr)
		session_set_build(s, libs.path[0], &libs.syms[0]);
	if (opt->off_cpu && (err = start_off_cpu(s, why, sizeof(why))))
		return setup_error(s, "--off-cpu: %s", why);
	s->trace.off_cpu = opt->off_cpu;
	s->trace.children = opt->children;
	if (opt->memory && start_memory(s, libs.nr ? libs.path[0] : NULL))
		return -1;
	s->trace.tree_prob = opt->tree_prob;
	/* Tests only: widen the window in which a target can exit mid-attach,
	 * so "exits during attach" is tested deterministically. */
	if (getenv("RFBPF_TEST_ATTACH_DELAY_MS"))
		usleep(1000 * atoi(getenv("RFBPF_TEST_ATTACH_DELAY_MS")));
	choose_probe_path(s, opt);
	if (!s->use_stubs && attach_libraries(s, &libs))
		return -1;
	if (s->use_stubs && !s->trace.library[0] && libs.nr)
		describe_path(s, libs.path[0]);
	if (session_open_ring(s))
		return setup_error(s, "cannot read the ring buffer: %s",
			  strerror(errno));
	if (opt->children)
		session_children_start(s);
	if (!s->launched)	/* before the first op it should see */
		session_python_start(s);
	return activate_target(s, opt, libs.path[0]);
}

