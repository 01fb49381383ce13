// The optimized CPU decode against the reference, on odd sizes: batch 1/7/37, contexts
// 1/15/16/17/97/1000 and ragged, block sizes 8/16/32, GQA 1/2/4/7/8, head_dim 64/128/256, every
// KV dtype, q f16 and bf16, hit rates 0/0.5/1, the context-split path, every tile-kernel path
// compiled in (avx512, avx2, portable); the avx2 path also over the full grid of KV dtype x
// head_dim x GQA 1/4/8 x block size 1/16/64.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_decode.h"
#include "backends/cpu/cpu_decode_scalar.h"  // fast_exp2
#include "common/dtype.h"
#include "common/errors.h"
#include "device/float_formats.h"
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
  DType q;
  double hit_rate = 0;
  int prefix_groups = 1;
  int num_threads = 0;  // 0: default
  int num_splits = 0;   // 0: planned
};

// A failing case prints its name and shape, not gtest's byte dump of the struct.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name << " (Hq " << c.hq << ", Hkv " << c.hkv << ", d " << c.head_dim << ", B " << c.batch
      << ", P " << c.block_size << ", kv " << dtype_name(c.kv) << ")";
}

WorkloadSpec spec_of(const Case& c) {
  WorkloadSpec s;
  s.model = ModelShape{"test", c.hq, c.hkv, c.head_dim, 1, ""};
  s.batch = c.batch;
  s.context = c.context;
  s.hit_rate = c.hit_rate;
  s.prefix_groups = c.prefix_groups;
  s.kv_dtype = c.kv;
  s.q_dtype = c.q;
  s.block_size = c.block_size;
  s.seed = 1234;
  return s;
}

// Runs the CPU decode on `w` and returns its output decoded to float.
std::vector<float> run_cpu(const Workload& w, const cpu::DecodeOptions& options) {
  kernels::PagedDecodeParams p = w.params();
  std::vector<std::byte> out(static_cast<std::size_t>(w.rows()) * p.num_q_heads * p.head_dim * 2);
  p.out = out.data();
  cpu::paged_decode(p, options);
  return decode_to_float(out, p.q_dtype);
}

void expect_matches_reference(const Case& c, cpu::DecodePath path) {
  SCOPED_TRACE(std::string(c.name) + " path=" + cpu::resolved_path_name(path));
  const Workload w = make_workload(spec_of(c));
  const std::vector<float> ref = reference_decode(w);
  cpu::DecodeOptions options;
  options.path = path;
  options.num_threads = c.num_threads;
  options.num_splits = c.num_splits;
  const std::vector<float> out = run_cpu(w, options);
  const Comparison cmp = compare_outputs(out, ref, c.hq, c.head_dim, tolerance_for(c.q, c.kv));
  EXPECT_TRUE(cmp.ok) << cmp.mismatches << " of " << cmp.checked << " elements out of tolerance\n"
                      << cmp.report;
  EXPECT_EQ(cmp.checked, ref.size());
}

const ContextSpec fixed(int n) { return ContextSpec::fixed(n); }

// The named paths this build has: each is checked on its own, not only the one `automatic` picks.
std::vector<cpu::DecodePath> compiled_paths() {
  std::vector<cpu::DecodePath> paths;
  if (cpu::avx512_compiled()) paths.push_back(cpu::DecodePath::avx512);
  if (cpu::avx2_compiled()) paths.push_back(cpu::DecodePath::avx2);
  paths.push_back(cpu::DecodePath::portable);
  return paths;
}

// A covering subset: every dimension's odd values appear, not their full product.
const Case kCases[] = {
    // name                       Hq  Hkv  d   batch context            P  kv                q h G
    {"b1_ctx1_gqa4", 8, 2, 128, 1, fixed(1), 16, DType::f16, DType::f16},
    {"b7_ctx15_mha_d64_bf16", 4, 4, 64, 7, fixed(15), 8, DType::bf16, DType::bf16},
    {"b7_ctx16_gqa8_d256_e4m3", 16, 2, 256, 7, fixed(16), 16, DType::fp8_e4m3, DType::f16},
    {"b37_ctx17_gqa4_d64_e5m2", 8, 2, 64, 37, fixed(17), 32, DType::fp8_e5m2, DType::bf16},
    {"b7_ctx97_gqa8_f32_h05", 16, 2, 128, 7, fixed(97), 16, DType::f32, DType::f16, 0.5, 2},
    {"b3_ctx1000_gqa4_h1", 8, 2, 128, 3, fixed(1000), 16, DType::f16, DType::bf16, 1.0, 1},
    {"b37_ragged_gqa7", 28, 4, 128, 37, ContextSpec::ragged(1, 300), 8, DType::f16, DType::f16, 0.5,
     3},
    {"b7_ctx97_gqa2_d256_bf16", 16, 8, 256, 7, fixed(97), 32, DType::bf16, DType::bf16},
    {"b1_ctx1000_mha_d256_e5m2", 2, 2, 256, 1, fixed(1000), 8, DType::fp8_e5m2, DType::f16},
    {"b7_ctx97_gqa16_e4m3", 32, 2, 64, 7, fixed(97), 16, DType::fp8_e4m3, DType::bf16, 0.5, 1},
    // The context-split path: batch 1 < threads, so the planner splits the context.
    {"split_b1_hkv1_planned", 4, 1, 128, 1, fixed(1000), 16, DType::f16, DType::f16, 0, 1, 8, 0},
    {"split_b1_ctx17_5splits", 4, 1, 64, 1, fixed(17), 16, DType::bf16, DType::bf16, 0, 1, 3, 5},
    {"split_b7_ragged_3splits", 8, 2, 128, 7, ContextSpec::ragged(1, 700), 16, DType::fp8_e4m3,
     DType::f16, 0.5, 2, 2, 3},
};

class CpuDecodeCase : public ::testing::TestWithParam<Case> {};

TEST_P(CpuDecodeCase, AutomaticPathMatchesReference) {
  expect_matches_reference(GetParam(), cpu::DecodePath::automatic);
}
TEST_P(CpuDecodeCase, PortablePathMatchesReference) {
  expect_matches_reference(GetParam(), cpu::DecodePath::portable);
}
TEST_P(CpuDecodeCase, Avx2PathMatchesReference) {
  if (!cpu::avx2_compiled()) GTEST_SKIP() << "the avx2 path is not compiled into this build";
  expect_matches_reference(GetParam(), cpu::DecodePath::avx2);
}
TEST_P(CpuDecodeCase, Avx512PathMatchesReference) {
  if (!cpu::avx512_compiled()) GTEST_SKIP() << "the avx512 path is not compiled into this build";
  expect_matches_reference(GetParam(), cpu::DecodePath::avx512);
}

INSTANTIATE_TEST_SUITE_P(OddShapes, CpuDecodeCase, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// Every KV dtype x head_dim instance compiled, on one small odd shape.
TEST(CpuDecode, EveryDtypeAndHeadDim) {
  for (DType kv : all_dtypes()) {
    for (int d : {64, 128, 256}) {
      const Case c{"grid", 8, 2, d, 3, ContextSpec::fixed(37), 16, kv, DType::f16};
      SCOPED_TRACE(std::string(dtype_name(kv)) + " d=" + std::to_string(d));
      expect_matches_reference(c, cpu::DecodePath::automatic);
    }
  }
}

// The avx2 tile kernels over the full grid: every KV dtype x head_dim 64/128/256 x GQA 1/4/8
// (passes of 1, 4 and 8 heads) x block size 1/16/64, ragged contexts (tails of every length
// within the 8-token score groups and the tiles), alternately one item per sequence and 3
// context splits.
TEST(CpuDecode, Avx2EveryDtypeHeadDimGroupAndBlockSize) {
  if (!cpu::avx2_compiled()) GTEST_SKIP() << "the avx2 path is not compiled into this build";
  int index = 0;
  for (DType kv : all_dtypes())
    for (int d : {64, 128, 256})
      for (int group : {1, 4, 8})
        for (int block : {1, 16, 64}) {
          const int splits = index++ % 2 == 0 ? 1 : 3;
          const Case c{"avx2_grid", 2 * group, 2, d, 3,     ContextSpec::ragged(1, 150), block, kv,
                       DType::f16,  0,         1, 2, splits};
          SCOPED_TRACE(std::string(dtype_name(kv)) + " d=" + std::to_string(d) +
                       " g=" + std::to_string(group) + " P=" + std::to_string(block) +
                       " splits=" + std::to_string(splits));
          expect_matches_reference(c, cpu::DecodePath::avx2);
        }
}

// Asking for a path this build lacks is an error that names the paths it has.
TEST(CpuDecode, UncompiledPathIsRejectedWithTheValidOnes) {
  for (cpu::DecodePath path : {cpu::DecodePath::avx512, cpu::DecodePath::avx2}) {
    const bool compiled =
        path == cpu::DecodePath::avx512 ? cpu::avx512_compiled() : cpu::avx2_compiled();
    if (compiled) continue;
    float out[8];
    const std::uint16_t in[8] = {};
    try {
      cpu::convert_kv_to_float(DType::f16, in, 8, out, path);
      ADD_FAILURE() << cpu::resolved_path_name(path) << " accepted though not compiled";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(cpu::resolved_path_name(path)), std::string::npos) << what;
      EXPECT_NE(what.find("valid here: automatic"), std::string::npos) << what;
      EXPECT_NE(what.find("portable"), std::string::npos) << what;
    }
  }
}

// The split planner: no split when the batch divides evenly among the threads, the fewest splits
// that even the load when it does not, and never splits shorter than a few hundred tokens.
TEST(CpuDecode, SplitPlanner) {
  std::vector<std::int32_t> lens(37, 8192);
  kernels::PagedDecodeParams p;
  p.context_lens = lens.data();
  p.num_kv_heads = 8;
  p.batch = 8;
  EXPECT_EQ(cpu::plan_cpu_splits(p, 2), 1);
  EXPECT_EQ(cpu::plan_cpu_splits(p, 1), 1);
  p.batch = 7;  // 7 items on 2 threads leave one idle for a round; 14 do not
  EXPECT_EQ(cpu::plan_cpu_splits(p, 2), 2);
  p.batch = 37;  // 19 rounds for 18.5 items' worth: close enough
  EXPECT_EQ(cpu::plan_cpu_splits(p, 2), 1);
  p.batch = 1;
  EXPECT_EQ(cpu::plan_cpu_splits(p, 2), 2);
  EXPECT_EQ(cpu::plan_cpu_splits(p, 8), 8);
  lens[0] = 300;
  EXPECT_EQ(cpu::plan_cpu_splits(p, 8), 1);
}

TEST(CpuDecode, RejectsUnsupportedShapes) {
  kernels::PagedDecodeParams p;
  p.batch = 1;
  p.num_q_heads = 8;
  p.num_kv_heads = 2;
  p.block_size = 16;
  p.head_dim = 96;
  EXPECT_NE(cpu::unsupported_reason(p).find("64, 128, 256"), std::string::npos);
  p.head_dim = 128;
  EXPECT_EQ(cpu::unsupported_reason(p), "");
  p.block_size = 12;
  EXPECT_NE(cpu::unsupported_reason(p), "");
  p.block_size = 16;
  p.num_q_heads = 6;
  p.num_kv_heads = 4;
  EXPECT_NE(cpu::unsupported_reason(p), "");
  p.num_q_heads = 8;
  p.q_dtype = DType::f32;
  EXPECT_NE(cpu::unsupported_reason(p), "");
}

// The test above must be able to fail: corrupt one K element of a token every sequence reads
// and the comparison against the (uncorrupted) reference must catch it.
TEST(CpuDecode, CorruptedCacheIsCaught) {
  const Case c{"fault", 8, 2, 128, 2, ContextSpec::fixed(33), 16, DType::f16, DType::f16};
  Workload w = make_workload(spec_of(c));
  const std::vector<float> ref = reference_decode(w);
  // First token of sequence 0, kv head 0: physical block block_tables[0][0], slot 0.
  const std::size_t row =
      kv_row_offset(w.layout.block_tables[0], 0, 0, c.hkv, c.block_size, c.head_dim);
  const std::uint16_t big = floatfmt::float_to_f16(60.0f);
  for (int i = 0; i < c.head_dim; ++i) std::memcpy(&w.v_cache[(row + i) * 2], &big, 2);
  const std::vector<float> out = run_cpu(w, {});
  const Comparison cmp = compare_outputs(out, ref, c.hq, c.head_dim, tolerance_for(c.q, c.kv));
  EXPECT_FALSE(cmp.ok);
  EXPECT_GT(cmp.mismatches, 0u);
}

// paged_kv_read's checksum computed directly from the block tables: the first 32-bit word of
// every 64-byte line of every context token's K and V row, every KV head, summed mod 2^64.
std::uint64_t expected_walk_sum(const Workload& w) {
  const kernels::PagedDecodeParams p = w.params();
  const std::size_t elem = dtype_size(p.kv_dtype);
  const std::size_t row_bytes = static_cast<std::size_t>(p.head_dim) * elem;
  std::uint64_t sum = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int t = 0; t < p.context_lens[b]; ++t)
      for (int h = 0; h < p.num_kv_heads; ++h) {
        const std::size_t row = token_row_offset(p.block_tables, p.max_blocks_per_seq, b, t, h,
                                                 p.num_kv_heads, p.block_size, p.head_dim) *
                                elem;
        for (std::size_t line = 0; line < row_bytes; line += 64)
          for (const std::vector<std::byte>* cache : {&w.k_cache, &w.v_cache}) {
            std::uint32_t word;
            std::memcpy(&word, cache->data() + row + line, sizeof word);
            sum += word;
          }
      }
  return sum;
}

// The memory walk of the microbenchmarks (paged_kv_read) reads every line of the KV once, in
// the decode's order: ragged contexts, shared prefixes, the split path, every path's tile size,
// 1/2/4-byte KV and all three head dims.
TEST(CpuDecode, MemoryWalkReadsEveryLineOnce) {
  const Case cases[] = {
      {"ragged", 32, 8, 128, 7, ContextSpec::ragged(1, 1000), 16, DType::f16, DType::f16, 0.5, 2},
      {"split", 8, 2, 64, 1, ContextSpec::fixed(1000), 8, DType::fp8_e4m3, DType::f16, 0, 1, 2, 3},
      {"wide", 4, 4, 256, 3, ContextSpec::fixed(97), 32, DType::f32, DType::f16},
      {"bf16", 28, 4, 128, 2, ContextSpec::fixed(513), 16, DType::bf16, DType::bf16, 1.0, 1},
  };
  for (const Case& c : cases) {
    for (cpu::DecodePath path : compiled_paths()) {
      SCOPED_TRACE(std::string(c.name) + " path=" + cpu::resolved_path_name(path));
      const Workload w = make_workload(spec_of(c));
      cpu::DecodeOptions options;
      options.path = path;
      options.num_threads = c.num_threads;
      options.num_splits = c.num_splits;
      EXPECT_EQ(cpu::paged_kv_read(w.params(), options), expected_walk_sum(w));
    }
  }
}

// The check above must be able to fail: a line the walk reads changes its sum by exactly the
// planted difference; the walk is not a constant.
TEST(CpuDecode, MemoryWalkSeesAPlantedLine) {
  const Case c{"fault", 8, 2, 128, 3, ContextSpec::fixed(100), 16, DType::f16, DType::f16};
  Workload w = make_workload(spec_of(c));
  const std::uint64_t before = cpu::paged_kv_read(w.params());
  // The last token of sequence 2, KV head 1: line 3 of its V row.
  const std::size_t row =
      token_row_offset(w.layout.block_tables.data(), w.layout.max_blocks_per_seq, 2, 99, 1, c.hkv,
                       c.block_size, c.head_dim) *
      2;
  std::uint32_t word;
  std::memcpy(&word, w.v_cache.data() + row + 3 * 64, sizeof word);
  const std::uint32_t planted = word + 12345u;
  std::memcpy(w.v_cache.data() + row + 3 * 64, &planted, sizeof planted);
  const std::uint64_t after = cpu::paged_kv_read(w.params());
  EXPECT_NE(after, before);
  EXPECT_EQ(after - before, static_cast<std::uint64_t>(planted) - word);
  EXPECT_EQ(after, expected_walk_sum(w));
}

// The vector loaders of every compiled path (vcvtph2ps, bf16 shift, fp8 bit tricks or byte
// tables with the e4m3 load scale) agree bit for bit with the scalar conversions on every code
// (NaN stays NaN; inf, subnormals and signed zeros exact): all 65536 fp16/bf16 patterns, all 256
// fp8 ones, and once more from an odd element on with an odd count, so the loaders' tails run.
TEST(CpuDecode, KvLoadersMatchScalarConversions) {
  for (DType kv : all_dtypes()) {
    SCOPED_TRACE(std::string(dtype_name(kv)));
    const std::size_t size = dtype_size(kv);
    const std::size_t count = kv == DType::f32 ? 4096 : (size == 2 ? 65536 : 256);
    std::vector<std::byte> src(count * size);
    for (std::size_t i = 0; i < count; ++i) {
      if (kv == DType::f32) {
        const float x = std::ldexp(static_cast<float>(i) - 2048.0f, static_cast<int>(i % 40) - 20);
        std::memcpy(&src[i * 4], &x, 4);
      } else if (size == 2) {
        const auto bits = static_cast<std::uint16_t>(i);
        std::memcpy(&src[i * 2], &bits, 2);
      } else {
        src[i] = static_cast<std::byte>(i);
      }
    }
    for (cpu::DecodePath path : compiled_paths()) {
      for (const std::size_t first : {std::size_t{0}, std::size_t{3}}) {
        const std::size_t n = first == 0 ? count : count - first - 2;  // odd: 8/16/64-wide tails
        std::vector<float> got(n);
        cpu::convert_kv_to_float(kv, &src[first * size], n, got.data(), path);
        int bad = 0;
        for (std::size_t i = 0; i < n && bad < 5; ++i) {
          const float want = decode_value(kv, &src[(first + i) * size]);
          const bool same = (std::isnan(want) && std::isnan(got[i])) ||
                            std::memcmp(&want, &got[i], sizeof want) == 0;
          if (!same) {
            ++bad;
            ADD_FAILURE() << "code " << first + i << ": got " << got[i] << ", want " << want << " ("
                          << cpu::resolved_path_name(path) << ", from element " << first << ")";
          }
        }
      }
    }
  }
}

TEST(CpuDecode, FastExp2IsAccurate) {
  double worst = 0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -100.0f * static_cast<float>(i) / 200000.0f;
    const double want = std::exp2(static_cast<double>(x));
    const double got = cpu::detail::fast_exp2(x);
    worst = std::max(worst, std::abs(got - want) / want);
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(cpu::detail::fast_exp2(0.0f), 1.0f);
  EXPECT_LT(cpu::detail::fast_exp2(-1000.0f), 1e-37f);
}

}  // namespace
}  // namespace decodebench
