// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "atomic_file.h"

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= w;
	}
	return 0;
}

/* fsync of the directory makes the rename itself survive a crash. */
static void sync_dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash - path + 1) : strdup(".");
	int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;

	if (fd >= 0) {
		fsync(fd);	/* best effort: the data is already renamed */
		close(fd);
	}
	free(dir);
}

int atomic_write_file(const char *path, const void *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	int dirlen = slash ? (int)(slash - path + 1) : 0;
	struct stat st;
	char *tmp;
	int fd, err;

	/* A rename over a device or FIFO would replace the node itself (as
	 * root, /dev/full by a regular file): only files are replaced. */
	if (!stat(path, &st) && !S_ISREG(st.st_mode))
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	if (asprintf(&tmp, "%.*s.%s.XXXXXX", dirlen, path, path + dirlen) < 0)
		return -ENOMEM;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		free(tmp);
		return err;
	}
	err = write_all(fd, buf, len);
	if (!err && fsync(fd))
		err = -errno;
	if (!err && fchmod(fd, 0644))
		err = -errno;
	if (close(fd) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
	else
		sync_dir_of(path);
	free(tmp);
	return err;
}

/* What fopen(path, "w") would give a new file: 0666 less the umask (read
 * by setting it back: rfbpf has one thread while it opens its outputs). */
static mode_t new_file_mode(void)
{
	mode_t mask = umask(022);

	umask(mask);
	return 0666 & ~mask;
}

int atomic_stream_create(struct atomic_stream *a, const char *path)
{
	char *target = NULL;
	const char *slash;
	struct stat st;
	mode_t mode;
	int fd, err;

	a->tmp = a->path = NULL;
	if (!lstat(path, &st) && S_ISLNK(st.st_mode))
		target = realpath(path, NULL);	/* dangling: path itself */
	a->path = target ? target : strdup(path);
	if (!a->path)
		return -ENOMEM;
	if (!stat(a->path, &st) && !S_ISREG(st.st_mode)) {
		fd = open(a->path, O_WRONLY | O_TRUNC | O_CLOEXEC);
		return fd < 0 ? -errno : fd;
	}
	mode = !stat(a->path, &st) ? st.st_mode & 07777 : new_file_mode();
	slash = strrchr(a->path, '/');
	if (asprintf(&a->tmp, "%.*s.%s.XXXXXX",
		     slash ? (int)(slash - a->path + 1) : 0, a->path,
		     slash ? slash + 1 : a->path) < 0) {
		a->tmp = NULL;
		return -ENOMEM;
	}
	fd = mkostemp(a->tmp, O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		free(a->tmp);
		a->tmp = NULL;
		/* A writable file in a directory that is not: in place, as
		 * before (no temporary can stand beside it). */
		if (!stat(a->path, &st))
			fd = open(a->path, O_WRONLY | O_TRUNC | O_CLOEXEC);
		return fd < 0 ? err : fd;
	}
	if (fchmod(fd, mode)) {
		err = -errno;
		close(fd);
		atomic_stream_discard(a);
		return err;
	}
	return fd;
}

int atomic_stream_publish(struct atomic_stream *a)
{
	if (!a->tmp)
		return 0;
	if (rename(a->tmp, a->path))
		return -errno;
	sync_dir_of(a->path);
	free(a->tmp);
	a->tmp = NULL;
	return 0;
}

bool atomic_stream_discard(struct atomic_stream *a)
{
	bool had = a->tmp != NULL;

	if (had)
		unlink(a->tmp);
	free(a->tmp);
	free(a->path);
	a->tmp = a->path = NULL;
	return had;
}
