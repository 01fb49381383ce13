// The CPU decode's attention variants (sliding window, sinks, soft-cap) against the reference on
// every compiled path, and the faults each check must catch: a window off by one block, sinks
// dropped, the soft-cap ignored; and a window's walk never touching a block before it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_decode.h"
#include "common/dtype.h"
#include "device/paged_kv.h"
#include "reference/reference.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

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
  int num_splits = 0;  // 0: planned
  double hit_rate = 0;
};

// A failing case prints its name and shape, not gtest's byte dump of the struct.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name << " (Hq " << c.hq << ", Hkv " << c.hkv << ", d " << c.head_dim << ", B " << c.batch
      << ", kv " << dtype_name(c.kv) << ", window " << c.window << ", sinks " << c.sinks
      << ", soft-cap " << c.softcap << ")";
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
  s.seed = 99;
  return make_workload(s);
}

std::vector<float> run_cpu(const kernels::PagedDecodeParams& params, int rows,
                           const cpu::DecodeOptions& options) {
  kernels::PagedDecodeParams p = params;
  std::vector<std::byte> out(static_cast<std::size_t>(rows) * p.num_q_heads * p.head_dim * 2);
  p.out = out.data();
  cpu::paged_decode(p, options);
  return decode_to_float(out, p.q_dtype);
}

Comparison against_reference(const Workload& w, const kernels::PagedDecodeParams& p,
                             const cpu::DecodeOptions& options) {
  const std::vector<float> ref = reference_decode(w);
  return compare_outputs(run_cpu(p, w.rows(), options), ref, p.num_q_heads, p.head_dim,
                         tolerance_for(w.spec.q_dtype, w.spec.kv_dtype));
}

std::vector<cpu::DecodePath> compiled_paths() {
  std::vector<cpu::DecodePath> paths;
  if (cpu::avx512_compiled()) paths.push_back(cpu::DecodePath::avx512);
  if (cpu::avx2_compiled()) paths.push_back(cpu::DecodePath::avx2);
  paths.push_back(cpu::DecodePath::portable);
  return paths;
}

const ContextSpec ragged(int lo, int hi) { return ContextSpec::ragged(lo, hi); }

// Windows shorter and longer than a block and a tile (64 tokens at d = 128, 128 at d = 64 on
// avx512), windows starting mid-block, contexts shorter than the window, blocks larger than a
// tile (P = 128: the walk starts inside the block), the split path, an integer format's tiles.
const Case kCases[] = {
    // name                      Hq Hkv  d  B  context        P   kv          W    sinks cap
    {"w1_p16", 8, 2, 128, 7, ragged(1, 97), 16, DType::f16, 1, false, 0},
    {"w17_p8_gqa4", 8, 2, 128, 7, ragged(1, 300), 8, DType::f16, 17, false, 0},
    {"w100_p16_d64", 8, 2, 64, 7, ragged(1, 300), 16, DType::bf16, 100, false, 0},
    {"w200_p128_big_blocks", 8, 2, 128, 5, ragged(150, 700), 128, DType::f16, 200, false, 0},
    {"w33_p1", 4, 4, 64, 3, ragged(1, 120), 1, DType::f16, 33, false, 0},
    {"sinks_only", 16, 2, 64, 7, ragged(1, 300), 16, DType::f16, 0, true, 0},
    {"softcap_only", 8, 2, 128, 7, ragged(1, 300), 16, DType::f16, 0, false, 2.0},
    {"all_three_int8", 8, 2, 128, 7, ragged(1, 300), 16, DType::int8, 50, true, 2.0},
    {"all_three_fp8", 16, 2, 64, 7, ragged(1, 300), 16, DType::fp8_e4m3, 70, true, 3.0},
    {"split_w300", 8, 1, 128, 1, ContextSpec::fixed(1000), 16, DType::f16, 300, true, 2.0, 3},
    {"split_w40_ragged", 8, 2, 128, 3, ragged(1, 700), 8, DType::f16, 40, true, 0, 4},
    {"prefix_shared_w64", 8, 2, 128, 6, ContextSpec::fixed(257), 16, DType::f16, 64, false, 0, 0,
     0.5},
};

class CpuVariantCase : public ::testing::TestWithParam<Case> {};

TEST_P(CpuVariantCase, EveryPathMatchesReference) {
  const Case& c = GetParam();
  const Workload w = workload_of(c);
  for (cpu::DecodePath path : compiled_paths()) {
    SCOPED_TRACE(std::string(c.name) + " path=" + cpu::resolved_path_name(path));
    cpu::DecodeOptions options;
    options.path = path;
    options.num_splits = c.num_splits;
    const Comparison cmp = against_reference(w, w.params(), options);
    EXPECT_TRUE(cmp.ok) << cmp.report;
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, CpuVariantCase, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// The planted faults: the decode told a window one block too long (it walks one more block and
// masks nothing of it), told no sinks, told no soft-cap. Each must fail the check on every path.
TEST(CpuVariants, PlantedFaultsAreCaught) {
  const Case c{"fault", 8, 2, 128, 7, ragged(60, 300), 16, DType::f16, 40, true, 2.0};
  const Workload w = workload_of(c);
  for (cpu::DecodePath path : compiled_paths()) {
    SCOPED_TRACE(cpu::resolved_path_name(path));
    cpu::DecodeOptions options;
    options.path = path;
    ASSERT_TRUE(against_reference(w, w.params(), options).ok);
    kernels::PagedDecodeParams window_off = w.params();
    window_off.window += c.block_size;
    EXPECT_FALSE(against_reference(w, window_off, options).ok) << "window off by one block";
    kernels::PagedDecodeParams window_short = w.params();
    window_short.window -= c.block_size;
    EXPECT_FALSE(against_reference(w, window_short, options).ok) << "window one block short";
    kernels::PagedDecodeParams no_sinks = w.params();
    no_sinks.has_sinks = false;
    EXPECT_FALSE(against_reference(w, no_sinks, options).ok) << "sinks dropped";
    kernels::PagedDecodeParams no_cap = w.params();
    no_cap.softcap = 0;
    EXPECT_FALSE(against_reference(w, no_cap, options).ok) << "soft-cap ignored";
  }
}

// Every token of every block before the block holding the window's first token is NaN: a walk
// that read one of them (as a token, or masked: NaN x 0 is NaN) would put NaN in the output.
TEST(CpuVariants, AWindowNeverReadsTheBlocksBeforeIt) {
  const Case c{"poisoned", 8, 2, 128, 7, ragged(1, 400), 16, DType::f16, 37, false, 0};
  Workload w = workload_of(c);
  const std::uint16_t nan_bits = 0x7e00;  // f16 quiet NaN
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
  ASSERT_GT(poisoned_blocks, 20);
  for (cpu::DecodePath path : compiled_paths()) {
    SCOPED_TRACE(cpu::resolved_path_name(path));
    cpu::DecodeOptions options;
    options.path = path;
    const Comparison cmp = against_reference(w, w.params(), options);
    EXPECT_TRUE(cmp.ok) << cmp.report;
    // The poison is live: without the window the same walk reads it.
    kernels::PagedDecodeParams full = w.params();
    full.window = 0;
    const std::vector<float> out = run_cpu(full, w.rows(), options);
    bool any_nan = false;
    for (float x : out) any_nan = any_nan || std::isnan(x);
    EXPECT_TRUE(any_nan);
  }
}

// The cascade takes sinks and the soft-cap: both passes cap their scores, and the merge adds each
// head's sink once. Against the reference on every path, with shared prefixes (plan groups) and
// without; planted: sinks dropped, the cap ignored.
TEST(CpuVariants, TheCascadeTakesSinksAndSoftCap) {
  const Case cases[] = {
      {"cascade_both", 8, 2, 128, 6, ContextSpec::fixed(257), 16, DType::f16, 0, true, 2.0, 0, 0.5},
      {"cascade_int8", 16, 2, 64, 5, ragged(40, 300), 16, DType::int8, 0, true, 3.0, 0, 0.7},
      {"cascade_unshared", 8, 2, 128, 3, ragged(1, 200), 16, DType::f16, 0, true, 2.0},
  };
  for (const Case& c : cases) {
    const Workload w = workload_of(c);
    const std::vector<float> ref = reference_decode(w);
    ASSERT_EQ(cpu::cascade_unsupported_reason(w.params()), "") << c.name;
    for (cpu::DecodePath path : compiled_paths()) {
      SCOPED_TRACE(std::string(c.name) + " path=" + cpu::resolved_path_name(path));
      cpu::DecodeOptions options;
      options.path = path;
      const auto check = [&](kernels::PagedDecodeParams p) {
        kernels::PrefixPlan plan = kernels::plan_prefixes(p);
        plan.bind(p);
        std::vector<std::byte> out(static_cast<std::size_t>(w.rows()) * p.num_q_heads * p.head_dim *
                                   2);
        p.out = out.data();
        cpu::paged_decode_cascade(p, options);
        return compare_outputs(decode_to_float(out, p.q_dtype), ref, p.num_q_heads, p.head_dim,
                               tolerance_for(w.spec.q_dtype, w.spec.kv_dtype));
      };
      const Comparison cmp = check(w.params());
      EXPECT_TRUE(cmp.ok) << cmp.report;
      kernels::PagedDecodeParams no_sinks = w.params();
      no_sinks.has_sinks = false;
      EXPECT_FALSE(check(no_sinks).ok) << "sinks dropped";
      kernels::PagedDecodeParams no_cap = w.params();
      no_cap.softcap = 0;
      EXPECT_FALSE(check(no_cap).ok) << "soft-cap ignored";
    }
  }
}

// The cascade takes a window beside sinks and the soft-cap (cpu_cascade_window_test.cpp holds it
// to the reference); only MLA is refused, naming kernel 'cpu'.
TEST(CpuVariants, TheCascadeTakesAWindow) {
  const Workload w = workload_of(
      {"cascade", 8, 2, 128, 4, ContextSpec::fixed(64), 16, DType::f16, 32, true, 2.0, 0, 0.5});
  kernels::PagedDecodeParams p = w.params();
  EXPECT_EQ(cpu::cascade_unsupported_reason(p), "");
  kernels::PrefixPlan plan = kernels::plan_prefixes(p);
  plan.bind(p);
  std::vector<std::byte> out(static_cast<std::size_t>(4) * 8 * 128 * 2);
  p.out = out.data();
  EXPECT_NO_THROW(cpu::paged_decode_cascade(p));
}

}  // namespace
}  // namespace decodebench
