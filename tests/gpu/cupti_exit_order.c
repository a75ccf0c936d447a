// SPDX-License-Identifier: BSD-2-Clause
/*
 * A job that exits while rfbpf holds the lease: the agent's exit work
 * (flush, kinds off, unsubscribe) must run before CUPTI is torn down.
 * The agent opens the stand-in libcupti itself (RFBPF_CUPTI_LIB), as it
 * opens a toolkit's CUPTI in a job that had none mapped, so CUPTI is
 * loaded after InitializeInjection ran. The stand-in registers its
 * teardown when it is loaded, as a C++ library's static destructors are,
 * aborts on any call after it, and (SIM_CUPTI_EXIT_CHECK=1) exits 3 if it
 * is torn down with a subscriber or kind still held. So this program
 * exits 0 only if the agent gave CUPTI back, and before its teardown.
 *
 * Usage: RFBPF_CUPTI_LIB=.../sim/libcupti.so.13 SIM_CUPTI_EXIT_CHECK=1
 *        cupti_exit_order
 *
 * With --no-cupti (RFBPF_CUPTI_LIB naming no file: a job on a machine
 * with no CUPTI anywhere) the agent must still load, see the lease, take
 * nothing and say why: CUPTI_ERROR_NOT_INITIALIZED and no version, and
 * the job exits as it would.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "rfbpf_gpu.h"

extern struct rf_gpu_control rfbpf_gpu_control;
int InitializeInjection(void);

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CUPTI_ERROR_NOT_INITIALIZED (cupti_result.h; not included: this
 * program must build as a job with no toolkit would see the agent). */
#define NO_CUPTI 15u

/* Starts the agent as CUDA would, gives it a lease, and waits up to 5 s
 * for *flag (the agent's thread looks every 100 ms). */
static void start_leased(const uint32_t *flag)
{
	uint64_t deadline = now_ns() + 5000000000ull;

	InitializeInjection();
	__atomic_store_n(&rfbpf_gpu_control.lease_until_ns,
			 now_ns() + 60000000000ull, __ATOMIC_RELEASE);
	while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE) &&
	       now_ns() < deadline) {
		struct timespec t = { 0, 10000000 };

		nanosleep(&t, NULL);
	}
}

static int no_cupti(void)
{
	start_leased(&rfbpf_gpu_control.lease_seen);
	if (!rfbpf_gpu_control.lease_seen ||
	    rfbpf_gpu_control.activity_enabled || rfbpf_gpu_control.cupti_ok ||
	    rfbpf_gpu_control.cupti_version ||
	    rfbpf_gpu_control.cupti_result != NO_CUPTI) {
		printf("tests/gpu/cupti_exit_order.c: FAILED: with no CUPTI: "
		       "lease seen %u, activity %u, cupti_ok %u, version %u, "
		       "result %u\n", rfbpf_gpu_control.lease_seen,
		       rfbpf_gpu_control.activity_enabled,
		       rfbpf_gpu_control.cupti_ok,
		       rfbpf_gpu_control.cupti_version,
		       rfbpf_gpu_control.cupti_result);
		return 1;
	}
	printf("tests/gpu/cupti_exit_order.c: no CUPTI: lease seen, nothing "
	       "taken, said why\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--no-cupti"))
		return no_cupti();
	/* The agent's thread takes CUPTI within a tick. */
	start_leased(&rfbpf_gpu_control.activity_enabled);
	if (!rfbpf_gpu_control.activity_enabled) {
		printf("tests/gpu/cupti_exit_order.c: FAILED: the agent did not "
		       "take the stand-in CUPTI within 5 s\n");
		return 1;
	}
	/* Exits with the lease held and CUPTI taken: the stand-in's
	 * teardown says whether the agent's exit work came first. */
	printf("tests/gpu/cupti_exit_order.c: exiting with CUPTI taken\n");
	fflush(stdout);
	return 0;
}
