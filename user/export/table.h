/* SPDX-License-Identifier: BSD-2-Clause */
/* The summary table, laid out like torch.profiler's key_averages().table(). */
#ifndef RFBPF_TABLE_H
#define RFBPF_TABLE_H

#include <stdio.h>
#include "model/aggregate.h"
#include "model/trace.h"

/* top = 0 prints every row. */
void print_table(FILE *f, const struct trace *t, const struct aggregate *a,
		 enum sort_key sort, int top);
/* --per-step: a step's heading and its heaviest top rows (no footer). */
void print_step_table(FILE *f, const struct trace *t,
		      const struct aggregate *a, const struct step *st,
		      enum sort_key sort, int top);
/* "1.234ms"-style durations, as torch.profiler prints them. */
void format_duration(uint64_t ns, char *buf, size_t len);

/* --top-wakers: the top pairs of ops where a traced thread woke another
 * (aggregate.wakers), most wakeups first. */
void print_wakers(FILE *f, const struct trace *t, const struct aggregate *a,
		  unsigned top);

#endif
