// SPDX-License-Identifier: BSD-2-Clause
/* Loading the CUPTI agent into a running job: inject.h. */
#include "gpu/inject.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/memfd.h>
#include "attach/activation.h"
#include "attach/held_stack.h"
#include "attach/remote_call.h"
#include "attach/safe_point.h"
#include "attach/target.h"

/* The agent's name in the job: its memfd's, and its soname, by which a
 * later rfbpf finds one already loaded. */
#define AGENT_NAME "librfbpf_cupti.so"
/* The name the agent gives its thread (cupti/agent.c). */
#define AGENT_THREAD "rfbpf-cupti"
/* A dlopen or an InitializeInjection slower than this is said (never
 * abandoned: the thread must come back through rfbpf's page). */
#define CALL_MS 2000

static bool is_cuda_name(const char *base)
{
	return !strncmp(base, "libcudart.so", 12) ||
	       !strncmp(base, "libcuda.so", 10);
}

static bool agent_thread_runs(pid_t pid)
{
	uint32_t *tids;
	size_t n = target_threads(pid, &tids);
	bool found = false;
	char comm[32];

	for (size_t i = 0; !found && i < n; i++) {
		target_thread_comm(pid, (pid_t)tids[i], comm, sizeof(comm));
		found = !strcmp(comm, AGENT_THREAD);
	}
	free(tids);
	return found;
}

/* NAME's value in pid's environment (as it was at exec), or NULL; valid
 * until the next call. */
static const char *env_get(pid_t pid, const char *name)
{
	static char env[256 * 1024];
	size_t n = strlen(name);
	int got = target_read_file_at("/proc", pid, "environ", env,
				      sizeof(env) - 1);

	if (got < 0)
		return NULL;
	env[got] = 0;
	for (int i = 0; i < got; i += strlen(env + i) + 1)
		if (!strncmp(env + i, name, n) && env[i + n] == '=')
			return env + i + n + 1;
	return NULL;
}

static bool env_has(pid_t pid, const char *name)
{
	return env_get(pid, name) != NULL;
}

static bool wanted(pid_t pid, char *why, size_t len)
{
	char path[PATH_MAX];

	if (target_find_library(pid, is_cuda_name, path, sizeof(path)))
		return snprintf(why, len, "it maps no libcudart or libcuda"),
		       false;
	if (agent_thread_runs(pid))
		return snprintf(why, len, "its CUPTI agent runs already"),
		       false;
	if (env_has(pid, "CUDA_INJECTION64_PATH"))
		return snprintf(why, len, "it names a CUDA injection library "
				"of its own (CUDA_INJECTION64_PATH), which the "
				"CUDA driver loads"), false;
	return true;
}

/* rfbpf's own copy of the agent into path: file if given (--gpu-agent),
 * else beside the rfbpf binary. */
static int agent_file(const char *file, char *path, size_t len, char *err,
		      size_t errlen)
{
	static const char *const beside[] = {
		"build/cupti/" AGENT_NAME, "../lib/rfbpf/" AGENT_NAME,
	};
	char exe[PATH_MAX];
	ssize_t n;

	if (file) {
		snprintf(path, len, "%s", file);
		if (!access(path, R_OK))
			return 0;
		return snprintf(err, errlen, "cannot read the CUPTI agent %s "
				"(--gpu-agent): %s", file, strerror(errno)),
		       -ENOENT;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = 0;
		for (size_t i = 0; i < sizeof(beside) / sizeof(*beside); i++) {
			snprintf(path, len, "%s/%s", dirname(exe), beside[i]);
			if (!access(path, R_OK))
				return 0;
			exe[n] = 0;	/* dirname() wrote into it */
		}
	}
	return snprintf(err, errlen, "no CUPTI agent beside rfbpf (make "
			"cupti builds build/cupti/%s; or give --gpu-agent "
			"FILE)", AGENT_NAME), -ENOENT;
}

int gpu_inject_prepare(pid_t pid, const char *file, struct gpu_inject *g,
		       char *why, size_t len)
{
	static const char *const names[] = { "dlopen", "dlsym", "dlerror" };
	const char *bind_now;
	uint64_t addr[3];
	int e;

	if (!wanted(pid, why, len))
		return 0;
	if (activation_seccomp_mode(pid))
		return snprintf(why, len, "process %d runs under a seccomp "
				"filter, and loading the agent makes system "
				"calls it may forbid (memfd_create, mmap, "
				"clone)", pid), -EPERM;
	/* glibc binds everything at load when it is set to anything. */
	if ((bind_now = env_get(pid, "LD_BIND_NOW")) && *bind_now)
		return snprintf(why, len, "process %d was started with "
				"LD_BIND_NOW (a job hardened to bind every "
				"symbol as it starts); rfbpf loads no library "
				"into such a job", pid), -EPERM;
	if ((e = agent_file(file, g->agent, sizeof(g->agent), why, len)) ||
	    (e = target_libc_functions(pid, names, 3, addr, why, len)))
		return e;
	g->dlopen = addr[0];
	g->dlsym = addr[1];
	g->dlerror = addr[2];
	return 1;
}

/* Calls fn(a, b) with the string s, copied onto the held thread's stack,
 * in place of argument str_arg (0: a, 1: b). */
static int call_with_string(struct held_thread *h, uint64_t fn, uint64_t a,
			    uint64_t b, int str_arg, const char *s,
			    uint64_t *ret, char *err, size_t len)
{
	uint64_t args[6] = { a, b };

	args[str_arg] = remote_call_stack_arg(h);
	return remote_call_function(h, fn, args, s, strlen(s) + 1, CALL_MS,
				    ret, err, len);
}

/* dlerror() on h: the thread's last error, read and cleared (0: none). */
static uint64_t clear_dlerror(struct held_thread *h,
			      const struct gpu_inject *g)
{
	uint64_t msg = 0, none[6] = { 0 };
	char ignored[128];

	if (remote_call_function(h, g->dlerror, none, NULL, 0, CALL_MS, &msg,
				 ignored, sizeof(ignored)))
		return 0;
	return msg;
}

/* What dlerror() says in the job, into err after what. */
static void say_dlerror(struct held_thread *h, const struct gpu_inject *g,
			const char *what, char *err, size_t len)
{
	uint64_t msg = clear_dlerror(h, g);
	char text[256] = "";

	if (msg && !target_read(h->pid, msg, text, sizeof(text) - 1))
		text[sizeof(text) - 1] = 0;
	snprintf(err, len, "%s: %s", what, text[0] ? text : "(no reason)");
}

/* A memfd in the job holding the agent's bytes: its number there. */
static int agent_memfd(struct held_thread *h, const char *agent,
		       int64_t *fd, char *err, size_t len)
{
	static const char name[] = AGENT_NAME;
	char path[64];
	struct stat st;
	int in, out, e;
	off_t at = 0;

	e = remote_syscall_checked(h, SYS_memfd_create,
				   (uint64_t[6]){ 0, MFD_CLOEXEC }, name,
				   sizeof(name), fd, "loading the CUPTI agent",
				   err, len);
	if (e)
		return e;
	snprintf(path, sizeof(path), "/proc/%d/fd/%lld", h->pid,
		 (long long)*fd);
	in = open(agent, O_RDONLY | O_CLOEXEC);
	out = open(path, O_WRONLY | O_CLOEXEC);
	e = in < 0 || out < 0 || fstat(in, &st) ? -errno : 0;
	while (!e && at < st.st_size)
		if (sendfile(out, in, &at, st.st_size - at) <= 0)
			e = errno ? -errno : -EIO;
	if (e)
		snprintf(err, len, "cannot copy %s into the job: %s",
			 agent, strerror(-e));
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return e;
}

static void close_in_job(struct held_thread *h, int64_t fd)
{
	char ignored[128];
	int64_t r;

	remote_syscall_checked(h, SYS_close, (uint64_t[6]){ (uint64_t)fd },
			       NULL, 0, &r, "closing", ignored,
			       sizeof(ignored));
}

/* The agent's handle: the one loaded already (by soname), or a new one
 * from a memfd. */
static int load(struct held_thread *h, const struct gpu_inject *g,
		uint64_t *handle, char *err, size_t len)
{
	char path[64];
	int64_t fd;
	int e;

	e = call_with_string(h, g->dlopen, 0, RTLD_NOW | RTLD_NOLOAD, 0,
			     AGENT_NAME, handle, err, len);
	if (e || *handle)
		return e;
	/* That failure is now the thread's dlerror(): the job's next call
	 * of it would read rfbpf's. */
	clear_dlerror(h, g);
	if ((e = agent_memfd(h, g->agent, &fd, err, len)))
		return e;
	snprintf(path, sizeof(path), "/proc/self/fd/%lld", (long long)fd);
	e = call_with_string(h, g->dlopen, 0,
			     RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE, 0, path,
			     handle, err, len);
	close_in_job(h, fd);
	/* Tests only: rfbpf killed between the dlopen and the agent's
	 * start. */
	if (!e && getenv("RFBPF_TEST_INJECT_DELAY_MS"))
		usleep(1000 * atoi(getenv("RFBPF_TEST_INJECT_DELAY_MS")));
	if (!e && !*handle) {
		say_dlerror(h, g, "dlopen of the CUPTI agent failed in the "
			    "job", err, len);
		return -ENOEXEC;
	}
	return e;
}

/* Does h's stack show it inside the loader or malloc? Then a dlopen on
 * it would run inside their work (held_stack.h). A stack that cannot be
 * read at all is taken on safe_point.h's argument, and said with -v. */
static int inside_loader_or_malloc(const struct held_thread *h,
				   bool verbose, char *err, size_t len)
{
	double start_ms = remote_now_ms();
	struct held_stack st;
	int e = held_stack_unwind(h, &st, verbose);

	if (e) {
		if (verbose)
			fprintf(stderr, "rfbpf: GPU: could not unwind the held "
				"thread %d: %s\n", h->tid, strerror(-e));
		return 0;
	}
	if (verbose && st.bad_frame < 0)
		fprintf(stderr, "rfbpf: GPU: held thread %d: %d frames%s, "
			"none in the dynamic loader or malloc (unwound in "
			"%.1f ms)\n", h->tid, st.frames, st.stopped_early ?
			" (unwinding stopped early)" : "",
			remote_now_ms() - start_ms);
	if (st.bad_frame < 0)
		return 0;
	return snprintf(err, len, "the thread rfbpf held runs an op inside "
			"%s, at frame %d of its stack: %s",
			st.bad_place == HELD_FRAME_LOADER ?
			"the dynamic loader, in a library's constructor" :
			"malloc", st.bad_frame, st.bad_where), -EAGAIN;
}

int gpu_inject(struct held_thread *h, const struct gpu_inject *g,
	       bool verbose, char *err, size_t len)
{
	uint64_t handle = 0, init = 0, ignored;
	int e;

	if (!h->at_op)
		return snprintf(err, len, "the thread rfbpf held was waiting "
				"in a system call, maybe inside a CUDA call, "
				"not running an op"), -EAGAIN;
	if ((e = inside_loader_or_malloc(h, verbose, err, len)))
		return e;
	if ((e = load(h, g, &handle, err, len)))
		return e;
	e = call_with_string(h, g->dlsym, handle, 0, 1, "InitializeInjection",
			     &init, err, len);
	if (!e && !init) {
		say_dlerror(h, g, "the CUPTI agent has no "
			    "InitializeInjection", err, len);
		return -ENOEXEC;
	}
	if (e)
		return e;
	e = remote_call_function(h, init, (uint64_t[6]){ 0 }, NULL, 0,
				 CALL_MS, &ignored, err, len);
	/* The agent's thread, made on the held thread, starts traced by
	 * rfbpf and stopped. */
	safe_point_release_new_threads(h);
	return e;
}
