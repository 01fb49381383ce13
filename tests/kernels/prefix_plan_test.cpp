// The prefix planner and its checker (kernels/prefix_plan.cpp): the groups it finds in the block
// tables of generated layouts and of hand-made tables (prefix trees, short members, no
// sharing), and every violation prefix_plan_error() must name, each planted in a valid plan.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

namespace k = kernels;

// Params over a layout's host tables (no tensors: the planner reads tables and lengths only).
k::PagedDecodeParams params_of(const PagedLayout& layout, int block_size) {
  k::PagedDecodeParams p;
  p.batch = static_cast<int>(layout.context_lens.size());
  p.block_size = block_size;
  p.max_blocks_per_seq = layout.max_blocks_per_seq;
  p.num_blocks = layout.num_blocks;
  p.block_tables = layout.block_tables.data();
  p.context_lens = layout.context_lens.data();
  return p;
}

WorkloadSpec spec(int batch, ContextSpec context, double h, int groups, int block_size = 16) {
  WorkloadSpec s;
  s.model = load_model("llama-3.1-8b");
  s.batch = batch;
  s.context = context;
  s.hit_rate = h;
  s.prefix_groups = groups;
  s.block_size = block_size;
  return s;
}

// The planner recovers the generator's groups exactly: members, shared blocks, and the tokens
// the layout says are shared (unique_tokens = total - tokens_shared).
TEST(PrefixPlan, RecoversGeneratedGroups) {
  for (const auto& [batch, context, h, groups, block] :
       std::vector<std::tuple<int, ContextSpec, double, int, int>>{
           {8, ContextSpec::fixed(1000), 0.5, 2, 16},
           {16, ContextSpec::fixed(4096), 0.9, 1, 16},
           {7, ContextSpec::ragged(300, 900), 0.75, 3, 8},
           {5, ContextSpec::fixed(256), 1.0, 1, 64},
           {6, ContextSpec::ragged(17, 200), 0.99, 4, 1}}) {
    SCOPED_TRACE(::testing::Message() << "B" << batch << " h=" << h << " G=" << groups);
    const WorkloadSpec s = spec(batch, context, h, groups, block);
    const PagedLayout layout = build_layout(s);
    k::PagedDecodeParams p = params_of(layout, block);
    const k::PrefixPlan plan = k::plan_prefixes(p);
    plan.bind(p);
    EXPECT_EQ(k::prefix_plan_error(p), "");
    int expected_groups = 0;
    for (int g = 0; g < static_cast<int>(layout.shared_blocks_of_group.size()); ++g) {
      int members = 0;
      for (int b = 0; b < batch; ++b) members += layout.group_of[b] == g;
      if (members >= 2 && layout.shared_blocks_of_group[g] > 0) ++expected_groups;
    }
    ASSERT_EQ(plan.num_groups(), expected_groups);
    for (int b = 0; b < batch; ++b) {
      const int g = layout.group_of[b];
      int members = 0;
      for (int c = 0; c < batch; ++c) members += layout.group_of[c] == g;
      const int want = members >= 2 ? layout.shared_blocks_of_group[g] * block : 0;
      EXPECT_EQ(plan.seq_prefix_tokens[b], want) << "sequence " << b;
    }
    EXPECT_EQ(layout.total_tokens - plan.tokens_shared(), layout.unique_tokens);
  }
}

TEST(PrefixPlan, NoSharingNoGroups) {
  for (const WorkloadSpec& s : {spec(8, ContextSpec::fixed(512), 0.0, 1),
                                spec(4, ContextSpec::fixed(512), 0.9, 4),  // groups of one
                                spec(1, ContextSpec::fixed(512), 0.9, 1)}) {
    const PagedLayout layout = build_layout(s);
    k::PagedDecodeParams p = params_of(layout, s.block_size);
    const k::PrefixPlan plan = k::plan_prefixes(p);
    EXPECT_EQ(plan.num_groups(), 0);
    EXPECT_EQ(plan.tokens_shared(), 0);
    EXPECT_EQ(plan.seq_prefix_tokens, std::vector<std::int32_t>(s.batch, 0));
    plan.bind(p);
    EXPECT_EQ(k::prefix_plan_error(p), "");
  }
}

// Hand-made tables, block size 4, rows of 4 entries.
struct Tables {
  std::vector<std::int32_t> tables;
  std::vector<std::int32_t> lens;
  k::PagedDecodeParams params() const {
    k::PagedDecodeParams p;
    p.batch = static_cast<int>(lens.size());
    p.block_size = 4;
    p.max_blocks_per_seq = 4;
    p.block_tables = tables.data();
    p.context_lens = lens.data();
    return p;
  }
};

TEST(PrefixPlan, PrefixTreeSharesWhatAllMembersShare) {
  // 0 and 1 share blocks 10, 11, 12; 2 shares 10 only; 3 starts elsewhere.
  const Tables t{{10, 11, 12, 1, /**/ 10, 11, 12, 2, /**/ 10, 5, 6, -1, /**/ 20, 21, -1, -1},
                 {16, 15, 12, 8}};
  const k::PrefixPlan plan = k::plan_prefixes(t.params());
  ASSERT_EQ(plan.num_groups(), 1);
  EXPECT_EQ(plan.group_seqs, (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(plan.group_tokens, (std::vector<std::int32_t>{4}));
  EXPECT_EQ(plan.seq_prefix_tokens, (std::vector<std::int32_t>{4, 4, 4, 0}));
}

TEST(PrefixPlan, PrefixCutToWholeBlocksOfTheShortestMember) {
  // Both tables agree on 3 entries, but sequence 1 has 9 tokens: 2 whole blocks.
  const Tables t{{7, 8, 9, -1, /**/ 7, 8, 9, -1}, {12, 9}};
  const k::PrefixPlan plan = k::plan_prefixes(t.params());
  ASSERT_EQ(plan.num_groups(), 1);
  EXPECT_EQ(plan.group_tokens[0], 8);
  // A member with less than one whole block joins no group.
  const Tables short_one{{7, 8, -1, -1, /**/ 7, -1, -1, -1}, {8, 3}};
  EXPECT_EQ(k::plan_prefixes(short_one.params()).num_groups(), 0);
}

// Each planted violation is named; the unplanted plan is valid.
TEST(PrefixPlan, ErrorNamesEachViolation) {
  const Tables t{{10, 11, 12, 1, /**/ 10, 11, 12, 2, /**/ 30, 31, -1, -1, /**/ 30, 31, 5, -1},
                 {16, 15, 8, 12}};
  const k::PrefixPlan good = k::plan_prefixes(t.params());
  ASSERT_EQ(good.num_groups(), 2);
  {
    k::PagedDecodeParams p = t.params();
    good.bind(p);
    ASSERT_EQ(k::prefix_plan_error(p), "");
  }
  auto error_of = [&](auto plant) {
    k::PrefixPlan bad = good;
    Tables tables = t;
    plant(bad, tables);
    k::PagedDecodeParams p = tables.params();
    bad.bind(p);
    return k::prefix_plan_error(p);
  };
  auto expect_error = [](const std::string& error, const std::string& part) {
    EXPECT_NE(error.find(part), std::string::npos) << "error '" << error << "' lacks '" << part;
  };
  expect_error(error_of([](k::PrefixPlan& b, Tables&) { b.group_tokens[0] = 6; }),
               "multiple of the block size");
  expect_error(error_of([](k::PrefixPlan& b, Tables&) { b.group_tokens[0] = 0; }),
               "positive multiple");
  expect_error(error_of([](k::PrefixPlan& b, Tables&) { b.group_tokens[1] = 12; }), "has only 8");
  expect_error(error_of([](k::PrefixPlan&, Tables& planted) { planted.tables[5] = 99; }),
               "block 1 is not the group's shared block");
  expect_error(error_of([](k::PrefixPlan& b, Tables&) { b.group_seqs[2] = 1; }),
               "repeats sequence 1");
  expect_error(error_of([](k::PrefixPlan& b, Tables&) { b.group_seqs[1] = 7; }), "valid: 0..3");
  expect_error(
      error_of([](k::PrefixPlan& b, Tables&) { std::swap(b.group_seqs[0], b.group_seqs[1]); }),
      "ascending");
  expect_error(error_of([](k::PrefixPlan& b, Tables&) { b.group_start[1] = 0; }), "no member");
  expect_error(error_of([](k::PrefixPlan& b, Tables&) { b.seq_prefix_tokens[2] = 0; }),
               "seq_prefix_tokens[2]");
  expect_error(error_of([](k::PrefixPlan& b, Tables&) { b.group_tokens[0] = 20; }),
               "more than a table row");
}

// bind(p, base) over packed() points where bind(p) does, relative to the copy.
TEST(PrefixPlan, PackedBindMatchesHostBind) {
  const Tables t{{10, 11, 12, 1, /**/ 10, 11, 12, 2}, {16, 15}};
  const k::PrefixPlan plan = k::plan_prefixes(t.params());
  const std::vector<std::int32_t> copy = plan.packed();
  k::PagedDecodeParams p = t.params();
  plan.bind(p, copy.data());
  EXPECT_EQ(k::prefix_plan_error(p), "");
  EXPECT_EQ(p.num_prefix_groups, 1);
  EXPECT_EQ(p.prefix_group_seqs[1], 1);
  EXPECT_EQ(p.prefix_group_tokens[0], 12);
  EXPECT_EQ(p.seq_prefix_tokens[1], 12);
  EXPECT_EQ(copy.size(), 2u + 2u + 1u + 2u);
}

}  // namespace
}  // namespace decodebench
