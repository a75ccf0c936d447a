/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * UTF-8 as the exporters need it: op names and command lines come from
 * the target as bytes, and JSON, Prometheus text and pprof's strings must
 * be valid UTF-8.
 */
#ifndef RFBPF_UTF8_H
#define RFBPF_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the valid UTF-8 sequence at s, or 0 if it is not one (an
 * overlong form, a surrogate, past U+10FFFF, or cut by the NUL). */
int utf8_len(const unsigned char *s);
/* Where s[0..len) is cut to at most max bytes without splitting a
 * character: max, less the continuation bytes (at most three) that
 * s[max] would leave without their lead byte. */
size_t utf8_cut(const char *s, size_t len, size_t max);

/* Is s[0..len) valid UTF-8 throughout (a character cut by len is not)? */
bool utf8_valid(const char *s, size_t len);
/* s[0..len) (up to a NUL) with each byte that starts no valid sequence
 * replaced by U+FFFD, as a malloc'd string; *out_len is its length.
 * NULL on ENOMEM. */
char *utf8_repair(const char *s, size_t len, size_t *out_len);

#endif
