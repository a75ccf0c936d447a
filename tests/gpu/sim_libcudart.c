// SPDX-License-Identifier: BSD-2-Clause
/*
 * A stand-in libcudart.so.12 for tests: what makes a process a CUDA job
 * to rfbpf (a libcudart or libcuda in its maps), with no GPU behind it.
 * A job loads it (tests/workloads/cuda_job.py) and rfbpf, attaching,
 * loads its CUPTI agent into the job (user/gpu/inject.h).
 */
#define EXPORT __attribute__((visibility("default")))

/* What CUDA 12.4's runtime says of its version. */
EXPORT int cudaRuntimeGetVersion(int *version)
{
	*version = 12040;
	return 0;
}

/* cudaErrorNoDevice: there is none. */
EXPORT int cudaGetDeviceCount(int *count)
{
	*count = 0;
	return 100;
}
