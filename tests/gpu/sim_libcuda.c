// SPDX-License-Identifier: BSD-2-Clause
/*
 * A stand-in libcuda.so.1 for tests: the driver calls the CUPTI agent
 * makes to learn what the GPU is (cupti/devices.c), answered as an H100
 * SXM's driver answers them, with no GPU behind it. The stand-in
 * libcudart needs it, as the real one needs the driver, so a job that
 * loads one has both.
 */
#include <stdio.h>
#include <string.h>
#include <cuda.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT CUresult cuDeviceGetCount(int *count)
{
	*count = 1;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a,
				     CUdevice device)
{
	static const struct { CUdevice_attribute a; int v; } h100[] = {
		{ CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132 },
		{ CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048 },
		{ CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024 },
		{ CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 32 },
		{ CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536 },
		{ CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536 },
		{ CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
		  233472 },
		{ CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152 },
		{ CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
		  232448 },
		{ CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 1024 },
		{ CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32 },
		{ CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9 },
		{ CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0 },
	};

	if (device != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	for (size_t i = 0; i < sizeof(h100) / sizeof(h100[0]); i++)
		if (h100[i].a == a)
			return *v = h100[i].v, CUDA_SUCCESS;
	return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice device)
{
	if (device != 0 || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "Stand-in H100 80GB HBM3");
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device)
{
	if (device != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*bytes = (size_t)80 << 30;
	return CUDA_SUCCESS;
}
