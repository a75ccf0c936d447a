// SPDX-License-Identifier: BSD-2-Clause
/* Kineto's occupancy estimate (user/model/gpu_occupancy.c), against
 * answers worked out by hand from the H100's numbers, as CUDA's occupancy
 * calculator gives them for these shapes. */
#include <math.h>
#include "check.h"
#include "model/gpu_occupancy.h"

/* An H100 SXM as its driver describes it. */
static const struct rf_gpu_device h100 = {
	.abi_version = RF_GPU_ABI_VERSION, .size = sizeof(h100),
	.sm_count = 132, .max_threads_per_sm = 2048,
	.max_threads_per_block = 1024, .max_blocks_per_sm = 32,
	.regs_per_sm = 65536, .regs_per_block = 65536,
	.shared_per_sm = 233472, .shared_per_block = 49152,
	.shared_per_block_optin = 232448, .reserved_shared_per_block = 1024,
	.warp_size = 32, .cc_major = 9,
};

static struct gpu_occupancy estimate(int32_t grid_x, int32_t block_x,
				     uint32_t regs, uint32_t shared, bool *ok)
{
	const int32_t grid[3] = { grid_x, 1, 1 }, block[3] = { block_x, 1, 1 };
	struct gpu_occupancy o = { 0 };

	*ok = gpu_estimate_occupancy(&h100, grid, block, regs, shared, &o);
	return o;
}

/* 256 threads of 32 registers: 8 blocks fit by warps and by registers.
 * A grid of 64 blocks gives each of the 132 SMs less than one. */
TEST(small_grid_fills_little)
{
	bool ok;
	struct gpu_occupancy o = estimate(64, 256, 32, 0, &ok);

	CHECK(ok);
	CHECK_EQ_U64(o.max_blocks, 8);
	CHECK(fabs(o.blocks_per_sm - 64.0 / 132) < 1e-9);
	CHECK(fabs(o.warps_per_sm - 8 * 64.0 / 132) < 1e-9);
	CHECK(fabs(o.percent - 100.0 * (64.0 / 132) * 256 / 2048) < 1e-9);
}

/* The same kernel with 16 blocks per SM: 8 resident, all 64 warps. */
TEST(big_grid_is_capped_by_what_fits)
{
	bool ok;
	struct gpu_occupancy o = estimate(132 * 16, 256, 32, 0, &ok);

	CHECK(ok);
	CHECK(fabs(o.blocks_per_sm - 16) < 1e-9);
	CHECK(fabs(o.percent - 100) < 1e-9);
}

/* 128 registers a thread: 4096 a warp, 16 warps an SM, 2 blocks: 25%. */
TEST(registers_limit)
{
	bool ok;
	struct gpu_occupancy o = estimate(132 * 16, 256, 128, 0, &ok);

	CHECK(ok);
	CHECK_EQ_U64(o.max_blocks, 2);
	CHECK(fabs(o.percent - 25) < 1e-9);
}

/* 100 KiB of shared memory plus the driver's 1 KiB: 2 blocks of 128
 * threads, 12.5%. */
TEST(shared_memory_limit)
{
	bool ok;
	struct gpu_occupancy o = estimate(132 * 16, 128, 32, 100 << 10, &ok);

	CHECK(ok);
	CHECK_EQ_U64(o.max_blocks, 2);
	CHECK(fabs(o.percent - 12.5) < 1e-9);
}

/* 32 warps of 4096 registers need twice a block's registers: such a
 * launch fails, so there is no estimate; nor without a device or a
 * block. */
TEST(no_estimate)
{
	const int32_t grid[3] = { 1, 1, 1 }, empty[3] = { 0, 1, 1 };
	const int32_t block[3] = { 32, 1, 1 };
	struct rf_gpu_device unknown = { 0 };
	struct gpu_occupancy o;
	bool ok;

	estimate(1, 1024, 128, 0, &ok);
	CHECK(!ok);
	CHECK(!gpu_estimate_occupancy(&h100, grid, empty, 32, 0, &o));
	CHECK(!gpu_estimate_occupancy(&unknown, grid, block, 32, 0, &o));
}

RUN_TESTS()
