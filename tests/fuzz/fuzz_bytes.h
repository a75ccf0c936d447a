/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Taking typed values off the front of a fuzzer's input, for targets that
 * build their calls from it. Past the end every value is 0 and every
 * string empty, so a short input is still a complete (if dull) case and
 * the fuzzer's mutations at the end never make a case invalid.
 */
#ifndef RFBPF_FUZZ_BYTES_H
#define RFBPF_FUZZ_BYTES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct fuzz_input {
	const uint8_t *data;
	size_t size;
};

static inline void fuzz_take(struct fuzz_input *in, void *out, size_t n)
{
	size_t k = n < in->size ? n : in->size;

	memset(out, 0, n);
	memcpy(out, in->data, k);
	in->data += k;
	in->size -= k;
}

static inline uint8_t fuzz_u8(struct fuzz_input *in)
{
	uint8_t v;

	fuzz_take(in, &v, sizeof(v));
	return v;
}

static inline uint32_t fuzz_u32(struct fuzz_input *in)
{
	uint32_t v;

	fuzz_take(in, &v, sizeof(v));
	return v;
}

static inline uint64_t fuzz_u64(struct fuzz_input *in)
{
	uint64_t v;

	fuzz_take(in, &v, sizeof(v));
	return v;
}

/* Any bit pattern: NaNs, infinities, subnormals and -0 included. */
static inline double fuzz_double(struct fuzz_input *in)
{
	double v;

	fuzz_take(in, &v, sizeof(v));
	return v;
}

/* A length byte, then that many bytes, as a malloc'd C string (an
 * embedded NUL ends it early, as it would any C string). */
static inline char *fuzz_string(struct fuzz_input *in)
{
	size_t n = fuzz_u8(in);
	char *s = malloc(n + 1);

	if (!s)
		abort();
	fuzz_take(in, s, n);
	s[n] = 0;
	return s;
}

#endif
