/* SPDX-License-Identifier: BSD-2-Clause */
/* The table's collectives block: the job's rank (model/distributed.h) and
 * its collectives (model/collectives.h) by time, with their bytes and
 * bandwidth. */
#ifndef RFBPF_TABLE_COLLECTIVES_H
#define RFBPF_TABLE_COLLECTIVES_H

#include <stdio.h>
#include "model/collectives.h"
#include "model/trace.h"

/* Prints nothing for a job that is not distributed and ran none. */
void print_collectives(FILE *f, const struct trace *t,
		       struct collectives *c);
/* "1.57 MB" (decimal units, as bandwidths are given). */
void format_bytes(double bytes, char *buf, size_t len);

#endif
