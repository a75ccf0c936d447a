// SPDX-License-Identifier: BSD-2-Clause
/*
 * A stand-in libcudart.so.12 for tests: what makes a process a CUDA job
 * to rfbpf (a libcudart or libcuda in its maps), with no GPU behind it.
 * A job loads it (tests/workloads/cuda_job.py) and rfbpf, attaching,
 * loads its CUPTI agent into the job (user/gpu/inject.h).
 *
 * cudaLaunchKernel does what CUDA does for CUPTI: if a CUPTI is loaded in
 * the process (the stand-in, tests/gpu/sim_libcupti.c), the launch goes
 * through its callbacks and activity (sim_cupti_launch). func is the
 * kernel's name here, not a host stub.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

struct dim3 {
	unsigned x, y, z;
};

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

/* The CUPTI loaded in the process, by either soname, whoever loaded it
 * (the agent opens it RTLD_LOCAL: it is not in the global scope). */
static void *loaded_cupti(void)
{
	void *h = dlopen("libcupti.so.13", RTLD_LAZY | RTLD_NOLOAD);

	return h ? h : dlopen("libcupti.so.12", RTLD_LAZY | RTLD_NOLOAD);
}

/* A kernel that "runs" for 20 us. 0: cudaSuccess. */
EXPORT int cudaLaunchKernel(const void *func, struct dim3 grid,
			    struct dim3 block, void **args, size_t shmem,
			    void *stream)
{
	uint32_t (*launch)(const char *, uint64_t);
	void *cupti = loaded_cupti();

	(void)grid, (void)block, (void)args, (void)shmem, (void)stream;
	if (!cupti)
		return 0;
	launch = (uint32_t (*)(const char *, uint64_t))dlsym(cupti,
		"sim_cupti_launch");
	if (launch)
		launch(func, 20000);
	dlclose(cupti);
	return 0;
}
