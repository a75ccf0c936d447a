/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rfbpf --continuous: one daemon per host. It finds every PyTorch process
 * (--all, within 2 s of its start) or the ones named (-p), switches
 * RecordFunction on in each at the sampling its budget allows, and every
 * --interval writes a pprof profile and Prometheus metrics and serves them
 * over HTTP. It holds aggregates and distinct stacks, never ops, so it can
 * run for months. SIGTERM or SIGINT switches every process off and exits
 * 0; SIGHUP re-reads --config.
 */
#ifndef RFBPF_FLEET_DAEMON_H
#define RFBPF_FLEET_DAEMON_H

#include "cli.h"

/* Runs until a stop signal. argv is kept for SIGHUP. Returns the exit
 * status (1 with one line on stderr if it could not start). */
int fleet_run(const struct options *opt, int argc, char **argv);

#endif
