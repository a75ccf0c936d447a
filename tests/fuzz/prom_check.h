/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A strict checker of Prometheus text exposition format 0.0.4, for the
 * fuzz targets of user/export/prom_text.c: stricter than Prometheus's own
 * parser where rfbpf writes only one form (no timestamps, no other
 * comments, no trailing commas), never laxer. Checked once against
 * promtool (tests/unit/test_prom_check.c).
 *
 *   # HELP name text      text: UTF-8, escapes \\ and \n only
 *   # TYPE name type      once per name, before any of its samples
 *   name{l="v",...} value the current family's, labels unique, values
 *                         UTF-8 with escapes \\ \" \n; value a Go float
 *
 * prom_check() returns NULL, or what is wrong and the line number in why.
 */
#ifndef RFBPF_FUZZ_PROM_CHECK_H
#define RFBPF_FUZZ_PROM_CHECK_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PC_NAME_MAX 1024

struct pc_state {
	const char *p, *end;
	int line;
	char family[PC_NAME_MAX];	/* the current TYPE's name */
	char type[16];
	/* Every family and series seen, as text: "T name", "H name",
	 * "S name{sorted labels}". Kept for the duplicate checks, in an
	 * open-addressed hash set of cap_seen slots (NULL: empty). */
	char **seen;
	size_t nr_seen, cap_seen;
	char why[128];
};

static inline bool pc_fail(struct pc_state *s, const char *what)
{
	snprintf(s->why, sizeof(s->why), "line %d: %s", s->line, what);
	return false;
}

/* FNV-1a: the seen set's hash. */
static inline size_t pc_hash(const char *text)
{
	size_t h = 14695981039346656037ull;

	for (; *text; text++)
		h = (h ^ (unsigned char)*text) * 1099511628211ull;
	return h;
}

/* Puts text (owned from here) in a table of cap slots, a power of 2. */
static inline void pc_put(char **table, size_t cap, char *text)
{
	size_t i = pc_hash(text) & (cap - 1);

	while (table[i])
		i = (i + 1) & (cap - 1);
	table[i] = text;
}

/* Adds text to seen; false if it was there already. A hash set, kept at
 * most half full: a list compared one by one made the checker quadratic
 * in the series, 40% of fuzz_fleet_metrics' time. */
static inline bool pc_first(struct pc_state *s, const char *text)
{
	size_t i;

	if (2 * (s->nr_seen + 1) > s->cap_seen) {
		size_t cap = s->cap_seen ? s->cap_seen * 2 : 256;
		char **table = calloc(cap, sizeof(*table));

		if (!table)
			abort();
		for (i = 0; i < s->cap_seen; i++)
			if (s->seen[i])
				pc_put(table, cap, s->seen[i]);
		free(s->seen);
		s->seen = table;
		s->cap_seen = cap;
	}
	for (i = pc_hash(text) & (s->cap_seen - 1); s->seen[i];
	     i = (i + 1) & (s->cap_seen - 1))
		if (!strcmp(s->seen[i], text))
			return false;
	s->seen[i] = strdup(text);
	if (!s->seen[i])
		abort();
	s->nr_seen++;
	return true;
}

static inline bool pc_name_char(char c, bool first, bool colon)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (colon && c == ':') || (!first && c >= '0' && c <= '9');
}

/* A metric (colon) or label name at s->p, copied to out. */
static inline bool pc_name(struct pc_state *s, bool colon, char *out)
{
	size_t n = 0;

	while (s->p < s->end && pc_name_char(*s->p, n == 0, colon)) {
		if (n + 1 >= PC_NAME_MAX)
			return pc_fail(s, "name too long for the checker");
		out[n++] = *s->p++;
	}
	out[n] = 0;
	return n ? true : pc_fail(s, "bad or empty name");
}

/* One UTF-8 character (table 3-7) at s->p, copied to *o. */
static inline bool pc_utf8_char(struct pc_state *s, char **o)
{
	const unsigned char *u = (const unsigned char *)s->p;
	unsigned c = u[0], n, lo = 0x80, hi = 0xbf;

	if (c < 0x80)
		n = 0;
	else if (c >= 0xc2 && c <= 0xdf)
		n = 1;
	else if (c >= 0xe0 && c <= 0xef)
		n = 2, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 3, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
	else
		return pc_fail(s, "invalid UTF-8");
	if (s->end - s->p <= (long)n)
		return pc_fail(s, "UTF-8 cut by the end");
	for (unsigned i = 1; i <= n; i++)
		if (u[i] < (i == 1 ? lo : 0x80) || u[i] > (i == 1 ? hi : 0xbf))
			return pc_fail(s, "invalid UTF-8");
	if (o) {
		memcpy(*o, s->p, n + 1);
		*o += n + 1;
	}
	s->p += n + 1;
	return true;
}

/* Escaped text up to stop ('"' in a label value, '\n' in HELP); escapes
 * allowed: \\ and \n, and \" when quoted. Unescaped into out if set. */
static inline bool pc_text(struct pc_state *s, char stop, char *out)
{
	while (s->p < s->end && *s->p != stop) {
		if (*s->p == '\n')
			return pc_fail(s, "raw newline in a label value");
		if (*s->p != '\\') {
			if (!pc_utf8_char(s, out ? &out : NULL))
				return false;
			continue;
		}
		if (s->end - s->p < 2 ||
		    !(s->p[1] == '\\' || s->p[1] == 'n' ||
		      (s->p[1] == '"' && stop == '"')))
			return pc_fail(s, "bad escape");
		/* \n is a newline: "a\nb" and "anb" are two values. */
		if (out)
			*out++ = s->p[1] == 'n' ? '\n' : s->p[1];
		s->p += 2;
	}
	if (out)
		*out = 0;
	return s->p < s->end ? true : pc_fail(s, "text not ended");
}

/* A value as Go's strconv.ParseFloat reads what rfbpf writes: decimal
 * with optional fraction and exponent, or NaN, +Inf, -Inf. */
static inline bool pc_value(struct pc_state *s)
{
	const char *v = s->p;
	size_t n = 0, digits = 0;

	while (s->p < s->end && *s->p != '\n')
		s->p++;
	n = s->p - v;
	if ((n == 3 && !memcmp(v, "NaN", 3)) || (n == 4 && (!memcmp(v, "+Inf", 4)
	    || !memcmp(v, "-Inf", 4))))
		return true;
	size_t i = 0;
	if (i < n && (v[i] == '-' || v[i] == '+'))
		i++;
	for (; i < n && v[i] >= '0' && v[i] <= '9'; i++)
		digits++;
	if (i < n && v[i] == '.')
		for (i++; i < n && v[i] >= '0' && v[i] <= '9'; i++)
			digits++;
	if (!digits)
		return pc_fail(s, "value is not a number");
	if (i < n && (v[i] == 'e' || v[i] == 'E')) {
		size_t e = 0;

		if (++i < n && (v[i] == '-' || v[i] == '+'))
			i++;
		for (; i < n && v[i] >= '0' && v[i] <= '9'; i++)
			e++;
		if (!e)
			return pc_fail(s, "bad exponent");
	}
	return i == n ? true : pc_fail(s, "junk after the value");
}

static inline bool pc_comment(struct pc_state *s)
{
	char name[PC_NAME_MAX], key[PC_NAME_MAX + 8];
	bool help;

	if (s->end - s->p >= 7 && !memcmp(s->p, "# HELP ", 7))
		help = true;
	else if (s->end - s->p >= 7 && !memcmp(s->p, "# TYPE ", 7))
		help = false;
	else
		return pc_fail(s, "a comment other than HELP or TYPE");
	s->p += 7;
	if (!pc_name(s, true, name))
		return false;
	snprintf(key, sizeof(key), "%c %s", help ? 'H' : 'T', name);
	if (!pc_first(s, key))
		return pc_fail(s, help ? "second HELP" : "second TYPE");
	if (s->p >= s->end || *s->p++ != ' ')
		return pc_fail(s, "no space after the name");
	if (help)
		return pc_text(s, '\n', NULL);
	static const char *const types[] = { "counter", "gauge", "histogram",
					     "summary", "untyped" };
	for (size_t i = 0; i < 5; i++) {
		size_t n = strlen(types[i]);

		if ((size_t)(s->end - s->p) > n && !memcmp(s->p, types[i], n) &&
		    s->p[n] == '\n') {
			s->p += n;
			snprintf(s->family, sizeof(s->family), "%s", name);
			snprintf(s->type, sizeof(s->type), "%s", types[i]);
			return true;
		}
	}
	return pc_fail(s, "unknown TYPE");
}

/* Is name a sample name of the current family? */
static inline bool pc_member(const struct pc_state *s, const char *name,
			     bool *bucket)
{
	size_t n = strlen(s->family);
	const char *suffix = name + n;

	*bucket = false;
	if (strncmp(name, s->family, n))
		return false;
	if (!strcmp(s->type, "histogram")) {
		*bucket = !strcmp(suffix, "_bucket");
		return *bucket || !strcmp(suffix, "_sum") ||
		       !strcmp(suffix, "_count");
	}
	if (!strcmp(s->type, "summary"))
		return !strcmp(suffix, "_sum") || !strcmp(suffix, "_count");
	return !*suffix;
}

static int pc_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The labels in braces; their "name=value" pairs sorted into series. */
static inline bool pc_labels(struct pc_state *s, char *series, size_t cap,
			     bool bucket)
{
	char *pairs[64], value[4096];
	size_t nr = 0;
	bool le = false, ok = true;

	while (ok && s->p < s->end && *s->p != '}') {
		char name[PC_NAME_MAX], pair[PC_NAME_MAX + sizeof(value)];

		if (nr && (*s->p++ != ',' || s->p >= s->end || *s->p == '}'))
			return pc_fail(s, "labels not separated by one comma");
		if (nr == 64)
			return pc_fail(s, "too many labels for the checker");
		if (!pc_name(s, false, name))
			return false;
		if (s->end - s->p < 2 || memcmp(s->p, "=\"", 2))
			return pc_fail(s, "no =\" after a label name");
		s->p += 2;
		if (!pc_text(s, '"', value))
			return false;
		s->p++;
		le |= !strcmp(name, "le");
		snprintf(pair, sizeof(pair), "%s=%s", name, value);
		for (size_t i = 0; i < nr && ok; i++)
			ok = strncmp(pairs[i], name, strlen(name)) ||
			     pairs[i][strlen(name)] != '=';
		pairs[nr] = strdup(pair);
		if (!pairs[nr++])
			abort();
	}
	if (ok && s->p >= s->end)
		ok = pc_fail(s, "labels not closed");
	if (!ok && !s->why[0])
		pc_fail(s, "duplicate label name");
	/* In a histogram, le belongs to buckets: on _sum or _count it would
	 * make them another series than the buckets'. */
	if (ok && bucket && !le)
		ok = pc_fail(s, "bucket without le");
	if (ok && !bucket && le && !strcmp(s->type, "histogram"))
		ok = pc_fail(s, "le on a histogram's _sum or _count");
	qsort(pairs, nr, sizeof(*pairs), pc_cmp);
	for (size_t i = 0; i < nr; i++) {
		size_t used = strlen(series);

		snprintf(series + used, cap - used, "%s\x01", pairs[i]);
		free(pairs[i]);
	}
	s->p++;
	return ok;
}

static inline bool pc_sample(struct pc_state *s)
{
	char name[PC_NAME_MAX], series[16384];
	bool bucket;

	if (!pc_name(s, true, name))
		return false;
	if (!s->family[0] || !pc_member(s, name, &bucket))
		return pc_fail(s, "a sample not of the current TYPE's family");
	snprintf(series, sizeof(series), "S %s{", name);
	if (s->p < s->end && *s->p == '{') {
		s->p++;
		if (!pc_labels(s, series, sizeof(series), bucket))
			return false;
	} else if (bucket) {
		return pc_fail(s, "bucket without le");
	}
	if (!pc_first(s, series))
		return pc_fail(s, "duplicate series");
	if (s->p >= s->end || *s->p++ != ' ')
		return pc_fail(s, "no space before the value");
	return pc_value(s);
}

static inline const char *prom_check(const char *text, size_t len,
				     char *why, size_t why_len)
{
	struct pc_state s = { .p = text, .end = text + len, .line = 1 };
	bool ok = true;

	while (ok && s.p < s.end) {
		ok = *s.p == '#' ? pc_comment(&s) : pc_sample(&s);
		if (ok && (s.p >= s.end || *s.p != '\n'))
			ok = pc_fail(&s, "line not ended by a newline");
		s.p++;
		s.line++;
	}
	for (size_t i = 0; i < s.cap_seen; i++)
		free(s.seen[i]);
	free(s.seen);
	if (ok)
		return NULL;
	snprintf(why, why_len, "%s", s.why);
	return why;
}

#endif
