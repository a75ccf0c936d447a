/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Files other programs read while rfbpf rewrites them (pprof profiles,
 * node_exporter's textfile): a reader sees the old file or the new one,
 * never a part.
 */
#ifndef RFBPF_ATOMIC_FILE_H
#define RFBPF_ATOMIC_FILE_H

#include <stddef.h>

/* Writes buf to a hidden temporary ".NAME.XXXXXX" next to path (so the
 * rename cannot cross file systems, and globs such as *.prom or
 * profile-*.pb.gz skip it), fsyncs it, makes it 0644 whatever the umask,
 * renames it over path and fsyncs the directory. 0 or -errno; on error
 * the temporary is gone and path unchanged. An existing path that is not
 * a regular file is left alone: -EISDIR for a directory, else -EINVAL. */
int atomic_write_file(const char *path, const void *buf, size_t len);

#endif
