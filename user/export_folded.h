/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Folded stacks ("process;thread;op;child;... weight") for flamegraph.pl,
 * speedscope and inferno. Weights are self time in ns, so every line's
 * weight sums to the traced self time. ';' in a name becomes ':'.
 */
#ifndef RFBPF_EXPORT_FOLDED_H
#define RFBPF_EXPORT_FOLDED_H

#include <stdio.h>
#include "trace.h"

int export_folded(const struct trace *t, const char *path);
/* Returns 0, or -1 on ENOMEM. */
int write_folded(FILE *f, const struct trace *t);

#endif
