// The CUDA backend's decisions that need no GPU (src/backends/cuda/cuda_plan.h), its error
// checks (cuda_check.h), and how it behaves on a machine without a device.
#include "backends/cuda/cuda_plan.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/hopper_split_instances.h"
#include "backends/cuda/occupancy_model.h"
#include "common/errors.h"
#include "common/units.h"
#include "kernels.h"
#include "results/self_check.h"
#include "workload/workload.h"

namespace decodebench::cuda {
namespace {

namespace k = kernels;

ModelShape llama_8b() { return {"llama-3.1-8b", 32, 8, 128, 32, ""}; }

WorkloadSpec spec_of(ModelShape m, int batch, int context, DType kv = DType::f16) {
  WorkloadSpec s;
  s.model = std::move(m);
  s.batch = batch;
  s.context = ContextSpec::fixed(context);
  s.kv_dtype = kv;
  s.block_size = 16;
  return s;
}

// ---- theoretical bandwidth, buffer sizes ---------------------------------------------------

TEST(CudaPlan, TheoreticalBandwidthFromClockAndBus) {
  // H100 SXM: HBM3 at 2619 MHz on a 5120-bit bus.
  EXPECT_NEAR(theoretical_bandwidth(2'619'000, 5120), 3.352e12, 1e9);
  // H200: 3201 MHz (HBM3e) x 6144 bit = 4.92 TB/s.
  EXPECT_NEAR(theoretical_bandwidth(3'201'000, 6144), 4.917e12, 1e9);
  EXPECT_EQ(theoretical_bandwidth(0, 5120), 0);  // not reported: unknown, not a guess
  EXPECT_EQ(theoretical_bandwidth(2'619'000, 0), 0);
}

TEST(CudaPlan, CeilingBuffersAreAtLeastEightTimesL2) {
  const std::size_t h100_l2 = 50 * 1024 * 1024;
  const std::size_t b = ceiling_buffer_bytes(h100_l2);
  EXPECT_GE(b, 8 * h100_l2);
  EXPECT_EQ(b % (1 << 20), 0u);
  EXPECT_EQ(ceiling_buffer_bytes(60'000'000 + 3) % 16, 0u);  // odd L2 sizes still give 16-multiples
  EXPECT_GE(ceiling_buffer_bytes(60'000'000 + 3), 480'000'024u);
  EXPECT_EQ(ceiling_buffer_bytes(0), kMinCeilingBufferBytes);  // no L2 reported: the floor
  // Capping to free memory: three buffers plus the headroom fit.
  const std::size_t free_bytes = std::size_t{1} << 30;
  const std::size_t fit = ceiling_buffer_bytes_that_fit(free_bytes);
  EXPECT_GT(fit, 0u);
  EXPECT_LE(3 * fit + kMemoryHeadroomBytes, free_bytes);
  EXPECT_EQ(fit % (1 << 20), 0u);
  EXPECT_EQ(ceiling_buffer_bytes_that_fit(kMemoryHeadroomBytes), 0u);
}

// ---- memory footprint and the skip reason --------------------------------------------------

TEST(CudaPlan, FootprintOfLlama8bBatch64Context8k) {
  // h = 0: every sequence has its own 8192 / 16 = 512 blocks.
  const WorkloadSpec spec = spec_of(llama_8b(), 64, 8192);
  const PagedLayout layout = build_layout(spec);
  ASSERT_EQ(layout.num_blocks, 64 * 512);
  k::KernelInfo plain;
  plain.name = "plain";
  const PointFootprint f =
      point_footprint(shape_params(spec, layout), plain, k::ResidentCtas{132, 3});
  EXPECT_EQ(f.q, 64u * 32 * 128 * 2);
  EXPECT_EQ(f.out, f.q);
  EXPECT_EQ(f.k_cache, 32768ull * 8 * 16 * 128 * 2);  // 1 GiB
  EXPECT_EQ(f.v_cache, f.k_cache);
  EXPECT_EQ(f.block_tables, 64u * layout.max_blocks_per_seq * 4);
  EXPECT_EQ(f.context_lens, 64u * 4);
  EXPECT_EQ(f.workspace, 0u);
  EXPECT_EQ(f.num_splits, 1);
  EXPECT_EQ(f.total(), f.q + f.out + f.k_cache + f.v_cache + f.block_tables + f.context_lens);
}

TEST(CudaPlan, SplitWorkspaceIsCounted) {
  const WorkloadSpec spec = spec_of(llama_8b(), 1, 32768);
  const PagedLayout layout = build_layout(spec);
  const k::PagedDecodeParams p = shape_params(spec, layout);
  k::KernelInfo splitting;
  splitting.name = "splitting";
  splitting.uses_workspace = true;
  const k::ResidentCtas gpu{132, 3};
  const PointFootprint f = point_footprint(p, splitting, gpu);
  EXPECT_EQ(f.num_splits, k::plan_num_splits(p, gpu));
  EXPECT_EQ(f.num_splits, 49);  // the planner's, for this residency (split_kv_plan.cpp)
  EXPECT_EQ(point_footprint(p, splitting, k::ResidentCtas{132, 2}).num_splits, 32);
  // The kernels' layout, whatever it is: the one owner of the workspace size.
  EXPECT_EQ(f.workspace, k::split_kv_workspace(p, f.num_splits).total_bytes);
  EXPECT_GE(f.workspace, 1u * 32 * f.num_splits * (128 + 1) * 4);  // [B][Hq][splits][d + 1] fp32
  EXPECT_EQ(f.total(),
            f.q + f.out + f.k_cache + f.v_cache + f.block_tables + f.context_lens + f.workspace);
}

TEST(CudaPlan, MemorySkipReasonNamesBothSizes) {
  PointFootprint f;
  f.k_cache = f.v_cache = 70'000'000'000;  // 140 GB of K/V
  const std::string reason = memory_skip_reason(f, /*free_bytes=*/139'000'000'000);
  EXPECT_NE(reason.find("needs 140.00 GB"), std::string::npos) << reason;
  EXPECT_NE(reason.find("139.00 GB free"), std::string::npos) << reason;
  // Fits, with the headroom to spare.
  EXPECT_EQ(memory_skip_reason(f, 141'000'000'000), "");
  // Fits only without the headroom: skipped.
  EXPECT_NE(memory_skip_reason(f, 140'000'000'000 + kMemoryHeadroomBytes / 2), "");
  EXPECT_EQ(format_gb(1.5e9), "1.50 GB");
}

// ---- the split planner on H100 / H200 ------------------------------------------------------
// The `auto` kernel is kernels::choose_kernel (tests/kernels/registry_test.cpp) and the planner
// kernels::plan_num_splits (tests/kernels/paged_decode/split_kv_test.cpp); on a GPU the backend
// gives both the runtime's residency of the split kernel instance. Here the same residency comes
// from the toolkit's calculator (occupancy_model.h) on sm_90 figures, fed the built instances'
// resources: threads and dynamic shared memory from the kernels themselves (launch_shape), and
// registers as ptxas allocated them for sm_90a (cuobjdump --dump-resource-usage, nvcc 13.0).
// cuobjdump's 1024 B of static shared memory is the per-block system reservation that the
// calculator adds itself, so the kernels' own static shared memory is 0.

// H100 SXM and H200: the same sm_90 SM, 132 of them.
constexpr int kHopperSms = 132;

using testing::kF16Cap4;
using testing::kFp8Cap4;
using testing::kFp8Cap8;
using testing::SplitInstance;

k::PagedDecodeParams llama_params(const SplitInstance& inst, int batch, int context) {
  ModelShape m = llama_8b();
  m.num_q_heads = m.num_kv_heads * inst.group;  // group 8: llama-3.1-70b's 64 / 8
  const WorkloadSpec spec = spec_of(m, batch, context, inst.kv);
  const PagedLayout layout = build_layout(spec);
  k::PagedDecodeParams p = shape_params(spec, layout);
  p.context_lens = nullptr;  // the layout dies here: plan for the table's capacity (= context)
  return p;
}

// The residency of the split kernel instance that would run `p`, on a Hopper SM; nullopt when
// this build did not compile that instance (a narrowed build).
std::optional<k::ResidentCtas> hopper_residency(const k::PagedDecodeParams& p, int registers) {
  const k::LaunchShape shape = k::cuda::launch_shape("split_kv", p);
  if (!shape.status.ok()) return std::nullopt;
  const Occupancy o =
      occupancy(KernelResources{registers, /*static_smem=*/0, shape.dynamic_smem, shape.threads},
                hopper_sm());
  EXPECT_TRUE(o.error.empty()) << o.error;
  return k::ResidentCtas{kHopperSms, o.ctas_per_sm};
}

TEST(SplitPlanOnHopper, LaunchShapeIsTheSplitKernels) {
  const k::PagedDecodeParams p = llama_params(kF16Cap4, 1, 32768);
  const k::LaunchShape shape = k::cuda::launch_shape("split_kv", p);
  if (!shape.status.ok()) GTEST_SKIP() << shape.status.message;
  EXPECT_EQ(shape.function, "split_kernel");
  EXPECT_EQ(shape.group_cap, 4);
  EXPECT_EQ(shape.threads, 128);
  EXPECT_EQ(shape.dynamic_smem, 60192u);  // 48 KiB ring + 2760 B x cap 4 (pipelined.cuh)
  EXPECT_EQ(shape.grid[0], 8);            // Hkv
  EXPECT_EQ(shape.grid[1], 1);            // batch
  EXPECT_EQ(shape.grid[2], p.num_splits);
  EXPECT_NE(shape.device_function, nullptr);
  // Refusals name what is wrong.
  EXPECT_NE(k::cuda::launch_shape("nope", p).status.message.find("unknown kernel"),
            std::string::npos);
  k::PagedDecodeParams g16 = p;
  g16.num_q_heads = 16 * g16.num_kv_heads;
  EXPECT_EQ(k::cuda::launch_shape("split_kv", g16).status.status, k::LaunchStatus::unsupported);
}

TEST(SplitPlanOnHopper, ResidencyOfTheSplitKernels) {
  // f16 cap 4: 58.8 KiB + 1 KiB reserved per block, 3 in 228 KiB (registers would allow 4);
  // fp8 cap 4: 50.8 KiB, 4; fp8 cap 8: 197 registers, 2 warps per sub-partition, 2 blocks.
  for (const auto& [inst, want] :
       {std::pair{kF16Cap4, 3}, std::pair{kFp8Cap4, 4}, std::pair{kFp8Cap8, 2}}) {
    const std::optional<k::ResidentCtas> gpu =
        hopper_residency(llama_params(inst, 1, 32768), inst.registers);
    if (!gpu) GTEST_SKIP() << "split_kv at d 128 / " << static_cast<int>(inst.kv) << " not built";
    EXPECT_EQ(gpu->ctas_per_sm, want)
        << "kv " << static_cast<int>(inst.kv) << " group " << inst.group;
  }
}

// llama-3.1-8b (and its group-8 sibling) at batch 1/8/16/64 x context 1k/8k/32k:
//   no split of the longest context is empty (splits <= its tiles);
//   where batch x Hkv already fills a wave, no split;
//   a split grid fills its one wave to >= 95 % unless the 256-token floor is what stops it:
//   one wave holds floor(slots / blocks) rows of batch x Hkv blocks, and on these shapes the
//   row left over is at most 12 of 396 slots (3 %); a planner that assumed 2 blocks per SM (264
//   of 396) would reach 67 %, one that rounded the wave up would spill into a second, nearly
//   empty wave (< 55 %).
TEST(SplitPlanOnHopper, Llama8bGrid) {
  constexpr double kMinWaveEfficiency = 0.95;
  for (const SplitInstance& inst : {kF16Cap4, kFp8Cap4, kFp8Cap8}) {
    for (int batch : {1, 8, 16, 64}) {
      for (int context : {1024, 8192, 32768}) {
        const k::PagedDecodeParams p = llama_params(inst, batch, context);
        const std::optional<k::ResidentCtas> gpu = hopper_residency(p, inst.registers);
        if (!gpu) GTEST_SKIP() << "split_kv at d 128 not built for this KV dtype";
        const int splits = k::plan_num_splits(p, *gpu);
        const long long blocks = static_cast<long long>(batch) * p.num_kv_heads;
        const long long total = blocks * splits;
        const long long slots = gpu->slots();
        const long long waves = (total + slots - 1) / slots;
        const double efficiency = static_cast<double>(total) / static_cast<double>(waves * slots);
        const int tiles =
            (context + k::kv_tile_tokens(p.head_dim) - 1) / k::kv_tile_tokens(p.head_dim);
        const std::string at = "kv " + std::to_string(static_cast<int>(inst.kv)) + " group " +
                               std::to_string(inst.group) + " batch " + std::to_string(batch) +
                               " context " + std::to_string(context) + ": " +
                               std::to_string(splits) + " splits, " + std::to_string(total) +
                               " blocks in " + std::to_string(waves) + " waves of " +
                               std::to_string(slots);
        EXPECT_GE(splits, 1) << at;
        EXPECT_LE(splits, tiles) << at;
        if (blocks >= slots) {
          EXPECT_EQ(splits, 1) << at;
        } else if (splits > 1 && splits < context / k::kMinTokensPerSplit) {
          EXPECT_EQ(waves, 1) << at;
          EXPECT_GE(efficiency, kMinWaveEfficiency) << at;
        }
      }
    }
  }
}

TEST(SplitPlanOnHopper, Batch1At32kHasNoEmptySplit) {
  const k::PagedDecodeParams p = llama_params(kF16Cap4, 1, 32768);
  const std::optional<k::ResidentCtas> gpu = hopper_residency(p, kF16Cap4.registers);
  if (!gpu) GTEST_SKIP() << "split_kv f16 d 128 not built";
  const int splits = k::plan_num_splits(p, *gpu);
  EXPECT_EQ(splits, 49);  // 392 of 396 slots, 20-21 of 1024 tiles each
  // The kernel's division (split_kv.cuh): n / S tiles each, n % S of them one more.
  const int tiles = 32768 / k::kv_tile_tokens(128);
  EXPECT_GE(tiles / splits, 1);
  EXPECT_LE(tiles / splits + (tiles % splits != 0), 21);
}

TEST(CudaPlan, BadDeviceMessageListsTheDevices) {
  const std::string msg = bad_device_message(3, {"NVIDIA H200", "NVIDIA H100 80GB HBM3"});
  EXPECT_NE(msg.find("--device 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0 (NVIDIA H200)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 (NVIDIA H100 80GB HBM3)"), std::string::npos) << msg;
  EXPECT_NE(bad_device_message(0, {}).find("no CUDA device"), std::string::npos);
}

// ---- cold-L2 flush and warm timing ---------------------------------------------------------

TEST(CudaPlan, FlushWritesTwiceL2ThenReadsAtLeastTwiceL2) {
  const std::size_t h200_l2 = 50 * 1024 * 1024;
  const L2FlushPlan p = plan_l2_flush(h200_l2, /*sm_count=*/132);
  EXPECT_EQ(p.write_bytes, 2 * h200_l2);  // evicts what the previous step left
  EXPECT_EQ(p.read_bytes, 2 * h200_l2);   // then replaces the memset's dirty lines
  EXPECT_EQ(p.read_grid, kFlushReadBlocksPerSm * 132);
  EXPECT_EQ(p.read_block, kFlushReadBlock);
  EXPECT_FALSE(p.empty());
  // What the bandwidth read kernel accepts: a multiple of 16 bytes, a block of whole warps.
  const L2FlushPlan odd = plan_l2_flush(60'000'003, 7);
  EXPECT_EQ(odd.write_bytes % 16, 0u);
  EXPECT_EQ(odd.read_bytes % 16, 0u);
  EXPECT_GE(odd.write_bytes, 120'000'006u);
  EXPECT_GE(odd.read_bytes, 120'000'006u);
  EXPECT_LT(odd.write_bytes, 120'000'006u + 16);
  EXPECT_EQ(odd.read_block % 32, 0);
  EXPECT_LE(odd.read_block, 1024);
  // A small L2: the read keeps its floor, so the flush still outlasts the host's launch path.
  const L2FlushPlan small = plan_l2_flush(4 * 1024 * 1024, 20);
  EXPECT_EQ(small.write_bytes, 8u * 1024 * 1024);
  EXPECT_EQ(small.read_bytes, kMinFlushReadBytes);
  // Unknown SM count: still a grid; unknown L2: nothing to flush.
  EXPECT_GE(plan_l2_flush(h200_l2, 0).read_grid, 1);
  EXPECT_TRUE(plan_l2_flush(0, 132).empty());
  EXPECT_EQ(plan_l2_flush(0, 132).read_grid, 0);
}

// What a cold point records of its flush, and the self-check it must pass: the plan's flush
// passes for any L2; a planted plan that flushes only one L2 (or whose read falls short) is
// flagged, naming both sizes.
TEST(CudaPlan, TheFlushRecordOfThePlanPassesTheSelfCheckAndASmallOneIsFlagged) {
  const std::size_t h200_l2 = 50 * 1024 * 1024;
  PointResult p;
  p.status = PointStatus::ok;
  p.timing = TimingRecord{TimingMethod::events_per_step, 1, /*warm_l2=*/false};
  for (std::size_t l2 : {h200_l2, std::size_t{4} << 20, std::size_t{60'000'003}}) {
    p.flush = flush_record(plan_l2_flush(l2, 132), l2);
    EXPECT_EQ(p.flush->cache_bytes, static_cast<double>(l2));
    EXPECT_GE(p.flush->flush_bytes, 2.0 * static_cast<double>(l2));
    EXPECT_FALSE(check_flush(p)) << check_flush(p)->reason;
  }
  L2FlushPlan planted = plan_l2_flush(h200_l2, 132);
  planted.write_bytes = h200_l2;  // one L2 only: what the step read may survive
  p.flush = flush_record(planted, h200_l2);
  EXPECT_EQ(p.flush->flush_bytes, static_cast<double>(h200_l2));
  const auto f = check_flush(p);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->name, kFlagSmallFlush);
  EXPECT_NE(f->reason.find("touched 50.0 MiB, under 2x the 50.0 MiB cache"), std::string::npos)
      << f->reason;
  planted = plan_l2_flush(h200_l2, 132);
  planted.read_bytes = 16;  // the read that replaces the dirty lines, cut short
  p.flush = flush_record(planted, h200_l2);
  EXPECT_TRUE(check_flush(p));
}

TEST(CudaPlan, StepsPerSampleCoverTheWindowAndNoMore) {
  EXPECT_EQ(steps_per_sample(1e-6), 1000);  // 1 us steps: 1000 of them make 1 ms
  EXPECT_EQ(steps_per_sample(3e-6), 334);   // ceil, so the window is at least 1 ms
  EXPECT_EQ(steps_per_sample(kWarmSampleSeconds), 1);
  EXPECT_EQ(steps_per_sample(5e-3), 1);  // a step longer than the window: one per sample
  EXPECT_EQ(steps_per_sample(1e-9), kMaxStepsPerSample);  // capped
  // Below the events' resolution, or no estimate at all: the cap.
  EXPECT_EQ(steps_per_sample(0), kMaxStepsPerSample);
  EXPECT_EQ(steps_per_sample(-1), kMaxStepsPerSample);
  EXPECT_EQ(steps_per_sample(std::nan("")), kMaxStepsPerSample);
  EXPECT_EQ(steps_per_sample(INFINITY), 1);
  for (double est = 1.3e-6; est < 3e-3; est *= 1.7) {
    const int n = steps_per_sample(est);
    EXPECT_GE(n * est, kWarmSampleSeconds * (1 - 1e-9)) << est;  // covers the window
    EXPECT_LT((n - 1) * est, kWarmSampleSeconds) << est;         // with the fewest steps
  }
}

TEST(CudaPlan, LeadInCoversTheHostLaunchPath) {
  EXPECT_EQ(lead_in_steps(1e-6), 50);  // 50 us of GPU work ahead of the start event
  EXPECT_EQ(lead_in_steps(20e-6), 3);
  EXPECT_EQ(lead_in_steps(1e-3), 1);  // at least one
  EXPECT_EQ(lead_in_steps(0), kMaxStepsPerSample);
  EXPECT_EQ(lead_in_steps(std::nan("")), kMaxStepsPerSample);
  for (double est = 1.1e-6; est < 1e-3; est *= 1.9) {
    EXPECT_GE(lead_in_steps(est) * est, kLeadInSeconds * (1 - 1e-9)) << est;
  }
}

// ---- error checks --------------------------------------------------------------------------

cudaError_t returns(cudaError_t e) { return e; }

TEST(CudaCheck, ThrowsWithFileLineCallAndErrorName) {
  try {
    DECODEBENCH_CUDA_CHECK(returns(cudaErrorMemoryAllocation));
    FAIL() << "no exception";
  } catch (const RuntimeFailure& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cuda_plan_test.cpp:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("returns(cudaErrorMemoryAllocation)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cudaErrorMemoryAllocation"), std::string::npos) << msg;
    EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(DECODEBENCH_CUDA_CHECK(returns(cudaSuccess)));
}

TEST(CudaCheck, NoThrowVariantLogs) {
  ::testing::internal::CaptureStderr();
  EXPECT_NO_THROW(DECODEBENCH_CUDA_CHECK_NOTHROW(returns(cudaErrorInvalidValue)));
  const std::string logged = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(logged.find("cudaErrorInvalidValue"), std::string::npos) << logged;
}

TEST(CudaCheck, LaunchResults) {
  EXPECT_NO_THROW(DECODEBENCH_CHECK_LAUNCH(k::LaunchResult{}, "fine"));
  // A device failure ends the sweep: RuntimeFailure, with the launcher's message.
  try {
    DECODEBENCH_CHECK_LAUNCH((k::LaunchResult{k::LaunchStatus::failed, "cudaErrorIllegalAddress"}),
                             "kernel 'x'");
    FAIL() << "no exception";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(
        std::string(e.what()).find("kernel 'x' failed on the device: cudaErrorIllegalAddress"),
        std::string::npos)
        << e.what();
  }
  // A refused point is that point's problem: InputError, not a device failure.
  EXPECT_THROW(DECODEBENCH_CHECK_LAUNCH((k::LaunchResult{k::LaunchStatus::unsupported, "d=96"}),
                                        "kernel 'x'"),
               InputError);
}

// ---- what the GPU can run --------------------------------------------------------------------

TEST(CudaArch, BuildArchitecturesAgainstTheDevice) {
  // Runs: the same SASS, SASS of an earlier minor of the major, PTX of an earlier capability.
  EXPECT_EQ(build_arch_error("80", 8, 0), "");
  EXPECT_EQ(build_arch_error("80", 8, 9), "");    // sm_80 SASS on Ada
  EXPECT_EQ(build_arch_error("80", 9, 0), "");    // compute_80 PTX, compiled by the driver
  EXPECT_EQ(build_arch_error("90a", 9, 0), "");   // what H100/H200 get
  EXPECT_EQ(build_arch_error("121", 13, 0), "");  // a GPU newer than nvcc: PTX
  EXPECT_EQ(build_arch_error("80;90a", 9, 0), "");
  EXPECT_EQ(build_arch_error("86,100a", 10, 0), "");  // the build's form: ',' between entries
  EXPECT_EQ(build_arch_error("100f", 10, 3), "");     // family: any later minor of the major
  EXPECT_EQ(build_arch_error("native", 8, 0), "");    // cannot tell: taken to run
  EXPECT_EQ(build_arch_error("", 8, 0), "");
  // Does not run: an arch-specific target on another GPU, SASS only of a later or other major.
  for (const auto& [archs, major, minor] :
       {std::tuple{"90a", 8, 0}, std::tuple{"90a", 10, 0}, std::tuple{"100a", 10, 3},
        std::tuple{"89-real", 9, 0}, std::tuple{"89-real", 8, 6}, std::tuple{"90-virtual", 8, 9},
        std::tuple{"90a;100a", 12, 0}, std::tuple{"120", 10, 0}, std::tuple{"100f", 11, 0}}) {
    const std::string why = build_arch_error(archs, major, minor);
    EXPECT_NE(why.find("compiled for CMAKE_CUDA_ARCHITECTURES"), std::string::npos)
        << archs << " on " << major << "." << minor << ": " << why;
    EXPECT_NE(why.find("compute capability " + std::to_string(major) + "." + std::to_string(minor)),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("scripts/run.sh"), std::string::npos) << why;
  }
  EXPECT_NE(build_arch_error("90a;100a", 8, 0).find("90a, 100a"), std::string::npos);
  // Below 8.0 no build runs, whatever it lists.
  const std::string turing = build_arch_error("75;80", 7, 5);
  EXPECT_NE(turing.find("compute capability 7.5"), std::string::npos) << turing;
  EXPECT_NE(turing.find("8.0 or newer"), std::string::npos) << turing;
}

TEST(CudaArch, DeviceSkipReasonComputeCapabilityAndSharedMemory) {
  k::KernelInfo tc;
  tc.name = "tc";
  k::PagedDecodeParams p;
  p.kv_dtype = DType::f16;
  p.head_dim = 256;
  const std::size_t tc_f16_d256 = 143616;  // tc_common.cuh Geometry: 2 x 66 KiB ring + q
  constexpr std::size_t kKiB = 1024;
  const DeviceLimits a100{8, 0, 163 * kKiB}, l40s{8, 9, 99 * kKiB}, h100{9, 0, 227 * kKiB},
      rtx5090{12, 0, 99 * kKiB}, turing{7, 5, 64 * kKiB}, unknown{8, 9, 0};
  EXPECT_EQ(device_skip_reason(a100, tc, p, tc_f16_d256), "");
  EXPECT_EQ(device_skip_reason(h100, tc, p, tc_f16_d256), "");
  EXPECT_EQ(device_skip_reason(unknown, tc, p, tc_f16_d256), "");  // not reported: not judged
  EXPECT_EQ(device_skip_reason(l40s, tc, p, 99 * kKiB), "");       // exactly the limit fits
  for (const DeviceLimits& small : {l40s, rtx5090}) {
    const std::string why = device_skip_reason(small, tc, p, tc_f16_d256);
    EXPECT_EQ(why,
              "kernel 'tc' needs 140.2 KiB of shared memory per thread block for f16 KV at "
              "head_dim 256; this GPU (compute capability " +
                  std::to_string(small.cc_major) + "." + std::to_string(small.cc_minor) +
                  ") allows 99.0 KiB");
  }
  const std::string old = device_skip_reason(turing, tc, p, 0);
  EXPECT_EQ(old,
            "kernel 'tc' needs compute capability 8.0 or newer (cp.async, ldmatrix, mma.sync); "
            "this GPU: 7.5");
}

TEST(CudaArch, SharedMemoryOfTheBuiltTcInstance) {
  // The bytes the backend passes are the kernel's own (launch_shape, no GPU needed): tc at
  // head_dim 128 f16 fits every GPU from 8.0 on; a planted 64 KiB device refuses it.
  const k::KernelInfo* tc = k::find_kernel("tc");
  if (tc == nullptr) GTEST_SKIP() << "tc is not built";
  WorkloadSpec spec = spec_of(llama_8b(), 1, 4096);
  const PagedLayout layout = build_layout(spec);
  k::PagedDecodeParams p = shape_params(spec, layout);
  p.context_lens = nullptr;
  const k::LaunchShape shape = k::cuda::launch_shape("tc", p);
  if (!shape.status.ok()) GTEST_SKIP() << shape.status.message;
  EXPECT_EQ(shape.dynamic_smem, 73984u);  // 2 x 34 KiB ring + 8 q rows hi and lo
  EXPECT_EQ(device_skip_reason({8, 9, 99 * 1024}, *tc, p, shape.dynamic_smem), "");
  EXPECT_NE(device_skip_reason({8, 9, 64 * 1024}, *tc, p, shape.dynamic_smem).find("72.2 KiB"),
            std::string::npos);
}

// ---- no device -------------------------------------------------------------------------------

TEST(CudaNoDevice, PresenceAgreesWithTheRuntimeAndLeavesNoError) {
  int count = 0;
  const bool runtime_sees = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  (void)cudaGetLastError();
  EXPECT_EQ(cuda_runtime_device_present(), runtime_sees);
  // With a device, the probe leaves no error behind for a later check to trip over. (Without a
  // driver the runtime's initialization error is returned by every call, cudaGetLastError
  // included, whatever anyone clears.)
  if (runtime_sees) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
}

TEST(CudaNoDevice, BackendConstructionFailsCleanly) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  (void)cudaGetLastError();
  if (count == 0) {
    // No driver or no device: a RuntimeFailure naming the CUDA error, never a crash.
    try {
      (void)make_cuda_backend(0);
      FAIL() << "no exception without a device";
    } catch (const RuntimeFailure& e) {
      EXPECT_NE(std::string(e.what()).find("cudaGetDeviceCount"), std::string::npos) << e.what();
    }
  } else {
    // An index past the last device: InputError listing the devices.
    try {
      (void)make_cuda_backend(count);
      FAIL() << "no exception for --device " << count;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("0 ("), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace decodebench::cuda
