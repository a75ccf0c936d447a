/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Prometheus text exposition format 0.0.4, written into memory so the same
 * bytes can go to node_exporter's textfile collector (prom_write_file) and
 * to HTTP /metrics (fleet/http.c).
 *
 * One bad byte makes a scraper drop the whole exposition, not one sample,
 * so everything that reaches the buffer is made valid here: metric and
 * label names have characters outside the format's alphabet replaced by
 * '_', label values and HELP text are escaped, and invalid UTF-8 becomes
 * U+FFFD. Callers pass whatever op names and paths they have.
 *
 * Running out of memory sets `oom` and stops appending, so a sequence of
 * calls needs one check at the end (prom_write_file refuses such a buffer).
 */
#ifndef RFBPF_EXPORT_PROM_TEXT_H
#define RFBPF_EXPORT_PROM_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include "model/u64map.h"

/* data is NUL-terminated once anything was written (len excludes it). */
struct prom_buf {
	char *data;
	size_t len, cap;
	bool oom;
	/* Every series written: a hash of its name and labels -> where in
	 * data it starts. A series is written once; one that reads the same
	 * as an earlier one (the same labels twice, or op names that differ
	 * only in bytes that are not UTF-8, both U+FFFD here) is left out,
	 * because a scraper refuses the duplicate. */
	struct u64map series;
};

struct prom_label {
	const char *name, *value;
};

void prom_init(struct prom_buf *b);
void prom_free(struct prom_buf *b);
/* Empties b for the next exposition (len = 0, oom cleared), keeps memory. */
void prom_reset(struct prom_buf *b);

/* "# HELP name help\n# TYPE name type\n". type is "counter", "gauge",
 * "histogram", "summary" or "untyped"; anything else is written as
 * "untyped". Samples of the family follow, before the next family. Each
 * family's name must differ from the others' after '_' replaced what the
 * alphabet lacks (rfbpf's are constants). */
void prom_family(struct prom_buf *b, const char *name, const char *type,
		 const char *help);

/* 'name{l1="v1",...} value\n' (no braces without labels). Values are
 * written in the shortest form that reads back as the same double;
 * NaN, +Inf and -Inf as the format spells them. A label whose name is an
 * earlier one's (after '_' replaced what the alphabet lacks) is left
 * out, as is a series already written (see struct prom_buf). */
void prom_sample(struct prom_buf *b, const char *name,
		 const struct prom_label *labels, size_t nr_labels,
		 double value);

/* A histogram's samples (after prom_family(b, name, "histogram", ...)):
 * name_bucket{labels,le="upper_bounds[i]"} cumulative_counts[i] for each
 * bucket, then le="+Inf" with `count` (unless the last bound is already
 * +Inf), name_sum and name_count. Bounds must increase and counts must
 * not decrease; that is the caller's data, not checked here. */
void prom_histogram(struct prom_buf *b, const char *name,
		    const struct prom_label *labels, size_t nr_labels,
		    const double *upper_bounds,
		    const double *cumulative_counts, size_t nr_buckets,
		    double sum, double count);

/* Writes b to path so a reader sees the old file or the new one, never a
 * part: a hidden temp file in the same directory (".NAME.XXXXXX", which
 * the textfile collector's *.prom glob skips), fsync, mode 0644, rename,
 * fsync of the directory. Returns 0 or -errno (-ENOMEM if b->oom). */
int prom_write_file(const char *path, const struct prom_buf *b);

/*
 * rfbpf's own process metrics under the standard unprefixed names every
 * Prometheus client library exports, so existing dashboards and alerts
 * work on rfbpf unchanged. A field that could not be read is NaN and is
 * left out by prom_process_write.
 */
struct prom_process {
	double cpu_seconds;		/* user + system, /proc/self/stat */
	double resident_bytes;		/* /proc/self/statm */
	double virtual_bytes;		/* /proc/self/statm */
	double open_fds;		/* entries of /proc/self/fd */
	double max_fds;			/* RLIMIT_NOFILE soft limit */
	double start_time_seconds;	/* since the Unix epoch */
};
/* Returns 0, or the first -errno met (the other fields are still read). */
int prom_process_read(struct prom_process *p);
/* process_cpu_seconds_total, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_open_fds, process_max_fds,
 * process_start_time_seconds: each with its HELP and TYPE. */
void prom_process_write(struct prom_buf *b, const struct prom_process *p);

#endif
