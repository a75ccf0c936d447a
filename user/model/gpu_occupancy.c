// SPDX-License-Identifier: BSD-2-Clause
/* Kineto's occupancy estimate: gpu_occupancy.h says how. */
#include "gpu_occupancy.h"

/* Registers are given to a warp in units of this many. */
#define REG_UNIT 256u
/* Shared memory is given to a block in units of this many bytes. */
#define SHARED_UNIT 128u

static uint64_t round_up(uint64_t v, uint64_t unit)
{
	return (v + unit - 1) / unit * unit;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

bool gpu_estimate_occupancy(const struct rf_gpu_device *d,
			    const int32_t grid[3], const int32_t block[3],
			    uint32_t registers_per_thread,
			    uint32_t shared_bytes, struct gpu_occupancy *o)
{
	uint64_t threads, warps, grid_blocks, fit;

	if (!d->sm_count || !d->warp_size || !d->max_threads_per_sm ||
	    !d->max_blocks_per_sm || block[0] <= 0 || block[1] <= 0 ||
	    block[2] <= 0 || grid[0] <= 0 || grid[1] <= 0 || grid[2] <= 0)
		return false;
	threads = (uint64_t)block[0] * (uint64_t)block[1] * (uint64_t)block[2];
	grid_blocks = (uint64_t)grid[0] * (uint64_t)grid[1] *
		      (uint64_t)grid[2];
	warps = (threads + d->warp_size - 1) / d->warp_size;
	/* By warps, and by the blocks an SM keeps. */
	fit = min_u64(d->max_threads_per_sm / d->warp_size / warps,
		      d->max_blocks_per_sm);
	if (registers_per_thread && d->regs_per_sm) {
		uint64_t per_warp = round_up((uint64_t)registers_per_thread *
					     d->warp_size, REG_UNIT);

		if (d->regs_per_block && per_warp * warps > d->regs_per_block)
			return false;	/* could not have run */
		fit = min_u64(fit, d->regs_per_sm / per_warp / warps);
	}
	if (d->shared_per_sm) {
		uint64_t per_block = round_up((uint64_t)shared_bytes +
					      d->reserved_shared_per_block,
					      SHARED_UNIT);

		if (per_block)
			fit = min_u64(fit, d->shared_per_sm / per_block);
	}
	o->max_blocks = (uint32_t)fit;
	o->blocks_per_sm = (double)grid_blocks / d->sm_count;
	o->warps_per_sm = o->blocks_per_sm * (double)warps;
	o->percent = 100.0 * (o->blocks_per_sm < (double)fit ?
			      o->blocks_per_sm : (double)fit) *
		     (double)threads / d->max_threads_per_sm;
	if (o->percent > 100.0)
		o->percent = 100.0;
	return true;
}
