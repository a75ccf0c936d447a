/* SPDX-License-Identifier: BSD-2-Clause */
/* The table's memory block (--memory): each device's live and peak bytes,
 * and the blocks still live at the end grouped by what made them (the
 * leak view: op, record_function scope, innermost Python frame). */
#ifndef RFBPF_TABLE_MEMORY_H
#define RFBPF_TABLE_MEMORY_H

#include <stdio.h>
#include "model/trace.h"

/* At most top groups (0: all); nothing without --memory. */
void print_memory(FILE *f, const struct trace *t, int top);

#endif
