/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The Prometheus writer (user/export/prom_text.c) with names, label
 * names and values, HELP texts, types and values from the input (any
 * bytes, NaN and infinities), called as its contract asks: a family, then
 * samples of that family (histograms through prom_histogram with rising
 * bounds), families named apart. Whatever the bytes, the exposition must
 * pass prom_check.h, a strict checker of the text format.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/prom_text.h"
#include "fuzz_bytes.h"
#include "prom_check.h"

#define MAX_FAMILIES 6
#define MAX_LABELS 4
#define MAX_SAMPLES 6
#define MAX_BUCKETS 5

static const char *const types[] = { "counter", "gauge", "histogram",
				     "summary", "untyped" };

/* Strings of one call, freed together. */
struct strings {
	char *s[64];
	size_t nr;
};

static char *take(struct strings *st, struct fuzz_input *in)
{
	char *s = fuzz_string(in);

	if (st->nr == sizeof(st->s) / sizeof(st->s[0]))
		abort();
	return st->s[st->nr++] = s;
}

static void free_strings(struct strings *st)
{
	for (size_t i = 0; i < st->nr; i++)
		free(st->s[i]);
	st->nr = 0;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Rising bounds (NaN and repeats left out, as a caller has none). */
static size_t rising_bounds(struct fuzz_input *in, double *bounds)
{
	size_t nr = fuzz_u8(in) % (MAX_BUCKETS + 1), kept = 0;

	for (size_t i = 0; i < nr; i++)
		bounds[i] = fuzz_double(in);
	qsort(bounds, nr, sizeof(*bounds), by_value);
	for (size_t i = 0; i < nr; i++)
		if (!isnan(bounds[i]) && (!kept || bounds[i] > bounds[kept - 1]))
			bounds[kept++] = bounds[i];
	return kept;
}

static void write_samples(struct prom_buf *b, struct fuzz_input *in,
			  const char *name, unsigned type,
			  struct prom_label *labels, size_t nr_labels,
			  struct strings *st)
{
	unsigned nr = fuzz_u8(in) % (MAX_SAMPLES + 1);
	char suffixed[300];
	double bounds[MAX_BUCKETS], counts[MAX_BUCKETS];

	for (unsigned k = 0; k < nr; k++) {
		for (size_t l = 0; l < nr_labels; l++)
			labels[l].value = fuzz_u8(in) == 0xff ? NULL :
					  take(st, in);
		if (type == 2) {
			size_t nb = rising_bounds(in, bounds);

			for (size_t i = 0; i < nb; i++)
				counts[i] = fuzz_double(in);
			prom_histogram(b, name, labels, nr_labels, bounds,
				       counts, nb, fuzz_double(in),
				       fuzz_double(in));
		} else if (type == 3) {
			snprintf(suffixed, sizeof(suffixed), "%s_sum", name);
			prom_sample(b, suffixed, labels, nr_labels,
				    fuzz_double(in));
			snprintf(suffixed, sizeof(suffixed), "%s_count", name);
			prom_sample(b, suffixed, labels, nr_labels,
				    fuzz_double(in));
		} else {
			prom_sample(b, name, labels, nr_labels,
				    fuzz_double(in));
		}
	}
}

/* One family: "f<i>_" keeps the names of families apart whatever the
 * input's bytes become (callers' family names are constants). */
static void write_family(struct prom_buf *b, struct fuzz_input *in,
			 unsigned i, struct strings *st)
{
	struct prom_label labels[MAX_LABELS];
	unsigned type = fuzz_u8(in) % 6, nr_labels;
	char name[300];
	char *raw = take(st, in), *help = take(st, in);
	const char *type_text = type < 5 ? types[type] : take(st, in);

	snprintf(name, sizeof(name), "f%u_%s", i, raw);
	prom_family(b, name, type_text, help[0] == 1 ? NULL : help);
	if (type == 5)		/* written as untyped, whatever it says */
		type = !strcmp(type_text, "histogram") ? 2 :
		       !strcmp(type_text, "summary") ? 3 : 4;
	nr_labels = fuzz_u8(in) % (MAX_LABELS + 1);
	for (unsigned l = 0; l < nr_labels; l++)
		labels[l].name = take(st, in);
	write_samples(b, in, name, type, labels, nr_labels, st);
}

static void process_metrics(struct prom_buf *b, struct fuzz_input *in)
{
	struct prom_process p = {
		.cpu_seconds = fuzz_double(in),
		.resident_bytes = fuzz_double(in),
		.virtual_bytes = fuzz_double(in),
		.open_fds = fuzz_double(in),
		.max_fds = fuzz_double(in),
		.start_time_seconds = fuzz_double(in),
	};

	prom_process_write(b, &p);
}

/* RFBPF_FUZZ_DUMP=FILE keeps the exposition of the (last) input run,
 * for `promtool check metrics < FILE`. */
static void check(const struct prom_buf *b)
{
	const char *dump = getenv("RFBPF_FUZZ_DUMP");
	FILE *f = dump ? fopen(dump, "we") : NULL;
	char why[160];

	if (f) {
		fwrite(b->data ? b->data : "", 1, b->len, f);
		fclose(f);
	}
	if (b->oom)
		return;
	if (prom_check(b->data ? b->data : "", b->len, why, sizeof(why))) {
		fprintf(stderr, "prom_check: %s\n%s", why, b->data);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_input in = { data, size };
	struct strings st = { .nr = 0 };
	struct prom_buf b;
	uint8_t flags = fuzz_u8(&in);
	unsigned nr = flags % (MAX_FAMILIES + 1);

	prom_init(&b);
	/* An exposition written before, then reset: none of it may stay. */
	if (flags & 0x80) {
		prom_family(&b, "stale", "gauge", "x");
		prom_sample(&b, "stale", NULL, 0, 1);
		prom_reset(&b);
	}
	for (unsigned i = 0; i < nr; i++) {
		write_family(&b, &in, i, &st);
		free_strings(&st);
	}
	if (flags & 0x40)
		process_metrics(&b, &in);
	check(&b);
	prom_free(&b);
	return 0;
}
