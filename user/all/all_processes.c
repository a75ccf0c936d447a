// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "all/all_processes.h"
#include "attach/privileges.h"
#include "attach/target.h"
#include "export/table_ranks.h"
#include "fleet/discovery.h"
#include "model/distributed.h"
#include "model/rank_summary.h"

/* One traced process and the rfbpf that traces it. */
struct traced {
	struct torch_process proc;
	struct dist_info dist;
	pid_t tracer;		/* 0: not started */
	int status;		/* its exit status, -1 until it ended */
	int table_fd;		/* its standard output */
	int summary_fd;		/* its --rank-summary */
	char path[4096];	/* its trace, "" without -o */
};

static volatile sig_atomic_t pass_on;	/* a signal to hand the tracers */

static void on_signal(int sig)
{
	/* Ctrl-C reaches every tracer from the terminal already (one
	 * process group); SIGTERM and SIGHUP were sent to this one only. */
	if (sig != SIGINT)
		pass_on = SIGTERM;
}

/* DIR/HOST.rankR.PID.pt.trace.json, as Kineto names a rank's trace
 * (HOST.PID.pt.trace.json for a process with no rank). */
static void trace_name(struct traced *t, const char *dir)
{
	char host[256] = "host";
	size_t n = strlen(dir);

	gethostname(host, sizeof(host) - 1);
	if (t->dist.rank >= 0)
		snprintf(t->path, sizeof(t->path), "%s%s%s.rank%d.%d.pt.trace."
			 "json", dir, n && dir[n - 1] == '/' ? "" : "/", host,
			 t->dist.rank, t->proc.pid);
	else
		snprintf(t->path, sizeof(t->path), "%s%s%s.%d.pt.trace.json",
			 dir, n && dir[n - 1] == '/' ? "" : "/", host,
			 t->proc.pid);
}

/* argv less --all and -o (each tracer gets its own), as given. */
static int child_args(int argc, char **argv, char **out)
{
	int n = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--all"))
			continue;
		if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			i++;
			continue;
		}
		if (!strncmp(a, "-o", 2) || !strncmp(a, "--output=", 9))
			continue;
		out[n++] = argv[i];
	}
	return n;
}

static int start_tracer(struct traced *t, int argc, char **argv)
{
	char pid[16], summary[32];
	char **args = calloc(argc + 12, sizeof(*args));
	int n = 0;

	if (!args)
		return -ENOMEM;
	/* Close-on-exec: each tracer gets its own two only. */
	t->table_fd = memfd_create("rfbpf-table", MFD_CLOEXEC);
	t->summary_fd = memfd_create("rfbpf-rank-summary", MFD_CLOEXEC);
	if (t->table_fd < 0 || t->summary_fd < 0) {
		free(args);
		return -errno;
	}
	snprintf(pid, sizeof(pid), "%d", t->proc.pid);
	snprintf(summary, sizeof(summary), "/dev/fd/%d", t->summary_fd);
	args[n++] = argv[0];
	n += child_args(argc, argv, args + n);
	args[n++] = "-q";
	args[n++] = "-p";
	args[n++] = pid;
	args[n++] = "--rank-summary";
	args[n++] = summary;
	if (t->path[0]) {
		args[n++] = "-o";
		args[n++] = t->path;
	}
	args[n] = NULL;
	fflush(NULL);
	t->tracer = fork();
	if (t->tracer < 0) {
		free(args);
		return -errno;
	}
	if (!t->tracer) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		dup2(t->table_fd, STDOUT_FILENO);
		fcntl(t->summary_fd, F_SETFD, 0);
		execv("/proc/self/exe", args);
		fprintf(stderr, "rfbpf: cannot run rfbpf for PID %d: %s\n",
			t->proc.pid, strerror(errno));
		_exit(127);
	}
	free(args);
	return 0;
}

/* Every tracer's end, passing stop signals on meanwhile. */
static void wait_all(struct traced *t, size_t nr)
{
	size_t left = 0;

	for (size_t i = 0; i < nr; i++)
		left += t[i].tracer > 0;
	while (left) {
		int status;
		pid_t p = wait(&status);

		if (p < 0) {
			if (errno != EINTR)
				return;
			if (pass_on)
				for (size_t i = 0; i < nr; i++)
					if (t[i].tracer > 0 && t[i].status < 0)
						kill(t[i].tracer, pass_on);
			pass_on = 0;
			continue;
		}
		for (size_t i = 0; i < nr; i++)
			if (t[i].tracer == p) {
				t[i].status = WIFEXITED(status) ?
					      WEXITSTATUS(status) :
					      128 + WTERMSIG(status);
				left--;
			}
	}
}

/* The whole of fd (a memfd) as a string; NULL if empty or unreadable. */
static char *slurp(int fd)
{
	off_t len = lseek(fd, 0, SEEK_END);
	char *buf;

	if (len <= 0 || !(buf = malloc(len + 1)))
		return NULL;
	if (pread(fd, buf, len, 0) != len) {
		free(buf);
		return NULL;
	}
	buf[len] = 0;
	return buf;
}

static int by_rank(const void *a, const void *b)
{
	const struct traced *x = a, *y = b;
	int rx = x->dist.rank < 0 ? 1 << 30 : x->dist.rank;
	int ry = y->dist.rank < 0 ? 1 << 30 : y->dist.rank;

	return rx != ry ? (rx > ry) - (rx < ry) :
	       (x->proc.pid > y->proc.pid) - (x->proc.pid < y->proc.pid);
}

/* The tables one after another, then the ranks' table. */
static void report(struct traced *t, size_t nr)
{
	struct rank_summary *sum = calloc(nr ? nr : 1, sizeof(*sum));
	size_t nr_sum = 0;

	for (size_t i = 0; i < nr; i++) {
		char *table = slurp(t[i].table_fd), *text;
		char where[256];

		dist_info_describe(&t[i].dist, where, sizeof(where));
		printf("%s== PID %d (%s)%s%s ==\n", i ? "\n" : "",
		       t[i].proc.pid, t[i].proc.comm,
		       t[i].dist.rank >= 0 ? ": " : "",
		       t[i].dist.rank >= 0 ? where : "");
		if (table)
			fputs(table, stdout);
		else
			printf("(no table: its rfbpf exited %d)\n",
			       t[i].status);
		free(table);
		text = slurp(t[i].summary_fd);
		if (sum && text && rank_summary_parse(text, &sum[nr_sum]))
			nr_sum++;
		free(text);
	}
	if (sum)
		print_rank_table(stdout, sum, nr_sum);
	fflush(stdout);
	free(sum);
}

/* Where some processes are ranks, the others (torchrun's agent, which
 * imports torch too) run no step and no collective: they are left out,
 * and said so, rather than traced with --steps waiting for steps that
 * never come. t is sorted by rank, the unranked last. Returns how many
 * are kept. */
static size_t keep_ranks(const struct traced *t, size_t nr)
{
	size_t ranked = 0;

	while (ranked < nr && t[ranked].dist.rank >= 0)
		ranked++;
	if (!ranked)
		return nr;
	for (size_t i = ranked; i < nr; i++)
		fprintf(stderr, "rfbpf: --all: PID %d (%s) has no RANK in its "
			"environment (a launcher, such as torchrun's agent): "
			"not traced; -p %d traces it\n", t[i].proc.pid,
			t[i].proc.comm, t[i].proc.pid);
	return ranked;
}

int all_processes_run(const struct options *opt, int argc, char **argv)
{
	struct torch_process *procs = NULL;
	struct traced *t;
	size_t nr = 0;
	int err, ret = 0;
	char why[512];

	/* No SA_RESTART: a signal interrupts wait() to be passed on. */
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* Before the scan: without them other users' maps are closed, and
	 * "no PyTorch process" would be said for the wrong reason. */
	if (!have_tracing_privileges(why, sizeof(why))) {
		fprintf(stderr, "rfbpf: %s\n", why);
		return 1;
	}
	err = discovery_scan("/proc", &procs, &nr);
	if (err) {
		fprintf(stderr, "rfbpf: cannot read /proc: %s\n",
			strerror(-err));
		return 1;
	}
	if (!nr) {
		fprintf(stderr, "rfbpf: --all: no process on this host maps a "
			"libtorch_cpu; start the job first\n");
		return 1;
	}
	if (opt->trace_path && mkdir(opt->trace_path, 0755) &&
	    errno != EEXIST) {
		fprintf(stderr, "rfbpf: cannot create %s: %s\n",
			opt->trace_path, strerror(errno));
		free(procs);
		return 1;
	}
	if (!(t = calloc(nr, sizeof(*t)))) {
		free(procs);
		return 1;
	}
	for (size_t i = 0; i < nr; i++) {
		t[i].proc = procs[i];
		t[i].status = -1;
		t[i].table_fd = t[i].summary_fd = -1;
		dist_info_init(&t[i].dist);
		target_read_dist_info(t[i].proc.pid, &t[i].dist);
	}
	free(procs);
	qsort(t, nr, sizeof(*t), by_rank);
	nr = keep_ranks(t, nr);
	fprintf(stderr, "rfbpf: --all: %zu PyTorch process%s\n", nr,
		nr == 1 ? "" : "es");
	for (size_t i = 0; i < nr; i++) {
		if (opt->trace_path)
			trace_name(&t[i], opt->trace_path);
		if ((err = start_tracer(&t[i], argc, argv))) {
			fprintf(stderr, "rfbpf: cannot start tracing PID %d: "
				"%s\n", t[i].proc.pid, strerror(-err));
			t[i].status = 1;
		}
	}
	wait_all(t, nr);
	report(t, nr);
	for (size_t i = 0; i < nr; i++) {
		if (t[i].status && !ret) {
			fprintf(stderr, "rfbpf: tracing PID %d failed (exit "
				"%d)\n", t[i].proc.pid, t[i].status);
			ret = t[i].status;
		}
		if (t[i].table_fd >= 0)
			close(t[i].table_fd);
		if (t[i].summary_fd >= 0)
			close(t[i].summary_fd);
	}
	free(t);
	return ret;
}
