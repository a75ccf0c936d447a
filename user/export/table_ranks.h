/* SPDX-License-Identifier: BSD-2-Clause */
/* --all's ranks table: each traced process's steps and the time its
 * collectives took in them, and the straggler (model/rank_summary.h). */
#ifndef RFBPF_TABLE_RANKS_H
#define RFBPF_TABLE_RANKS_H

#include <stddef.h>
#include <stdio.h>
#include "model/rank_summary.h"

/* Sorts r by job and rank, and prints a table per job. */
void print_rank_table(FILE *f, struct rank_summary *r, size_t nr);

#endif
