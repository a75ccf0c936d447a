/* SPDX-License-Identifier: BSD-2-Clause */
/* Writing JSON strings and numbers exactly: op names may hold quotes,
 * control characters, or a UTF-8 sequence cut by truncation. */
#ifndef RFBPF_JSON_WRITER_H
#define RFBPF_JSON_WRITER_H

#include <stdint.h>
#include <stdio.h>

/* Writes s as a quoted JSON string; invalid UTF-8 becomes U+FFFD. */
void json_string(FILE *f, const char *s);
/* Writes ns as microseconds with exactly three decimals (no rounding). */
void json_us(FILE *f, uint64_t ns);
/* JSON has no NaN or infinity, and printf spells them "nan" and "inf",
 * which no parser takes: both of these write a non-finite v as null. */
/* v in the fewest digits that read back as v. */
void json_double(FILE *f, double v);
/* v with exactly `decimals` digits after the point (rounded). */
void json_fixed(FILE *f, double v, int decimals);

#endif
