// SPDX-License-Identifier: BSD-2-Clause
/*
 * A stand-in libcudart.so.12 for tests: what makes a process a CUDA job
 * to rfbpf (a libcudart or libcuda in its maps), with no GPU behind it.
 * It needs the stand-in libcuda.so.1 (sim_libcuda.c), which describes
 * the GPU to the agent.
 * A job loads it (tests/workloads/cuda_job.py) and rfbpf, attaching,
 * loads its CUPTI agent into the job (user/gpu/inject.h).
 *
 * cudaLaunchKernel does what CUDA does for CUPTI: if a CUPTI is loaded in
 * the process (the stand-in, tests/gpu/sim_libcupti.c), the launch goes
 * through its callbacks and activity (sim_cupti_launch). func is the
 * kernel's name here, not a host stub. cudaStreamSynchronize waits 2 ms,
 * inside CUPTI's callbacks if one is loaded (sim_cupti_stream_sync).
 * cudaMemcpyAsync and cudaMemsetAsync work on host memory (the "device"
 * is the host here) and go through CUPTI as a host-to-device copy and a
 * device set do (sim_cupti_copy, sim_cupti_set).
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

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

/* The loaded CUPTI's function name, or NULL. */
static void *cupti_function(const char *name)
{
	void *cupti = loaded_cupti(), *fn;

	if (!cupti)
		return NULL;
	fn = dlsym(cupti, name);
	dlclose(cupti);		/* the agent's reference keeps it */
	return fn;
}

/* Waits 2 ms for the "GPU". 0: cudaSuccess. */
EXPORT int cudaStreamSynchronize(void *stream)
{
	uint32_t (*sync)(uint64_t) =
		(uint32_t (*)(uint64_t))cupti_function("sim_cupti_stream_sync");
	struct timespec ts = { 0, 2000000 };

	(void)stream;
	if (sync)
		sync(2000000);
	else
		nanosleep(&ts, NULL);
	return 0;
}

/* A kernel that "runs" for 20 us. 0: cudaSuccess. */
EXPORT int cudaLaunchKernel(const void *func, struct dim3 grid,
			    struct dim3 block, void **args, size_t shmem,
			    void *stream)
{
	uint32_t (*launch)(const char *, uint64_t) =
		(uint32_t (*)(const char *, uint64_t))cupti_function(
			"sim_cupti_launch");

	(void)grid, (void)block, (void)args, (void)shmem, (void)stream;
	if (launch)
		launch(func, 20000);
	return 0;
}

/* cudaMemcpyKind's cudaMemcpyHostToDevice: the only kind played. */
#define HOST_TO_DEVICE 1

/* A copy "to the device" (host memory here) that takes 10 us, as a
 * pageable one (pinned: 1 for a pinned source, the stand-in cannot tell).
 * 0: cudaSuccess; 1 (cudaErrorInvalidValue) for another kind. */
EXPORT int cudaMemcpyAsync(void *dst, const void *src, size_t count,
			   int kind, void *stream)
{
	uint32_t (*copy)(uint64_t, int, uint64_t) =
		(uint32_t (*)(uint64_t, int, uint64_t))cupti_function(
			"sim_cupti_copy");

	(void)stream;
	if (kind != HOST_TO_DEVICE)
		return 1;
	memcpy(dst, src, count);
	if (copy)
		copy(count, 0, 10000);
	return 0;
}

/* A set of "device" (host here) memory that takes 5 us. */
EXPORT int cudaMemsetAsync(void *dst, int value, size_t count, void *stream)
{
	uint32_t (*set)(uint64_t, uint32_t, uint64_t) =
		(uint32_t (*)(uint64_t, uint32_t, uint64_t))cupti_function(
			"sim_cupti_set");

	(void)stream;
	memset(dst, value, count);
	if (set)
		set(count, (uint32_t)value, 5000);
	return 0;
}
