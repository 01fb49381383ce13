// cascade through the SIMT emulator against the CPU reference: the prefix pass (members packed
// into 16-row MMA tiles, chunked along the prefix), the suffix pass and the merge, on every
// compiled head_dim and KV dtype, GQA groups 1 / 4 / 8 (16, 4 and 2 members per tile), 1..4
// prefix groups, ragged and empty suffixes, block sizes 8..64, hand-made plans (groups of one,
// prefixes shorter than the planner's), forced chunk and split counts; no plan equals tc bit for
// bit; a plan that does not hold is refused. The registry-driven suite (paged_decode_test.cpp)
// runs cascade with the planner's plan on the shapes common to every rung.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
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

namespace k = kernels;

const k::KernelInfo* cascade_info() { return k::find_kernel("cascade"); }

struct Case {
  int batch = 4;
  ContextSpec context = ContextSpec::ragged(40, 120);
  int num_q_heads = 8;
  int num_kv_heads = 2;
  DType q_dtype = DType::f16;
  int block_size = 16;
  double hit_rate = 0.5;
  int prefix_groups = 1;
};

Workload make(const Case& c, int head_dim, DType kv_dtype) {
  return make_workload(testing_support::decode_spec(c, head_dim, kv_dtype, 777));
}

// How a run gets its plan and schedule: the planner's plan (or `plan`), the planned workspace
// (or forced split / chunk counts).
struct Options {
  std::optional<k::PrefixPlan> plan;  // default: plan_prefixes on the workload's tables
  int num_splits = 0;                 // 0: planned (plan_workspace for 4 SMs x 2 blocks)
  int num_prefix_chunks = 0;          // forced with num_splits
  std::string kernel = "cascade";
};

struct CascadeRun {
  k::LaunchResult launch;
  std::vector<std::uint16_t> bits;  // [rows][Hq][d] q_dtype
  std::vector<float> out;
  k::PrefixPlan plan;
  k::SplitKvWorkspace layout;
};

CascadeRun run(const Workload& w, const Options& o = {}) {
  k::PagedDecodeParams p = w.params();
  CascadeRun r;
  r.plan = o.plan ? *o.plan : k::plan_prefixes(p);
  if (o.kernel == "cascade") r.plan.bind(p);
  const k::KernelInfo* info = k::find_kernel(o.kernel);
  r.layout = o.num_splits > 0 ? k::split_kv_workspace(p, o.num_splits, o.num_prefix_chunks)
                              : k::plan_workspace(*info, p, k::ResidentCtas{4, 2});
  std::vector<float> ws(r.layout.total_bytes / sizeof(float) + 1, std::nanf(""));
  r.layout.bind(p, ws.data());
  const std::size_t n = static_cast<std::size_t>(w.rows()) * p.num_q_heads * p.head_dim;
  r.bits.assign(n, 0xffff);  // NaN in f16 and bf16: must be written
  p.out = r.bits.data();
  r.launch = k::emu::launch_paged_decode(o.kernel, p, /*stream=*/nullptr);
  r.out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    r.out[i] = p.q_dtype == DType::f16 ? floatfmt::f16_to_float(r.bits[i])
                                       : floatfmt::bf16_to_float(r.bits[i]);
  }
  return r;
}

void expect_reference(const Workload& w, const CascadeRun& r) {
  ASSERT_TRUE(r.launch.ok()) << r.launch.message;
  const Comparison cmp =
      compare_outputs(r.out, reference_decode(w), w.spec.model.num_q_heads, w.spec.model.head_dim,
                      tolerance_for(w.spec.q_dtype, w.spec.kv_dtype));
  EXPECT_TRUE(cmp.ok) << cmp.mismatches << " of " << cmp.checked << " off; " << cmp.report;
}

// `c` on every compiled head_dim with the first KV dtype and every KV dtype with the first
// head_dim (a cross: each value is met, the emulated run stays short). `want_groups` >= 0: the
// planner must find that many groups (so the case really runs the prefix pass).
void expect_matches_reference(const Case& c, const std::string& what, int want_groups = -1,
                              const Options& o = {}) {
  const k::KernelInfo* info = cascade_info();
  if (info == nullptr || info->head_dims.empty()) GTEST_SKIP() << "cascade not compiled";
  for (int d : info->head_dims) {
    for (DType kv : info->kv_dtypes) {
      if (d != info->head_dims.front() && kv != info->kv_dtypes.front()) continue;
      SCOPED_TRACE(what + ", d " + std::to_string(d) + ", KV " + std::string(dtype_name(kv)));
      const Workload w = make(c, d, kv);
      const CascadeRun r = run(w, o);
      if (want_groups >= 0) {
        ASSERT_EQ(r.plan.num_groups(), want_groups);
      }
      expect_reference(w, r);
    }
  }
}

// GQA 1 (16 members per tile: 18 members take two tiles), 4 (4 per tile) and 8 (2 per tile,
// here 5 members: three tiles, the last with one member).
TEST(CascadeEmu, GroupsOneFourEight) {
  for (const auto& [hq, hkv, batch] : {std::tuple{2, 2, 18}, {8, 2, 6}, {8, 1, 5}}) {
    Case c;
    c.num_q_heads = hq;
    c.num_kv_heads = hkv;
    c.batch = batch;
    c.context = ContextSpec::ragged(33, 90);
    c.hit_rate = 0.6;
    c.q_dtype = hq / hkv == 4 ? DType::bf16 : DType::f16;
    expect_matches_reference(c, "group " + std::to_string(hq / hkv), /*want_groups=*/1);
  }
}

// 1..4 prefix groups (round-robin members), group 4 and a 3-member tile remainder at group 3.
TEST(CascadeEmu, SeveralPrefixGroups) {
  for (int groups = 1; groups <= 4; ++groups) {
    Case c;
    c.batch = 2 * groups + 1;
    c.prefix_groups = groups;
    c.num_q_heads = groups == 3 ? 6 : 8;  // group 3 packs 5 members per tile
    c.context = ContextSpec::ragged(20, 100);
    c.hit_rate = 0.7;
    c.block_size = 8;
    expect_matches_reference(c, std::to_string(groups) + " groups", groups);
  }
}

// Every sequence's context is exactly its prefix (hit rate 1, whole blocks): every suffix is
// empty, its splits are LSE -inf and the output is the prefix pass alone.
TEST(CascadeEmu, EmptySuffixes) {
  Case c;
  c.batch = 3;
  c.context = ContextSpec::fixed(64);
  c.hit_rate = 1.0;
  const k::KernelInfo* info = cascade_info();
  if (info == nullptr || info->head_dims.empty()) GTEST_SKIP() << "cascade not compiled";
  const Workload w = make(c, info->head_dims.front(), info->kv_dtypes.front());
  const k::PrefixPlan plan = k::plan_prefixes(w.params());
  ASSERT_EQ(plan.num_groups(), 1);
  ASSERT_EQ(plan.group_tokens[0], 64);
  expect_matches_reference(c, "context = prefix", 1);
}

// Block sizes 8..64 with prefixes of 1..several blocks; block 64 = the tile.
TEST(CascadeEmu, BlockSizes) {
  for (int block : {8, 32, 64}) {
    Case c;
    c.block_size = block;
    c.batch = 3;
    c.context = ContextSpec::ragged(block + 5, 3 * block + 7);
    c.hit_rate = 0.8;
    expect_matches_reference(c, "block " + std::to_string(block), 1);
  }
}

// Forced counts: more prefix chunks than the prefix has units (the last chunks empty), several
// suffix splits, and both at once.
TEST(CascadeEmu, ChunkAndSplitCounts) {
  for (const auto& [splits, chunks] : {std::pair{1, 1}, {1, 3}, {3, 2}, {2, 9}}) {
    Case c;
    c.batch = 3;
    c.context = ContextSpec::ragged(150, 260);
    c.hit_rate = 0.75;
    Options o;
    o.num_splits = splits;
    o.num_prefix_chunks = chunks;
    expect_matches_reference(
        c, std::to_string(splits) + " splits, " + std::to_string(chunks) + " chunks", 1, o);
  }
}

// Hand-made plans the planner never makes: every sequence a group of its own, and a group
// sharing fewer blocks than its tables do (any whole number of blocks is a valid prefix).
TEST(CascadeEmu, HandMadePlans) {
  const k::KernelInfo* info = cascade_info();
  if (info == nullptr || info->head_dims.empty()) GTEST_SKIP() << "cascade not compiled";
  Case c;
  c.batch = 4;
  c.context = ContextSpec::ragged(40, 100);
  c.hit_rate = 0.8;
  const Workload w = make(c, info->head_dims.front(), info->kv_dtypes.front());
  const int block = c.block_size;
  {
    SCOPED_TRACE("groups of one");
    k::PrefixPlan plan;
    plan.group_start = {0};
    plan.seq_prefix_tokens.assign(c.batch, 0);
    for (int b = 0; b < c.batch; b += 2) {  // 0 and 2 alone; 1 and 3 in no group
      plan.group_seqs.push_back(b);
      plan.group_start.push_back(static_cast<std::int32_t>(plan.group_seqs.size()));
      const int tokens = (w.layout.context_lens[b] / block) * block;
      plan.group_tokens.push_back(tokens);
      plan.seq_prefix_tokens[b] = tokens;
    }
    Options o;
    o.plan = plan;
    expect_reference(w, run(w, o));
  }
  const k::PrefixPlan found = k::plan_prefixes(w.params());
  ASSERT_EQ(found.num_groups(), 1);
  ASSERT_GE(found.group_tokens[0], 2 * block);
  for (int blocks = 1; blocks < found.group_tokens[0] / block; ++blocks) {
    SCOPED_TRACE(std::to_string(blocks) + " of the shared blocks");
    k::PrefixPlan plan = found;
    plan.group_tokens[0] = blocks * block;
    for (std::int32_t& t : plan.seq_prefix_tokens) t = t > 0 ? blocks * block : 0;
    Options o;
    o.plan = plan;
    expect_reference(w, run(w, o));
  }
}

// No group (hit rate 0): cascade launches tc, so the output is tc's bit for bit.
TEST(CascadeEmu, WithoutAPlanItIsTc) {
  const k::KernelInfo* info = cascade_info();
  if (info == nullptr || info->head_dims.empty() || k::find_kernel("tc") == nullptr)
    GTEST_SKIP() << "cascade or tc not compiled";
  for (const double h : {0.0, 0.5}) {
    Case c;
    c.hit_rate = h;
    c.context = ContextSpec::ragged(70, 200);
    const Workload w = make(c, info->head_dims.front(), info->kv_dtypes.front());
    Options none;
    none.plan = k::PrefixPlan{{0}, {}, {}, std::vector<std::int32_t>(c.batch, 0)};
    none.num_splits = 2;
    const CascadeRun cascade = run(w, none);
    Options tc = none;
    tc.kernel = "tc";
    const CascadeRun ref = run(w, tc);
    ASSERT_TRUE(cascade.launch.ok()) << cascade.launch.message;
    ASSERT_TRUE(ref.launch.ok()) << ref.launch.message;
    EXPECT_EQ(cascade.bits, ref.bits) << "hit rate " << h;
    if (h == 0.0) expect_reference(w, run(w));  // the planner finds nothing either
  }
}

// A plan that does not hold for the tables is refused before anything runs, with the reason.
TEST(CascadeEmu, InvalidPlanIsRefused) {
  const k::KernelInfo* info = cascade_info();
  if (info == nullptr || info->head_dims.empty()) GTEST_SKIP() << "cascade not compiled";
  Case c;
  c.hit_rate = 0.5;
  const Workload w = make(c, info->head_dims.front(), info->kv_dtypes.front());
  k::PrefixPlan plan = k::plan_prefixes(w.params());
  ASSERT_EQ(plan.num_groups(), 1);
  plan.group_tokens[0] += c.block_size;  // past what the tables share, or the context
  for (std::int32_t& t : plan.seq_prefix_tokens) t = t > 0 ? plan.group_tokens[0] : 0;
  Options o;
  o.plan = plan;
  o.num_splits = 1;
  o.num_prefix_chunks = 1;
  const CascadeRun r = run(w, o);
  EXPECT_EQ(r.launch.status, k::LaunchStatus::unsupported);
  EXPECT_NE(r.launch.message.find("prefix plan: group 0"), std::string::npos) << r.launch.message;
  // And a valid plan without its chunk count (a workspace laid out for tc).
  Options no_chunks;
  no_chunks.num_splits = 2;
  const CascadeRun r2 = run(w, no_chunks);
  EXPECT_EQ(r2.launch.status, k::LaunchStatus::unsupported);
  EXPECT_NE(r2.launch.message.find("num_prefix_chunks 0"), std::string::npos) << r2.launch.message;
}

// The schedule's host side: tiles per group, chunks planned to fill the wave, suffix splits
// planned on the suffixes, and the workspace rows of splits + chunks.
TEST(CascadePlan, TilesChunksAndWorkspace) {
  WorkloadSpec spec;
  spec.model.name = "test";
  spec.model.num_q_heads = 8;
  spec.model.num_kv_heads = 8;  // MHA: 16 members per tile
  spec.model.head_dim = 128;
  spec.model.num_layers = 1;
  spec.batch = 18;
  spec.context = ContextSpec::fixed(4096);
  spec.hit_rate = 0.9;
  const PagedLayout layout = build_layout(spec);
  k::PagedDecodeParams p = shape_params(spec, layout);
  const k::PrefixPlan plan = k::plan_prefixes(p);
  ASSERT_EQ(plan.num_groups(), 1);
  plan.bind(p);
  EXPECT_EQ(k::prefix_tiles(p), 2);  // 16 + 2 members
  const k::ResidentCtas gpu{132, 3};
  // 8 heads x 2 tiles = 16 blocks over a 3680-token prefix: the tile and 256-token limits.
  const int chunks = k::plan_prefix_chunks(p, gpu);
  EXPECT_EQ(chunks, k::plan_pieces(16, plan.group_tokens[0], 128, gpu));
  EXPECT_GT(chunks, 1);
  const int splits = k::plan_suffix_splits(p, gpu);
  EXPECT_EQ(splits, k::plan_pieces(18 * 8, 4096 - plan.group_tokens[0], 128, gpu));
  k::KernelInfo cascade;
  cascade.uses_workspace = true;
  cascade.prefix_aware = true;
  const k::SplitKvWorkspace w = k::plan_workspace(cascade, p, gpu);
  EXPECT_EQ(w.num_splits, splits);
  EXPECT_EQ(w.num_prefix_chunks, chunks);
  EXPECT_EQ(w.num_prefix_tiles, 2);
  EXPECT_EQ(w.partial_lse_bytes, 18u * 8 * (splits + chunks) * sizeof(float));
  // Without a plan: tc's workspace.
  k::PagedDecodeParams none = shape_params(spec, layout);
  const k::SplitKvWorkspace tc_like = k::plan_workspace(cascade, none, gpu);
  EXPECT_EQ(tc_like.num_prefix_chunks, 0);
  EXPECT_EQ(tc_like.num_splits, k::plan_num_splits(none, gpu));
  for (int group : {1, 2, 3, 4, 5, 6, 7, 8})
    EXPECT_EQ(k::prefix_members_per_tile(group) * group <= 16 &&
                  (k::prefix_members_per_tile(group) + 1) * group > 16,
              true)
        << group;
}

// A planted fault is caught: the output compared with the reference of a workload that shares
// one block less fails (the prefix's last block matters).
TEST(CascadeEmu, WrongResultIsCaught) {
  const k::KernelInfo* info = cascade_info();
  if (info == nullptr || info->head_dims.empty()) GTEST_SKIP() << "cascade not compiled";
  Case c;
  c.batch = 3;
  c.context = ContextSpec::fixed(64);
  c.hit_rate = 1.0;
  const Workload w = make(c, info->head_dims.front(), info->kv_dtypes.front());
  const CascadeRun r = run(w);
  ASSERT_TRUE(r.launch.ok()) << r.launch.message;
  Case other = c;
  other.context = ContextSpec::fixed(63);
  const Workload w2 = make(other, info->head_dims.front(), info->kv_dtypes.front());
  const Comparison cmp =
      compare_outputs(r.out, reference_decode(w2), c.num_q_heads, info->head_dims.front(),
                      tolerance_for(c.q_dtype, info->kv_dtypes.front()));
  EXPECT_FALSE(cmp.ok);
}

}  // namespace
}  // namespace decodebench
