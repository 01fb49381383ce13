// The prefix-aware CPU decode (paged_decode_cascade, kernel `cascade`) against the reference:
// every KV dtype, head_dim 64/128/256, GQA 1/4/8, 1-4 prefix groups, ragged contexts, block
// sizes 1/16/64, h = 0 (bit-identical to paged_decode), h = 1 (empty suffixes), a hand-made
// group of one sequence, 1-3 threads and prefixes cut into pieces; bad plans; the backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_decode.h"
#include "common/dtype.h"
#include "common/errors.h"
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
  double hit_rate;
  int prefix_groups;
  int num_threads = 0;    // 0: default
  int num_splits = 0;     // 0: planned
  int prefix_chunks = 0;  // 0: planned
  DType q = DType::f16;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

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
  s.seed = 4321;
  return s;
}

cpu::DecodeOptions options_of(const Case& c) {
  cpu::DecodeOptions o;
  o.num_threads = c.num_threads;
  o.num_splits = c.num_splits;
  o.prefix_chunks = c.prefix_chunks;
  return o;
}

// Output of paged_decode_cascade on `p` (its prefix fields as given) or of paged_decode.
std::vector<float> run(k::PagedDecodeParams p, const Workload& w, const cpu::DecodeOptions& o,
                       bool cascade = true) {
  std::vector<std::byte> out(static_cast<std::size_t>(w.rows()) * p.num_q_heads * p.head_dim *
                             dtype_size(p.q_dtype));
  p.out = out.data();
  if (cascade)
    cpu::paged_decode_cascade(p, o);
  else
    cpu::paged_decode(p, o);
  return decode_to_float(out, p.q_dtype);
}

void expect_close(const std::vector<float>& out, const Workload& w) {
  const std::vector<float> ref = reference_decode(w);
  const Comparison cmp = compare_outputs(out, ref, w.spec.model.num_q_heads, w.spec.model.head_dim,
                                         tolerance_for(w.spec.q_dtype, w.spec.kv_dtype));
  EXPECT_TRUE(cmp.ok) << cmp.mismatches << " of " << cmp.checked << " elements out of tolerance\n"
                      << cmp.report;
  EXPECT_EQ(cmp.checked, ref.size());
}

// The planned cascade against the reference, on every compiled path; returns the plan.
k::PrefixPlan expect_cascade_matches(const Case& c) {
  const Workload w = make_workload(spec_of(c));
  k::PagedDecodeParams p = w.params();
  const k::PrefixPlan plan = k::plan_prefixes(p);
  plan.bind(p);
  for (cpu::DecodePath path : {cpu::DecodePath::automatic, cpu::DecodePath::portable}) {
    SCOPED_TRACE(std::string(c.name) + " path=" + cpu::resolved_path_name(path));
    cpu::DecodeOptions o = options_of(c);
    o.path = path;
    expect_close(run(p, w, o), w);
  }
  return plan;
}

const ContextSpec fixed(int n) { return ContextSpec::fixed(n); }

const Case kCases[] = {
    // name                          Hq  Hkv  d  batch context       P  kv              h    G thr
    {"mha_d128_f16_g1", 4, 4, 128, 6, fixed(300), 16, DType::f16, 0.9, 1},
    {"gqa4_d64_bf16_g2", 8, 2, 64, 7, fixed(200), 16, DType::bf16, 0.6, 2},
    {"gqa8_d256_e4m3_g3", 16, 2, 256, 9, fixed(130), 16, DType::fp8_e4m3, 0.8, 3},
    {"gqa4_d128_e5m2_g4", 8, 2, 128, 11, fixed(97), 16, DType::fp8_e5m2, 0.7, 4},
    {"gqa8_d128_f32_ragged", 16, 2, 128, 10, ContextSpec::ragged(40, 400), 16, DType::f32, 0.5, 2},
    {"gqa4_ragged_g3_p64", 8, 2, 128, 12, ContextSpec::ragged(64, 700), 64, DType::f16, 0.9, 3},
    {"mha_d64_p1", 2, 2, 64, 5, ContextSpec::ragged(3, 90), 1, DType::bf16, 0.7, 2},
    {"gqa8_p1_threads3", 8, 1, 128, 4, fixed(50), 1, DType::f16, 0.5, 1, 3},
    // h = 1: every member's context lies in the prefix; its suffix is empty.
    {"h1_empty_suffix", 8, 2, 128, 4, fixed(256), 16, DType::f16, 1.0, 1, 2},
    {"h1_empty_suffix_g2_p64", 8, 8, 64, 5, fixed(128), 64, DType::bf16, 1.0, 2, 3},
    // Threads, pieces of the prefix and suffix splits given.
    {"threads1", 8, 2, 128, 6, fixed(500), 16, DType::f16, 0.8, 2, 1},
    {"threads2_chunks3", 8, 1, 128, 4, fixed(700), 16, DType::f16, 0.9, 1, 2, 0, 3},
    {"threads3_chunks5_splits2", 8, 2, 64, 5, ContextSpec::ragged(300, 900), 16, DType::fp8_e4m3,
     0.6, 2, 3, 2, 5},
    // More pieces than a short prefix has tiles: the last pieces are empty.
    {"chunks_past_prefix", 4, 1, 128, 3, fixed(80), 16, DType::f16, 0.5, 1, 2, 1, 7},
    {"bf16_q", 8, 2, 128, 6, fixed(333), 16, DType::bf16, 0.75, 2, 2, 0, 2, DType::bf16},
};

class CpuCascadeCase : public ::testing::TestWithParam<Case> {};

TEST_P(CpuCascadeCase, MatchesReference) {
  const k::PrefixPlan plan = expect_cascade_matches(GetParam());
  EXPECT_GT(plan.num_groups(), 0) << "the case should share a prefix";
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuCascadeCase, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// Every KV dtype x head_dim x GQA group instance, with two prefix groups and ragged contexts.
TEST(CpuCascade, EveryDtypeHeadDimAndGroup) {
  for (DType kv : all_dtypes()) {
    for (int d : {64, 128, 256}) {
      for (int g : {1, 4, 8}) {
        SCOPED_TRACE(std::string(dtype_name(kv)) + " d=" + std::to_string(d) +
                     " g=" + std::to_string(g));
        const Case c{"grid", 2 * g, 2, d, 5, ContextSpec::ragged(33, 120), 16, kv, 0.7, 2, 2};
        expect_cascade_matches(c);
      }
    }
  }
}

// h = 1 really leaves suffixes empty (what the cases above rely on).
TEST(CpuCascade, FullHitRateLeavesEmptySuffixes) {
  const Workload w = make_workload(spec_of(kCases[8]));
  const k::PrefixPlan plan = k::plan_prefixes(w.params());
  ASSERT_EQ(plan.num_groups(), 1);
  for (int b = 0; b < w.spec.batch; ++b)
    EXPECT_EQ(plan.seq_prefix_tokens[b], w.layout.context_lens[b]);
}

// No plan (h = 0, or a plan not bound): the output is paged_decode's bit for bit, split or not.
TEST(CpuCascade, NoPlanIsThePlainDecode) {
  for (int splits : {0, 1, 3}) {
    for (double h : {0.0, 0.8}) {
      SCOPED_TRACE("splits=" + std::to_string(splits) + " h=" + std::to_string(h));
      Case c{"plain", 8, 2, 128, 3, ContextSpec::ragged(1, 600), 16, DType::f16, h, 1, 2, splits};
      const Workload w = make_workload(spec_of(c));
      const k::PagedDecodeParams p = w.params();  // num_prefix_groups = 0
      if (h == 0) {
        EXPECT_EQ(k::plan_prefixes(p).num_groups(), 0);
      }
      const std::vector<float> cascade = run(p, w, options_of(c));
      const std::vector<float> plain = run(p, w, options_of(c), /*cascade=*/false);
      ASSERT_EQ(cascade.size(), plain.size());
      EXPECT_EQ(std::memcmp(cascade.data(), plain.data(), plain.size() * sizeof(float)), 0);
    }
  }
}

// A plan the planner would not make: a group of one sequence (valid, nothing saved), and a
// group sharing fewer blocks than the tables do.
TEST(CpuCascade, HandMadePlans) {
  const Case c{"hand", 8, 2, 128, 4, fixed(200), 16, DType::f16, 0.8, 1, 2};
  const Workload w = make_workload(spec_of(c));
  k::PagedDecodeParams p = w.params();
  k::PrefixPlan one;
  one.group_start = {0, 1};
  one.group_seqs = {2};
  one.group_tokens = {48};
  one.seq_prefix_tokens = {0, 0, 48, 0};
  one.bind(p);
  ASSERT_EQ(k::prefix_plan_error(p), "");
  expect_close(run(p, w, options_of(c)), w);

  k::PrefixPlan shorter = k::plan_prefixes(w.params());
  ASSERT_EQ(shorter.num_groups(), 1);
  ASSERT_GT(shorter.group_tokens[0], 16);
  shorter.group_tokens[0] = 16;
  for (auto& t : shorter.seq_prefix_tokens) t = 16;
  shorter.bind(p);
  ASSERT_EQ(k::prefix_plan_error(p), "");
  expect_close(run(p, w, options_of(c)), w);
}

TEST(CpuCascade, InvalidPlanIsRejected) {
  const Case c{"bad", 8, 2, 128, 4, fixed(200), 16, DType::f16, 0.8, 1, 2};
  const Workload w = make_workload(spec_of(c));
  k::PagedDecodeParams p = w.params();
  k::PrefixPlan plan = k::plan_prefixes(p);
  plan.seq_prefix_tokens[1] += 16;  // disagrees with its group
  plan.bind(p);
  const std::string why = k::prefix_plan_error(p);
  ASSERT_FALSE(why.empty());
  try {
    run(p, w, options_of(c));
    ADD_FAILURE() << "an invalid plan was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), why);
    EXPECT_NE(std::string(e.what()).find("seq_prefix_tokens[1]"), std::string::npos);
  }

  k::PrefixPlan too_long = k::plan_prefixes(w.params());
  too_long.group_tokens[0] = 208;  // past every context
  std::fill(too_long.seq_prefix_tokens.begin(), too_long.seq_prefix_tokens.end(), 208);
  too_long.bind(p);
  EXPECT_THROW(run(p, w, options_of(c)), InputError);
}

// Pieces: enough items for the threads when there are few (group, KV head) pairs, none when the
// KV heads already give every thread several, never pieces of under a few hundred tokens.
TEST(CpuCascade, PrefixChunkPlanner) {
  const std::vector<std::int32_t> start = {0, 4}, tokens = {4096};
  k::PagedDecodeParams p;
  p.num_prefix_groups = 1;
  p.prefix_group_start = start.data();
  p.prefix_group_tokens = tokens.data();
  p.num_kv_heads = 1;
  EXPECT_EQ(cpu::plan_prefix_chunks(p, 1), 1);
  EXPECT_EQ(cpu::plan_prefix_chunks(p, 2), 8);
  p.num_kv_heads = 32;
  EXPECT_EQ(cpu::plan_prefix_chunks(p, 2), 1);
  p.num_kv_heads = 8;
  EXPECT_EQ(cpu::plan_prefix_chunks(p, 2), 1);
  p.num_kv_heads = 1;
  const std::vector<std::int32_t> short_prefix = {300};
  p.prefix_group_tokens = short_prefix.data();
  EXPECT_EQ(cpu::plan_prefix_chunks(p, 2), 1);
  p.num_prefix_groups = 0;
  EXPECT_EQ(cpu::plan_prefix_chunks(p, 2), 1);
}

TEST(CpuCascade, Backend) {
  auto backend = make_cpu_backend();
  const std::vector<std::string> names = backend->kernel_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "cascade"), names.end());
  WorkloadSpec s =
      spec_of({"backend", 8, 2, 128, 6, ContextSpec::ragged(40, 300), 16, DType::f16, 0.7, 2});
  EXPECT_EQ(backend->choose_kernel(s), "cascade");
  EXPECT_EQ(backend->skip_reason(s, "cascade"), "");
  const std::string unknown = backend->skip_reason(s, "flash");
  EXPECT_NE(unknown.find("valid: cpu, cascade"), std::string::npos) << unknown;

  const Workload w = make_workload(s);
  for (const char* kernel : {"cascade", "cpu"}) {
    SCOPED_TRACE(kernel);
    auto point = backend->prepare(w, kernel, TimingOptions{/*warm_l2=*/true});
    point->run();
    expect_close(point->output(), w);
  }

  s.hit_rate = 0;  // nothing shared: the plain decode
  EXPECT_EQ(backend->choose_kernel(s), "cpu");
  s.hit_rate = 0.7;
  s.batch = 1;  // a group needs two sequences
  EXPECT_EQ(backend->choose_kernel(s), "cpu");
}

}  // namespace
}  // namespace decodebench
