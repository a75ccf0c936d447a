/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A strict JSON parser (RFC 8259) for the unit tests of the exporters: no
 * JSON library is a dependency of rfbpf, and a trace that a strict parser
 * rejects is one Perfetto may reject too. Header-only, tests only.
 */
#ifndef RFBPF_TEST_JSON_PARSE_H
#define RFBPF_TEST_JSON_PARSE_H

#include <stdlib.h>
#include <string.h>


enum jt { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
	enum jt type;
	char *str;		/* J_STR: decoded UTF-8; J_NUM: its text */
	size_t len;		/* J_STR: bytes in str (may hold U+0000) */
	struct jv *items;	/* J_ARR, J_OBJ: values */
	char **keys;		/* J_OBJ: decoded keys */
	size_t nr;
};

struct jp {
	const unsigned char *p, *end;
	int depth;
};

struct sbuf {
	char *s;
	size_t len, cap;
};

static inline void sb_put(struct sbuf *b, char c)
{
	if (b->len + 2 > b->cap) {
		b->cap = b->cap ? b->cap * 2 : 32;
		b->s = realloc(b->s, b->cap);
		if (!b->s)
			abort();
	}
	b->s[b->len++] = c;
	b->s[b->len] = 0;
}

static inline void sb_utf8(struct sbuf *b, unsigned cp)
{
	if (cp < 0x80) {
		sb_put(b, cp);
	} else if (cp < 0x800) {
		sb_put(b, 0xc0 | cp >> 6);
		sb_put(b, 0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		sb_put(b, 0xe0 | cp >> 12);
		sb_put(b, 0x80 | (cp >> 6 & 0x3f));
		sb_put(b, 0x80 | (cp & 0x3f));
	} else {
		sb_put(b, 0xf0 | cp >> 18);
		sb_put(b, 0x80 | (cp >> 12 & 0x3f));
		sb_put(b, 0x80 | (cp >> 6 & 0x3f));
		sb_put(b, 0x80 | (cp & 0x3f));
	}
}

static inline void ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' ||
				 *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static inline int hex4(struct jp *j, unsigned *out)
{
	*out = 0;
	for (int i = 0; i < 4; i++, j->p++) {
		unsigned c = j->p < j->end ? *j->p : 0, v;

		if (c >= '0' && c <= '9')
			v = c - '0';
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			v = (c | 0x20) - 'a' + 10;
		else
			return -1;
		*out = *out << 4 | v;
	}
	return 0;
}

/* Raw UTF-8 as Unicode's table 3-7 of well-formed byte sequences has it
 * (no overlongs, no surrogates, nothing past U+10FFFF). */
static inline int utf8_raw(struct jp *j, struct sbuf *b)
{
	unsigned c = *j->p, n, lo = 0x80, hi = 0xbf;

	if (c >= 0xc2 && c <= 0xdf)
		n = 1;
	else if (c >= 0xe0 && c <= 0xef)
		n = 2, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 3, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
	else
		return -1;
	if ((size_t)(j->end - j->p) <= n)
		return -1;
	for (unsigned i = 1; i <= n; i++) {
		unsigned d = j->p[i];

		if (d < (i == 1 ? lo : 0x80) || d > (i == 1 ? hi : 0xbf))
			return -1;
	}
	for (unsigned i = 0; i <= n; i++)
		sb_put(b, *j->p++);
	return 0;
}

static inline int parse_string(struct jp *j, char **out, size_t *len)
{
	struct sbuf b = {};

	sb_put(&b, 0);
	b.len = 0;
	if (j->p >= j->end || *j->p++ != '"')
		goto bad;
	for (;;) {
		if (j->p >= j->end)
			goto bad;
		unsigned c = *j->p;

		if (c == '"') {
			j->p++;
			break;
		}
		if (c < 0x20)
			goto bad;
		if (c >= 0x80) {
			if (utf8_raw(j, &b))
				goto bad;
			continue;
		}
		j->p++;
		if (c != '\\') {
			sb_put(&b, c);
			continue;
		}
		if (j->p >= j->end)
			goto bad;
		c = *j->p++;
		static const char from[] = "\"\\/bfnrt";
		static const char to[] = "\"\\/\b\f\n\r\t";
		const char *esc = strchr(from, c);
		if (c && esc) {
			sb_put(&b, to[esc - from]);
			continue;
		}
		unsigned cp, lo;
		if (c != 'u' || hex4(j, &cp))
			goto bad;
		if (cp >= 0xdc00 && cp <= 0xdfff)
			goto bad;		/* lone low surrogate */
		if (cp >= 0xd800 && cp <= 0xdbff) {
			if (j->end - j->p < 6 || j->p[0] != '\\' ||
			    j->p[1] != 'u')
				goto bad;
			j->p += 2;
			if (hex4(j, &lo) || lo < 0xdc00 || lo > 0xdfff)
				goto bad;
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		}
		sb_utf8(&b, cp);
	}
	*out = b.s;
	*len = b.len;
	return 0;
bad:
	free(b.s);
	return -1;
}

static inline int digits(struct jp *j)
{
	const unsigned char *s = j->p;

	while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
		j->p++;
	return j->p > s ? 0 : -1;
}

static inline int parse_number(struct jp *j, struct jv *v)
{
	const unsigned char *s = j->p;

	if (j->p < j->end && *j->p == '-')
		j->p++;
	if (j->p < j->end && *j->p == '0')
		j->p++;			/* no leading zeros */
	else if (digits(j))
		return -1;
	if (j->p < j->end && *j->p == '.') {
		j->p++;
		if (digits(j))
			return -1;
	}
	if (j->p < j->end && (*j->p | 0x20) == 'e') {
		j->p++;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (digits(j))
			return -1;
	}
	v->type = J_NUM;
	v->str = strndup((const char *)s, j->p - s);
	return v->str ? 0 : -1;
}

static inline int literal(struct jp *j, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n))
		return -1;
	j->p += n;
	return 0;
}

static inline int parse_value(struct jp *j, struct jv *v);

/* Arrays and objects: items separated by ',', no trailing comma. */
static inline int parse_container(struct jp *j, struct jv *v, char close)
{
	int obj = close == '}';

	v->type = obj ? J_OBJ : J_ARR;
	j->p++;
	ws(j);
	if (j->p < j->end && *j->p == close) {
		j->p++;
		return 0;
	}
	for (;;) {
		v->items = realloc(v->items, (v->nr + 1) * sizeof(*v->items));
		v->keys = realloc(v->keys, (v->nr + 1) * sizeof(*v->keys));
		if (!v->items || !v->keys)
			abort();
		memset(&v->items[v->nr], 0, sizeof(*v->items));
		v->keys[v->nr] = NULL;
		v->nr++;
		ws(j);
		if (obj) {
			size_t len;

			if (parse_string(j, &v->keys[v->nr - 1], &len))
				return -1;
			ws(j);
			if (j->p >= j->end || *j->p++ != ':')
				return -1;
		}
		if (parse_value(j, &v->items[v->nr - 1]))
			return -1;
		ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == close) {
			j->p++;
			return 0;
		}
		return -1;
	}
}

static inline int parse_value(struct jp *j, struct jv *v)
{
	int ret;

	ws(j);
	if (j->p >= j->end || ++j->depth > 64)
		return -1;
	switch (*j->p) {
	case '{': ret = parse_container(j, v, '}'); break;
	case '[': ret = parse_container(j, v, ']'); break;
	case '"':
		v->type = J_STR;
		ret = parse_string(j, &v->str, &v->len);
		break;
	case 't': v->type = J_BOOL; ret = literal(j, "true"); break;
	case 'f': v->type = J_BOOL; ret = literal(j, "false"); break;
	case 'n': v->type = J_NULL; ret = literal(j, "null"); break;
	default: ret = parse_number(j, v); break;
	}
	j->depth--;
	return ret;
}

static inline void jv_free(struct jv *v)
{
	for (size_t i = 0; i < v->nr; i++) {
		jv_free(&v->items[i]);
		free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->str);
	memset(v, 0, sizeof(*v));
}

/* The whole text must be exactly one JSON value. */
static inline int json_parse(const char *text, size_t len, struct jv *v)
{
	struct jp j = { (const unsigned char *)text,
			(const unsigned char *)text + len, 0 };

	memset(v, 0, sizeof(*v));
	if (parse_value(&j, v))
		return -1;
	ws(&j);
	return j.p == j.end ? 0 : -1;
}

static inline const struct jv *jget(const struct jv *o, const char *key)
{
	if (!o || o->type != J_OBJ)
		return NULL;
	for (size_t i = 0; i < o->nr; i++)
		if (!strcmp(o->keys[i], key))
			return &o->items[i];
	return NULL;
}

static inline const char *jstr(const struct jv *o, const char *key)
{
	const struct jv *v = jget(o, key);

	return v && v->type == J_STR ? v->str : NULL;
}

static inline const char *jnum(const struct jv *o, const char *key)
{
	const struct jv *v = jget(o, key);

	return v && v->type == J_NUM ? v->str : NULL;
}

static inline int valid_json(const char *text)
{
	struct jv v;
	int ok = !json_parse(text, strlen(text), &v);

	jv_free(&v);
	return ok;
}

#endif
