// SPDX-License-Identifier: BSD-2-Clause
/*
 * user/python/line_table.c against CPython itself: for every code object
 * in tests/fixtures/python_lines.txt (written by Debian's interpreter,
 * tests/fixtures/python_lines.py), the line of each code unit must be the
 * one co_positions() gave. Then what the table cannot answer: units past
 * its end, a table cut short, bytes that do not start an entry.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "python/line_table.h"

#define FIXTURE "tests/fixtures/python_lines.txt"
#define MAX_TABLE 4096
#define MAX_UNITS 8192

static size_t unhex(const char *hex, uint8_t *out, size_t max)
{
	size_t n = 0;
	unsigned b;

	if (!strcmp(hex, "-"))
		return 0;
	while (n < max && sscanf(hex + 2 * n, "%2x", &b) == 1)
		out[n++] = (uint8_t)b;
	return n;
}

TEST(every_unit_of_every_code_object_as_cpython_says)
{
	static char hex[2 * MAX_TABLE + 2], name[256];
	static uint8_t table[MAX_TABLE];
	static int want[MAX_UNITS];
	int major = 0, minor = 0, first, units, codes = 0, checked = 0;
	int wrong = 0, none = 0, far = 0;
	FILE *f = fopen(FIXTURE, "r");

	CHECK(f != NULL);
	if (!f)
		return;
	CHECK(fscanf(f, "python %d.%d", &major, &minor) == 2);
	CHECK(major == 3 && minor >= 11);
	while (fscanf(f, " code %255s %d %8193s %d", name, &first, hex,
		      &units) == 4) {
		size_t len = unhex(hex, table, sizeof(table));

		CHECK(units > 0 && units <= MAX_UNITS);
		if (units <= 0 || units > MAX_UNITS)
			break;
		for (int i = 0; i < units; i++)
			CHECK(fscanf(f, "%d", &want[i]) == 1);
		for (int i = 0; i < units; i++) {
			int got = py_line_of(table, len, first, (uint32_t)i);

			if (got != want[i] && wrong++ < 5)
				fprintf(stderr, "  %s unit %d: line %d, "
					"CPython says %d\n", name, i, got,
					want[i]);
			none += want[i] == PY_LINE_NONE;
			far += want[i] - first >= 300;
			checked++;
		}
		/* Past the last unit: not a line of this code. */
		CHECK_EQ_U64(py_line_of(table, len, first, (uint32_t)units),
			     (uint64_t)(int64_t)PY_LINE_OUT);
		codes++;
	}
	fclose(f);
	CHECK_EQ_U64(wrong, 0);
	/* The fixture covers what it says it does. */
	CHECK(codes >= 20);
	CHECK(checked >= 500);
	CHECK(none > 0);	/* units with no location */
	CHECK(far > 0);		/* a line 300 on: the long form */
}

TEST(a_table_cut_short_or_malformed_gives_no_line)
{
	/* One long-form entry (form 14, 1 unit): line +3, then three
	 * varints; the first two operands split over 2 bytes each. */
	const uint8_t whole[] = { 0xf0, 0x46, 0x00, 0x00, 0x41, 0x00, 0x05 };

	/* 0x46 0x00: varint 6 (more follows, then 0), signed +3. */
	CHECK_EQ_U64(py_line_of(whole, sizeof(whole), 10, 0), 13);
	for (size_t cut = 1; cut < sizeof(whole); cut++)
		CHECK_EQ_U64(py_line_of(whole, cut, 10, 0),
			     (uint64_t)(int64_t)PY_LINE_OUT);
	/* A byte without its top bit cannot start an entry. */
	const uint8_t bad[] = { 0x12 };

	CHECK_EQ_U64(py_line_of(bad, 1, 10, 0),
		     (uint64_t)(int64_t)PY_LINE_OUT);
	CHECK_EQ_U64(py_line_of(NULL, 0, 10, 0),
		     (uint64_t)(int64_t)PY_LINE_OUT);
}

TEST(each_form_moves_the_line_as_documented)
{
	const uint8_t t[] = {
		0x80 | 13 << 3 | 1, 0x04,	/* no column, 2 units: +2 */
		0x80 | 11 << 3, 0x01, 0x02,	/* one line, 1 unit: +1 */
		0x80 | 15 << 3 | 2,		/* no location, 3 units */
		0x80 | 13 << 3, 0x03,		/* no column: -1 */
		0x80 | 3 << 3, 0x10,		/* short: +0 */
	};
	const int want[] = { 7, 7, 8, PY_LINE_NONE, PY_LINE_NONE,
			     PY_LINE_NONE, 7, 7 };

	for (uint32_t u = 0; u < sizeof(want) / sizeof(*want); u++)
		CHECK_EQ_U64(py_line_of(t, sizeof(t), 5, u),
			     (uint64_t)(int64_t)want[u]);
}

int main(void)
{
	return check_run_all(__FILE__);
}
