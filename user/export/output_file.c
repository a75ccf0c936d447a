// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include "export/output_file.h"

int output_file_open(struct output_file *o, const char *path, bool gzip)
{
	int fd;

	memset(o, 0, sizeof(*o));
	fd = atomic_stream_create(&o->file, path);
	if (fd < 0) {
		atomic_stream_discard(&o->file);
		errno = -fd;
		return -1;
	}
	if ((gzip ? out_file_dup_gzip : out_file_dup)(&o->out, fd)) {
		int err = errno;

		close(fd);
		atomic_stream_discard(&o->file);
		errno = err;
		return -1;
	}
	close(fd);
	return 0;
}

int output_file_publish(struct output_file *o)
{
	int err = atomic_stream_publish(&o->file);

	if (err)
		errno = -err;
	return err ? -1 : 0;
}

bool output_file_discard(struct output_file *o)
{
	out_file_close(&o->out);
	return atomic_stream_discard(&o->file);
}

int output_file_close(struct output_file *o)
{
	int err = out_file_close(&o->out);	/* errno: the first failure */

	if (!err && output_file_publish(o))
		err = -1;
	atomic_stream_discard(&o->file);
	return err;
}
