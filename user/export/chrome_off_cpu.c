// SPDX-License-Identifier: BSD-2-Clause
/*
 * --off-cpu in the Chrome trace: each interval a traced thread spent off
 * CPU is a slice on the thread's own track, inside the op it happened in,
 * named by why ("off CPU: sleeping"); a wakeup by a traced thread's op is
 * a flow from that op (at the wakeup) to the slice's end, where the woken
 * thread ran again.
 */
#include "chrome_events.h"

void chrome_write_off_cpu(struct chrome_writer *w, const struct trace *t,
			  const struct off_cpu_interval *iv)
{
	FILE *f = w->f;
	uint64_t id;

	fprintf(f, "%s{\"ph\":\"X\",\"cat\":\"off_cpu\",\"name\":\"off CPU: "
		"%s\",\"pid\":%u,\"tid\":%u,\"ts\":", chrome_next(w),
		off_cpu_reason_name(iv->reason), iv->pid, iv->tid);
	chrome_ts(w, iv->start_ns);
	fputs(",\"dur\":", f);
	json_us(f, iv->end_ns - iv->start_ns);
	fprintf(f, ",\"args\":{\"reason\":\"%s\"",
		off_cpu_reason_name(iv->reason));
	if (iv->op_name != UINT32_MAX) {
		fputs(",\"op\":", f);
		json_string(f, names_get(&t->names, iv->op_name));
		fprintf(f, ",\"External id\":%lld", (long long)iv->op_id + 1);
	}
	if (iv->waker_tid) {
		fprintf(f, ",\"waker tid\":%u,\"waker pid\":%u,\"waker\":",
			iv->waker_tid, iv->waker_pid);
		json_string(f, iv->waker_comm);
	} else if (iv->wake_ns) {
		fputs(",\"waker\":", f);	/* "[interrupt]" */
		json_string(f, iv->waker_comm);
	}
	if (iv->waker_op_name != UINT32_MAX) {
		fputs(",\"waker op\":", f);
		json_string(f, names_get(&t->names, iv->waker_op_name));
	}
	fputs("}}", f);
	if (iv->waker_op_name == UINT32_MAX || !iv->wake_ns)
		return;
	/* "s" binds to the waker's op, enclosing the wakeup on its thread;
	 * "f" to the off-CPU slice, enclosing its last nanosecond. */
	id = ++w->flows;
	fprintf(f, "%s{\"ph\":\"s\",\"cat\":\"wakeup\",\"name\":\"wakeup\","
		"\"id\":%llu,\"pid\":%u,\"tid\":%u,\"ts\":", chrome_next(w),
		(unsigned long long)id, iv->waker_pid, iv->waker_tid);
	chrome_ts(w, iv->wake_ns);
	fprintf(f, "}%s{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"wakeup\","
		"\"name\":\"wakeup\",\"id\":%llu,\"pid\":%u,\"tid\":%u,\"ts\":",
		chrome_next(w), (unsigned long long)id, iv->pid, iv->tid);
	chrome_ts(w, iv->end_ns > iv->start_ns ? iv->end_ns - 1 : iv->end_ns);
	fputs("}", f);
}
