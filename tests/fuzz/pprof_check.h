/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What a decoded pprof profile must satisfy for `go tool pprof` (its
 * profile.CheckValid and its string and id lookups) and for stores that
 * decode profile.proto as proto3 (Pyroscope, Parca: a string that is not
 * valid UTF-8 fails the whole profile there). Each check names the rule;
 * the first broken one is returned as text, NULL when all hold.
 * Header-only, for the pprof fuzz target.
 */
#ifndef RFBPF_FUZZ_PPROF_CHECK_H
#define RFBPF_FUZZ_PPROF_CHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include "gen/profile.pb-c.h"

typedef Perftools__Profiles__Profile pc_profile;

/* Unicode's table 3-7 of well-formed UTF-8, over the whole string. */
static inline bool pc_utf8(const unsigned char *s)
{
	while (*s) {
		unsigned c = *s, n, lo = 0x80, hi = 0xbf;

		if (c < 0x80) {
			s++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 1;
		else if (c >= 0xe0 && c <= 0xef)
			n = 2, lo = c == 0xe0 ? 0xa0 : 0x80,
			hi = c == 0xed ? 0x9f : 0xbf;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 3, lo = c == 0xf0 ? 0x90 : 0x80,
			hi = c == 0xf4 ? 0x8f : 0xbf;
		else
			return false;
		for (unsigned i = 1; i <= n; i++)
			if (s[i] < (i == 1 ? lo : 0x80) ||
			    s[i] > (i == 1 ? hi : 0xbf))
				return false;
		s += n + 1;
	}
	return true;
}

static inline bool pc_str(const pc_profile *p, int64_t i)
{
	return i >= 0 && (size_t)i < p->n_string_table;
}

static inline const Perftools__Profiles__Location *
pc_location(const pc_profile *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_location; i++)
		if (p->location[i]->id == id)
			return p->location[i];
	return NULL;
}

static inline const Perftools__Profiles__Function *
pc_function(const pc_profile *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_function; i++)
		if (p->function[i]->id == id)
			return p->function[i];
	return NULL;
}

static inline const char *pc_strings(const pc_profile *p)
{
	if (!p->n_string_table || p->string_table[0][0])
		return "string_table[0] is not \"\"";
	for (size_t i = 0; i < p->n_string_table; i++)
		if (!pc_utf8((const unsigned char *)p->string_table[i]))
			return "a string is not valid UTF-8 (proto3)";
	if (!p->period_type || !pc_str(p, p->period_type->type) ||
	    !pc_str(p, p->period_type->unit))
		return "period_type missing or out of range";
	for (size_t i = 0; i < p->n_sample_type; i++)
		if (!pc_str(p, p->sample_type[i]->type) ||
		    !pc_str(p, p->sample_type[i]->unit))
			return "sample_type string index out of range";
	if (!pc_str(p, p->default_sample_type) || !pc_str(p, p->drop_frames) ||
	    !pc_str(p, p->keep_frames))
		return "profile string index out of range";
	for (size_t i = 0; i < p->n_comment; i++)
		if (!pc_str(p, p->comment[i]))
			return "comment string index out of range";
	return NULL;
}

/* Ids are non-zero and unique; what refers to them finds them. */
static inline const char *pc_tables(const pc_profile *p)
{
	for (size_t i = 0; i < p->n_function; i++) {
		const Perftools__Profiles__Function *f = p->function[i];

		if (!f->id || pc_function(p, f->id) != f)
			return "function id 0 or repeated";
		if (!pc_str(p, f->name) || !pc_str(p, f->system_name) ||
		    !pc_str(p, f->filename))
			return "function string index out of range";
	}
	for (size_t i = 0; i < p->n_location; i++) {
		const Perftools__Profiles__Location *l = p->location[i];

		if (!l->id || pc_location(p, l->id) != l)
			return "location id 0 or repeated";
		for (size_t k = 0; k < l->n_line; k++)
			if (!pc_function(p, l->line[k]->function_id))
				return "line refers to a missing function";
	}
	return NULL;
}

static inline const char *pc_samples(const pc_profile *p)
{
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];

		if (s->n_value != p->n_sample_type)
			return "sample value count != sample_type count";
		for (size_t k = 0; k < s->n_location_id; k++)
			if (!pc_location(p, s->location_id[k]))
				return "sample refers to a missing location";
		for (size_t k = 0; k < s->n_label; k++) {
			const Perftools__Profiles__Label *l = s->label[k];

			if (!l->key || !pc_str(p, l->key) ||
			    !pc_str(p, l->str) || !pc_str(p, l->num_unit))
				return "label string index out of range";
			if (l->str && l->num)
				return "label with both str and num";
		}
	}
	return NULL;
}

static inline const char *pprof_check(const pc_profile *p)
{
	const char *why = pc_strings(p);

	if (!why)
		why = pc_tables(p);
	if (!why)
		why = pc_samples(p);
	return why;
}

#endif
