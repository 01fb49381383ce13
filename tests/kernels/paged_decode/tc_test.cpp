// tc specifics through the SIMT emulator, on every compiled head_dim and KV dtype: every GQA group
// 1..8 (one padded MMA serves them all), q of another dtype than the MMA (the hi + lo split of
// q), contexts around its 64-token tile and the split unit, block sizes up to 128, the split
// count (1 writes the output directly, many, more than there are units), and a planted fault.
// The registry-driven suite (paged_decode_test.cpp) covers the shapes common to every rung.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "device/float_formats.h"
#include "kernels.h"
#include "kernels/paged_decode/decode_spec.h"
#include "reference/reference.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

using kernels::PagedDecodeParams;

const kernels::KernelInfo* tc_info() { return kernels::find_kernel("tc"); }

struct Case {
  int batch = 2;
  ContextSpec context = ContextSpec::fixed(97);
  int num_q_heads = 8;
  int num_kv_heads = 2;
  DType q_dtype = DType::f16;
  int block_size = 16;
  double hit_rate = 0;
  int num_splits = 1;
};

Workload make(const Case& c, int head_dim, DType kv_dtype) {
  return make_workload(testing_support::decode_spec(c, head_dim, kv_dtype, 4242));
}

struct TcRun {
  kernels::LaunchResult launch;
  std::vector<float> out;  // [rows][Hq][d]
  std::vector<float> ws;   // the workspace after the launch
};

TcRun run_tc(const Workload& w, int num_splits) {
  PagedDecodeParams p = w.params();
  const std::size_t out_elems = static_cast<std::size_t>(w.rows()) * p.num_q_heads * p.head_dim;
  std::vector<std::uint16_t> out(out_elems, 0xffff);  // NaN in f16 and bf16: must be written
  const kernels::SplitKvWorkspace layout = kernels::split_kv_workspace(p, num_splits);
  TcRun run;
  run.ws.assign(layout.total_bytes / sizeof(float), std::nanf(""));
  p.out = out.data();
  layout.bind(p, run.ws.data());
  run.launch = kernels::emu::launch_paged_decode("tc", p, /*stream=*/nullptr);
  run.out.resize(out_elems);
  for (std::size_t i = 0; i < out_elems; ++i) {
    run.out[i] =
        p.q_dtype == DType::f16 ? floatfmt::f16_to_float(out[i]) : floatfmt::bf16_to_float(out[i]);
  }
  return run;
}

// Runs `c` on every compiled head_dim with the first compiled KV dtype and on every compiled KV
// dtype with the first head_dim (a cross, not the product: each value is met, the emulated run
// stays short) and compares with the reference.
void expect_matches_reference(const Case& c, const std::string& what) {
  const kernels::KernelInfo* k = tc_info();
  if (k == nullptr || k->head_dims.empty()) GTEST_SKIP() << "tc not compiled in this build";
  for (int d : k->head_dims) {
    for (DType kv : k->kv_dtypes) {
      if (d != k->head_dims.front() && kv != k->kv_dtypes.front()) continue;
      SCOPED_TRACE(what + ", d " + std::to_string(d) + ", KV " + std::string(dtype_name(kv)));
      const Workload w = make(c, d, kv);
      const TcRun run = run_tc(w, c.num_splits);
      ASSERT_TRUE(run.launch.ok()) << run.launch.message;
      const Comparison cmp = compare_outputs(run.out, reference_decode(w), c.num_q_heads, d,
                                             tolerance_for(c.q_dtype, kv));
      EXPECT_TRUE(cmp.ok) << cmp.mismatches << " of " << cmp.checked << " off; " << cmp.report;
    }
  }
}

TEST(TcEmu, EveryGroupOneToEight) {
  for (int group = 1; group <= 8; ++group) {
    Case c;
    c.num_kv_heads = 2;
    c.num_q_heads = 2 * group;
    c.q_dtype = group % 2 == 0 ? DType::f16 : DType::bf16;
    expect_matches_reference(c, "group " + std::to_string(group));
  }
}

// The MMA type is the KV dtype (f16 for fp8): q of the other 16-bit dtype goes in as hi + lo.
TEST(TcEmu, QueryDtypeOtherThanTheMmaType) {
  for (DType q : {DType::f16, DType::bf16}) {
    Case c;
    c.q_dtype = q;
    c.num_q_heads = 16;  // group 8
    c.context = ContextSpec::ragged(15, 170);
    c.hit_rate = 0.5;
    expect_matches_reference(c, std::string("q ") + std::string(dtype_name(q)));
  }
}

// Around the 64-token tile (a warp's 16 tokens, the 4 warps) and the split unit.
TEST(TcEmu, ContextsAroundTheTile) {
  for (int context : {1, 15, 16, 17, 63, 64, 65, 129}) {
    Case c;
    c.batch = 1;
    c.context = ContextSpec::fixed(context);
    c.num_splits = context > 64 ? 2 : 1;
    expect_matches_reference(c, "context " + std::to_string(context));
  }
}

TEST(TcEmu, BlockSizes) {
  for (int block : {8, 32, 64, 128}) {
    Case c;
    c.block_size = block;
    c.context = ContextSpec::ragged(40, 300);
    c.hit_rate = 1.0;  // whole prefix shared
    expect_matches_reference(c, "block " + std::to_string(block));
  }
}

TEST(TcEmu, SplitCounts) {
  for (int splits : {1, 2, 3, 9}) {
    Case c;
    c.batch = 1;
    c.context = ContextSpec::fixed(700);
    c.num_splits = splits;
    expect_matches_reference(c, std::to_string(splits) + " splits");
  }
  Case empty;  // more splits than units of the longest context: the last ones are empty
  empty.context = ContextSpec::ragged(1, 40);
  empty.num_splits = 7;
  expect_matches_reference(empty, "7 splits of <= 40 tokens");
}

// One split writes the output itself: the workspace is not touched (no merge launch).
TEST(TcEmu, OneSplitLeavesTheWorkspaceAlone) {
  const kernels::KernelInfo* k = tc_info();
  if (k == nullptr || k->head_dims.empty()) GTEST_SKIP() << "tc not compiled in this build";
  Case c;
  const TcRun run = run_tc(make(c, k->head_dims.front(), k->kv_dtypes.front()), 1);
  ASSERT_TRUE(run.launch.ok()) << run.launch.message;
  for (float v : run.ws) ASSERT_TRUE(std::isnan(v));
}

// A planted fault is caught: the output compared with another workload's reference fails.
TEST(TcEmu, WrongResultIsCaught) {
  const kernels::KernelInfo* k = tc_info();
  if (k == nullptr || k->head_dims.empty()) GTEST_SKIP() << "tc not compiled in this build";
  Case c;
  c.num_splits = 3;
  const int d = k->head_dims.front();
  const Workload w = make(c, d, k->kv_dtypes.front());
  const TcRun run = run_tc(w, c.num_splits);
  ASSERT_TRUE(run.launch.ok()) << run.launch.message;
  Case other = c;
  other.context = ContextSpec::fixed(96);  // one token fewer
  const Workload w2 = make(other, d, k->kv_dtypes.front());
  const Comparison cmp = compare_outputs(run.out, reference_decode(w2), c.num_q_heads, d,
                                         tolerance_for(c.q_dtype, k->kv_dtypes.front()));
  EXPECT_FALSE(cmp.ok);
}

}  // namespace
}  // namespace decodebench
