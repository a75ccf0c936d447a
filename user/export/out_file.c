// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include "out_file.h"

static ssize_t cookie_write(void *cookie, const char *buf, size_t len)
{
	struct out_file *o = cookie;
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(o->fd, buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (!o->err)
				o->err = n < 0 ? errno : EIO;
			errno = o->err;
			return -1;
		}
		done += n;
	}
	return done;
}

static int cookie_close(void *cookie)
{
	struct out_file *o = cookie;

	/* NFS and quotas may report a full disk only here. */
	if (close(o->fd) && !o->err)
		o->err = errno;
	o->fd = -1;
	return o->err ? -1 : 0;
}

/* The stream over o->fd, which it owns from now on. */
static int wrap(struct out_file *o)
{
	static const cookie_io_functions_t io = {
		.write = cookie_write, .close = cookie_close,
	};

	o->err = 0;
	o->f = NULL;
	if (o->fd < 0)
		return -1;
	o->f = fopencookie(o, "w", io);
	if (!o->f) {
		int err = errno;

		close(o->fd);
		o->fd = -1;
		errno = err;
		return -1;
	}
	return 0;
}

int out_file_open(struct out_file *o, const char *path)
{
	o->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	return wrap(o);
}

int out_file_dup(struct out_file *o, int fd)
{
	o->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return wrap(o);
}

int out_file_close(struct out_file *o)
{
	int ret = o->f ? fclose(o->f) : 0;

	o->f = NULL;
	if (o->err) {
		errno = o->err;
		return -1;
	}
	return ret ? -1 : 0;
}
