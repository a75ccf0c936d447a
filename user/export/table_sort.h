/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The column the table is really sorted by. --sort cuda, self_cuda and
 * kernels sort by GPU columns, which a job without GPU activity leaves at
 * zero: sorting by them would give an order that means nothing, silently.
 * Such a run is sorted by self time instead (total when self time is not
 * known), and the user is told why, once.
 */
#ifndef RFBPF_TABLE_SORT_H
#define RFBPF_TABLE_SORT_H

#include <stddef.h>
#include "model/aggregate.h"
#include "model/trace.h"

/* The --sort word for a key ("self_cuda"). */
const char *sort_key_name(enum sort_key key);
/* The key to sort t's table by when asked for asked. When it is another
 * and the user chose asked (a GPU key), why says so in one sentence with
 * what is sorted instead; else why is "" (why may be NULL with len 0). */
enum sort_key table_sort_key(const struct trace *t, enum sort_key asked,
			     char *why, size_t len);

#endif
