/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What one sampled op costs a traced thread on this host, measured at
 * start: the overhead budget (--budget) rests on it, because the cost of a
 * uprobe differs more than 2x between machines of the same kind.
 *
 * On the callback-stub path a sampled op costs its thread two optimized
 * uprobe hits (the start and end stubs' nop5, rewritten by the kernel into
 * calls into its trampoline), each running one of rfbpf's programs, which
 * reads the op and writes a record into the ring buffer. The calibration
 * reproduces exactly that in rfbpf's own process: its own instance of
 * rfbpf's BPF object (probes_load, filtered to rfbpf's pid, its own ring
 * buffer, drained and counted here), callback_start/callback_end attached
 * with probes_attach_callbacks to stub-shaped functions of rfbpf's binary
 * (calibrate_target.S), called with a RecordFunction-shaped object, in
 * rounds that alternate probed and unprobed calls, timed in the calling
 * thread's CPU time (what a traced thread pays, not what other processes
 * took while it was preempted); the figures are medians of the rounds.
 * Everything is detached and freed before it returns.
 *
 * The object names its op through a FunctionSchema with a name longer
 * than std::string's inline buffer, the dearest of the usual shapes (one
 * user-memory read more than a short or plain-string name).
 *
 * Takes well under a second (mostly loading the BPF object). Call it
 * before rfbpf forks anything: while the probes are attached, rfbpf's
 * own code holds calls into a trampoline a child would not inherit.
 */
#ifndef RFBPF_ATTACH_CALIBRATE_H
#define RFBPF_ATTACH_CALIBRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "model/trace.h"

struct calibration {
	/* start + end hit pair with rfbpf's programs, minus the same calls
	 * without probes */
	double ns_per_sampled_op;
	double ns_per_call_no_probe;	/* baseline per call pair */
	/* of which inside the op's own interval (from its start record's
	 * timestamp to its end record's, around an empty call): the rest
	 * falls outside it, but inside every op around it */
	double ns_inside_op;
	/* The rounds' range (lowest and highest round) of ns_inside_op and
	 * ns_per_sampled_op: how far one calibration can move. */
	double inside_lo, inside_hi, op_lo, op_hi;
	unsigned iterations;		/* probed pairs timed, all rounds */
	/* the kernel optimized the uprobes (nop5 -> call), as on the stub
	 * path; if not, the figure is that of trapping uprobes */
	bool optimized;
	/* records rfbpf's programs wrote in the timed rounds and the
	 * calibration read back, well formed: 2 x iterations unless some
	 * were lost (then the programs did less than in a session) */
	uint64_t events;
};

/* What the calibration says each op's times hold of the probes' cost. */
void calibration_probe_cost(const struct calibration *c,
			    struct probe_cost *cost);

/* Measures, in rfbpf's own process, what one sampled op costs a traced
 * thread on this host. Returns 0 or -errno with a one-line reason in err. */
int calibrate_sampled_op_cost(struct calibration *c, char *err, size_t len);

#endif
