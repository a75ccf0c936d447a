// SPDX-License-Identifier: BSD-2-Clause
#include <locale.h>
#include <stdint.h>
#include <string.h>
#include <wchar.h>
#include "text_cell.h"
#include "utf8.h"

/* The width of code point c in a terminal (wcwidth needs a UTF-8 locale,
 * taken for this thread only so the program's own stays untouched). */
static int columns(uint32_t c)
{
	static locale_t utf8;
	locale_t old;
	int w;

	if (c < 0x20 || (c >= 0x7f && c < 0xa0))
		return 1;		/* written as a space */
	if (c < 0x7f)
		return 1;
	if (!utf8)
		utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	if (!utf8)
		return 1;
	old = uselocale(utf8);
	w = wcwidth((wchar_t)c);
	uselocale(old);
	return w < 0 ? 1 : w;
}

/* The code point at s (n bytes long), or U+FFFD for an invalid byte. */
static uint32_t decode(const unsigned char *s, int *n)
{
	static const unsigned char mask[] = { 0, 0x7f, 0x1f, 0x0f, 0x07 };
	uint32_t c;

	*n = utf8_len(s);
	if (!*n) {
		*n = 1;
		return 0xfffd;
	}
	c = s[0] & mask[*n];
	for (int i = 1; i < *n; i++)
		c = c << 6 | (s[i] & 0x3f);
	return c;
}

static void put(FILE *f, const unsigned char *s, int n, uint32_t c)
{
	if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0))
		fputc(' ', f);
	else if (c == 0xfffd && n == 1)
		fputs("\xef\xbf\xbd", f);
	else
		fwrite(s, 1, n, f);
}

/* Columns of the longest head of s that fits in max (*fit: its bytes;
 * s[*fit] is not NUL if some did not fit). */
static int measure(const unsigned char *s, int max, size_t *fit)
{
	int used = 0, n;

	*fit = 0;
	while (s[*fit]) {
		int w = columns(decode(s + *fit, &n));

		if (used + w > max)
			break;
		used += w;
		*fit += n;
	}
	return used;
}

void print_cell(FILE *f, const char *text, int width, char mark)
{
	const unsigned char *s = (const unsigned char *)text;
	int room = width - (mark ? 1 : 0), used, n;
	size_t fit, i = 0;

	used = measure(s, room, &fit);
	if (s[fit])		/* too wide: cut, leaving room for "..." */
		used = measure(s, room - 3, &fit);
	while (i < fit) {
		uint32_t c = decode(s + i, &n);

		put(f, s + i, n, c);
		i += n;
	}
	if (s[fit]) {
		fputs("...", f);
		used += 3;
	}
	if (mark) {
		fputc(mark, f);
		used++;
	}
	for (; used < width; used++)
		fputc(' ', f);
}
