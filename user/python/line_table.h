/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Line numbers from CPython's location table (co_linetable, 3.11 and
 * later: PEP 626/657, Objects/locations.md), for Python frames read from
 * outside the process: a frame gives its code object and the code unit it
 * is at, and this turns them into the source line, as co_positions()
 * would inside.
 *
 * The table is a run of entries, each covering 1 to 8 code units (2-byte
 * instruction words, cache entries included): a first byte 1cccclll
 * (c = the form, l = units - 1), then the form's operands. The line
 * starts at co_firstlineno and each entry moves it by a delta; form 15
 * says its units have no location, form 13 carries only the line delta,
 * form 14 the line delta and the end line and columns, forms 10-12 a
 * delta of 0-2 and two columns, forms 0-9 one column byte and no delta.
 * Numbers are varints of 6-bit chunks (bit 6: more follow), signed ones
 * with the sign in bit 0.
 */
#ifndef RFBPF_PY_LINE_TABLE_H
#define RFBPF_PY_LINE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#define PY_LINE_NONE (-1)	/* the table gives that unit no location */
#define PY_LINE_OUT (-2)	/* past the table's end, or a table cut
				 * short or malformed */

/* The line of code unit `unit` (byte offset / 2) of a code object whose
 * co_linetable is table[len] and whose co_firstlineno is first_line. */
int py_line_of(const uint8_t *table, size_t len, int first_line,
	       uint32_t unit);

#endif
