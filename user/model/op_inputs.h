/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Ops' inputs (--shapes), as torch.profiler(record_shapes=True) shows
 * them. BPF sends, per recorded op, a record of its inputs (rfbpf.h,
 * struct rf_inputs_event); here a record becomes the four lists Kineto
 * writes in a Chrome trace's args, as JSON text:
 *   "Input Dims"       [[2, 3], [3, 4], [], []]
 *   "Input type"       ["float", "float", "Scalar", "Scalar"]
 *   "Input Strides"    [[3, 1], [4, 1], [], []]
 *   "Concrete Inputs"  ["", "", "1", "0.5"]
 * Each distinct record is kept once (an op keeps an id): a model calls
 * its ops with a few hundred distinct input sets at most.
 */
#ifndef RFBPF_OP_INPUTS_H
#define RFBPF_OP_INPUTS_H

#include <stddef.h>
#include <stdint.h>
#include "names.h"
#include "u64map.h"

/* The four lists of one input set, ids in the names table, and what its
 * tensors hold. */
struct input_set {
	uint32_t dims, types, strides, concrete;
	bool sized;		/* every tensor's sizes were read whole */
	uint64_t elems, bytes;	/* its tensors' (a tensor list's too) */
};

struct op_inputs {
	unsigned nr_dtypes;	/* the build's scalar types: dtype indexes at
				 * or past it are no scalar type (an
				 * undefined tensor; 0: no inputs read) */
	bool every_op;		/* --shapes: every op's inputs are read, not
				 * only collectives' */
	struct u64map by_record;	/* hash of a record -> set id */
	struct input_set *sets;		/* id - 1 -> its lists */
	size_t nr, cap;
	char *buf;			/* formatting room, 4 lists */
};

/* Where the four lists go, as JSON text, each in at most len bytes (a
 * list that does not fit is written "[]"). */
struct input_lists {
	char *dims, *types, *strides, *concrete;
	size_t len;
};

/* Formats a record of nw words: pure, for the unit tests as much as for
 * op_inputs_add. */
void op_inputs_format(const uint64_t *w, uint32_t nw, unsigned nr_dtypes,
		      const struct input_lists *out);
/* The elements and bytes of a record's tensors, those in tensor lists
 * too; false if some tensor's sizes or dtype could not be read whole. */
bool op_inputs_bytes(const uint64_t *w, uint32_t nw, unsigned nr_dtypes,
		     uint64_t *elems, uint64_t *bytes);
/* The id (from 1) of the input set of a record, added if new; 0 on
 * ENOMEM. */
uint32_t op_inputs_add(struct op_inputs *oi, struct names *names,
		       const uint64_t *w, uint32_t nw);
static inline const struct input_set *
op_inputs_get(const struct op_inputs *oi, uint32_t id)
{
	return id && id <= oi->nr ? &oi->sets[id - 1] : NULL;
}
/* The name torch gives dtype index i ("float", "long int", "c10::Half"),
 * "" for none. */
const char *op_inputs_dtype(unsigned i, unsigned nr_dtypes);
void op_inputs_free(struct op_inputs *oi);

#endif
