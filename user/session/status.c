// SPDX-License-Identifier: BSD-2-Clause
#include <stdio.h>
#include <unistd.h>
#include "session/status.h"

void status_init(struct status *s, bool quiet)
{
	*s = (struct status){ .enabled = !quiet && isatty(STDERR_FILENO) };
}

void status_update(struct status *s, double elapsed_s, uint64_t events,
		   uint64_t ops, uint64_t drops)
{
	if (!s->enabled || elapsed_s - s->last_print_s < 0.25)
		return;
	if (elapsed_s > s->last_ops_s)
		s->rate = (ops - s->last_ops) / (elapsed_s - s->last_ops_s);
	s->last_ops = ops;
	s->last_ops_s = elapsed_s;
	s->last_print_s = elapsed_s;
	fprintf(stderr, "\r\033[K[rfbpf] %7.1fs  events %llu  ops/s %.0f  "
		"drops %llu", elapsed_s, (unsigned long long)events, s->rate,
		(unsigned long long)drops);
	fflush(stderr);
}

void status_clear(struct status *s)
{
	if (s->enabled && s->last_print_s > 0) {
		fprintf(stderr, "\r\033[K");
		fflush(stderr);
	}
}
