/* SPDX-License-Identifier: BSD-2-Clause */
/* Text cells of the table, measured in terminal columns, not bytes: op
 * names may hold any UTF-8 (wide CJK characters, combining marks),
 * invalid bytes, or control characters such as a newline. */
#ifndef RFBPF_TEXT_CELL_H
#define RFBPF_TEXT_CELL_H

#include <stdio.h>

/* Writes s in exactly width columns, left-aligned: control characters as
 * spaces, invalid bytes as U+FFFD, and a name too wide cut at a character
 * boundary and ended with "..." (as torch does). mark, if not 0, is put
 * right after the text and counted in the width. */
void print_cell(FILE *f, const char *s, int width, char mark);

#endif
