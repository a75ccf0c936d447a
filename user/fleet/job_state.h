/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One PyTorch process traced by the fleet daemon: a session with
 * RecordFunction switched on at the sampling probability the budget
 * chose, and what the exports need from it. This header holds the state
 * alone; the operations on it come in job.h (the job's life: job.c),
 * job_ops.h (its counters), job_window.h (its full-trace windows) and
 * job_bursts.h (--bursts).
 *
 * Estimators (what feeds each export, and why it is sound):
 * - Calls, inclusive time and the latency histogram: every op that closes
 *   counts 1/p, p being the sampling in force (1 inside a window).
 *   RecordFunction keeps each op independently with probability p, so the
 *   sums are unbiased (Horvitz-Thompson) at any p. Calls and inclusive
 *   time also get standard errors, from unbiased variance estimates
 *   (job_op_add).
 * - Self time and stacks: sampled ops cannot give them (the unsampled ops
 *   in between are invisible), so they come only from a full-trace window
 *   per interval, started at a uniformly random moment of the interval:
 *   every instant of self time then has the same chance L/T of falling in
 *   a window of length L, and scaling the self time inside the window
 *   (window_self.h: by time, clipped to the window, so one thread never
 *   shows more than T) by T/L is unbiased. When the budget cannot pay for
 *   a window every interval, a window stands for a span of several,
 *   placed at random in the span and scaled by span/L. L is the job's
 *   time, not the window's: traced fully, the job runs slower, and its
 *   self times are without the probe cost, so L is the window's length
 *   less the probe time its ops spent, spread over the threads that ran
 *   (window_self_length). Windows are switched on and off by
 *   re-registering the callback at p = 1 and back.
 */
#ifndef RFBPF_FLEET_JOB_STATE_H
#define RFBPF_FLEET_JOB_STATE_H

#include <stdbool.h>
#include <sys/types.h>
#include "attach/control_block.h"
#include "fleet/discovery.h"
#include "fleet/job_capture.h"
#include "export/flight_recorder.h"
#include "fleet/window_self.h"
#include "model/aggregate.h"
#include "model/stack_profile.h"
#include "session/session.h"

/* --bursts: one measured part of a burst, [a, b), and the callback's
 * on-period it lies in, [on, off) (CLOCK_MONOTONIC ns). */
struct job_burst {
	uint64_t on, a, b;
	bool opened, closed;
};
#define JOB_MAX_BURSTS 512	/* a interval's, at most */

/* Estimated totals since the job was first traced, per op name: the
 * counters of the metrics, and what their standard errors come from. */
struct job_op {
	double calls;
	double total_s, self_s;
	/* Variance estimates of calls and total_s (see job_op_add). Self
	 * time has none: one window stands for its span, and a single
	 * cluster gives no estimate of the variance between clusters. */
	double calls_var, total_var;
	double latency[AGG_LATENCY_BUCKETS];	/* estimated calls per bucket */
	/* --bursts: what the op did in the burst being read (calls, total
	 * and self seconds, unscaled), and the interval's sums of those and
	 * of their squares over its bursts (job_ops_burst_fold): the
	 * variance comes from the spread between bursts. */
	double in_burst[3], burst_sum[3], burst_sum2[3];
	bool touched;
	double self_var;
	/* --bursts: estimated seconds its calls spent in CUDA synchronize
	 * calls (its own or in ops nested in it), weighed as total_s. */
	double gpu_wait_s;
	/* Estimated bytes its calls' tensors held, weighed as calls (its
	 * input records: collectives', or every op's with --shapes). */
	double bytes;
	/* --memory, --bursts: estimated bytes allocated while it was the
	 * innermost op (job_share_allocations), and the byte-sampled bytes
	 * of this interval's bursts' measured parts that were. */
	double alloc_bytes, alloc_in_bursts;
};
enum { BURST_CALLS, BURST_TOTAL, BURST_SELF };

struct job {
	struct session s;
	struct options opt;	/* the daemon's, with this pid and p */
	struct torch_process proc;	/* as discovery found it */
	double p;		/* RecordFunction's sampling outside windows */
	bool fixed_p;		/* the job's CUPTI agent owns the callback */
	/* The window of this interval: [window_at, window_at + window_s). */
	double window_at, window_s;
	bool in_window, window_done;
	bool whole_interval;	/* the whole job fits the budget: p = 1 */
	/* The last window, CLOCK_MONOTONIC ns: ops that began in it were
	 * recorded at p = 1 (off is UINT64_MAX while it is open). */
	uint64_t win_on_ns, win_off_ns;
	uint64_t run_from_ns;	/* the job ran again after the window's
				 * first stop */
	uint64_t cut_ns;	/* an open window was counted up to here */
	double window_time;	/* seconds of window in this span */
	double window_in_interval;	/* ...and in this interval */
	double window_scale;	/* what the stacks of the interval that
				 * just ended are scaled by (0: none yet) */
	double span_start, span_s;	/* the window stands for this span */
	double hold_s;		/* a re-registration's stop, measured */
	double search_s;	/* ...and the search for its safe point: a
				 * window is closed that much early */
	struct stack_profile window_stacks;	/* the window's stacks */
	/* --memory: the live blocks that kept a stack, by stack (made anew
	 * at each interval's end). */
	struct stack_profile inuse_stacks;
	struct aggregate window_agg;		/* the window's self times */
	struct window_self self;	/* ...counted by time (window_self.h) */
	/* Counters. */
	struct job_op *ops;	/* by series; series max_ops is [other] */
	size_t nr_ops, cap_ops;
	struct u64map series;	/* name id + 1 -> series */
	uint32_t *series_name;	/* series -> name id */
	size_t nr_series;
	uint64_t sampled_closed;	/* ops closed outside windows, this
					 * interval */
	uint64_t closed_in_interval;	/* every op closed, this interval */
	double read_cpu_s;	/* rfbpf's CPU reading its events, this
				 * interval */
	double loader_ns_per_op;	/* rfbpf's own CPU per traced op,
					 * measured (0: not yet) */
	double interval_start;
	double cpu_s_prev;	/* the job's CPU seconds at interval start */
	double cpu_rate, op_rate;	/* measured over the last interval */
	double est_overhead;	/* share of its CPU tracing costs, planned */
	uint64_t reregistrations, windows;
	uint64_t drops_prev;
	bool bias_logged;	/* the sampler-bias line was logged */
	int setup_err;		/* job_start: -errno of a failed activation */
	uint64_t mem_hits_prev;	/* --memory: BPF's allocator probe hits at
				 * the last interval's end */
	/* --memory, --bursts: the byte-sampled bytes made in this
	 * interval's measured parts (op or not), the job's estimated bytes
	 * at the last interval's end, and those no burst has shared out
	 * yet. */
	double alloc_in_bursts, alloc_bytes_prev, alloc_pending;
	uint64_t switches_prev;	/* --off-cpu: BPF's switch count at the
				 * last interval */
	double steps_exported;	/* estimated steps at the last export
				 * (fleet_collectives.c) */
	/* --bursts (job_bursts.c): the control thread switches the
	 * callback; every op recorded began in a burst. */
	bool bursts;
	struct job_burst burst[JOB_MAX_BURSTS];	/* this interval's */
	size_t nr_bursts, next_open, next_close;
	struct control_burst period[JOB_MAX_BURSTS];	/* on-periods */
	size_t nr_periods, next_period;
	uint64_t period_seq0;	/* the thread's count of bursts before
				 * this interval's */
	double burst_weight;	/* stratum / measured length: an op begun
				 * in a measured part stands for this many */
	uint64_t bursts_total, bursts_skipped, bursts_late;
	uint64_t bursts_dropped;	/* planned periods a capture took */
	uint64_t bursts_counting;	/* of them, counting only */
	/* What a traced op costs the job, measured in it: its CPU and ops
	 * in traced bursts [0] and in bursts that only count [1], decayed
	 * each interval (job_bursts.c) */
	double price_cpu[2], price_ops[2], price_n[2], price_wall[2];
	double measured_cost;	/* 1 - (CPU per op counted) / (per op
				 * traced); NAN until measured */
	double calls_scale;	/* ops per second counted / traced: the
				 * ops a traced burst's time stands for
				 * (1 until measured) */
	double burst_cost;	/* f as the last plan priced it */
	uint32_t *touched;	/* series with something in this burst */
	size_t nr_touched, cap_touched;
	size_t bursts_folded;	/* bursts read this interval */
	/* GET /debug/rfbpf/trace (job_capture.c), and the bursts it
	 * handed the thread this interval (not planned periods). */
	struct job_capture capture;
	/* --flight-recorder (job_recorder.c), or NULL. */
	struct flight_recorder *recorder;
	/* The control thread's numbers of those bursts, in order: the
	 * planned periods' results are matched past them (job_bursts.c). */
	uint64_t *capture_seqs;
	size_t nr_capture_seqs, cap_capture_seqs;
	/* what a switch costs: the control thread's CPU per switch,
	 * measured, and when last read */
	double switch_ns;
	uint64_t ctl_cpu_prev, ctl_switches_prev;
};

#endif
