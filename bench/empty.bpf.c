// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The baseline of the per-event benchmark: a uprobe program that does
 * nothing, so what it costs is the uprobe itself (trap or trampoline,
 * perf/BPF dispatch) and nothing of rfbpf's recording.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

SEC("uprobe")
int empty(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
