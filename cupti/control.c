// SPDX-License-Identifier: BSD-2-Clause
/*
 * The control block rfbpf finds by symbol (rfbpf_gpu_control) and the rule
 * it carries: the agent does tracing work only while lease_until_ns, a
 * CLOCK_MONOTONIC deadline rfbpf writes through /proc/PID/mem, lies in the
 * future. rfbpf writes only the lease and flush_request; every other
 * field is the agent's,
 * updated with atomics because rfbpf may read it at any moment.
 *
 * Errors never leave the agent: each failed CUPTI call is counted in
 * `errors` and described on stderr once per call site, so a job whose
 * CUPTI is broken prints a handful of lines, not one per launch.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "control.h"

/* In .data (initialised, not .bss) and exported: rfbpf reads the symbol's
 * address from the ELF and expects the magic there. */
RF_EXPORT __attribute__((used, aligned(64)))
struct rf_gpu_control rfbpf_gpu_control = {
	.magic = RF_GPU_CONTROL_MAGIC,
	.abi_version = RF_GPU_ABI_VERSION,
	.flush_period_ns = 1000000000ull,
};

uint64_t rf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Called on every launch: no clock read at all when no tracer ever came. */
bool rf_lease_active(uint64_t now_ns)
{
	uint64_t until = __atomic_load_n(&rfbpf_gpu_control.lease_until_ns,
					 __ATOMIC_ACQUIRE);

	if (!until)
		return false;
	if (!now_ns)
		now_ns = rf_now_ns();
	return now_ns < until;
}

uint64_t rf_lease_now(void)
{
	uint64_t until = __atomic_load_n(&rfbpf_gpu_control.lease_until_ns,
					 __ATOMIC_ACQUIRE);
	uint64_t now;

	if (!until)
		return 0;
	now = rf_now_ns();
	return now < until ? now : 0;
}

void rf_count(__u64 *counter, uint64_t n)
{
	__atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

void rf_warn_once(int *once, const char *fmt, ...)
{
	char line[256];
	va_list ap;

	if (__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One write: lines from several threads do not interleave. */
	fprintf(stderr, "rfbpf-cupti: %s\n", line);
}

void rf_cupti_failed(CUptiResult res, const char *what, int *once)
{
	const char *name = NULL;

	rf_count(&rfbpf_gpu_control.errors, 1);
	if (__atomic_load_n(once, __ATOMIC_RELAXED))
		return;
	if (!rf_cupti.GetResultString ||
	    rf_cupti.GetResultString(res, &name) != CUPTI_SUCCESS || !name)
		name = "unknown CUPTI error";
	/* `what` is the call's source text: name CUPTI's function only
	 * (rf_cupti.ActivityFlushAll(...) is cuptiActivityFlushAll). */
	if (!strncmp(what, "rf_cupti.", 9))
		rf_warn_once(once, "cupti%.*s failed: %s (%d)",
			     (int)strcspn(what + 9, "("), what + 9, name,
			     (int)res);
	else
		rf_warn_once(once, "%.*s failed: %s (%d)",
			     (int)strcspn(what, "("), what, name, (int)res);
}
