/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Python call sites of ops (--python-stacks). BPF sends, per op, the
 * frames of its thread's Python stack as (code object, code unit); a
 * resolver names them (user/python/ reads the target's memory, the unit
 * tests use a table). Each distinct place becomes a frame label,
 * "FUNCTION (FILE:LINE)" as py-spy writes them, interned in the trace's
 * names table like an op name, so the outputs that print stacks need
 * nothing new; py_frames_loc() tells a Python frame from an op and gives
 * its parts (pprof wants function, file and line apart).
 *
 * Stacks are interned too (an op keeps one id), outermost frame first.
 * What is kept grows with the distinct places and stacks a program has,
 * not with how long it runs; the (code, unit) cache is emptied when it
 * gets large (a program that makes code at run time).
 */
#ifndef RFBPF_PY_FRAMES_H
#define RFBPF_PY_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "rfbpf.h"
#include "names.h"
#include "u64map.h"

/* Where a Python frame is. func and file are ids in the names table. */
struct py_loc {
	uint32_t func, file;
	int32_t line;		/* -1: not known */
};

/* Names a frame of process pid: its code object's generation (a new
 * number when another code object took the address) and, for a
 * (code, unit) not seen in that generation, its function, file, line.
 * Each returns 0, or -1 when the memory cannot be read. */
struct py_resolver {
	int (*gen)(void *ctx, uint32_t pid, uint64_t code, uint32_t *gen);
	int (*locate)(void *ctx, uint32_t pid, uint64_t code, int32_t unit,
		      char *func, size_t func_len, char *file,
		      size_t file_len, int *line);
	void *ctx;
};

struct py_site;

struct py_frames {
	struct py_loc *locs;
	size_t nr_locs, cap_locs;
	struct u64map loc_of_label;	/* label id + 1 -> index in locs */
	struct py_site *sites;		/* (pid, code, unit) -> label */
	size_t nr_sites, cap_sites;
	uint32_t *pool;			/* every stack's labels, end to end */
	size_t pool_len, pool_cap;
	struct { uint32_t at, n; } *stacks;	/* id - 1 -> its labels */
	size_t nr_stacks, cap_stacks;
	uint32_t *stack_index;		/* open addressing: id, 0 empty */
	size_t stack_index_cap;
	uint64_t unresolved;		/* frames no resolver could name */
};

/* The label of a stack cut at the depth cap, outermost in its stack. */
#define PY_TRUNCATED_LABEL "[python stack truncated]"
/* A frame whose code object could not be read. */
#define PY_UNKNOWN_LABEL "[python: unreadable frame]"

/* The stack BPF sent (innermost first, n frames, RF_PY_F_* flags) as an
 * interned stack id; 0 for no frame at all, or on ENOMEM. */
uint32_t py_frames_stack(struct py_frames *p, struct names *names,
			 const struct py_resolver *r, uint32_t pid,
			 const struct rf_py_frame *frames, uint32_t n,
			 uint32_t flags);
/* The label of a place, noted as a Python frame: a frame copied from
 * another trace's names (fleet mode merges jobs). UINT32_MAX on ENOMEM. */
uint32_t py_frames_add_loc(struct py_frames *p, struct names *names,
			   const char *func, const char *file, int line);
/* The id of a stack of labels given outermost first, added if new;
 * 0 on ENOMEM. */
uint32_t py_frames_intern(struct py_frames *p, const uint32_t *labels,
			  uint32_t n);
/* A stack's labels, outermost first (NULL and 0 for id 0). */
const uint32_t *py_frames_get(const struct py_frames *p, uint32_t id,
			      uint32_t *n);
/* The place a label stands for, or NULL when it is no Python frame. */
const struct py_loc *py_frames_loc(const struct py_frames *p,
				   uint32_t label);
/* Whether two labels are one function's frame, whatever line each is at
 * (same function and file; markers only as themselves). */
bool py_frames_same_function(const struct py_frames *p, uint32_t a,
			     uint32_t b);
/* How many of a's first frames b starts with, frame by frame as
 * py_frames_same_function tells them: the frames of two stacks, both
 * outermost first, that can be one call still running. */
uint32_t py_frames_common(const struct py_frames *p, const uint32_t *a,
			  uint32_t na, const uint32_t *b, uint32_t nb);
/* Where a record_function scope's own frames begin in its begin stack
 * l[0..n): at the innermost frame of a function named __enter__ (the
 * context manager's, called from the frame holding the `with` or from
 * ContextDecorator's wrapper), n if there is none. */
uint32_t py_frames_enter_caller(const struct py_frames *p,
				const struct names *names, const uint32_t *l,
				uint32_t n);
void py_frames_free(struct py_frames *p);

#endif
