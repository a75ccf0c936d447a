/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The JSON writer (user/export/json_writer.c) driven the way the Chrome
 * trace exporters drive it: objects and arrays nested by the caller, keys
 * and values through json_string, json_us, json_double and json_fixed,
 * from fuzzer-chosen calls and bytes (invalid UTF-8, control characters,
 * NaN and infinite doubles, the largest integers). The document must
 * always parse under a strict RFC 8259 parser (tests/unit/json_parse.h,
 * which also requires valid UTF-8), and what it says must be what was
 * written: each string as given with invalid UTF-8 as U+FFFD, each double
 * read back exactly (or null when it had no JSON form).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/json_writer.h"
#include "fuzz_bytes.h"
#include "../unit/json_parse.h"

/* json_parse refuses deeper documents; stay under its limit. */
#define MAX_DEPTH 48
#define MAX_VALUES 256

/* What each written value must read back as, in document order. */
struct expect {
	enum jt type;
	char *str;		/* J_STR: the UTF-8 expected */
	size_t len;
	double num;		/* J_NUM from json_double: the value */
	int exact;		/* J_NUM: compare num with strtod */
};

struct doc {
	FILE *f;
	char open[MAX_DEPTH];	/* '{' or '[' per level */
	int items[MAX_DEPTH];	/* items written at each level */
	int depth;
	struct expect exp[MAX_VALUES];
	int nr_exp;
};

/* The bytes json_string must write for s, decoded: s itself where it is
 * valid UTF-8 (checked here by Unicode's table 3-7, independently of
 * user/export/utf8.c), U+FFFD for each byte that starts no valid
 * sequence. */
static size_t valid_seq(const unsigned char *s)
{
	unsigned c = s[0], n, lo = 0x80, hi = 0xbf;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 1;
	else if (c >= 0xe0 && c <= 0xef)
		n = 2, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 3, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
	else
		return 0;
	for (unsigned i = 1; i <= n; i++)
		if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xbf))
			return 0;	/* also stops at the NUL */
	return n + 1;
}

static char *expected_string(const char *str, size_t *len)
{
	const unsigned char *s = (const unsigned char *)str;
	char *out = malloc(strlen(str) * 3 + 1), *o = out;

	if (!out)
		abort();
	while (*s) {
		size_t n = valid_seq(s);

		if (!n) {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			s++;
		} else {
			memcpy(o, s, n);
			o += n;
			s += n;
		}
	}
	*len = o - out;
	*o = 0;
	return out;
}

/* Before a key or an array item: the comma, if not the first. */
static void separate(struct doc *d)
{
	if (d->depth && d->items[d->depth - 1]++)
		fputc(',', d->f);
}

static void open_level(struct doc *d, char c)
{
	fputc(c, d->f);
	d->open[d->depth] = c;
	d->items[d->depth++] = 0;
}

static void close_level(struct doc *d)
{
	d->depth--;
	fputc(d->open[d->depth] == '{' ? '}' : ']', d->f);
}

/* One value: a string, a time, a double, or a new object or array. */
static void write_value(struct doc *d, struct fuzz_input *in)
{
	struct expect scratch, *e = &scratch;
	unsigned op = fuzz_u8(in) % 5;
	double v;

	if (op == 4 && d->depth < MAX_DEPTH) {
		open_level(d, fuzz_u8(in) & 1 ? '{' : '[');
		return;
	}
	/* Past MAX_VALUES nothing is expected: an unchecked time, written
	 * through a scratch expectation (exp[MAX_VALUES] is past the array:
	 * the 10-minute run found this harness writing there). */
	if (d->nr_exp == MAX_VALUES)
		op = 1;
	else
		e = &d->exp[d->nr_exp++];
	memset(e, 0, sizeof(*e));
	switch (op) {
	case 0: {
		char *s = fuzz_string(in);

		json_string(d->f, s);
		e->type = J_STR;
		e->str = expected_string(s, &e->len);
		free(s);
		break;
	}
	case 1:
		json_us(d->f, fuzz_u64(in));
		e->type = J_NUM;
		break;
	case 2:
		v = fuzz_double(in);
		json_double(d->f, v);
		e->type = isfinite(v) ? J_NUM : J_NULL;
		e->num = v;
		e->exact = 1;
		break;
	default:
		v = fuzz_double(in);
		json_fixed(d->f, v, fuzz_u8(in) % 4);
		e->type = isfinite(v) ? J_NUM : J_NULL;
		break;
	}
}

/* An item of the current level: in an object, a key and its value. */
static void write_item(struct doc *d, struct fuzz_input *in)
{
	separate(d);
	if (d->depth && d->open[d->depth - 1] == '{') {
		char *key = fuzz_string(in);

		json_string(d->f, key);
		free(key);
		fputc(':', d->f);
	}
	write_value(d, in);
}

/* Walks the parsed document in order, checking each leaf. */
static void check_leaves(const struct jv *v, const struct doc *d, int *i)
{
	if (v->type == J_ARR || v->type == J_OBJ) {
		for (size_t k = 0; k < v->nr; k++)
			check_leaves(&v->items[k], d, i);
		return;
	}
	if (*i >= d->nr_exp)
		return;		/* past MAX_VALUES: parsed, not compared */
	const struct expect *e = &d->exp[(*i)++];

	if (v->type != e->type)
		abort();
	if (e->type == J_STR &&
	    (v->len != e->len || memcmp(v->str, e->str, e->len)))
		abort();
	if (e->type == J_NUM && e->exact && strtod(v->str, NULL) != e->num)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_input in = { data, size };
	struct doc d = { .depth = 0 };
	char *text = NULL;
	size_t len = 0;
	struct jv v;
	int i = 0;

	d.f = open_memstream(&text, &len);
	if (!d.f)
		return 0;
	/* The document is one object (as a Chrome trace is); then a close
	 * byte ends a level, anything else adds an item to it. */
	open_level(&d, '{');
	while (d.depth && in.size) {
		if (fuzz_u8(&in) % 4 == 0)
			close_level(&d);
		else
			write_item(&d, &in);
	}
	while (d.depth)
		close_level(&d);
	fclose(d.f);
	if (json_parse(text, len, &v)) {
		fprintf(stderr, "invalid JSON: %.*s\n", (int)len, text);
		abort();
	}
	check_leaves(&v, &d, &i);
	if (i != d.nr_exp)
		abort();
	jv_free(&v);
	for (int k = 0; k < d.nr_exp; k++)
		free(d.exp[k].str);
	free(text);
	return 0;
}
