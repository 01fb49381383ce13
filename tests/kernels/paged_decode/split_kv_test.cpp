// split_kv specifics through the SIMT emulator: the split count (1, many, more than there are
// tiles), empty splits (short contexts), the workspace contents, and the host planner's rule.
// The registry-driven suite covers the common shapes of every rung; this file covers what only
// split_kv has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "device/float_formats.h"
#include "kernels.h"
#include "kernels/paged_decode/decode_spec.h"
#include "reference/reference.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

using kernels::LaunchStatus;
using kernels::PagedDecodeParams;

struct Case {
  int batch = 3;
  ContextSpec context = ContextSpec::fixed(97);
  int num_q_heads = 8;
  int num_kv_heads = 2;
  int head_dim = 128;
  DType kv_dtype = DType::f16;
  DType q_dtype = DType::f16;
  int block_size = 16;
  double hit_rate = 0;
  int num_splits = 4;
};

// The split_kv entry of the ladder (the build may be narrowed or leave split_kv out).
const kernels::KernelInfo* split_kv_info() {
  for (const auto& k : kernels::kernel_ladder()) {
    if (k.name == "split_kv") return &k;
  }
  return nullptr;
}

// Runs `c` on its head_dim / KV dtype if this build compiled them, else on the first compiled
// ones (same dtype class where possible), so a narrowed build still exercises every test.
// False when split_kv is not compiled at all.
bool adapt_to_build(Case& c) {
  const kernels::KernelInfo* k = split_kv_info();
  if (k == nullptr || k->head_dims.empty() || k->kv_dtypes.empty()) return false;
  bool has_d = false;
  for (int d : k->head_dims) has_d |= d == c.head_dim;
  if (!has_d) c.head_dim = k->head_dims.front();
  bool has_t = false;
  for (DType t : k->kv_dtypes) has_t |= t == c.kv_dtype;
  if (!has_t) {
    DType pick = k->kv_dtypes.front();
    for (DType t : k->kv_dtypes) {
      if (is_fp8(t) == is_fp8(c.kv_dtype)) {
        pick = t;
        break;
      }
    }
    c.kv_dtype = pick;
  }
  return true;
}

Workload make(const Case& c) {
  return make_workload(testing_support::decode_spec(c, c.head_dim, c.kv_dtype, 20240611));
}

struct SplitRun {
  kernels::LaunchResult launch;
  std::vector<float> out;          // [rows][Hq][d]
  std::vector<float> partial_out;  // [rows][Hq][num_splits][d]
  std::vector<float> partial_lse;  // [rows][Hq][num_splits]
};

SplitRun run_split_kv(const Workload& w, int num_splits) {
  PagedDecodeParams p = w.params();
  p.num_splits = num_splits;
  const std::size_t out_elems = static_cast<std::size_t>(w.rows()) * p.num_q_heads * p.head_dim;
  std::vector<std::uint16_t> out(out_elems,
                                 0xffff);  // NaN in both f16 and bf16: must be overwritten
  // One allocation laid out by split_kv_workspace().
  const kernels::SplitKvWorkspace layout = kernels::split_kv_workspace(p, num_splits);
  const std::size_t lse_elems = static_cast<std::size_t>(w.rows()) * p.num_q_heads * num_splits;
  std::vector<float> ws(layout.total_bytes / sizeof(float), std::nanf(""));
  EXPECT_EQ(ws.size(), lse_elems * (p.head_dim + 1));
  p.out = out.data();
  layout.bind(p, ws.data());
  EXPECT_EQ(p.partial_lse, ws.data() + lse_elems * p.head_dim);

  SplitRun run;
  run.launch = kernels::emu::launch_paged_decode("split_kv", p, /*stream=*/nullptr);
  run.out.resize(out_elems);
  for (std::size_t i = 0; i < out_elems; ++i) {
    run.out[i] =
        p.q_dtype == DType::f16 ? floatfmt::f16_to_float(out[i]) : floatfmt::bf16_to_float(out[i]);
  }
  run.partial_out.assign(ws.begin(),
                         ws.begin() + static_cast<std::ptrdiff_t>(lse_elems * p.head_dim));
  run.partial_lse.assign(ws.begin() + static_cast<std::ptrdiff_t>(lse_elems * p.head_dim),
                         ws.end());
  return run;
}

void expect_matches_reference(Case c) {
  if (!adapt_to_build(c)) GTEST_SKIP() << "split_kv not compiled in this build";
  const Workload w = make(c);
  const SplitRun run = run_split_kv(w, c.num_splits);
  ASSERT_TRUE(run.launch.ok()) << run.launch.message;
  const std::vector<float> ref = reference_decode(w);
  const Comparison cmp = compare_outputs(run.out, ref, c.num_q_heads, c.head_dim,
                                         tolerance_for(c.q_dtype, c.kv_dtype));
  EXPECT_TRUE(cmp.ok) << cmp.mismatches << " of " << cmp.checked << " elements off; " << cmp.report;
}

TEST(SplitKvEmu, OneSplitIsCorrect) {
  Case c;
  c.num_splits = 1;
  c.context = ContextSpec::ragged(1, 300);
  expect_matches_reference(c);
}

TEST(SplitKvEmu, ManySplitsOfALongContext) {
  Case c;
  c.batch = 1;
  c.context = ContextSpec::fixed(700);
  c.num_splits = 9;
  expect_matches_reference(c);
}

TEST(SplitKvEmu, MoreSplitsThanTilesLeavesEmptySplits) {
  Case c;
  c.context = ContextSpec::ragged(1, 40);  // at most 2 tiles of 32 tokens, 7 splits
  c.num_splits = 7;
  c.num_q_heads = 4;
  c.num_kv_heads = 4;  // MHA: group 1
  expect_matches_reference(c);
}

// S <= n tiles: every split gets a tile, the larger shares first. Dividing tokens first and
// rounding each share up to whole tiles would leave the last split empty here: 32 tiles in 12
// splits of 3 cover the context in 11, 34 tiles in 33 splits of 2 in 17.
TEST(SplitKvEmu, EverySplitHasATileWhenThereAreEnough) {
  for (const auto& [tiles, splits] : {std::pair{32, 12}, std::pair{34, 33}}) {
    Case c;
    c.batch = 1;
    c.num_q_heads = 4;
    c.num_kv_heads = 1;
    c.num_splits = splits;
    if (!adapt_to_build(c)) GTEST_SKIP() << "split_kv not compiled in this build";
    const int tile = kernels::kv_tile_tokens(c.head_dim);
    c.context = ContextSpec::fixed(tiles * tile - tile / 2);  // the last tile half full
    const Workload w = make(c);
    const SplitRun run = run_split_kv(w, splits);
    ASSERT_TRUE(run.launch.ok()) << run.launch.message;
    for (int row = 0; row < c.num_q_heads; ++row) {
      for (int s = 0; s < splits; ++s) {
        EXPECT_TRUE(std::isfinite(run.partial_lse[static_cast<std::size_t>(row) * splits + s]))
            << tiles << " tiles, " << splits << " splits: split " << s << " of row " << row
            << " is empty";
      }
    }
    const Comparison cmp = compare_outputs(run.out, reference_decode(w), c.num_q_heads, c.head_dim,
                                           tolerance_for(c.q_dtype, c.kv_dtype));
    EXPECT_TRUE(cmp.ok) << cmp.report;
  }
}

TEST(SplitKvEmu, ContextOfOneTokenWithManySplits) {
  Case c;
  c.batch = 2;
  c.context = ContextSpec::fixed(1);
  c.num_splits = 5;
  expect_matches_reference(c);
}

TEST(SplitKvEmu, Fp8GroupEightBf16WithSharedPrefix) {
  Case c;
  c.kv_dtype = DType::fp8_e4m3;
  c.q_dtype = DType::bf16;
  c.num_q_heads = 16;
  c.num_kv_heads = 2;
  c.context = ContextSpec::ragged(15, 170);
  c.hit_rate = 0.5;
  c.block_size = 8;
  c.num_splits = 3;
  expect_matches_reference(c);
}

// The workspace holds what split_kv.cuh documents: splits cover whole tiles from the front, so
// a context of fewer tiles than splits leaves the last splits empty, with lse -inf and a zero
// partial; a non-empty split has a finite lse; and merging the partials on the host by log-sum-exp
// gives the kernel's output.
TEST(SplitKvEmu, WorkspaceHoldsNormalizedPartialsAndLse) {
  Case c;
  c.batch = 2;
  c.context = ContextSpec::fixed(50);  // tiles of 16..64 tokens: at most 4 of 6 splits used
  c.num_splits = 6;
  if (!adapt_to_build(c)) GTEST_SKIP() << "split_kv not compiled in this build";
  const Workload w = make(c);
  const SplitRun run = run_split_kv(w, c.num_splits);
  ASSERT_TRUE(run.launch.ok()) << run.launch.message;
  const int d = c.head_dim;
  for (int row = 0; row < c.batch * c.num_q_heads; ++row) {
    const float* lse = &run.partial_lse[static_cast<std::size_t>(row) * c.num_splits];
    const float* part = &run.partial_out[static_cast<std::size_t>(row) * c.num_splits * d];
    int used = 0;
    double mx = -INFINITY;
    for (int s = 0; s < c.num_splits; ++s) {
      if (lse[s] == -INFINITY) {
        for (int i = 0; i < d; ++i) ASSERT_EQ(part[s * d + i], 0.f) << "empty split " << s;
      } else {
        ASSERT_TRUE(std::isfinite(lse[s])) << "row " << row << " split " << s << ": " << lse[s];
        EXPECT_EQ(used, s) << "non-empty splits must come first";
        ++used;
        mx = std::max<double>(mx, lse[s]);
      }
    }
    EXPECT_GE(used, 1);
    EXPECT_LT(used, c.num_splits) << "50 tokens cannot fill 6 splits of whole tiles";
    for (int i = 0; i < d; ++i) {
      double num = 0, den = 0;
      for (int s = 0; s < used; ++s) {
        const double wgt = std::exp2(lse[s] - mx);
        num += wgt * part[s * d + i];
        den += wgt;
      }
      const double merged = num / den;
      EXPECT_NEAR(run.out[static_cast<std::size_t>(row) * d + i], merged,
                  2e-3 + 8e-3 * std::abs(merged))
          << "row " << row << " dim " << i;
    }
  }
}

// A planted fault is caught: the same run compared against another workload's reference fails.
TEST(SplitKvEmu, WrongResultIsCaught) {
  Case c;
  c.num_splits = 3;
  if (!adapt_to_build(c)) GTEST_SKIP() << "split_kv not compiled in this build";
  const Workload w = make(c);
  const SplitRun run = run_split_kv(w, c.num_splits);
  ASSERT_TRUE(run.launch.ok()) << run.launch.message;
  Case other = c;
  other.context = ContextSpec::fixed(96);  // one token shorter
  const std::vector<float> ref = reference_decode(make(other));
  const Comparison cmp = compare_outputs(run.out, ref, c.num_q_heads, c.head_dim,
                                         tolerance_for(c.q_dtype, c.kv_dtype));
  EXPECT_FALSE(cmp.ok);
}

TEST(SplitKvEmu, RefusesMissingWorkspaceAndBadSplitCounts) {
  Case c;
  if (!adapt_to_build(c)) GTEST_SKIP() << "split_kv not compiled in this build";
  const Workload w = make(c);
  PagedDecodeParams p = w.params();
  std::vector<std::uint16_t> out(static_cast<std::size_t>(w.rows()) * p.num_q_heads * p.head_dim);
  p.out = out.data();
  p.num_splits = 2;
  const auto no_ws = kernels::emu::launch_paged_decode("split_kv", p, nullptr);
  EXPECT_EQ(no_ws.status, LaunchStatus::unsupported);
  EXPECT_NE(no_ws.message.find("workspace"), std::string::npos) << no_ws.message;
  const kernels::SplitKvWorkspace layout = kernels::split_kv_workspace(p, 2);
  std::vector<float> ws(layout.total_bytes / sizeof(float));
  layout.bind(p, ws.data());
  p.num_splits = 0;
  const auto zero = kernels::emu::launch_paged_decode("split_kv", p, nullptr);
  EXPECT_EQ(zero.status, LaunchStatus::unsupported);
  EXPECT_NE(zero.message.find("num_splits"), std::string::npos) << zero.message;
}

// The launch kernels::launch_shape reports: the split kernel's, as launch_split_kv launches it
// (the same numbers as the CUDA target's, checked in tests/backends/cuda/cuda_plan_test.cpp).
TEST(SplitKvEmu, LaunchShapeIsTheSplitKernels) {
  Case c;
  c.num_q_heads = 8;
  c.num_kv_heads = 2;  // group 4
  c.num_splits = 5;
  if (!adapt_to_build(c)) GTEST_SKIP() << "split_kv not compiled in this build";
  PagedDecodeParams p = make(c).params();
  p.num_splits = c.num_splits;
  const kernels::LaunchShape shape = kernels::emu::launch_shape("split_kv", p);
  ASSERT_TRUE(shape.status.ok()) << shape.status.message;
  EXPECT_EQ(shape.function, "split_kernel");
  EXPECT_EQ(shape.group_cap, 4);
  EXPECT_EQ(shape.threads, 128);
  EXPECT_GT(shape.dynamic_smem, 48u * 1024);  // the ring alone is 40-48 KiB
  EXPECT_EQ(shape.grid[0], c.num_kv_heads);
  EXPECT_EQ(shape.grid[1], c.batch);
  EXPECT_EQ(shape.grid[2], c.num_splits);
  EXPECT_EQ(shape.device_function, nullptr);  // no device handle on the emulator
  p.num_q_heads = 32;                         // group 16: no rung but naive serves it
  EXPECT_EQ(kernels::emu::launch_shape("split_kv", p).status.status, LaunchStatus::unsupported);
}

// ---- the planner (plain C++) ----------------------------------------------------------------

PagedDecodeParams plan_params(int batch, int num_kv_heads, int max_context, int head_dim = 128) {
  PagedDecodeParams p;
  p.batch = batch;
  p.num_q_heads = num_kv_heads * 4;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.block_size = 16;
  p.max_blocks_per_seq = (max_context + 15) / 16;
  return p;
}

// 132 SMs (H100 SXM, H200) with the split kernel's residency at d 128: 3 blocks per SM at f16
// group cap 4, 4 at fp8 cap 4, 2 at fp8 cap 8 (tests/backends/cuda/cuda_plan_test.cpp derives
// these from the kernels' resources).
constexpr kernels::ResidentCtas kF16Cap4{132, 3};
constexpr kernels::ResidentCtas kFp8Cap4{132, 4};
constexpr kernels::ResidentCtas kFp8Cap8{132, 2};

int tiles_of(const PagedDecodeParams& p, int context) {
  const int t = kernels::kv_tile_tokens(p.head_dim);
  return (context + t - 1) / t;
}

TEST(SplitKvPlan, FillsOneWaveOfTheResidentBlocks) {
  // llama-3.1-8b, batch 1, 32k: 1024 tiles of 32 tokens. 396 slots hold 49 x 8 blocks, at 21
  // tiles each (split_kv_plan.cpp); no longer 33 splits with the last one empty.
  EXPECT_EQ(kernels::plan_num_splits(plan_params(1, 8, 32768), kF16Cap4), 49);
  // 528 slots hold 66 x 8, but 64 splits give the same 16 tiles per block: the fewer.
  EXPECT_EQ(kernels::plan_num_splits(plan_params(1, 8, 32768), kFp8Cap4), 64);
  EXPECT_EQ(kernels::plan_num_splits(plan_params(1, 8, 32768), kFp8Cap8), 32);
  EXPECT_EQ(kernels::plan_num_splits(plan_params(8, 8, 32768), kF16Cap4), 6);
  EXPECT_EQ(kernels::plan_num_splits(plan_params(16, 8, 8192), kF16Cap4), 3);
  EXPECT_EQ(kernels::plan_num_splits(plan_params(16, 8, 8192), kFp8Cap8), 2);
}

TEST(SplitKvPlan, NoSplitWhenBatchTimesHeadsFillsAWave) {
  // 384 of 396 slots: a second split of each would spill into a second wave.
  EXPECT_EQ(kernels::plan_num_splits(plan_params(48, 8, 8192), kF16Cap4), 1);
  EXPECT_EQ(kernels::plan_num_splits(plan_params(64, 8, 8192), kF16Cap4), 1);
  EXPECT_EQ(kernels::plan_num_splits(plan_params(64, 8, 32768), kFp8Cap4), 1);
  EXPECT_EQ(kernels::plan_num_splits(plan_params(33, 8, 32768), kFp8Cap8), 1);  // 264 = 264
  EXPECT_EQ(kernels::plan_num_splits(plan_params(256, 8, 32768), kF16Cap4), 1);
}

TEST(SplitKvPlan, SplitsAreNeverShorterThanTheMinimum) {
  // 1024 tokens at >= 256 per split: at most 4 splits, whatever the device.
  EXPECT_EQ(kernels::plan_num_splits(plan_params(1, 8, 1024), kF16Cap4), 4);
  EXPECT_EQ(kernels::plan_num_splits(plan_params(1, 8, 8192), kF16Cap4), 32);
  EXPECT_EQ(kernels::plan_num_splits(plan_params(1, 8, 100), kF16Cap4), 1);
  EXPECT_GE(kernels::plan_num_splits(plan_params(1, 1, 1 << 20), kF16Cap4), 1);
  EXPECT_LE(kernels::plan_num_splits(plan_params(1, 1, 1 << 20), {132, 32}), kernels::kMaxSplits);
}

// Every split of the longest sequence gets a tile (the kernel's division gives each of S <= n
// splits at least one of n tiles: EverySplitHasATileWhenThereAreEnough), over odd shapes, every
// head_dim's tile and residencies from 1 to 32 blocks per SM.
TEST(SplitKvPlan, NeverMoreSplitsThanTilesOfTheLongestContext) {
  for (int d : {64, 128, 256}) {
    for (int batch : {1, 2, 7, 37}) {
      for (int hkv : {1, 2, 8}) {
        for (int context : {1, 15, 97, 256, 257, 1000, 4095, 32768, 100003}) {
          for (int ctas : {1, 2, 3, 4, 32}) {
            const PagedDecodeParams p = plan_params(batch, hkv, context, d);
            const int s = kernels::plan_num_splits(p, {132, ctas});
            ASSERT_GE(s, 1);
            ASSERT_LE(s, tiles_of(p, context))
                << "d " << d << " batch " << batch << " Hkv " << hkv << " context " << context;
            ASSERT_LE(static_cast<long long>(s) * batch * hkv,
                      std::max(132LL * ctas, 1LL * batch * hkv))
                << "more than one wave";
          }
        }
      }
    }
  }
}

TEST(SplitKvPlan, PlansForTheLongestLengthWhenTheCallerHasThem) {
  // A table with room for 32k tokens whose longest sequence has 1000: at most 3 splits of it.
  PagedDecodeParams p = plan_params(2, 8, 32768);
  const std::vector<std::int32_t> lens = {1000, 17};
  p.context_lens = lens.data();
  EXPECT_EQ(kernels::plan_num_splits(p, kF16Cap4), 3);
  p.context_lens = nullptr;  // the table's capacity
  EXPECT_EQ(kernels::plan_num_splits(p, kF16Cap4), 24);
}

TEST(SplitKvPlan, WorkspaceBytesCoverPartialsAndLse) {
  const PagedDecodeParams p = plan_params(3, 8, 1024);  // Hq 32, d 128
  EXPECT_EQ(kernels::split_kv_workspace(p, 5).total_bytes, std::size_t{3} * 32 * 5 * (128 + 1) * 4);
  EXPECT_EQ(kernels::split_kv_workspace(p, 1).total_bytes, std::size_t{3} * 32 * 1 * 129 * 4);
}

}  // namespace
}  // namespace decodebench
