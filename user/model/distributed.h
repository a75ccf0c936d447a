/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A distributed job's place in it: rank, local rank, world size, the
 * rendezvous master and run, from the environment torchrun (and
 * torch.distributed's env:// init) gives each rank, and the backend, from
 * the collectives it runs. What the Chrome trace's "distributedInfo"
 * (Kineto's key, which HTA's multi-rank analyses need), the table's
 * header, the output file names and the fleet's labels say.
 */
#ifndef RFBPF_MODEL_DISTRIBUTED_H
#define RFBPF_MODEL_DISTRIBUTED_H

#include <stdbool.h>
#include <stddef.h>

struct dist_info {
	int rank, local_rank, world_size;	/* -1: not known */
	char master_addr[64], master_port[16], run_id[64];
	char backend[16];	/* "gloo", "nccl"; "" until a collective ran */
};

void dist_info_init(struct dist_info *d);
/* Fills d from an environment block (NUL-separated NAME=VALUE strings,
 * as /proc/PID/environ holds): RANK, LOCAL_RANK, WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID. A value that is no
 * number where one is due is left unknown. */
void dist_info_from_environ(struct dist_info *d, const char *env,
			    size_t len);
/* Notes the backend of a collective's name ("gloo:all_reduce"). */
void dist_info_saw_collective(struct dist_info *d, const char *name);
/* Whether the job is distributed as far as rfbpf can tell. */
bool dist_info_known(const struct dist_info *d);
/* "rank 1 of 3 (local rank 1), backend gloo, master 10.0.0.1:29500, run
 * abc" with what is known. */
void dist_info_describe(const struct dist_info *d, char *buf, size_t len);

#endif
