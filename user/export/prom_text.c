// SPDX-License-Identifier: BSD-2-Clause
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "atomic_file.h"
#include "prom_text.h"
#include "utf8.h"

void prom_init(struct prom_buf *b)
{
	*b = (struct prom_buf){};
}

void prom_free(struct prom_buf *b)
{
	free(b->data);
	u64map_free(&b->series);
	prom_init(b);
}

void prom_reset(struct prom_buf *b)
{
	b->len = 0;
	b->oom = false;
	if (b->data)
		b->data[0] = '\0';
	/* Emptied, its memory kept like data's. */
	if (b->series.slots)
		memset(b->series.slots, 0,
		       b->series.cap * sizeof(*b->series.slots));
	b->series.len = 0;
}

/* Room for n more bytes plus the terminating NUL; false (and oom) if not. */
static bool reserve(struct prom_buf *b, size_t n)
{
	size_t cap = b->cap ? b->cap : 4096;
	char *data;

	if (b->oom)
		return false;
	if (b->len + n < b->cap)
		return true;
	while (cap <= b->len + n)
		cap *= 2;
	data = realloc(b->data, cap);
	if (!data) {
		b->oom = true;
		return false;
	}
	b->data = data;
	b->cap = cap;
	return true;
}

static void put(struct prom_buf *b, const char *s, size_t n)
{
	if (!reserve(b, n))
		return;
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

static void put_str(struct prom_buf *b, const char *s)
{
	put(b, s, strlen(s));
}

/*
 * Label values escape '\\', '"' and newline; HELP text escapes '\\' and
 * newline only (a quote is literal there). Each invalid UTF-8 byte becomes
 * U+FFFD, the replacement character, rather than '?': it shows a reader
 * that a byte was lost instead of passing for a real question mark.
 */
static void put_escaped(struct prom_buf *b, const char *str, bool quote)
{
	const unsigned char *s = (const unsigned char *)str;

	while (*s) {
		const unsigned char *run = s;
		int n;

		/* A run of bytes written as they are goes in one put: byte by
		 * byte, the writer was most of a scrape's time. */
		while (*s && *s != '\\' && *s != '\n' && !(*s == '"' && quote) &&
		       (n = utf8_len(s)))
			s += n;
		if (s > run)
			put(b, (const char *)run, (size_t)(s - run));
		if (!*s)
			break;
		if (*s == '\\')
			put(b, "\\\\", 2);
		else if (*s == '\n')
			put(b, "\\n", 2);
		else if (*s == '"' && quote)
			put(b, "\\\"", 2);
		else
			put(b, "\xef\xbf\xbd", 3);	/* invalid UTF-8 */
		s++;
	}
}

/* A label name's alphabet (a metric name's adds ':'). */
static bool name_char_ok(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (c >= '0' && c <= '9' && !first);
}

/* Metric names are [a-zA-Z_:][a-zA-Z0-9_:]*, label names the same without
 * ':'. Other characters become '_' (a leading digit too), and an empty
 * name becomes "_", so a typo cannot invalidate the exposition. */
static void put_name(struct prom_buf *b, const char *name, bool colon_ok)
{
	const char *s = name;

	if (!*s)
		put(b, "_", 1);
	while (*s) {
		const char *run = s;

		while (*s && (name_char_ok(*s, s == name) ||
			      (*s == ':' && colon_ok)))
			s++;
		if (s > run)
			put(b, run, (size_t)(s - run));
		if (*s) {
			put(b, "_", 1);
			s++;
		}
	}
}

/* Shortest of %.15g..%.17g that reads back as v: 0.1 stays "0.1" instead
 * of "0.10000000000000001", and every double still survives exactly. */
static void format_value(char *out, size_t cap, double v)
{
	if (isnan(v)) {
		snprintf(out, cap, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(out, cap, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(out, cap, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			return;
	}
}

static void put_value(struct prom_buf *b, double v)
{
	char s[32];

	format_value(s, sizeof(s), v);
	put_str(b, s);
}

void prom_family(struct prom_buf *b, const char *name, const char *type,
		 const char *help)
{
	static const char *const types[] = { "counter", "gauge", "histogram",
					     "summary", "untyped" };
	const char *t = "untyped";

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (type && !strcmp(type, types[i]))
			t = types[i];
	put_str(b, "# HELP ");
	put_name(b, name, true);
	put(b, " ", 1);
	put_escaped(b, help ? help : "", false);
	put_str(b, "\n# TYPE ");
	put_name(b, name, true);
	put(b, " ", 1);
	put_str(b, t);
	put(b, "\n", 1);
}

static void put_label(struct prom_buf *b, bool first, const char *name,
		      const char *value)
{
	if (!first)
		put(b, ",", 1);
	put_name(b, name, false);
	put(b, "=\"", 2);
	put_escaped(b, value ? value : "", true);
	put(b, "\"", 1);
}

/* Do label names a and b read the same once written (put_name)? */
static bool same_label_name(const char *a, const char *b)
{
	if (!*a)
		a = "_";
	if (!*b)
		b = "_";
	for (size_t i = 0; a[i] || b[i]; i++) {
		if (!a[i] || !b[i])
			return false;
		if ((name_char_ok(a[i], !i) ? a[i] : '_') !=
		    (name_char_ok(b[i], !i) ? b[i] : '_'))
			return false;
	}
	return true;
}

/* Is labels[i] named as an earlier label, or le in a histogram? A
 * scraper refuses a sample that has a label name twice, and a caller's le
 * would be the buckets' (and make _sum and _count other series). */
static bool repeated_label(const struct prom_label *labels, size_t i,
			   bool histogram)
{
	if (histogram && same_label_name(labels[i].name, "le"))
		return true;
	for (size_t k = 0; k < i; k++)
		if (same_label_name(labels[k].name, labels[i].name))
			return true;
	return false;
}

/* FNV-1a of s[0..n), never 0 (u64map's empty key). */
static uint64_t series_hash(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h ? h : 1;
}

/* The series just written at data[start..len): false if it was written
 * before, else noted. Equal hashes are told apart by the bytes: the
 * earlier series ends where its value's ' ' is. */
static bool first_series(struct prom_buf *b, size_t start)
{
	size_t n = b->len - start;
	uint64_t h = series_hash(b->data + start, n), *at;

	at = u64map_get(&b->series, h);
	if (at)
		return !(*at + n < start && !memcmp(b->data + *at,
						    b->data + start, n) &&
			 b->data[*at + n] == ' ');
	if (!u64map_put(&b->series, h, start))
		b->oom = true;
	return true;
}

/* name+suffix{labels[,le="le"]} value: one line of any sample type;
 * histogram: one of prom_histogram's (which own le). */
static void put_sample(struct prom_buf *b, const char *name,
		       const char *suffix, const struct prom_label *labels,
		       size_t nr_labels, bool histogram, const char *le,
		       double value)
{
	size_t start = b->len;
	bool first = true;

	put_name(b, name, true);
	put_str(b, suffix);
	if (nr_labels || le) {
		put(b, "{", 1);
		for (size_t i = 0; i < nr_labels; i++) {
			if (repeated_label(labels, i, histogram))
				continue;
			put_label(b, first, labels[i].name, labels[i].value);
			first = false;
		}
		if (le)
			put_label(b, first, "le", le);
		put(b, "}", 1);
	}
	if (b->oom)
		return;
	if (!first_series(b, start)) {
		b->len = start;
		b->data[start] = '\0';
		return;
	}
	put(b, " ", 1);
	put_value(b, value);
	put(b, "\n", 1);
}

void prom_sample(struct prom_buf *b, const char *name,
		 const struct prom_label *labels, size_t nr_labels,
		 double value)
{
	put_sample(b, name, "", labels, nr_labels, false, NULL, value);
}

void prom_histogram(struct prom_buf *b, const char *name,
		    const struct prom_label *labels, size_t nr_labels,
		    const double *upper_bounds,
		    const double *cumulative_counts, size_t nr_buckets,
		    double sum, double count)
{
	bool has_inf = false;
	char le[32];

	for (size_t i = 0; i < nr_buckets; i++) {
		format_value(le, sizeof(le), upper_bounds[i]);
		put_sample(b, name, "_bucket", labels, nr_labels, true, le,
			   cumulative_counts[i]);
		has_inf = isinf(upper_bounds[i]) && upper_bounds[i] > 0;
	}
	if (!has_inf)
		put_sample(b, name, "_bucket", labels, nr_labels, true,
			   "+Inf", count);
	put_sample(b, name, "_sum", labels, nr_labels, true, NULL, sum);
	put_sample(b, name, "_count", labels, nr_labels, true, NULL, count);
}

int prom_write_file(const char *path, const struct prom_buf *b)
{
	if (b->oom)
		return -ENOMEM;
	return atomic_write_file(path, b->data ? b->data : "", b->len);
}

/*
 * Process metrics. /proc/self/stat's second field is the command name in
 * parentheses and may itself hold spaces and ')', so fields are counted
 * from the last ')': the token after it is field 3 (state).
 */
static int read_file(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, cap - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n < 0)
		return n;
	buf[n] = '\0';
	return 0;
}

/* Field `field` (1-based, as proc(5) numbers them) of /proc/self/stat. */
static int stat_field(const char *stat, int field, unsigned long long *out)
{
	const char *p = strrchr(stat, ')');

	if (!p)
		return -EINVAL;
	p++;
	for (int f = 3; f <= field; f++) {
		char *end;

		while (*p == ' ')
			p++;
		if (f == field) {
			errno = 0;
			*out = strtoull(p, &end, 10);
			return end == p || errno ? -EINVAL : 0;
		}
		p = strchr(p, ' ');
		if (!p)
			return -EINVAL;
	}
	return -EINVAL;
}

/* Seconds since the epoch at boot: the "btime" line of /proc/stat, read
 * line by line because the "intr" line before it can be very long. */
static int boot_time(double *out)
{
	FILE *f = fopen("/proc/stat", "re");
	size_t cap = 0;
	char *line = NULL;
	int err = -EINVAL;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0)
		if (!strncmp(line, "btime ", 6)) {
			*out = strtod(line + 6, NULL);
			err = 0;
			break;
		}
	free(line);
	fclose(f);
	return err;
}

static int read_stat(struct prom_process *p)
{
	double ticks = sysconf(_SC_CLK_TCK), btime = 0;
	unsigned long long utime = 0, stime = 0, start = 0;
	char stat[1024];
	int err = read_file("/proc/self/stat", stat, sizeof(stat));

	if (!err)
		err = stat_field(stat, 14, &utime);
	if (!err)
		err = stat_field(stat, 15, &stime);
	if (!err)
		p->cpu_seconds = (utime + stime) / ticks;
	if (!err)
		err = stat_field(stat, 22, &start);
	if (!err)
		err = boot_time(&btime);
	if (!err)
		p->start_time_seconds = btime + start / ticks;
	return err;
}

static int read_statm(struct prom_process *p)
{
	double page = sysconf(_SC_PAGESIZE);
	unsigned long long size, resident;
	char statm[256];
	int err = read_file("/proc/self/statm", statm, sizeof(statm));

	if (err)
		return err;
	if (sscanf(statm, "%llu %llu", &size, &resident) != 2)
		return -EINVAL;
	p->virtual_bytes = size * page;
	p->resident_bytes = resident * page;
	return 0;
}

/* Counts /proc/self/fd without the descriptor that reads it. */
static int count_fds(struct prom_process *p)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	double n = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
			n++;
	closedir(d);
	p->open_fds = n;
	return 0;
}

int prom_process_read(struct prom_process *p)
{
	struct rlimit rl;
	int err, first_err;

	p->cpu_seconds = p->resident_bytes = p->virtual_bytes = NAN;
	p->open_fds = p->max_fds = p->start_time_seconds = NAN;
	first_err = read_stat(p);
	err = read_statm(p);
	first_err = first_err ? first_err : err;
	err = count_fds(p);
	first_err = first_err ? first_err : err;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		p->max_fds = rl.rlim_cur == RLIM_INFINITY ? INFINITY :
			     (double)rl.rlim_cur;
	else if (!first_err)
		first_err = -errno;
	return first_err;
}

static void put_process_metric(struct prom_buf *b, const char *name,
			       const char *type, const char *help, double v)
{
	if (isnan(v))
		return;
	prom_family(b, name, type, help);
	prom_sample(b, name, NULL, 0, v);
}

void prom_process_write(struct prom_buf *b, const struct prom_process *p)
{
	put_process_metric(b, "process_cpu_seconds_total", "counter",
		"Total user and system CPU time spent in seconds.",
		p->cpu_seconds);
	put_process_metric(b, "process_resident_memory_bytes", "gauge",
		"Resident memory size in bytes.", p->resident_bytes);
	put_process_metric(b, "process_virtual_memory_bytes", "gauge",
		"Virtual memory size in bytes.", p->virtual_bytes);
	put_process_metric(b, "process_open_fds", "gauge",
		"Number of open file descriptors.", p->open_fds);
	put_process_metric(b, "process_max_fds", "gauge",
		"Maximum number of open file descriptors.", p->max_fds);
	put_process_metric(b, "process_start_time_seconds", "gauge",
		"Start time of the process since unix epoch in seconds.",
		p->start_time_seconds);
}
