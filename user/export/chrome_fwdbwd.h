/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Forward-to-backward links, as Kineto draws them ("fwdbwd" flows): a
 * backward op carries the sequence number of the forward op that built its
 * autograd node and that op's PyTorch thread (fwd_thread); the forward op
 * is the one with that sequence number on that thread that began last
 * (earlier ones with the same number only led up to it). Forward ops are
 * remembered until their backward op closes, at most FWDBWD_MAX of them
 * (inference never runs backward): past that they are forgotten, counted.
 */
#ifndef RFBPF_EXPORT_CHROME_FWDBWD_H
#define RFBPF_EXPORT_CHROME_FWDBWD_H

#include <stdbool.h>
#include <stdint.h>
#include "model/trace.h"
#include "model/u64map.h"

#define FWDBWD_MAX 65536

struct fwd_op {
	uint32_t pid, tid;	/* where the forward op ran */
	uint64_t rf_thread;
	int64_t seq;
	uint64_t start_ns;
};

struct fwdbwd {
	struct u64map index;	/* hash of (pid, rf_thread, seq) -> ops[] */
	struct fwd_op *ops;
	size_t nr, cap;
	uint64_t forgotten;	/* forward ops dropped at FWDBWD_MAX */
};

/* A closed op that may be a forward op: remembered if it has a sequence
 * number, its thread, and no forward thread of its own. */
void fwdbwd_forward(struct fwdbwd *m, uint32_t pid, const struct op *o);
/* A closed backward op: its forward op, which is then forgotten (one
 * flow per pair, as Kineto); false if none is known. */
bool fwdbwd_backward(struct fwdbwd *m, uint32_t pid, const struct op *o,
		     struct fwd_op *fwd);
void fwdbwd_free(struct fwdbwd *m);

#endif
