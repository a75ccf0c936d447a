/* SPDX-License-Identifier: BSD-2-Clause */
/* --all's ranks table: each traced process's steps and the time its
 * collectives took in them, and the straggler (model/rank_summary.h). */
#ifndef RFBPF_TABLE_RANKS_H
#define RFBPF_TABLE_RANKS_H

#include <stddef.h>
#include <stdio.h>
#include "model/rank_summary.h"

void print_rank_table(FILE *f, const struct rank_summary *r, size_t nr);

#endif
