// SPDX-License-Identifier: BSD-2-Clause
#include <stdlib.h>
#include <string.h>
#include "utf8.h"

int utf8_len(const unsigned char *s)
{
	unsigned cp;
	int n;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) { n = 2; cp = s[0] & 0x1f; }
	else if ((s[0] & 0xf0) == 0xe0) { n = 3; cp = s[0] & 0x0f; }
	else if ((s[0] & 0xf8) == 0xf0) { n = 4; cp = s[0] & 0x07; }
	else
		return 0;
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)	/* also stops at the NUL */
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and values past U+10FFFF are invalid. */
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

size_t utf8_cut(const char *s, size_t len, size_t max)
{
	size_t keep = max;

	if (len <= max)
		return len;
	for (int i = 0; i < 3 && keep &&
	     ((unsigned char)s[keep] & 0xc0) == 0x80; i++)
		keep--;
	return keep;
}

bool utf8_valid(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;

	/* utf8_len stops at a NUL, and s is a C string: it reads no further
	 * than s does, even where len cuts s short. */
	for (size_t i = 0; i < len;) {
		int n = utf8_len(u + i);

		if (!n || !u[i] || (size_t)n > len - i)
			return false;
		i += n;
	}
	return true;
}

char *utf8_repair(const char *s, size_t len, size_t *out_len)
{
	/* A copy cut at len first, so no sequence is read across the cut. */
	unsigned char *in = (unsigned char *)strndup(s, len), *p;
	char *out, *o;

	if (!in)
		return NULL;
	out = malloc(strlen((char *)in) * 3 + 1);
	if (!out) {
		free(in);
		return NULL;
	}
	for (p = in, o = out; *p;) {
		int n = utf8_len(p);

		if (n) {
			memcpy(o, p, n);
			p += n;
			o += n;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);	/* U+FFFD */
			p++;
			o += 3;
		}
	}
	*o = 0;
	*out_len = o - out;
	free(in);
	return out;
}
