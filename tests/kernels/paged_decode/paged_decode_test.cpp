// Every kernel of the ladder, run through the SIMT emulator against the CPU reference, on odd
// shapes: batch 1/3/7; context 1/15/16/17/97/300 and ragged; GQA groups 1/4/8; prefix-hit rate
// 0/0.5/1; block size 8/16/32; q f16 and bf16; every compiled head_dim and KV dtype.
//
// Registry-driven: the suite is instantiated from kernel_ladder() x compiled head_dims x KV
// dtypes, so a new rung is tested the moment it is registered. The shapes are a covering subset,
// not the full product: the first compiled (head_dim, KV dtype) runs every case, the others a
// rotating pair, so each axis value meets every kernel while the emulated run stays short.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "kernels.h"
#include "kernels/paged_decode/decode_spec.h"
#include "reference/reference.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

// The CPU reference parallelizes with OpenMP. Here its threads would only compete with the
// emulated threads for the cores (libgomp's spinning workers slow emulation badly), and
// libgomp is not ThreadSanitizer-instrumented, so its barriers would show up as false races.
// The shapes are tiny: one thread.
const int kOpenMpSingleThread = [] {
  omp_set_num_threads(1);
  return 1;
}();

struct Case {
  const char* label;
  int batch;
  ContextSpec context;
  int num_q_heads;
  int num_kv_heads;
  double hit_rate;
  int prefix_groups;
  int block_size;
  DType q_dtype;
};

// Each row is odd on purpose; comments say what it stresses.
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      // One token: the softmax is a single 1.0.
      {"b1_ctx1_mha_p8", 1, ContextSpec::fixed(1), 2, 2, 0.0, 1, 8, DType::f16},
      // Partial last block, GQA 4, half the prefix shared.
      {"b3_ctx15_g4_h05_p16_bf16", 3, ContextSpec::fixed(15), 4, 1, 0.5, 1, 16, DType::bf16},
      // Exactly one block; every sequence shares it (h = 1), GQA 8.
      {"b3_ctx16_g8_h1_p16", 3, ContextSpec::fixed(16), 8, 1, 1.0, 1, 16, DType::f16},
      // One token past a block boundary, 7 sequences, two prefix groups.
      {"b7_ctx17_g1_h05_p8_bf16", 7, ContextSpec::fixed(17), 2, 2, 0.5, 2, 8, DType::bf16},
      // Ragged contexts across 97..300, GQA 4 over 2 KV heads, block 32.
      {"b3_ragged97_300_g4_p32", 3, ContextSpec::ragged(97, 300), 8, 2, 0.5, 1, 32, DType::f16},
      // Longer than one score chunk / tile; whole prefix shared by all.
      {"b1_ctx300_g8_h1_p32_bf16", 1, ContextSpec::fixed(300), 8, 1, 1.0, 1, 32, DType::bf16},
      // 97 tokens, 7 sequences, MHA over 3 heads (Hkv not a power of two).
      {"b7_ctx97_mha3_h0_p16", 7, ContextSpec::fixed(97), 3, 3, 0.0, 1, 16, DType::f16},
      // Long enough for split_kv's planner to cut the context (4 SMs x 2 blocks).
      {"b1_ctx600_g4_p16", 1, ContextSpec::fixed(600), 4, 1, 0.0, 1, 16, DType::f16},
  };
  return all;
}

struct Target {
  std::string kernel;
  int head_dim;
  DType kv_dtype;
  int combo_index;  // position among the compiled (head_dim, kv_dtype) pairs
};

std::vector<Target> targets() {
  std::vector<Target> out;
  for (const kernels::KernelInfo& k : kernels::kernel_ladder()) {
    if (k.mla_only) continue;  // MLA's shapes only: its own suite (mla_test.cpp)
    int combo = 0;
    for (int d : k.head_dims) {
      for (DType kv : k.kv_dtypes) out.push_back({k.name, d, kv, combo++});
    }
  }
  return out;
}

// A failing target prints as its test name does, not as gtest's byte dump of the struct.
void PrintTo(const Target& t, std::ostream* os) {
  *os << t.kernel << " d" << t.head_dim << " " << dtype_name(t.kv_dtype);
}

std::string target_name(const testing::TestParamInfo<Target>& info) {
  return info.param.kernel + "_d" + std::to_string(info.param.head_dim) + "_" +
         std::string(dtype_name(info.param.kv_dtype));
}

WorkloadSpec spec_for(const Case& c, const Target& t) {
  return testing_support::decode_spec(c, t.head_dim, t.kv_dtype, 1234);
}

// Runs one case; returns the comparison (launch failures are test failures).
struct CaseRun {
  kernels::LaunchResult launch;
  std::vector<float> out;
  std::vector<float> ref;
  Tolerance tol;
  int num_q_heads = 0;
  int head_dim = 0;
};

CaseRun run_case(const Case& c, const Target& t) {
  const Workload w = make_workload(spec_for(c, t));
  kernels::PagedDecodeParams p = w.params();
  std::vector<std::byte> out(static_cast<std::size_t>(p.batch) * p.num_q_heads * p.head_dim *
                             dtype_size(p.q_dtype));
  p.out = out.data();
  std::vector<float> workspace;
  const kernels::KernelInfo* info = nullptr;
  for (const auto& k : kernels::kernel_ladder()) {
    if (k.name == t.kernel) info = &k;
  }
  // A prefix-aware rung gets the planner's plan of the case's tables, as the backends bind it.
  kernels::PrefixPlan plan;
  if (info != nullptr && info->prefix_aware) {
    plan = kernels::plan_prefixes(p);
    plan.bind(p);
  }
  if (info != nullptr && info->uses_workspace) {
    const kernels::SplitKvWorkspace layout =
        kernels::plan_workspace(*info, p, kernels::ResidentCtas{4, 2});
    workspace.assign((layout.total_bytes + sizeof(float) - 1) / sizeof(float), 0.f);
    layout.bind(p, workspace.data());
  }
  CaseRun r;
  r.launch = kernels::emu::launch_paged_decode(t.kernel, p, /*stream=*/nullptr);
  r.out = decode_to_float(out, p.q_dtype);
  r.ref = reference_decode(w);
  r.tol = tolerance_for(p.q_dtype, p.kv_dtype);
  r.num_q_heads = p.num_q_heads;
  r.head_dim = p.head_dim;
  return r;
}

class PagedDecodeEmu : public testing::TestWithParam<Target> {};

TEST_P(PagedDecodeEmu, MatchesTheCpuReference) {
  const Target& t = GetParam();
  const auto& all = cases();
  for (std::size_t i = 0; i < all.size(); ++i) {
    // The first (head_dim, dtype) pair takes every case; the others two, rotating.
    const bool selected =
        t.combo_index == 0 ||
        i % all.size() == static_cast<std::size_t>(2 * t.combo_index) % all.size() ||
        i % all.size() == static_cast<std::size_t>(2 * t.combo_index + 1) % all.size();
    if (!selected) continue;
    const Case& c = all[i];
    SCOPED_TRACE(std::string("case ") + c.label);
    const CaseRun r = run_case(c, t);
    ASSERT_TRUE(r.launch.ok()) << r.launch.message;
    const Comparison cmp = compare_outputs(r.out, r.ref, r.num_q_heads, r.head_dim, r.tol);
    EXPECT_TRUE(cmp.ok) << cmp.mismatches << " of " << cmp.checked << " elements outside atol "
                        << r.tol.atol << " rtol " << r.tol.rtol << "; max_abs " << cmp.max_abs
                        << "\n"
                        << cmp.report;
  }
}

INSTANTIATE_TEST_SUITE_P(Ladder, PagedDecodeEmu, testing::ValuesIn(targets()), target_name);

// The comparison this suite relies on must be able to fail: one element of a correct output,
// nudged well outside the tolerance, is caught and reported with its index.
TEST(PagedDecodeEmuChecker, APlantedWrongElementIsCaught) {
  const auto& ladder = kernels::kernel_ladder();
  ASSERT_FALSE(ladder.empty());
  const Target t{ladder.front().name, ladder.front().head_dims.front(),
                 ladder.front().kv_dtypes.front(), 0};
  CaseRun r = run_case(cases()[1], t);
  ASSERT_TRUE(r.launch.ok()) << r.launch.message;
  ASSERT_TRUE(compare_outputs(r.out, r.ref, r.num_q_heads, r.head_dim, r.tol).ok);
  const std::size_t planted = r.out.size() / 2 + 3;
  r.out[planted] += 0.05f + 0.05f * std::abs(r.out[planted]);
  const Comparison cmp = compare_outputs(r.out, r.ref, r.num_q_heads, r.head_dim, r.tol);
  EXPECT_FALSE(cmp.ok);
  EXPECT_EQ(cmp.mismatches, 1u);
}

TEST(PagedDecodeEmuLaunch, UnknownKernelListsTheLadder) {
  kernels::PagedDecodeParams p;
  const kernels::LaunchResult r = kernels::emu::launch_paged_decode("no_such_kernel", p, nullptr);
  EXPECT_EQ(r.status, kernels::LaunchStatus::unsupported);
  EXPECT_NE(r.message.find("no_such_kernel"), std::string::npos) << r.message;
  for (const auto& k : kernels::kernel_ladder()) {
    EXPECT_NE(r.message.find(k.name), std::string::npos) << r.message;
  }
}

TEST(PagedDecodeEmuLaunch, UnsupportedShapesAreRefusedWithAReason) {
  const auto& ladder = kernels::kernel_ladder();
  ASSERT_FALSE(ladder.empty());
  const Target t{ladder.front().name, ladder.front().head_dims.front(),
                 ladder.front().kv_dtypes.front(), 0};
  const Workload w = make_workload(spec_for(cases()[0], t));
  kernels::PagedDecodeParams p = w.params();
  std::vector<std::byte> out(4096);
  p.out = out.data();
  kernels::PagedDecodeParams bad = p;
  bad.block_size = 4;  // below every rung's minimum
  EXPECT_EQ(kernels::emu::launch_paged_decode(t.kernel, bad, nullptr).status,
            kernels::LaunchStatus::unsupported);
  bad = p;
  bad.head_dim = 96;  // never compiled
  const auto r = kernels::emu::launch_paged_decode(t.kernel, bad, nullptr);
  EXPECT_EQ(r.status, kernels::LaunchStatus::unsupported);
  EXPECT_NE(r.message.find("96"), std::string::npos) << r.message;
  bad = p;
  bad.k_cache = nullptr;
  EXPECT_EQ(kernels::emu::launch_paged_decode(t.kernel, bad, nullptr).status,
            kernels::LaunchStatus::unsupported);
}

}  // namespace
}  // namespace decodebench
