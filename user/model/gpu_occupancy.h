/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Kineto's estimate of how full a kernel kept the GPU's multiprocessors
 * ("est. achieved occupancy %" in torch.profiler's traces), from the
 * kernel's launch shape (CUPTI's record) and what its GPU is (the
 * agent's rf_gpu_device).
 *
 * The theoretical limit is the fewest blocks an SM can hold by each of
 * its four budgets: warps, registers, shared memory and blocks. The
 * estimate then takes the blocks the grid actually gives each SM, if
 * fewer, and says what share of the SM's threads those blocks fill. It
 * uses the allocation rules of the GPUs torch supports (registers by the
 * warp in units of 256, shared memory in units of 128 bytes, plus the
 * driver's reserve per block); CUDA's occupancy calculator also splits
 * registers among an SM's four schedulers, so its answer can be one
 * block lower for register-heavy kernels. It is an estimate, as
 * Kineto's is: it says nothing of stalls or tail effects.
 */
#ifndef RFBPF_GPU_OCCUPANCY_H
#define RFBPF_GPU_OCCUPANCY_H

#include <stdbool.h>
#include <stdint.h>
#include "rfbpf_gpu.h"

struct gpu_occupancy {
	double blocks_per_sm;	/* the grid's blocks over the SMs */
	double warps_per_sm;	/* blocks_per_sm times warps per block */
	double percent;		/* est. achieved occupancy, 0..100 */
	uint32_t max_blocks;	/* resident blocks per SM at most */
};

/* False when the device or the shape does not allow an answer (a field
 * the driver did not give, an empty block, a block that cannot run). */
bool gpu_estimate_occupancy(const struct rf_gpu_device *d,
			    const int32_t grid[3], const int32_t block[3],
			    uint32_t registers_per_thread,
			    uint32_t shared_bytes, struct gpu_occupancy *o);

#endif
