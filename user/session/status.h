/* SPDX-License-Identifier: BSD-2-Clause */
/* The live one-line status on a terminal's stderr. */
#ifndef RFBPF_STATUS_H
#define RFBPF_STATUS_H

#include <stdbool.h>
#include <stdint.h>

struct status {
	bool enabled;
	double last_print_s;
	uint64_t last_ops;
	double last_ops_s;
	double rate;
};

/* Enabled only when stderr is a terminal and not quiet. */
void status_init(struct status *s, bool quiet);
/* Redraws at most 4 times a second. */
void status_update(struct status *s, double elapsed_s, uint64_t events,
		   uint64_t ops, uint64_t drops);
/* Erases the line before anything else is printed. */
void status_clear(struct status *s);

#endif
