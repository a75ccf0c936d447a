// SPDX-License-Identifier: BSD-2-Clause
/*
 * Output files keep the errno of the write that failed: /dev/full is a
 * full disk, and must be said as one ("No space left on device"), however
 * much was written before and whether the failure came at a buffer flush
 * or at the close.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "export/atomic_file.h"
#include "export/out_file.h"

TEST(a_full_disk_is_enospc_small_or_large)
{
	static const size_t sizes[] = { 10, 100000 };

	for (size_t i = 0; i < 2; i++) {
		struct out_file o;

		CHECK(!out_file_open(&o, "/dev/full"));
		for (size_t n = 0; n < sizes[i]; n++)
			fputc('x', o.f);
		errno = 0;
		CHECK(out_file_close(&o) == -1);
		CHECK_EQ_U64(errno, ENOSPC);
	}
}

TEST(a_file_written_whole)
{
	char path[] = "/tmp/rfbpf-out-XXXXXX", buf[64] = "";
	int fd = mkstemp(path);
	struct out_file o;

	CHECK(fd >= 0);
	close(fd);
	CHECK(!out_file_open(&o, path));
	fprintf(o.f, "hello %d\n", 42);
	CHECK(!out_file_close(&o));
	fd = open(path, O_RDONLY);
	CHECK(read(fd, buf, sizeof(buf) - 1) == 9);
	close(fd);
	CHECK_STR(buf, "hello 42\n");
	unlink(path);
}

TEST(over_a_dup_the_fd_stays_open)
{
	int fd = open("/dev/null", O_WRONLY);
	struct out_file o;

	CHECK(!out_file_dup(&o, fd));
	fputs("x", o.f);
	CHECK(!out_file_close(&o));
	CHECK(fcntl(fd, F_GETFD) >= 0);
	close(fd);
}

TEST(an_unopenable_path_keeps_errno)
{
	struct out_file o;

	CHECK(out_file_open(&o, "/nonexistent-dir/x") == -1);
	CHECK_EQ_U64(errno, ENOENT);
}

static size_t entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.' || (e->d_name[1] &&
		     strcmp(e->d_name, ".."));
	if (d)
		closedir(d);
	return n;
}

static const char *read_back(const char *path)
{
	static char buf[64];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	return buf;
}

/* The Chrome trace's file (atomic_stream): the old file stays whole
 * until publish, and a discarded stream leaves nothing behind. */
TEST(a_stream_replaces_the_file_only_when_published)
{
	char dir[] = "/tmp/rfbpf-stream-XXXXXX", path[64];
	struct atomic_stream a;
	struct stat st;
	int fd;

	CHECK(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/e.json", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0 && write(fd, "good", 4) == 4);
	close(fd);

	fd = atomic_stream_create(&a, path);
	CHECK(fd >= 0 && write(fd, "partial", 7) == 7);
	close(fd);
	CHECK_EQ_U64(entries(dir), 2);		/* the temporary beside it */
	CHECK_STR(read_back(path), "good");
	CHECK(atomic_stream_discard(&a));
	CHECK_EQ_U64(entries(dir), 1);
	CHECK_STR(read_back(path), "good");

	fd = atomic_stream_create(&a, path);
	CHECK(fd >= 0 && write(fd, "new", 3) == 3);
	CHECK_EQ_U64(atomic_stream_publish(&a), 0);
	CHECK(write(fd, "er", 2) == 2);		/* written on once in place */
	close(fd);
	CHECK(!atomic_stream_discard(&a));	/* nothing left to remove */
	CHECK_STR(read_back(path), "newer");
	CHECK_EQ_U64(entries(dir), 1);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600);
	unlink(path);
	rmdir(dir);
}

TEST(a_stream_to_a_device_writes_it_directly)
{
	struct atomic_stream a;
	struct stat before, after;
	int fd;

	CHECK(stat("/dev/null", &before) == 0);
	fd = atomic_stream_create(&a, "/dev/null");
	CHECK(fd >= 0 && a.tmp == NULL);
	close(fd);
	CHECK_EQ_U64(atomic_stream_publish(&a), 0);
	atomic_stream_discard(&a);
	CHECK(stat("/dev/null", &after) == 0 && S_ISCHR(after.st_mode));
	CHECK_EQ_U64(after.st_ino, before.st_ino);
}

RUN_TESTS()
