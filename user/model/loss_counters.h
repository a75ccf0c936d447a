/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What a trace lost or could not pair, defined once. Each output that
 * reports it reads this table, so a counter is spelled the same way, in
 * the same order, everywhere: the table's "Lost or unpaired" line
 * (format_losses), the Chrome trace's otherData (export/chrome.c) and the
 * reasons of rfbpf_job_ops_unpaired_total (fleet/fleet_metrics.c).
 *
 * X(field, kind, JSON key, metric reason, table words, what it counts)
 * - field: a uint64_t of struct counts, declared from this table;
 * - kind: LOSS_OP for a count of its own, LOSS_CUT for one of the ways an
 *   op was cut short (the table groups them under "truncated ops", the
 *   trace adds their sum, counts_truncated());
 * - metric reason: NULL where the metric has no such reason (drops have a
 *   metric of their own; nothing is open at detach in fleet mode);
 * - table words: NULL where the table says it otherwise (out of memory is
 *   shouted, not counted).
 */
#ifndef RFBPF_LOSS_COUNTERS_H
#define RFBPF_LOSS_COUNTERS_H

#define RF_LOSS_COUNTERS(X) \
	X(drops, LOSS_OP, "drops", NULL, "drops", \
	  "events the ring buffer had no room for") \
	X(unmatched_ends, LOSS_OP, "unmatched_ends", "unmatched_end", \
	  "unmatched ends", "end() with no open before()") \
	X(repeated_ends, LOSS_OP, "repeated_ends", "repeated_end", \
	  "repeated ends", "a second end() of one op") \
	X(async_ends, LOSS_OP, "async_ends", "async_end", "async ends", \
	  "end() on another thread than the op's before()") \
	X(ends_begun_untraced, LOSS_OP, "ends_begun_before_tracing", \
	  "end_begun_before_tracing", "ends of ops begun before tracing", \
	  "the end of an op that began before its process was traced") \
	X(open_at_detach, LOSS_CUT, "open_at_detach", NULL, "open at detach", \
	  "ops still open when rfbpf detached") \
	X(open_at_thread_exit, LOSS_CUT, "open_at_thread_exit", \
	  "open_at_thread_exit", "at thread exit", \
	  "ops open when their thread exited") \
	X(closed_by_parent, LOSS_CUT, "closed_by_parent", "closed_by_parent", \
	  "closed by parent", "ops whose parent ended before them") \
	X(replaced, LOSS_CUT, "replaced", "replaced", "replaced", \
	  "ops whose RecordFunction was reused before their end") \
	X(names_truncated, LOSS_OP, "names_truncated", "name_truncated", \
	  "names truncated", "op names cut at the event's name size") \
	X(name_faults, LOSS_OP, "name_faults", "name_unreadable", \
	  "unreadable names", "op names the probe could not read") \
	X(nvtx_pops_unmatched, LOSS_OP, "nvtx_pops_unmatched", \
	  "nvtx_pop_unmatched", "unmatched NVTX pops", \
	  "NVTX range pops with no range pushed since the attach") \
	X(oom, LOSS_OP, "out_of_memory", "out_of_memory", NULL, \
	  "events lost because the loader could not allocate")

enum loss_kind { LOSS_OP, LOSS_CUT };

#define RF_LOSS_FIELD(field, kind, json, reason, words, help) uint64_t field;
#define RF_LOSS_ONE(field, kind, json, reason, words, help) + 1
enum { RF_LOSS_NR = 0 RF_LOSS_COUNTERS(RF_LOSS_ONE) };

#endif
