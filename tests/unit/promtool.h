/* SPDX-License-Identifier: BSD-2-Clause */
/* promtool (Debian package prometheus) on a Prometheus exposition: the
 * reference client's verdict, shared by the tests that write one. */
#ifndef RFBPF_TEST_PROMTOOL_H
#define RFBPF_TEST_PROMTOOL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROMTOOL "/usr/bin/promtool"

/* promtool's exit status on `text`: 0 valid and lint-clean, 1 invalid,
 * 3 lint problems; -1 if it could not run. Its complaints are shown
 * unless `quiet`. */
static inline int promtool_check(const char *text, size_t len, bool quiet)
{
	char path[] = "/tmp/rfbpf-promtool-XXXXXX", cmd[160];
	int fd = mkstemp(path), status;

	if (fd < 0)
		return -1;
	if (write(fd, text, len) != (ssize_t)len) {
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	snprintf(cmd, sizeof(cmd), PROMTOOL " check metrics < %s%s", path,
		 quiet ? " >/dev/null 2>&1" : "");
	status = system(cmd);
	unlink(path);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#endif
