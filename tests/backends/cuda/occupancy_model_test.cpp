// cuda::occupancy: the toolkit's calculator on sm_90 figures, checked against counts worked out
// by hand from the Hopper limits (64 warps, 32 blocks, 64K registers in 4 sub-partitions
// allocated per warp in units of 256, 228 KiB of shared memory with 1 KiB reserved per block).
#include "backends/cuda/occupancy_model.h"

#include <gtest/gtest.h>

namespace decodebench::cuda {
namespace {

KernelResources resources(int registers, int threads, std::size_t static_smem = 0,
                          std::size_t dynamic_smem = 0) {
  return KernelResources{registers, static_smem, dynamic_smem, threads};
}

TEST(Occupancy, WarpsLimitSmallKernels) {
  // 32 registers x 256 threads: 8 warps per block, 64 warps per SM -> 8 blocks (the register
  // file holds exactly 64 warps of 32 registers too).
  const Occupancy o = occupancy(resources(32, 256), hopper_sm());
  EXPECT_EQ(o.ctas_per_sm, 8);
  EXPECT_EQ(o.limited_by, "warps, registers");
  // 16 registers x 1024 threads: 2 blocks, warps alone bind.
  const Occupancy w = occupancy(resources(16, 1024), hopper_sm());
  EXPECT_EQ(w.ctas_per_sm, 2);
  EXPECT_EQ(w.limited_by, "warps");
}

TEST(Occupancy, RegistersAreAllocatedPerSubPartition) {
  // 208 registers: 6656 per warp; a sub-partition's 16384 hold 2 warps, so 8 warps per SM
  // (a whole-SM division, 65536 / 6656 = 9, would be wrong). 4 warps per block -> 2 blocks.
  const Occupancy o = occupancy(resources(208, 128), hopper_sm());
  EXPECT_EQ(o.ctas_per_sm, 2);
  EXPECT_EQ(o.limited_by, "registers");
  // 128 registers: 4096 per warp, 4 per sub-partition, 16 warps -> 4 blocks of 4 warps.
  EXPECT_EQ(occupancy(resources(128, 128), hopper_sm()).ctas_per_sm, 4);
}

TEST(Occupancy, SharedMemoryCountsTheReservedKilobyte) {
  // 56 KiB dynamic + 1 KiB reserved = 57 KiB per block; 228 KiB hold 4.
  const Occupancy four = occupancy(resources(32, 128, 0, 56 * 1024), hopper_sm());
  EXPECT_EQ(four.ctas_per_sm, 4);
  EXPECT_EQ(four.limited_by, "shared memory");
  // 57 KiB + 1 KiB = 58 KiB: only 3 fit.
  EXPECT_EQ(occupancy(resources(32, 128, 0, 57 * 1024), hopper_sm()).ctas_per_sm, 3);
}

TEST(Occupancy, ABlockThatCannotFitGivesZeroOrAnError) {
  // More shared memory than one block may opt into.
  const Occupancy o = occupancy(resources(32, 128, 0, 300 * 1024), hopper_sm());
  EXPECT_EQ(o.ctas_per_sm, 0);
  EXPECT_FALSE(o.error.empty());
  // More threads than a block may have.
  const Occupancy big = occupancy(resources(32, 2048), hopper_sm());
  EXPECT_EQ(big.ctas_per_sm, 0);
  EXPECT_FALSE(big.error.empty());
}

TEST(Occupancy, UnknownComputeCapabilityIsNamed) {
  SmSpec sm = hopper_sm();
  sm.cc_major = 1;
  const Occupancy o = occupancy(resources(32, 128), sm);
  EXPECT_EQ(o.ctas_per_sm, 0);
  EXPECT_NE(o.error.find("1.0"), std::string::npos) << o.error;
}

}  // namespace
}  // namespace decodebench::cuda
