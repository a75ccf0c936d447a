// SPDX-License-Identifier: BSD-2-Clause
/* Prometheus text format: escaping, values, histograms, the atomic file
 * write, process metrics, and promtool's verdict on a whole exposition. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "export/prom_text.h"
#include "promtool.h"

/* The buffer's text after `write` ran on a fresh buffer. */
#define TEXT_OF(b, write)						\
	(prom_reset(&(b)), (write), (b).data ? (b).data : "")

TEST(sample_without_and_with_labels)
{
	struct prom_label l[] = { { "op", "aten::mm" }, { "pid", "42" } };
	struct prom_buf b;

	prom_init(&b);
	CHECK_STR(TEXT_OF(b, prom_sample(&b, "rfbpf_ops_total", NULL, 0, 7)),
		  "rfbpf_ops_total 7\n");
	CHECK_STR(TEXT_OF(b, prom_sample(&b, "rfbpf_ops_total", l, 2, 3)),
		  "rfbpf_ops_total{op=\"aten::mm\",pid=\"42\"} 3\n");
	CHECK(!b.oom);
	CHECK_EQ_U64(b.len, strlen(b.data));
	prom_free(&b);
	CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
}

TEST(label_values_escape_backslash_quote_newline)
{
	struct prom_label l[] = { { "v", "a\\b\"c\nd" } };
	struct prom_buf b;

	prom_init(&b);
	CHECK_STR(TEXT_OF(b, prom_sample(&b, "m", l, 1, 1)),
		  "m{v=\"a\\\\b\\\"c\\nd\"} 1\n");
	/* Other bytes, tabs and carriage returns included, pass as they are. */
	l[0].value = "tab\there\rcr";
	CHECK_STR(TEXT_OF(b, prom_sample(&b, "m", l, 1, 1)),
		  "m{v=\"tab\there\rcr\"} 1\n");
	l[0].value = NULL;		/* a missing value is empty */
	CHECK_STR(TEXT_OF(b, prom_sample(&b, "m", l, 1, 1)), "m{v=\"\"} 1\n");
	prom_free(&b);
}

TEST(help_escapes_backslash_and_newline_but_not_quotes)
{
	struct prom_buf b;

	prom_init(&b);
	CHECK_STR(TEXT_OF(b, prom_family(&b, "m_total", "counter",
					 "a \"quoted\"\\path\nsecond line")),
		  "# HELP m_total a \"quoted\"\\\\path\\nsecond line\n"
		  "# TYPE m_total counter\n");
	CHECK_STR(TEXT_OF(b, prom_family(&b, "g", "gauge", NULL)),
		  "# HELP g \n# TYPE g gauge\n");
	prom_free(&b);
}

TEST(every_type_and_unknown_types_as_untyped)
{
	const char *types[] = { "counter", "gauge", "histogram", "summary",
				"untyped" };
	struct prom_buf b;
	char want[128];

	prom_init(&b);
	for (size_t i = 0; i < 5; i++) {
		snprintf(want, sizeof(want), "# HELP m h\n# TYPE m %s\n",
			 types[i]);
		CHECK_STR(TEXT_OF(b, prom_family(&b, "m", types[i], "h")), want);
	}
	CHECK_STR(TEXT_OF(b, prom_family(&b, "m", "Counter", "h")),
		  "# HELP m h\n# TYPE m untyped\n");
	CHECK_STR(TEXT_OF(b, prom_family(&b, "m", NULL, "h")),
		  "# HELP m h\n# TYPE m untyped\n");
	prom_free(&b);
}

TEST(invalid_utf8_becomes_replacement_character)
{
	/* A lone continuation byte, a truncated 3-byte sequence, an overlong
	 * '/', a surrogate; valid 2-, 3- and 4-byte sequences stay. */
	struct prom_label l[] = { { "op", "a\x80" "b\xe2\x82" "c\xc0\xaf"
					  "d\xed\xa0\x80" "é€😀" } };
	struct prom_buf b;

	prom_init(&b);
	CHECK_STR(TEXT_OF(b, prom_sample(&b, "m", l, 1, 1)),
		  "m{op=\"a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd"
		  "c\xef\xbf\xbd\xef\xbf\xbd"
		  "d\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "é€😀\"} 1\n");
	/* A sequence cut by the end of the string. */
	l[0].value = "x\xf0\x9f\x98";
	CHECK_STR(TEXT_OF(b, prom_sample(&b, "m", l, 1, 1)),
		  "m{op=\"x\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"} 1\n");
	CHECK_STR(TEXT_OF(b, prom_family(&b, "m", "gauge", "bad\xff")),
		  "# HELP m bad\xef\xbf\xbd\n# TYPE m gauge\n");
	prom_free(&b);
}

TEST(names_outside_the_alphabet_become_underscores)
{
	struct prom_label l[] = { { "my-label:x", "v" }, { "9lives", "w" } };
	struct prom_buf b;

	prom_init(&b);
	CHECK_STR(TEXT_OF(b, prom_sample(&b, "rfbpf:ops.total", l, 2, 1)),
		  "rfbpf:ops_total{my_label_x=\"v\",_lives=\"w\"} 1\n");
	CHECK_STR(TEXT_OF(b, prom_sample(&b, "1m", NULL, 0, 1)), "_m 1\n");
	CHECK_STR(TEXT_OF(b, prom_sample(&b, "", NULL, 0, 1)), "_ 1\n");
	prom_free(&b);
}

TEST(values_shortest_exact_and_special)
{
	static const struct { double v; const char *text; } cases[] = {
		{ 0, "0" }, { -0.0, "-0" }, { 1, "1" }, { 0.1, "0.1" },
		{ 1.5e-7, "1.5e-07" }, { 123456789, "123456789" },
		{ 1e21, "1e+21" }, { 9007199254740993.0, "9007199254740992" },
		{ 0.30000000000000004, "0.30000000000000004" },
		{ NAN, "NaN" }, { INFINITY, "+Inf" }, { -INFINITY, "-Inf" },
	};
	struct prom_buf b;
	char want[64];

	prom_init(&b);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(want, sizeof(want), "m %s\n", cases[i].text);
		CHECK_STR(TEXT_OF(b, prom_sample(&b, "m", NULL, 0,
						 cases[i].v)), want);
	}
	/* Every finite double reads back exactly. */
	uint64_t x = 88172645463325252ull;
	for (int i = 0; i < 100000; i++) {
		double v;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(&v, &x, sizeof(v));
		if (!isfinite(v))
			continue;
		prom_reset(&b);
		prom_sample(&b, "m", NULL, 0, v);
		if (strtod(b.data + 2, NULL) != v) {
			CHECK(!"value does not read back");
			break;
		}
	}
	prom_free(&b);
}

TEST(histogram_buckets_sum_count)
{
	struct prom_label l[] = { { "op", "aten::mm" } };
	double le[] = { 0.001, 0.01, 0.1 }, cum[] = { 2, 5, 9 };
	double le_inf[] = { 1, INFINITY }, cum_inf[] = { 1, 4 };
	struct prom_buf b;

	prom_init(&b);
	CHECK_STR(TEXT_OF(b, prom_histogram(&b, "d_seconds", l, 1, le, cum, 3,
					    1.25, 10)),
		  "d_seconds_bucket{op=\"aten::mm\",le=\"0.001\"} 2\n"
		  "d_seconds_bucket{op=\"aten::mm\",le=\"0.01\"} 5\n"
		  "d_seconds_bucket{op=\"aten::mm\",le=\"0.1\"} 9\n"
		  "d_seconds_bucket{op=\"aten::mm\",le=\"+Inf\"} 10\n"
		  "d_seconds_sum{op=\"aten::mm\"} 1.25\n"
		  "d_seconds_count{op=\"aten::mm\"} 10\n");
	/* No labels; a last bound of +Inf is not written twice. */
	CHECK_STR(TEXT_OF(b, prom_histogram(&b, "h", NULL, 0, le_inf, cum_inf,
					    2, 3.5, 4)),
		  "h_bucket{le=\"1\"} 1\n"
		  "h_bucket{le=\"+Inf\"} 4\n"
		  "h_sum 3.5\n"
		  "h_count 4\n");
	/* No buckets at all: still the +Inf one. */
	CHECK_STR(TEXT_OF(b, prom_histogram(&b, "h", NULL, 0, NULL, NULL, 0,
					    0, 0)),
		  "h_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n");
	prom_free(&b);
}

/* Whatever the caller passes, no sample has a label name twice and no
 * series is written twice: a scraper refuses either (the prom_text fuzz
 * target found all three). */
TEST(no_repeated_label_or_series)
{
	struct prom_label same[] = { { "a-b", "1" }, { "a_b", "2" } };
	struct prom_label le[] = { { "op", "mm" }, { "le", "5" } };
	struct prom_label x1[] = { { "op", "x\xff" } };
	struct prom_label x2[] = { { "op", "x\xfe" } };
	struct prom_buf b;
	const double bound = 1, count = 2;

	prom_init(&b);
	CHECK_STR(TEXT_OF(b, prom_sample(&b, "g", same, 2, 1)),
		  "g{a_b=\"1\"} 1\n");
	CHECK_STR(TEXT_OF(b, (prom_sample(&b, "c", x1, 1, 1),
			      prom_sample(&b, "c", x2, 1, 2),
			      prom_sample(&b, "c", NULL, 0, 3),
			      prom_sample(&b, "c", NULL, 0, 4))),
		  "c{op=\"x\xef\xbf\xbd\"} 1\nc 3\n");
	CHECK_STR(TEXT_OF(b, prom_histogram(&b, "h", le, 2, &bound, &count, 1,
					    3, 2)),
		  "h_bucket{op=\"mm\",le=\"1\"} 2\n"
		  "h_bucket{op=\"mm\",le=\"+Inf\"} 2\n"
		  "h_sum{op=\"mm\"} 3\nh_count{op=\"mm\"} 2\n");
	/* A reset forgets the series written. */
	CHECK_STR(TEXT_OF(b, prom_sample(&b, "c", NULL, 0, 5)), "c 5\n");
	prom_free(&b);
}

TEST(reset_keeps_memory_and_grows_past_first_block)
{
	struct prom_buf b;
	char *data;
	size_t cap;

	prom_init(&b);
	/* 5000 series (one written twice would be left out). */
	for (int i = 0; i < 5000; i++) {
		char v[16];
		struct prom_label l = { "i", v };

		snprintf(v, sizeof(v), "%d", i);
		prom_sample(&b, "rfbpf_some_long_metric_name_total", &l, 1, i);
	}
	CHECK(!b.oom);
	CHECK(b.len > 100000);
	CHECK_EQ_U64(strlen(b.data), b.len);
	CHECK(!strcmp(b.data + b.len - 5, "4999\n"));
	data = b.data;
	cap = b.cap;
	prom_reset(&b);
	CHECK(b.len == 0 && b.data == data && b.cap == cap);
	CHECK_STR(b.data, "");
	prom_free(&b);
}

/* A fresh directory under /tmp; the caller removes it. */
static void make_dir(char *dir, size_t cap)
{
	snprintf(dir, cap, "/tmp/rfbpf-prom-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	static char buf[1 << 16];
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

TEST(write_file_atomic_0644_no_temp_left)
{
	char dir[64], path[128];
	struct prom_buf b;
	struct stat st;
	mode_t old_mask = umask(077);	/* 0644 must not depend on umask */

	make_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/rfbpf.prom", dir);
	prom_init(&b);
	prom_family(&b, "up_total", "counter", "h");
	prom_sample(&b, "up_total", NULL, 0, 1);
	CHECK_EQ_U64(prom_write_file(path, &b), 0);
	CHECK_STR(slurp(path), "# HELP up_total h\n# TYPE up_total counter\n"
		  "up_total 1\n");
	CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0644);
	CHECK_EQ_U64(count_entries(dir), 1);

	/* Replacing: new content, still one file. */
	prom_reset(&b);
	prom_sample(&b, "up_total", NULL, 0, 2);
	CHECK_EQ_U64(prom_write_file(path, &b), 0);
	CHECK_STR(slurp(path), "up_total 2\n");
	CHECK_EQ_U64(count_entries(dir), 1);

	/* An empty buffer writes an empty file. */
	prom_free(&b);
	CHECK_EQ_U64(prom_write_file(path, &b), 0);
	CHECK_STR(slurp(path), "");
	umask(old_mask);
	unlink(path);
	rmdir(dir);
}

TEST(write_file_errors)
{
	struct prom_buf b;

	prom_init(&b);
	prom_sample(&b, "m", NULL, 0, 1);
	CHECK_EQ_U64(prom_write_file("/nonexistent-dir/x.prom", &b), -ENOENT);
	b.oom = true;
	CHECK_EQ_U64(prom_write_file("/tmp/never-written.prom", &b), -ENOMEM);
	CHECK(access("/tmp/never-written.prom", F_OK) != 0);
	prom_free(&b);
}

TEST(write_file_relative_path)
{
	char dir[64], cwd[4096];
	struct prom_buf b;

	make_dir(dir, sizeof(dir));
	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK(chdir(dir) == 0);
	prom_init(&b);
	prom_sample(&b, "m", NULL, 0, 3);
	CHECK_EQ_U64(prom_write_file("rel.prom", &b), 0);
	CHECK_STR(slurp("rel.prom"), "m 3\n");
	CHECK_EQ_U64(count_entries("."), 1);
	unlink("rel.prom");
	CHECK(chdir(cwd) == 0);
	rmdir(dir);
	prom_free(&b);
}

TEST(process_metrics_read_and_written)
{
	struct prom_process p;
	struct prom_buf b;
	double now = time(NULL);

	CHECK_EQ_U64(prom_process_read(&p), 0);
	CHECK(p.cpu_seconds >= 0 && p.cpu_seconds < 3600);
	CHECK(p.resident_bytes > 4096 && p.virtual_bytes >= p.resident_bytes);
	CHECK(p.open_fds >= 3 && p.open_fds < 1000);
	CHECK(p.max_fds >= p.open_fds);
	/* Started within the last hour, not in the future (1 s of rounding
	 * from clock ticks and btime's whole seconds). */
	CHECK(p.start_time_seconds > now - 3600 &&
	      p.start_time_seconds <= now + 1);

	prom_init(&b);
	prom_process_write(&b, &p);
	CHECK(strstr(b.data, "# TYPE process_cpu_seconds_total counter\n"));
	CHECK(strstr(b.data, "\nprocess_cpu_seconds_total "));
	CHECK(strstr(b.data, "\nprocess_resident_memory_bytes "));
	CHECK(strstr(b.data, "\nprocess_virtual_memory_bytes "));
	CHECK(strstr(b.data, "\nprocess_open_fds "));
	CHECK(strstr(b.data, "\nprocess_max_fds "));
	CHECK(strstr(b.data, "# TYPE process_start_time_seconds gauge\n"));

	/* A field that could not be read is left out, not written as 0. */
	p.open_fds = NAN;
	prom_reset(&b);
	prom_process_write(&b, &p);
	CHECK(!strstr(b.data, "process_open_fds"));
	CHECK(strstr(b.data, "process_max_fds"));
	prom_free(&b);
}

static void build_exposition(struct prom_buf *b)
{
	struct prom_label tricky[] = {
		{ "op", "quote\" back\\slash new\nline bad\xff utf8 é" },
		{ "pid", "1234" },
	};
	struct prom_label plain[] = { { "op", "aten::mm" } };
	double le[] = { 1e-6, 1e-3, 1 }, cum[] = { 1, 3, 7 };
	struct prom_process p;

	prom_family(b, "rfbpf_ops_total", "counter",
		    "Ops recorded.\nSecond line with a \\ backslash.");
	prom_sample(b, "rfbpf_ops_total", tricky, 2, 42);
	prom_sample(b, "rfbpf_ops_total", plain, 1, 1e21);
	prom_family(b, "rfbpf_op_duration_seconds", "histogram",
		    "Op durations.");
	prom_histogram(b, "rfbpf_op_duration_seconds", tricky, 2, le, cum, 3,
		       0.5, 8);
	prom_histogram(b, "rfbpf_op_duration_seconds", plain, 1, le, cum, 3,
		       0.25, 7);
	prom_family(b, "rfbpf_ratio", "gauge", "Special values.");
	prom_sample(b, "rfbpf_ratio", plain, 1, NAN);
	prom_process_read(&p);
	prom_process_write(b, &p);
}

TEST(promtool_accepts_the_exposition)
{
	struct prom_buf b;
	const char *raw = "# HELP m_total h\n# TYPE m_total counter\n"
			  "m_total{l=\"a\nb\"} 1\n";

	if (access(PROMTOOL, X_OK)) {
		printf("skip promtool_accepts_the_exposition: no "
		       PROMTOOL " (Debian package prometheus)\n");
		return;
	}
	prom_init(&b);
	build_exposition(&b);
	CHECK(!b.oom);
	CHECK_EQ_U64(promtool_check(b.data, b.len, false), 0);
	/* The control: promtool does reject what the escaping prevents. */
	CHECK_EQ_U64(promtool_check(raw, strlen(raw), true), 1);
	prom_free(&b);
}

RUN_TESTS()
