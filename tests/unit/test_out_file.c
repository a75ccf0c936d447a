// SPDX-License-Identifier: BSD-2-Clause
/*
 * Output files keep the errno of the write that failed: /dev/full is a
 * full disk, and must be said as one ("No space left on device"), however
 * much was written before and whether the failure came at a buffer flush
 * or at the close.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include "check.h"
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

RUN_TESTS()
