// The attention variants on the tensor-core rungs through the SIMT emulator, against the CPU
// reference: tc takes sliding windows, sinks and soft-capping (float and integer KV, one split
// and many), cascade sinks and soft-capping (its prefix pass and merge) and refuses windows. The
// faults each check must catch: a window one block too long or short, sinks dropped, the cap
// ignored; and a window's walk never touching a block before the one holding its first token.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "device/paged_kv.h"
#include "kernels.h"
#include "reference/reference.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

// The reference's OpenMP threads would only compete with the emulated ones (paged_decode_test).
const int kOpenMpSingleThread = [] {
  omp_set_num_threads(1);
  return 1;
}();

struct Case {
  const char* name;
  int hq, hkv, head_dim;
  int batch;
  ContextSpec context;
  int block_size;
  DType kv;
  int window;
  bool sinks;
  double softcap;
  int num_splits = 1;  // tc: 1 writes out directly (the sink joins there), more merge
  double hit_rate = 0;
};

// A failing case prints its name and shape, not gtest's byte dump of the struct.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name << " (Hq " << c.hq << ", Hkv " << c.hkv << ", d " << c.head_dim << ", B " << c.batch
      << ", kv " << dtype_name(c.kv) << ", window " << c.window << ", sinks " << c.sinks
      << ", soft-cap " << c.softcap << ", splits " << c.num_splits << ")";
}

const kernels::KernelInfo* rung(const char* name) { return kernels::find_kernel(name); }

// The compiled (head_dim, KV dtype) a case can run with on `k`: its own when compiled, else the
// first compiled of the same kind (float or integer), else none.
bool adapt(const kernels::KernelInfo& k, Case& c) {
  const auto has = [](const auto& items, auto x) {
    return std::find(items.begin(), items.end(), x) != items.end();
  };
  if (!has(k.head_dims, c.head_dim)) c.head_dim = k.head_dims.front();
  if (has(k.kv_dtypes, c.kv)) return true;
  for (DType kv : k.kv_dtypes) {
    if (is_int_kv(kv) == is_int_kv(c.kv)) {
      c.kv = kv;
      return true;
    }
  }
  return false;
}

Workload workload_of(const Case& c) {
  WorkloadSpec s;
  s.model = ModelShape{"variants", c.hq, c.hkv, c.head_dim, 1, ""}.with_window(c.window);
  s.model.sinks = c.sinks;
  s.model.attn_logit_softcapping = c.softcap;
  s.batch = c.batch;
  s.context = c.context;
  s.block_size = c.block_size;
  s.kv_dtype = c.kv;
  s.hit_rate = c.hit_rate;
  s.seed = 77;
  return make_workload(s);
}

struct Run {
  kernels::LaunchResult launch;
  std::vector<float> out;
};

// `k` on `params` (the workload's, perhaps with a planted fault) with the workspace and prefix
// plan its backend would bind; num_splits > 0 overrides tc's planned split count.
Run run_rung(const kernels::KernelInfo& k, const kernels::PagedDecodeParams& params,
             int num_splits) {
  kernels::PagedDecodeParams p = params;
  std::vector<std::byte> out(static_cast<std::size_t>(p.batch) * p.num_q_heads * p.head_dim *
                             dtype_size(p.q_dtype));
  p.out = out.data();
  kernels::PrefixPlan plan;
  if (k.prefix_aware) {
    plan = kernels::plan_prefixes(p);
    plan.bind(p);
  }
  std::vector<float> workspace;
  kernels::SplitKvWorkspace layout =
      k.prefix_aware ? kernels::plan_workspace(k, p, kernels::ResidentCtas{4, 2})
                     : kernels::split_kv_workspace(p, num_splits);
  workspace.assign((layout.total_bytes + sizeof(float) - 1) / sizeof(float), std::nanf(""));
  layout.bind(p, workspace.data());
  Run r;
  r.launch = kernels::emu::launch_paged_decode(k.name, p, /*stream=*/nullptr);
  r.out = decode_to_float(out, p.q_dtype);
  return r;
}

Comparison against_reference(const kernels::KernelInfo& k, const Workload& w,
                             const kernels::PagedDecodeParams& p, int num_splits) {
  const Run r = run_rung(k, p, num_splits);
  EXPECT_TRUE(r.launch.ok()) << r.launch.message;
  return compare_outputs(r.out, reference_decode(w), p.num_q_heads, p.head_dim,
                         tolerance_for(w.spec.q_dtype, w.spec.kv_dtype));
}

const ContextSpec ragged(int lo, int hi) { return ContextSpec::ragged(lo, hi); }

// tc: windows shorter and longer than a block, a warp's 16 tokens and a 64-token tile, starting
// mid-block and past a whole warp of the first block (P = 64, 128), contexts shorter than the
// window, P = 8 (int4's half-block instance), one split and several, every variant with each
// integer format's own scale path.
const Case kTcCases[] = {
    // name                  Hq Hkv  d  B  context        P   kv              W  sinks cap splits
    {"w1_p16", 8, 2, 128, 5, ragged(1, 97), 16, DType::f16, 1, false, 0},
    {"w17_p8_gqa4", 8, 2, 128, 5, ragged(1, 300), 8, DType::f16, 17, false, 0},
    {"w100_d64_fp8", 8, 2, 64, 5, ragged(1, 300), 16, DType::fp8_e4m3, 100, false, 0},
    {"w200_p128", 8, 2, 128, 3, ragged(150, 700), 128, DType::f16, 200, false, 0},
    {"w70_p64_split3", 4, 1, 128, 2, ragged(300, 700), 64, DType::f16, 70, false, 0, 3},
    {"sinks_only", 16, 2, 64, 5, ragged(1, 300), 16, DType::f16, 0, true, 0},
    {"sinks_split4", 8, 1, 128, 2, ContextSpec::fixed(500), 16, DType::f16, 0, true, 0, 4},
    {"softcap_only", 8, 2, 128, 5, ragged(1, 300), 16, DType::f16, 0, false, 2.0},
    {"all_int8", 8, 2, 128, 5, ragged(1, 300), 16, DType::int8, 50, true, 2.0},
    {"all_int4_p8", 8, 2, 128, 5, ragged(1, 300), 8, DType::int4, 45, true, 2.0},
    {"all_int4_split2", 8, 2, 64, 3, ragged(200, 600), 32, DType::int4, 130, true, 3.0, 2},
    {"all_fp8_split3", 16, 2, 64, 3, ragged(100, 600), 16, DType::fp8_e4m3, 70, true, 3.0, 3},
};

class TcVariantCase : public ::testing::TestWithParam<Case> {};

TEST_P(TcVariantCase, MatchesTheReference) {
  const kernels::KernelInfo* k = rung("tc");
  if (k == nullptr) GTEST_SKIP() << "tc not compiled in this build";
  Case c = GetParam();
  if (!adapt(*k, c)) GTEST_SKIP() << "no compiled KV format of this kind";
  const Workload w = workload_of(c);
  EXPECT_EQ(kernels::unsupported_reason(*k, w.params()), "");
  const Comparison cmp = against_reference(*k, w, w.params(), c.num_splits);
  EXPECT_TRUE(cmp.ok) << cmp.report;
}

INSTANTIATE_TEST_SUITE_P(Variants, TcVariantCase, ::testing::ValuesIn(kTcCases),
                         [](const auto& test) { return std::string(test.param.name); });

// The planted faults: the kernel told a window one block too long (it walks one more block and
// masks nothing of it) or short, no sinks, no soft-cap. Each must fail the check, with one split
// (the sink joins at the store) and with several (it joins in the merge), float and integer KV.
TEST(TcVariants, PlantedFaultsAreCaught) {
  const kernels::KernelInfo* k = rung("tc");
  if (k == nullptr) GTEST_SKIP() << "tc not compiled in this build";
  for (DType kv : {DType::f16, DType::int8}) {
    for (int splits : {1, 3}) {
      Case c{"fault", 8, 2, 128, 4, ragged(100, 300), 16, kv, 40, true, 2.0, splits};
      if (!adapt(*k, c)) continue;
      SCOPED_TRACE(std::string(dtype_name(c.kv)) + ", splits " + std::to_string(splits));
      const Workload w = workload_of(c);
      ASSERT_TRUE(against_reference(*k, w, w.params(), splits).ok);
      kernels::PagedDecodeParams window_long = w.params();
      window_long.window += c.block_size;
      EXPECT_FALSE(against_reference(*k, w, window_long, splits).ok) << "window a block long";
      kernels::PagedDecodeParams window_short = w.params();
      window_short.window -= c.block_size;
      EXPECT_FALSE(against_reference(*k, w, window_short, splits).ok) << "window a block short";
      kernels::PagedDecodeParams no_sinks = w.params();
      no_sinks.has_sinks = false;
      EXPECT_FALSE(against_reference(*k, w, no_sinks, splits).ok) << "sinks dropped";
      kernels::PagedDecodeParams no_cap = w.params();
      no_cap.softcap = 0;
      EXPECT_FALSE(against_reference(*k, w, no_cap, splits).ok) << "soft-cap ignored";
    }
  }
}

// Every token of every block before the one holding the window's first token is NaN: a walk that
// read one of them (as a token, or masked: NaN x 0 is NaN in the MMA) would put NaN in the
// output. Without the window the same walk reads the poison.
TEST(TcVariants, AWindowNeverReadsTheBlocksBeforeIt) {
  const kernels::KernelInfo* k = rung("tc");
  if (k == nullptr) GTEST_SKIP() << "tc not compiled in this build";
  Case c{"poisoned", 8, 2, 128, 5, ragged(1, 400), 16, DType::f16, 37, false, 0, 2};
  if (!adapt(*k, c) || dtype_size(c.kv) != 2) GTEST_SKIP() << "needs a 16-bit KV format";
  Workload w = workload_of(c);
  const std::uint16_t nan_bits = c.kv == DType::bf16 ? 0x7fc0 : 0x7e00;
  int poisoned_blocks = 0;
  for (int r = 0; r < w.rows(); ++r) {
    const int len = w.layout.context_lens[r];
    for (int j = 0; j < window_first_block(len, c.window, c.block_size); ++j) {
      const std::int32_t block = w.layout.block_tables[r * w.layout.max_blocks_per_seq + j];
      const std::size_t first = kv_row_offset(block, 0, 0, c.hkv, c.block_size, c.head_dim);
      for (std::size_t i = 0; i < static_cast<std::size_t>(c.hkv) * c.block_size * c.head_dim;
           ++i) {
        std::memcpy(&w.k_cache[(first + i) * 2], &nan_bits, 2);
        std::memcpy(&w.v_cache[(first + i) * 2], &nan_bits, 2);
      }
      ++poisoned_blocks;
    }
  }
  ASSERT_GT(poisoned_blocks, 10);
  const Comparison cmp = against_reference(*k, w, w.params(), c.num_splits);
  EXPECT_TRUE(cmp.ok) << cmp.report;
  kernels::PagedDecodeParams full = w.params();
  full.window = 0;
  bool any_nan = false;
  for (float x : run_rung(*k, full, c.num_splits).out) any_nan = any_nan || std::isnan(x);
  EXPECT_TRUE(any_nan);
}

// cascade: sinks and the soft-cap through both passes and the merge, with shared prefixes (two
// groups) and without; the same planted faults. It refuses a window, naming tc.
TEST(CascadeVariants, SinksAndSoftCapMatchTheReference) {
  const kernels::KernelInfo* k = rung("cascade");
  if (k == nullptr) GTEST_SKIP() << "cascade not compiled in this build";
  for (DType kv : {DType::f16, DType::int4}) {
    for (double hit : {0.0, 0.6}) {
      Case c{"cascade", 8, 2, 128, 4, ragged(100, 250), 16, kv, 0, true, 2.0, 0, hit};
      if (!adapt(*k, c)) continue;
      SCOPED_TRACE(std::string(dtype_name(c.kv)) + ", hit rate " + std::to_string(hit));
      const Workload w = workload_of(c);
      EXPECT_TRUE(against_reference(*k, w, w.params(), 0).ok);
      kernels::PagedDecodeParams no_sinks = w.params();
      no_sinks.has_sinks = false;
      EXPECT_FALSE(against_reference(*k, w, no_sinks, 0).ok) << "sinks dropped";
      kernels::PagedDecodeParams no_cap = w.params();
      no_cap.softcap = 0;
      EXPECT_FALSE(against_reference(*k, w, no_cap, 0).ok) << "soft-cap ignored";
    }
  }
}

TEST(CascadeVariants, RefusesAWindowNamingTc) {
  const kernels::KernelInfo* k = rung("cascade");
  if (k == nullptr) GTEST_SKIP() << "cascade not compiled in this build";
  Case c{"window", 8, 2, 128, 2, ContextSpec::fixed(64), 16, DType::f16, 32, false, 0};
  adapt(*k, c);
  const std::string why = kernels::unsupported_reason(*k, workload_of(c).params());
  EXPECT_NE(why.find("a sliding window of 32 tokens"), std::string::npos) << why;
  EXPECT_NE(why.find("'tc'"), std::string::npos) << why;
}

}  // namespace
}  // namespace decodebench
