/* SPDX-License-Identifier: BSD-2-Clause */
#ifndef RFBPF_PRIVILEGES_H
#define RFBPF_PRIVILEGES_H

#include <stdbool.h>
#include <stddef.h>

/* Whether this process may load BPF programs and open uprobe perf events:
 * CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN. If not, writes a one-line
 * reason naming the missing capabilities into why. */
bool have_tracing_privileges(char *why, size_t len);

#endif
