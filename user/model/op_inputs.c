// SPDX-License-Identifier: BSD-2-Clause
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "op_inputs.h"
#include "rfbpf.h"

/*
 * c10::ScalarType in order, named as torch names them (the C++ type's
 * name, which is what Kineto's "Input type" holds). 1.13 has the first
 * 18, 2.6 the first 44, 2.14 all 47: the order only ever grew at the end.
 */
static const char *const dtypes[] = {
	"unsigned char", "signed char", "short int", "int", "long int",
	"c10::Half", "float", "double", "c10::complex<c10::Half>",
	"c10::complex<float>", "c10::complex<double>", "bool", "c10::qint8",
	"c10::quint8", "c10::qint32", "c10::BFloat16", "c10::quint4x2",
	"c10::quint2x4", "c10::bits1x8", "c10::bits2x4", "c10::bits4x2",
	"c10::bits8", "c10::bits16", "c10::Float8_e5m2", "c10::Float8_e4m3fn",
	"c10::Float8_e5m2fnuz", "c10::Float8_e4m3fnuz", "short unsigned int",
	"unsigned int", "long unsigned int", "c10::dummy_uint1_7_t<1>",
	"c10::dummy_uint1_7_t<2>", "c10::dummy_uint1_7_t<3>",
	"c10::dummy_uint1_7_t<4>", "c10::dummy_uint1_7_t<5>",
	"c10::dummy_uint1_7_t<6>", "c10::dummy_uint1_7_t<7>",
	"c10::dummy_int1_7_t<1>", "c10::dummy_int1_7_t<2>",
	"c10::dummy_int1_7_t<3>", "c10::dummy_int1_7_t<4>",
	"c10::dummy_int1_7_t<5>", "c10::dummy_int1_7_t<6>",
	"c10::dummy_int1_7_t<7>", "c10::Float8_e8m0fnu",
	"c10::Float4_e2m1fn_x2", "c10::complex<c10::BFloat16>",
};
#define NR_DTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

/* Each scalar type's bytes per element, in the same order (the sub-byte
 * packed types count a byte per element, as element_size() does). */
static const unsigned char dtype_bytes[] = {
	1, 1, 2, 4, 8, 2, 4, 8, 4, 8, 16, 1, 1, 1, 4, 2, 1, 1, 1, 1, 1, 1, 2,
	1, 1, 1, 1, 2, 4, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4,
};
_Static_assert(sizeof(dtype_bytes) == NR_DTYPES, "a size per dtype");

/* c10::TypeKind::TensorType: 3 in every build rfbpf knows. */
#define TYPE_KIND_TENSOR 3

const char *op_inputs_dtype(unsigned i, unsigned nr_dtypes)
{
	return i < nr_dtypes && i < NR_DTYPES ? dtypes[i] : "";
}

/* A list of JSON text being written. A record's lists take a few KB at
 * most (RF_IN_MAX_WORDS words); one that would not fit is written "[]"
 * rather than cut into invalid JSON. */
struct out {
	char *p;
	size_t len, at;
	bool full;
};

static void put(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->p + o->at, o->len - o->at, fmt, ap);
	va_end(ap);
	if (n < 0 || o->at + n >= o->len) {
		o->full = true;
		return;
	}
	o->at += n;
}

static void done(struct out *o)
{
	put(o, "]");
	if (o->full)
		snprintf(o->p, o->len, "[]");
}

/* A double as IValue prints it (Kineto's "Concrete Inputs"): whole
 * numbers with a trailing point ("2."), others with 17 digits. */
static void put_double(struct out *o, double d)
{
	int c = fpclassify(d);

	if ((c == FP_NORMAL || c == FP_ZERO) && fabs(d) < 1e10 &&
	    (double)(int64_t)d == d) {
		put(o, "%s%lld.", d == 0 && signbit(d) ? "-" : "",
		    (long long)d);
		return;
	}
	put(o, "%.17g", d);
}

static void put_scalar(struct out *o, unsigned kind, uint64_t v)
{
	double d;

	if (kind == RF_IN_INT)
		put(o, "%lld", (long long)v);
	else if (kind == RF_IN_BOOL)
		put(o, "%s", v & 1 ? "True" : "False");
	else {
		memcpy(&d, &v, sizeof(d));
		put_double(o, d);
	}
}

static bool is_scalar(unsigned kind)
{
	return kind == RF_IN_INT || kind == RF_IN_DOUBLE || kind == RF_IN_BOOL;
}

/* An undefined tensor (at::Tensor(): a conv's missing bias) is the
 * UndefinedTensorImpl, whose dtype is TypeMeta()'s, ScalarType::Undefined,
 * right after the build's scalar types. Profilers write it as None. */
static bool undefined(uint64_t h, unsigned nr_dtypes)
{
	return !op_inputs_dtype(RF_IN_AUX(h), nr_dtypes)[0];
}

/* The words a value takes, its header included. */
static uint32_t value_words(uint64_t h)
{
	unsigned k = RF_IN_KIND(h);

	if (k == RF_IN_TENSOR)
		return 1 + 2 * RF_IN_KEPT(h);
	return is_scalar(k) ? 2 : 1;
}

/* "[2, 3]" from a tensor's kept sizes (or strides: from = kept). */
static void put_sizes(struct out *o, const uint64_t *w, uint32_t at,
		      uint32_t nw, uint64_t h, bool strides)
{
	uint32_t kept = RF_IN_KEPT(h), first = at + 1 + (strides ? kept : 0);

	put(o, "[");
	for (uint32_t k = 0; k < kept && first + k < nw; k++)
		put(o, "%s%lld", k ? ", " : "", (long long)w[first + k]);
	put(o, "]");
}

struct lists {
	struct out dims, types, strides, concrete;
};

/* A list input at word at: TensorList, ScalarList or neither, as Kineto
 * tells them (by the list's element type: List[Optional[Tensor]] is
 * neither). Returns the words it takes with its elements. */
static uint32_t put_list(struct lists *l, const uint64_t *w, uint32_t at,
			 uint32_t nw)
{
	uint64_t h = w[at];
	uint32_t n = RF_IN_KEPT(h), i, p;
	bool tensors = RF_IN_AUX(h) == TYPE_KIND_TENSOR, scalars = !tensors;

	for (i = 0, p = at + 1; i < n && p < nw; i++) {
		scalars = scalars && is_scalar(RF_IN_KIND(w[p]));
		p += value_words(w[p]);
	}
	put(&l->types, "\"%s\"", tensors ? "TensorList" :
	    scalars ? "ScalarList" : "");
	put(&l->dims, "[");
	put(&l->strides, "[");
	put(&l->concrete, "\"%s", scalars ? "[" : "");
	for (i = 0, p = at + 1; i < n && p < nw; i++) {
		if (tensors && RF_IN_KIND(w[p]) == RF_IN_TENSOR) {
			put(&l->dims, "%s", i ? ", " : "");
			put_sizes(&l->dims, w, p, nw, w[p], false);
			put(&l->strides, "%s", i ? ", " : "");
			put_sizes(&l->strides, w, p, nw, w[p], true);
		} else if (scalars && p + 1 < nw) {
			put(&l->concrete, "%s", i ? ", " : "");
			put_scalar(&l->concrete, RF_IN_KIND(w[p]), w[p + 1]);
		}
		p += value_words(w[p]);
	}
	put(&l->dims, "]");
	put(&l->strides, "]");
	put(&l->concrete, "%s\"", scalars ? "]" : "");
	return p - at;
}

void op_inputs_format(const uint64_t *w, uint32_t nw, unsigned nr_dtypes,
		      const struct input_lists *out)
{
	struct lists l = {
		.dims = { .p = out->dims, .len = out->len },
		.types = { .p = out->types, .len = out->len },
		.strides = { .p = out->strides, .len = out->len },
		.concrete = { .p = out->concrete, .len = out->len },
	};
	struct out *all[] = { &l.dims, &l.types, &l.strides, &l.concrete };

	for (int k = 0; k < 4; k++)
		put(all[k], "[");
	for (uint32_t at = 0, i = 0; at < nw; i++) {
		uint64_t h = w[at];
		unsigned kind = RF_IN_KIND(h);

		for (int k = 0; k < 4; k++)
			put(all[k], "%s", i ? ", " : "");
		if (kind == RF_IN_LIST) {
			at += put_list(&l, w, at, nw);
			continue;
		}
		if (kind == RF_IN_TENSOR && !undefined(h, nr_dtypes)) {
			put_sizes(&l.dims, w, at, nw, h, false);
			put_sizes(&l.strides, w, at, nw, h, true);
			put(&l.types, "\"%s\"",
			    op_inputs_dtype(RF_IN_AUX(h), nr_dtypes));
			put(&l.concrete, "\"\"");
		} else {
			put(&l.dims, "[]");
			put(&l.strides, "[]");
			put(&l.types, "\"%s\"", is_scalar(kind) ? "Scalar" : "");
			put(&l.concrete, "\"");
			if (is_scalar(kind) && at + 1 < nw)
				put_scalar(&l.concrete, kind, w[at + 1]);
			put(&l.concrete, "\"");
		}
		at += value_words(h);
	}
	for (int k = 0; k < 4; k++)
		done(all[k]);
}

/* One tensor's elements and bytes; false if not read whole. */
static bool tensor_bytes(uint64_t h, const uint64_t *w, uint32_t at,
			 uint32_t nw, unsigned nr_dtypes, uint64_t *elems,
			 uint64_t *bytes)
{
	unsigned dtype = RF_IN_AUX(h);
	uint64_t n = 1;

	if (RF_IN_FLAGS(h) || RF_IN_KEPT(h) != RF_IN_COUNT(h) ||
	    at + RF_IN_KEPT(h) >= nw)
		return false;
	if (undefined(h, nr_dtypes))	/* None: nothing moved */
		return true;
	for (uint32_t k = 0; k < RF_IN_KEPT(h); k++)
		n *= w[at + 1 + k];
	*elems += n;
	*bytes += n * dtype_bytes[dtype];
	return true;
}

bool op_inputs_bytes(const uint64_t *w, uint32_t nw, unsigned nr_dtypes,
		     uint64_t *elems, uint64_t *bytes)
{
	bool whole = true;

	*elems = *bytes = 0;
	for (uint32_t at = 0; at < nw;) {
		uint64_t h = w[at];

		if (RF_IN_KIND(h) == RF_IN_LIST) {
			uint32_t p = at + 1;

			if (RF_IN_FLAGS(h) || RF_IN_KEPT(h) != RF_IN_COUNT(h))
				whole = false;
			for (uint32_t i = 0; i < RF_IN_KEPT(h) && p < nw; i++) {
				if (RF_IN_KIND(w[p]) == RF_IN_TENSOR &&
				    !tensor_bytes(w[p], w, p, nw, nr_dtypes,
						  elems, bytes))
					whole = false;
				p += value_words(w[p]);
			}
			at = p;
			continue;
		}
		if (RF_IN_KIND(h) == RF_IN_TENSOR &&
		    !tensor_bytes(h, w, at, nw, nr_dtypes, elems, bytes))
			whole = false;
		at += value_words(h);
	}
	return whole;
}

static uint64_t record_hash(const uint64_t *w, uint32_t nw)
{
	uint64_t h = 0xcbf29ce484222325ull ^ nw;

	for (uint32_t i = 0; i < nw; i++)
		h = (h ^ w[i]) * 0x100000001b3ull;
	return h ? h : 1;
}

#define LIST_LEN 8192

uint32_t op_inputs_add(struct op_inputs *oi, struct names *names,
		       const uint64_t *w, uint32_t nw)
{
	uint64_t key = record_hash(w, nw), *found = u64map_get(&oi->by_record,
							       key);
	struct input_lists l = { .len = LIST_LEN };
	struct input_set s;

	if (found)
		return (uint32_t)*found;
	if (!oi->buf && !(oi->buf = malloc(4 * LIST_LEN)))
		return 0;
	if (oi->nr == oi->cap) {
		size_t cap = oi->cap ? 2 * oi->cap : 64;
		struct input_set *p = realloc(oi->sets, cap * sizeof(*p));

		if (!p)
			return 0;
		oi->sets = p;
		oi->cap = cap;
	}
	l.dims = oi->buf;
	l.types = oi->buf + LIST_LEN;
	l.strides = oi->buf + 2 * LIST_LEN;
	l.concrete = oi->buf + 3 * LIST_LEN;
	op_inputs_format(w, nw, oi->nr_dtypes, &l);
	s.sized = op_inputs_bytes(w, nw, oi->nr_dtypes, &s.elems, &s.bytes);
	s.dims = names_intern(names, l.dims, strlen(l.dims));
	s.types = names_intern(names, l.types, strlen(l.types));
	s.strides = names_intern(names, l.strides, strlen(l.strides));
	s.concrete = names_intern(names, l.concrete, strlen(l.concrete));
	if (s.dims == UINT32_MAX || s.types == UINT32_MAX ||
	    s.strides == UINT32_MAX || s.concrete == UINT32_MAX ||
	    !u64map_put(&oi->by_record, key, oi->nr + 1))
		return 0;
	oi->sets[oi->nr++] = s;
	return (uint32_t)oi->nr;
}

void op_inputs_free(struct op_inputs *oi)
{
	u64map_free(&oi->by_record);
	free(oi->sets);
	free(oi->buf);
	memset(oi, 0, sizeof(*oi));
}
