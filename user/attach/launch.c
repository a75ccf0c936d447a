// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "launch.h"

int launch_prepare(struct launch *l, char **argv)
{
	int go[2], err[2];
	char c;

	if (pipe2(go, O_CLOEXEC))
		return -errno;
	if (pipe2(err, O_CLOEXEC)) {
		close(go[0]);
		close(go[1]);
		return -errno;
	}
	l->pid = fork();
	if (l->pid < 0) {
		int e = -errno;

		close(go[0]); close(go[1]); close(err[0]); close(err[1]);
		return e;
	}
	if (l->pid == 0) {
		/* rfbpf's handlers only count signals: a Ctrl-C before exec
		 * must end the command as it would end it untraced. */
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		close(go[1]);
		close(err[0]);
		if (read(go[0], &c, 1) != 1)
			_exit(127);	/* rfbpf gave up: run nothing */
		execvp(argv[0], argv);
		int e = errno;
		if (write(err[1], &e, sizeof(e)) != sizeof(e))
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(err[1]);
	l->go_fd = go[1];
	l->err_fd = err[0];
	return 0;
}

int launch_release(struct launch *l)
{
	char c = 1;
	int e = 0;
	ssize_t n;

	if (write(l->go_fd, &c, 1) != 1)
		e = errno;	/* EPIPE: the command died before exec */
	close(l->go_fd);
	l->go_fd = -1;
	/* EOF (exec closed the CLOEXEC pipe) means the command is running. */
	n = read(l->err_fd, &e, sizeof(e));
	close(l->err_fd);
	l->err_fd = -1;
	return n == sizeof(e) ? -e : 0;
}

void launch_abort(struct launch *l)
{
	int code;

	if (l->go_fd >= 0)
		close(l->go_fd);
	if (l->err_fd >= 0)
		close(l->err_fd);
	l->go_fd = l->err_fd = -1;
	launch_reap(l, true, &code);
}

bool launch_reap(struct launch *l, bool block, int *code)
{
	int status;
	pid_t r;

	do
		r = waitpid(l->pid, &status, block ? 0 : WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r < 0 && errno == ECHILD) {
		/* Reaped by a wait of rfbpf's ptrace code: it kept the
		 * status (remote_reaped), or it is unknown (-1). */
		*code = -1;
		return true;
	}
	if (r != l->pid)
		return false;
	if (WIFEXITED(status))
		*code = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		*code = 128 + WTERMSIG(status);
	else
		return false;
	return true;
}
