/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rfbpf --all (one-shot): every PyTorch process on the host traced at
 * once, as the ranks of a distributed job are. Each process gets its own
 * rfbpf (this binary, run with -p PID and the same options), so that one
 * rank's failure or exit leaves the others traced; -o DIR/ gets one trace
 * each, named by rank; at the end the tables follow one another in rank
 * order, then the ranks' table: steps, collective waits and the rank the
 * others waited for.
 */
#ifndef RFBPF_ALL_PROCESSES_H
#define RFBPF_ALL_PROCESSES_H

#include "cli.h"

/* Runs until every process's rfbpf ended (a stop signal is passed on to
 * them). Returns the exit status: 0 if every one succeeded. */
int all_processes_run(const struct options *opt, int argc, char **argv);

#endif
