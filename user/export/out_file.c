// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>
#include "out_file.h"

/* All of buf to o->fd: 0, or -1 with the first failure kept. */
static int write_all(struct out_file *o, const char *buf, size_t len)
{
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
	return 0;
}

/* gzip: what deflate makes of buf (flush Z_FINISH at the end) to fd. */
static int deflate_out(struct out_file *o, const char *buf, size_t len,
		       int flush)
{
	char out[16384];
	int ret;

	o->z->next_in = (unsigned char *)buf;
	o->z->avail_in = (unsigned)len;
	do {
		o->z->next_out = (unsigned char *)out;
		o->z->avail_out = sizeof(out);
		ret = deflate(o->z, flush);
		if (ret == Z_STREAM_ERROR) {
			if (!o->err)
				o->err = EIO;
			return -1;
		}
		if (write_all(o, out, sizeof(out) - o->z->avail_out))
			return -1;
	} while (o->z->avail_out == 0 || (flush == Z_FINISH &&
					   ret != Z_STREAM_END));
	return 0;
}

static ssize_t gz_write(void *cookie, const char *buf, size_t len)
{
	struct out_file *o = cookie;

	if (o->err) {
		errno = o->err;
		return -1;
	}
	return deflate_out(o, buf, len, Z_NO_FLUSH) ? -1 : (ssize_t)len;
}

static int gz_close(void *cookie)
{
	struct out_file *o = cookie;

	if (!o->err)
		deflate_out(o, NULL, 0, Z_FINISH);
	deflateEnd(o->z);
	free(o->z);
	o->z = NULL;
	if (close(o->fd) && !o->err)
		o->err = errno;
	o->fd = -1;
	return o->err ? -1 : 0;
}

static ssize_t cookie_write(void *cookie, const char *buf, size_t len)
{
	return write_all(cookie, buf, len) ? -1 : (ssize_t)len;
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
	o->z = NULL;
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

int out_file_dup_gzip(struct out_file *o, int fd)
{
	static const cookie_io_functions_t io = {
		.write = gz_write, .close = gz_close,
	};

	o->err = 0;
	o->f = NULL;
	o->z = calloc(1, sizeof(*o->z));
	if (!o->z)
		return -1;
	/* 15 + 16: a gzip header and trailer, as gzip(1) writes. */
	if (deflateInit2(o->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		free(o->z);
		o->z = NULL;
		errno = ENOMEM;
		return -1;
	}
	o->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (o->fd >= 0)
		o->f = fopencookie(o, "w", io);
	if (!o->f) {
		int err = errno;

		if (o->fd >= 0)
			close(o->fd);
		o->fd = -1;
		deflateEnd(o->z);
		free(o->z);
		o->z = NULL;
		errno = err;
		return -1;
	}
	return 0;
}
