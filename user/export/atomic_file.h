/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Files other programs read while rfbpf rewrites them (pprof profiles,
 * node_exporter's textfile): a reader sees the old file or the new one,
 * never a part.
 */
#ifndef RFBPF_ATOMIC_FILE_H
#define RFBPF_ATOMIC_FILE_H

#include <stdbool.h>
#include <stddef.h>

/* Writes buf to a hidden temporary ".NAME.XXXXXX" next to path (so the
 * rename cannot cross file systems, and globs such as *.prom or
 * profile-*.pb.gz skip it), fsyncs it, makes it 0644 whatever the umask,
 * renames it over path and fsyncs the directory. 0 or -errno; on error
 * the temporary is gone and path unchanged. An existing path that is not
 * a regular file is left alone: -EISDIR for a directory, else -EINVAL. */
int atomic_write_file(const char *path, const void *buf, size_t len);

/*
 * A file written as a stream (the Chrome trace) that must not replace
 * the file at its path until it is worth having: a run stopped before it
 * traced anything leaves the old file as it was. The stream goes to a
 * hidden temporary beside path, put in place by atomic_stream_publish and
 * written on after that (its readers watch it grow). A path that is not
 * a regular file (/dev/stdout, a FIFO) is written directly: a rename
 * would replace the node itself. A symbolic link is followed.
 */
struct atomic_stream {
	char *tmp;	/* the temporary, until published (NULL: none) */
	char *path;	/* what it replaces */
};

/* Creates the temporary (mode: the file it replaces, else 0666 less the
 * umask, as fopen makes it) or opens a special path. A descriptor to
 * write to, or -errno. */
int atomic_stream_create(struct atomic_stream *a, const char *path);
/* Renames the temporary over path (a no-op once done or without one).
 * 0 or -errno (the temporary is kept, to be discarded). */
int atomic_stream_publish(struct atomic_stream *a);
/* Not published: the temporary is removed and path left as it was.
 * Frees what create allocated either way. True if a temporary went. */
bool atomic_stream_discard(struct atomic_stream *a);

#endif
