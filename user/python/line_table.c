// SPDX-License-Identifier: BSD-2-Clause
/* CPython's location table: the format is in line_table.h. */
#include <limits.h>
#include <stdbool.h>
#include "line_table.h"

enum {
	FORM_ONE_LINE_0 = 10,	/* 10, 11, 12: line delta 0, 1, 2 */
	FORM_NO_COLUMN = 13,
	FORM_LONG = 14,
	FORM_NONE = 15,
};

struct reader {
	const uint8_t *p, *end;
	bool bad;
};

static uint32_t read_varint(struct reader *r)
{
	uint32_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (r->p == r->end || shift > 30) {
			r->bad = true;
			return 0;
		}
		b = *r->p++;
		v |= (uint32_t)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	return v;
}

static int read_svarint(struct reader *r)
{
	uint32_t v = read_varint(r);

	return v & 1 ? -(int)(v >> 1) : (int)(v >> 1);
}

/* Skips n operand bytes. */
static void skip(struct reader *r, size_t n)
{
	if ((size_t)(r->end - r->p) < n) {
		r->bad = true;
		return;
	}
	r->p += n;
}

int py_line_of(const uint8_t *table, size_t len, int first_line,
	       uint32_t unit)
{
	struct reader r = { table, table, false };
	/* Wide: a table read from a job's memory may add deltas past int. */
	int64_t line = first_line;
	uint32_t at = 0;

	if (!len)		/* table may be NULL then (none was read) */
		return PY_LINE_OUT;
	r.end = table + len;
	while (r.p < r.end) {
		uint8_t head = *r.p++;
		unsigned form = (head >> 3) & 15;
		uint32_t units = (head & 7) + 1;
		bool none = false;

		if (!(head & 0x80))	/* not the start of an entry */
			return PY_LINE_OUT;
		switch (form) {
		case FORM_NONE:
			none = true;
			break;
		case FORM_NO_COLUMN:
			line += read_svarint(&r);
			break;
		case FORM_LONG:
			line += read_svarint(&r);
			read_varint(&r);	/* end line delta */
			read_varint(&r);	/* column + 1 */
			read_varint(&r);	/* end column + 1 */
			break;
		default:
			if (form >= FORM_ONE_LINE_0) {
				line += (int)form - FORM_ONE_LINE_0;
				skip(&r, 2);	/* column, end column */
			} else {
				skip(&r, 1);	/* the columns, packed */
			}
		}
		if (r.bad)
			return PY_LINE_OUT;
		if (line < INT_MIN || line > INT_MAX)
			return PY_LINE_OUT;
		if (unit < at + units)
			return none ? PY_LINE_NONE : (int)line;
		at += units;
	}
	return PY_LINE_OUT;
}
