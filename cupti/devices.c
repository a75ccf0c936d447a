// SPDX-License-Identifier: BSD-2-Clause
/*
 * What each GPU is, for the tracer: the numbers Kineto's occupancy
 * estimate and its "deviceProperties" need, read from the job's own CUDA
 * driver (cuDeviceGetAttribute) and handed to rfbpf_probe_gpu_device.
 *
 * The agent never loads or starts the driver: it looks only for a
 * libcuda.so.1 already in the process (RTLD_NOLOAD), and asks only after
 * the job made a CUDA call the agent saw (so cuInit has run: asking
 * earlier could block on the driver's initialisation, or find nothing).
 * It asks from its own thread, with no lock of its own held, since the
 * driver may take its locks. The attribute calls only read.
 */
#include <dlfcn.h>
#include <string.h>
#include <cuda.h>
#include "control.h"
#include "devices.h"
#include "probes.h"

/* Enough for any machine's GPUs; more are not reported. */
#define MAX_DEVICES 64

struct driver {
	CUresult (*get_count)(int *);
	CUresult (*get)(CUdevice *, int);
	CUresult (*get_attribute)(int *, CUdevice_attribute, CUdevice);
	CUresult (*get_name)(char *, int, CUdevice);
	CUresult (*total_mem)(size_t *, CUdevice);
};

/* One attribute of a device; 0 when the driver does not say. */
static int driver_attr(int attribute, int ordinal, void *ctx)
{
	const struct driver *drv = ctx;
	CUdevice dev;
	int v = 0;

	if (drv->get(&dev, ordinal) != CUDA_SUCCESS ||
	    drv->get_attribute(&v, (CUdevice_attribute)attribute, dev) !=
	    CUDA_SUCCESS)
		return 0;
	return v;
}

void rf_device_fill(struct rf_gpu_device *d, int ordinal,
		    int (*attr)(int attribute, int ordinal, void *ctx),
		    void *ctx)
{
#define A(a) (uint32_t)attr(CU_DEVICE_ATTRIBUTE_##a, ordinal, ctx)
	*d = (struct rf_gpu_device){
		.abi_version = RF_GPU_ABI_VERSION,
		.size = sizeof(*d),
		.device_id = (uint32_t)ordinal,
		.sm_count = A(MULTIPROCESSOR_COUNT),
		.max_threads_per_sm = A(MAX_THREADS_PER_MULTIPROCESSOR),
		.max_threads_per_block = A(MAX_THREADS_PER_BLOCK),
		.max_blocks_per_sm = A(MAX_BLOCKS_PER_MULTIPROCESSOR),
		.regs_per_sm = A(MAX_REGISTERS_PER_MULTIPROCESSOR),
		.regs_per_block = A(MAX_REGISTERS_PER_BLOCK),
		.shared_per_sm = A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
		.shared_per_block = A(MAX_SHARED_MEMORY_PER_BLOCK),
		.shared_per_block_optin = A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
		.reserved_shared_per_block =
			A(RESERVED_SHARED_MEMORY_PER_BLOCK),
		.warp_size = A(WARP_SIZE),
		.cc_major = A(COMPUTE_CAPABILITY_MAJOR),
		.cc_minor = A(COMPUTE_CAPABILITY_MINOR),
	};
#undef A
}

static bool find_driver(struct driver *drv)
{
	void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);

	if (!h)
		return false;
	drv->get_count = (CUresult (*)(int *))dlsym(h, "cuDeviceGetCount");
	drv->get = (CUresult (*)(CUdevice *, int))dlsym(h, "cuDeviceGet");
	drv->get_attribute = (CUresult (*)(int *, CUdevice_attribute,
					   CUdevice))
		dlsym(h, "cuDeviceGetAttribute");
	drv->get_name = (CUresult (*)(char *, int, CUdevice))
		dlsym(h, "cuDeviceGetName");
	drv->total_mem = (CUresult (*)(size_t *, CUdevice))
		dlsym(h, "cuDeviceTotalMem_v2");
	/* The job's own reference keeps it loaded. */
	dlclose(h);
	return drv->get_count && drv->get && drv->get_attribute;
}

bool rf_devices_report(void)
{
	struct driver drv;
	int n = 0;

	if (!__atomic_load_n(&rfbpf_gpu_control.launches, __ATOMIC_RELAXED))
		return false;		/* no CUDA call seen yet */
	if (!find_driver(&drv) || drv.get_count(&n) != CUDA_SUCCESS)
		return true;		/* no driver to ask: never */
	for (int i = 0; i < n && i < MAX_DEVICES; i++) {
		struct rf_gpu_device d;
		size_t mem = 0;
		CUdevice dev;

		rf_device_fill(&d, i, driver_attr, &drv);
		if (drv.get(&dev, i) == CUDA_SUCCESS) {
			if (drv.get_name &&
			    drv.get_name(d.name, sizeof(d.name), dev) !=
			    CUDA_SUCCESS)
				d.name[0] = 0;
			if (drv.total_mem &&
			    drv.total_mem(&mem, dev) == CUDA_SUCCESS)
				d.total_memory = mem;
		}
		d.name[sizeof(d.name) - 1] = 0;
		rf_probe_gpu_device(&d);
	}
	return true;
}
