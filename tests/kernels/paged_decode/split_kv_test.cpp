// split_kv specifics through the SIMT emulator: the split count (1, many, more than there are
// tiles), empty splits (short contexts), the workspace contents, and the host planner's rule.
// The registry-driven suite covers the common shapes of every rung; this file covers what only
// split_kv has.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/float_formats.h"
#include "kernels.h"
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
  WorkloadSpec spec;
  spec.model.name = "test";
  spec.model.num_q_heads = c.num_q_heads;
  spec.model.num_kv_heads = c.num_kv_heads;
  spec.model.head_dim = c.head_dim;
  spec.model.num_layers = 1;
  spec.batch = c.batch;
  spec.context = c.context;
  spec.hit_rate = c.hit_rate;
  spec.prefix_groups = 1;
  spec.kv_dtype = c.kv_dtype;
  spec.q_dtype = c.q_dtype;
  spec.block_size = c.block_size;
  spec.seed = 20240611;
  return make_workload(spec);
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
// a short context leaves the last splits empty, with lse -inf and a zero partial; a non-empty
// split has a finite lse; and merging the partials on the host by log-sum-exp gives the
// kernel's output.
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

// ---- the planner (plain C++) ----------------------------------------------------------------

PagedDecodeParams plan_params(int batch, int num_kv_heads, int max_context) {
  PagedDecodeParams p;
  p.batch = batch;
  p.num_q_heads = num_kv_heads * 4;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = 128;
  p.block_size = 16;
  p.max_blocks_per_seq = (max_context + 15) / 16;
  return p;
}

TEST(SplitKvPlan, FillsTheGpuWhenBatchTimesHeadsCannot) {
  // One wave of 2 blocks per SM x 132 SMs = 264 slots; 8 KV heads. Rounded down, so the grid
  // never spills into a second wave.
  EXPECT_EQ(kernels::plan_num_splits(plan_params(1, 8, 32768), 132), 33);
  EXPECT_EQ(kernels::plan_num_splits(plan_params(8, 8, 32768), 132), 4);
  EXPECT_EQ(kernels::plan_num_splits(plan_params(16, 8, 8192), 132), 2);
}

TEST(SplitKvPlan, NoSplitWhenTheGridIsAlreadyFull) {
  EXPECT_EQ(kernels::plan_num_splits(plan_params(17, 8, 8192), 132), 1);
  EXPECT_EQ(kernels::plan_num_splits(plan_params(64, 8, 8192), 132), 1);
  EXPECT_EQ(kernels::plan_num_splits(plan_params(256, 8, 32768), 132), 1);
}

TEST(SplitKvPlan, SplitsAreNeverShorterThanTheMinimum) {
  // 1024 tokens at >= 256 per split: at most 4 splits, whatever the SM count.
  EXPECT_EQ(kernels::plan_num_splits(plan_params(1, 8, 1024), 132), 4);
  EXPECT_EQ(kernels::plan_num_splits(plan_params(1, 8, 100), 132), 1);
  EXPECT_GE(kernels::plan_num_splits(plan_params(1, 1, 1 << 20), 132), 1);
  EXPECT_LE(kernels::plan_num_splits(plan_params(1, 1, 1 << 20), 132), 256);
}

TEST(SplitKvPlan, WorkspaceBytesCoverPartialsAndLse) {
  const PagedDecodeParams p = plan_params(3, 8, 1024);  // Hq 32, d 128
  EXPECT_EQ(kernels::split_kv_workspace(p, 5).total_bytes, std::size_t{3} * 32 * 5 * (128 + 1) * 4);
  EXPECT_EQ(kernels::split_kv_workspace(p, 1).total_bytes, std::size_t{3} * 32 * 1 * 129 * 4);
}

}  // namespace
}  // namespace decodebench
