// The CPU cascade with a sliding window, against the reference on every compiled path: shared
// prefixes at h = 0.5, 0.9 and 1, windows shorter than a block, windows starting inside the
// prefix, past it for every member (the prefix is not read) and both within one group; float and
// integer KV; sinks and the soft-cap beside the window; blocks larger than a tile; prefixes cut
// into pieces and suffixes split. Planted faults each caught: a window one block long, one block
// short, a prefix pass that ignores the members' window starts; and NaN in every block before
// all windows that read it, which a correct walk never touches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_decode.h"
#include "common/dtype.h"
#include "device/paged_kv.h"
#include "reference/reference.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

namespace k = kernels;

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
  double hit_rate;
  int prefix_groups = 1;
  int num_threads = 0;    // 0: default
  int num_splits = 0;     // 0: planned
  int prefix_chunks = 0;  // 0: planned
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

Workload workload_of(const Case& c) {
  WorkloadSpec s;
  s.model = ModelShape{"cascade-window", c.hq, c.hkv, c.head_dim, 1, ""}.with_window(c.window);
  s.model.sinks = c.sinks;
  s.model.attn_logit_softcapping = c.softcap;
  s.batch = c.batch;
  s.context = c.context;
  s.block_size = c.block_size;
  s.kv_dtype = c.kv;
  s.hit_rate = c.hit_rate;
  s.prefix_groups = c.prefix_groups;
  s.seed = 2024;
  return make_workload(s);
}

std::vector<cpu::DecodePath> compiled_paths() {
  std::vector<cpu::DecodePath> paths;
  if (cpu::avx512_compiled()) paths.push_back(cpu::DecodePath::avx512);
  if (cpu::avx2_compiled()) paths.push_back(cpu::DecodePath::avx2);
  paths.push_back(cpu::DecodePath::portable);
  return paths;
}

cpu::DecodeOptions options_of(const Case& c, cpu::DecodePath path) {
  cpu::DecodeOptions o;
  o.num_threads = c.num_threads;
  o.num_splits = c.num_splits;
  o.prefix_chunks = c.prefix_chunks;
  o.path = path;
  return o;
}

// The cascade on `params` (perhaps with a planted fault) with the plan of its block tables.
std::vector<float> run_cascade(k::PagedDecodeParams p, int rows, const cpu::DecodeOptions& o) {
  const k::PrefixPlan plan = k::plan_prefixes(p);
  plan.bind(p);
  std::vector<std::byte> out(static_cast<std::size_t>(rows) * p.num_q_heads * p.head_dim * 2);
  p.out = out.data();
  cpu::paged_decode_cascade(p, o);
  return decode_to_float(out, p.q_dtype);
}

Comparison against(const std::vector<float>& ref, const Workload& w, k::PagedDecodeParams p,
                   const cpu::DecodeOptions& o) {
  return compare_outputs(run_cascade(p, w.rows(), o), ref, p.num_q_heads, p.head_dim,
                         tolerance_for(w.spec.q_dtype, w.spec.kv_dtype));
}

// How a case's members meet their prefix: a window reaching into it (starting inside it, or
// covering the whole context) or starting past it; groups whose prefix slid out of every
// member's window, and groups holding both kinds of member.
struct Kinds {
  int groups = 0, starts_inside = 0, past = 0, unread_groups = 0, mixed_groups = 0;
};
Kinds kinds_of(const Workload& w) {
  const k::PagedDecodeParams p = w.params();
  const k::PrefixPlan plan = k::plan_prefixes(p);
  Kinds kinds;
  kinds.groups = plan.num_groups();
  for (int g = 0; g < plan.num_groups(); ++g) {
    int reads = 0, past = 0;
    for (int m = plan.group_start[g]; m < plan.group_start[g + 1]; ++m) {
      const int first = window_first_token(p.context_lens[plan.group_seqs[m]], p.window);
      reads += first < plan.group_tokens[g] ? 1 : 0;
      past += first < plan.group_tokens[g] ? 0 : 1;
      kinds.starts_inside += first > 0 && first < plan.group_tokens[g] ? 1 : 0;
    }
    kinds.past += past;
    kinds.unread_groups += reads == 0 ? 1 : 0;
    kinds.mixed_groups += reads > 0 && past > 0 ? 1 : 0;
  }
  return kinds;
}

const ContextSpec ragged(int lo, int hi) { return ContextSpec::ragged(lo, hi); }
const ContextSpec fixed(int n) { return ContextSpec::fixed(n); }

// Tiles are 64 tokens at d = 128 (avx512, avx2) and 32 (portable); blocks of 128 are entered at
// the tile-sized piece holding the window's first token.
const Case kCases[] = {
    // name                         Hq Hkv  d  B  context       P  kv          W  sinks cap  h  G
    {"w5_sub_block_h09", 8, 2, 128, 6, ragged(100, 400), 16, DType::f16, 5, false, 0, 0.9},
    {"w5_inside_prefix_h1", 8, 2, 128, 5, fixed(256), 16, DType::f16, 5, true, 2.0, 1.0},
    {"w40_h1_ragged", 8, 2, 128, 7, ragged(64, 300), 16, DType::bf16, 40, false, 0, 1.0, 2},
    {"w100_mixed_h05", 8, 2, 128, 9, ragged(100, 600), 16, DType::f16, 100, true, 2.0, 0.5, 2},
    {"w300_inside_h09", 16, 2, 128, 6, ragged(800, 1000), 16, DType::f16, 300, false, 3.0, 0.9},
    {"w70_mha_d64", 4, 4, 64, 7, ragged(50, 400), 16, DType::bf16, 70, true, 0, 0.9},
    {"w150_gqa8_d256_fp8", 16, 2, 256, 6, ragged(100, 500), 16, DType::fp8_e4m3, 150, true, 2.0,
     0.5},
    {"w200_p128_big_blocks", 8, 2, 128, 6, ragged(300, 900), 128, DType::f16, 200, true, 2.0, 0.9},
    {"w33_p1", 4, 2, 64, 5, ragged(60, 200), 1, DType::f16, 33, false, 0, 0.9},
    {"w2000_longer_than_contexts", 8, 2, 128, 4, ragged(100, 600), 16, DType::f16, 2000, true, 2.0,
     0.9},
    {"int8_w50_sinks_cap_h09", 8, 2, 128, 8, ragged(60, 400), 16, DType::int8, 50, true, 2.0, 0.9,
     2},
    {"int8_w150_sinks_cap_h05", 16, 2, 64, 7, ragged(100, 500), 16, DType::int8, 150, true, 3.0,
     0.5},
    {"int4_w90_sinks_cap_h09", 8, 2, 128, 6, ragged(80, 400), 16, DType::int4, 90, true, 2.0, 0.9},
    {"int4_token_w9_h1", 8, 2, 128, 5, fixed(192), 16, DType::int4_token, 9, true, 2.0, 1.0},
    // Prefix pieces wholly before every window (left empty), split suffixes, several threads.
    {"chunks5_splits3_threads3", 8, 2, 128, 6, ragged(500, 900), 16, DType::f16, 250, true, 2.0,
     0.9, 2, 3, 3, 5},
    {"int8_chunks4_threads2", 8, 1, 128, 4, ragged(600, 800), 16, DType::int8, 300, true, 2.0, 0.9,
     1, 2, 2, 4},
};

class CpuCascadeWindowCase : public ::testing::TestWithParam<Case> {};

TEST_P(CpuCascadeWindowCase, EveryPathMatchesReference) {
  const Case& c = GetParam();
  const Workload w = workload_of(c);
  ASSERT_GT(k::plan_prefixes(w.params()).num_groups(), 0) << "the case should share a prefix";
  ASSERT_EQ(cpu::cascade_unsupported_reason(w.params()), "");
  const std::vector<float> ref = reference_decode(w);
  for (cpu::DecodePath path : compiled_paths()) {
    SCOPED_TRACE(std::string(c.name) + " path=" + cpu::resolved_path_name(path));
    const Comparison cmp = against(ref, w, w.params(), options_of(c, path));
    EXPECT_TRUE(cmp.ok) << cmp.mismatches << " of " << cmp.checked << " out of tolerance\n"
                        << cmp.report;
  }
}

INSTANTIATE_TEST_SUITE_P(Windows, CpuCascadeWindowCase, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// The cases above hold every kind of member the rule distinguishes.
TEST(CpuCascadeWindow, TheCasesCoverEveryKind) {
  Kinds all;
  bool sub_block = false, big_block = false, int_kv = false, h05 = false, h09 = false;
  for (const Case& c : kCases) {
    const Kinds kinds = kinds_of(workload_of(c));
    all.starts_inside += kinds.starts_inside;
    all.past += kinds.past;
    all.unread_groups += kinds.unread_groups;
    all.mixed_groups += kinds.mixed_groups;
    sub_block = sub_block || c.window < c.block_size;
    big_block = big_block || c.block_size > 64;
    int_kv = int_kv || (is_int_kv(c.kv) && c.sinks && c.softcap > 0);
    h05 = h05 || c.hit_rate == 0.5;
    h09 = h09 || c.hit_rate == 0.9;
  }
  EXPECT_GT(all.starts_inside, 0) << "a window starting inside its prefix";
  EXPECT_GT(all.past, 0) << "a window starting past its prefix";
  EXPECT_GT(all.unread_groups, 0) << "a prefix before every member's window";
  EXPECT_GT(all.mixed_groups, 0) << "a group with both kinds of member";
  EXPECT_TRUE(sub_block && big_block && int_kv && h05 && h09);
}

// Planted: the window one block too long, one block short, and the prefix pass run without the
// window (each member then attends to prefix tokens before its window). Each fails the check on
// every path, on a group whose windows start inside the prefix and on one whose prefix slid out
// of them all.
TEST(CpuCascadeWindow, PlantedFaultsAreCaught) {
  const Case cases[] = {
      {"inside", 8, 2, 128, 6, ragged(300, 500), 16, DType::f16, 120, true, 2.0, 0.9},
      {"unread", 8, 2, 128, 6, ragged(200, 400), 16, DType::int8, 40, true, 2.0, 0.5},
  };
  for (const Case& c : cases) {
    const Workload w = workload_of(c);
    const Kinds kinds = kinds_of(w);
    if (std::string(c.name) == "inside") {
      ASSERT_GT(kinds.starts_inside, 0);
    } else {
      ASSERT_EQ(kinds.unread_groups, kinds.groups);
      ASSERT_GT(kinds.groups, 0);
    }
    const std::vector<float> ref = reference_decode(w);
    for (cpu::DecodePath path : compiled_paths()) {
      SCOPED_TRACE(std::string(c.name) + " path=" + cpu::resolved_path_name(path));
      const cpu::DecodeOptions o = options_of(c, path);
      ASSERT_TRUE(against(ref, w, w.params(), o).ok);
      k::PagedDecodeParams longer = w.params();
      longer.window += c.block_size;
      EXPECT_FALSE(against(ref, w, longer, o).ok) << "window one block long";
      k::PagedDecodeParams shorter = w.params();
      shorter.window -= c.block_size;
      EXPECT_FALSE(against(ref, w, shorter, o).ok) << "window one block short";
      cpu::DecodeOptions planted = o;
      planted.planted_prefix_ignores_window = true;
      EXPECT_FALSE(against(ref, w, w.params(), planted).ok) << "prefix pass ignores the window";
    }
  }
}

// Every block that no sequence's window reaches (for a shared block: before the earliest window
// block of its group's members) is NaN in K and V, so reading one, even masked (NaN x 0), puts
// NaN in the output. The cascade matches the reference on every path; with the planted prefix
// pass that ignores the window, the same workload gives NaN, so the poison sits where a wrong
// prefix pass reads.
TEST(CpuCascadeWindow, NoBlockBeforeEveryWindowIsRead) {
  const Case cases[] = {
      // Windows start inside the prefix: its blocks before the earliest of them are poisoned.
      {"inside", 8, 2, 128, 8, ragged(400, 700), 16, DType::f16, 150, true, 2.0, 0.9, 2, 2, 2, 3},
      // Every window starts past the prefix: the whole prefix is poisoned.
      {"unread", 8, 2, 128, 6, ragged(200, 400), 16, DType::f16, 40, true, 2.0, 0.5, 2, 2, 0, 2},
      // Blocks larger than a tile, entered at the tile-sized piece holding the window's start.
      {"big_blocks", 8, 2, 128, 6, ragged(600, 900), 128, DType::f16, 200, false, 0, 0.9},
  };
  for (const Case& c : cases) {
    Workload w = workload_of(c);
    const k::PagedDecodeParams p0 = w.params();
    // A physical block is poisoned when every (sequence, index) that names it lies before that
    // sequence's window block.
    std::map<std::int32_t, bool> before_all;
    for (int b = 0; b < w.rows(); ++b) {
      const int len = p0.context_lens[b];
      const int blocks = (len + c.block_size - 1) / c.block_size;
      for (int j = 0; j < blocks; ++j) {
        const std::int32_t block = p0.block_tables[b * p0.max_blocks_per_seq + j];
        const bool before = j < window_first_block(len, c.window, c.block_size);
        const auto [it, inserted] = before_all.try_emplace(block, before);
        if (!inserted) it->second = it->second && before;
      }
    }
    const k::PrefixPlan plan = k::plan_prefixes(p0);
    int poisoned = 0, poisoned_shared = 0;
    const std::uint16_t nan_bits = 0x7e00;  // f16 quiet NaN
    const std::size_t block_elems = static_cast<std::size_t>(c.hkv) * c.block_size * c.head_dim;
    for (const auto& [block, before] : before_all) {
      if (!before) continue;
      const std::size_t first = kv_row_offset(block, 0, 0, c.hkv, c.block_size, c.head_dim);
      for (std::size_t i = 0; i < block_elems; ++i) {
        std::memcpy(&w.k_cache[(first + i) * 2], &nan_bits, 2);
        std::memcpy(&w.v_cache[(first + i) * 2], &nan_bits, 2);
      }
      ++poisoned;
      for (int g = 0; g < plan.num_groups(); ++g) {
        const int b0 = plan.group_seqs[plan.group_start[g]];
        const std::int32_t* row = p0.block_tables + b0 * p0.max_blocks_per_seq;
        const int shared = plan.group_tokens[g] / c.block_size;
        poisoned_shared += std::count(row, row + shared, block) > 0 ? 1 : 0;
      }
    }
    ASSERT_GE(poisoned_shared, 3) << c.name;
    ASSERT_GT(poisoned, poisoned_shared) << c.name;
    const std::vector<float> ref = reference_decode(w);  // reads the window's tokens only
    for (cpu::DecodePath path : compiled_paths()) {
      SCOPED_TRACE(std::string(c.name) + " path=" + cpu::resolved_path_name(path));
      const cpu::DecodeOptions o = options_of(c, path);
      const Comparison cmp = against(ref, w, w.params(), o);
      EXPECT_TRUE(cmp.ok) << cmp.report;
      cpu::DecodeOptions planted = o;
      planted.planted_prefix_ignores_window = true;
      const std::vector<float> out = run_cascade(w.params(), w.rows(), planted);
      EXPECT_TRUE(std::any_of(out.begin(), out.end(), [](float x) { return std::isnan(x); }))
          << "the poison is not where a prefix pass without the window reads";
    }
  }
}

// Without a plan the cascade with a window is the plain windowed decode bit for bit.
TEST(CpuCascadeWindow, NoPlanIsThePlainDecode) {
  const Case c{"plain", 8, 2, 128, 5, ragged(1, 600), 16, DType::f16, 70, true, 2.0, 0.8, 1, 2, 3};
  const Workload w = workload_of(c);
  for (cpu::DecodePath path : compiled_paths()) {
    SCOPED_TRACE(cpu::resolved_path_name(path));
    k::PagedDecodeParams p = w.params();  // num_prefix_groups = 0
    std::vector<std::byte> cascade(static_cast<std::size_t>(w.rows()) * 8 * 128 * 2);
    std::vector<std::byte> plain(cascade.size());
    p.out = cascade.data();
    cpu::paged_decode_cascade(p, options_of(c, path));
    p.out = plain.data();
    cpu::paged_decode(p, options_of(c, path));
    EXPECT_EQ(cascade, plain);
  }
}

// The backend takes a windowed point on `cascade`, picks it where the blocks share a prefix,
// and its output is the reference's.
TEST(CpuCascadeWindow, Backend) {
  auto backend = make_cpu_backend();
  const Workload w = workload_of(
      {"backend", 8, 2, 128, 6, ragged(100, 400), 16, DType::f16, 64, true, 2.0, 0.9, 2});
  EXPECT_EQ(backend->skip_reason(w.spec, "cascade"), "");
  EXPECT_EQ(backend->choose_kernel(w.spec), "cascade");
  auto point = backend->prepare(w, "cascade", TimingOptions{/*warm_l2=*/true});
  point->run();
  const std::vector<float> ref = reference_decode(w);
  const Comparison cmp =
      compare_outputs(point->output(), ref, 8, 128, tolerance_for(w.spec.q_dtype, w.spec.kv_dtype));
  EXPECT_TRUE(cmp.ok) << cmp.report;
}

}  // namespace
}  // namespace decodebench
