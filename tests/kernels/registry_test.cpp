// The registry's plain functions, on any machine: the `--kernel auto` choice, the split_kv
// workspace layout and the one precondition check (its wording included). Synthetic ladders,
// so the rules are tested whatever this build compiled.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "device/math.h"
#include "kernels.h"

namespace decodebench {
namespace {

namespace k = kernels;

// A ladder shaped like the full build's.
std::vector<k::KernelInfo> full_ladder() {
  std::vector<k::KernelInfo> ladder;
  for (const char* name : {"naive", "gqa", "pipelined", "split_kv"}) {
    k::KernelInfo info;
    info.name = name;
    info.head_dims = {64, 128, 256};
    info.kv_dtypes = {DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2};
    info.q_dtypes = {DType::f16, DType::bf16};
    info.max_group = std::string(name) == "naive" ? 0 : 8;
    info.uses_workspace = std::string(name) == "split_kv";
    ladder.push_back(info);
  }
  return ladder;
}

// A decode point's shape with every sequence `context` tokens long, block size 16, no sharing
// (what build_layout gives for such a spec). `lens` must outlive the params.
k::PagedDecodeParams shape(int batch, int hq, int hkv, int context, std::vector<std::int32_t>& lens,
                           int head_dim = 128) {
  lens.assign(static_cast<std::size_t>(batch), context);
  k::PagedDecodeParams p;
  p.batch = batch;
  p.num_q_heads = hq;
  p.num_kv_heads = hkv;
  p.head_dim = head_dim;
  p.block_size = 16;
  p.max_blocks_per_seq = (context + 15) / 16;
  p.num_blocks = batch * p.max_blocks_per_seq;
  p.context_lens = lens.data();
  return p;
}

// 132 SMs with 3 resident split blocks each: the H100/H200 residency of split_kv at f16, d 128,
// group cap 4 (tests/backends/cuda/cuda_plan_test.cpp derives it from the kernel's resources).
constexpr k::ResidentCtas kHopperF16{132, 3};

std::string choose(int batch, int hq, int hkv, int context,
                   const std::vector<k::KernelInfo>& ladder, k::ResidentCtas gpu = kHopperF16) {
  std::vector<std::int32_t> lens;
  return k::choose_kernel(ladder, shape(batch, hq, hkv, context, lens), gpu);
}

// ---- `--kernel auto` ------------------------------------------------------------------------

TEST(KernelChoice, SplitsLongContextsThatCannotFillTheGpu) {
  const auto ladder = full_ladder();
  // llama-3.1-8b (Hq 32, Hkv 8) on 132 SMs x 3 resident blocks = 396 slots.
  EXPECT_EQ(choose(1, 32, 8, 32768, ladder), "split_kv");   // 8 blocks
  EXPECT_EQ(choose(16, 32, 8, 8192, ladder), "split_kv");   // 128 blocks: the planner gives 3
  EXPECT_EQ(choose(48, 32, 8, 8192, ladder), "pipelined");  // 384 blocks: no second split fits
  EXPECT_EQ(choose(64, 32, 8, 8192, ladder), "pipelined");  // 512 blocks fill it
  EXPECT_EQ(choose(1, 32, 8, 512, ladder), "pipelined");    // too short to repay the merge
  EXPECT_EQ(choose(1, 32, 8, k::kSplitKvMinContext, ladder), "split_kv");
  EXPECT_EQ(choose(1, 32, 8, k::kSplitKvMinContext - 1, ladder), "pipelined");
  // The residency decides, not the SM count alone: 2 blocks per SM (fp8 at group cap 8) make 264
  // slots, where 16 x 8 blocks leave room for 2 splits but 24 x 8 for none.
  EXPECT_EQ(choose(16, 32, 8, 8192, ladder, {132, 2}), "split_kv");
  EXPECT_EQ(choose(24, 32, 8, 8192, ladder, {132, 2}), "pipelined");
  EXPECT_EQ(choose(24, 32, 8, 8192, ladder, {132, 3}), "split_kv");
}

TEST(KernelChoice, AsksTheResidencyOfTheSplittingRungOnly) {
  const auto ladder = full_ladder();
  std::vector<std::int32_t> lens;
  const k::PagedDecodeParams p = shape(16, 32, 8, 8192, lens);
  std::vector<std::string> asked;
  const auto resident = [&](const k::KernelInfo& rung) {
    asked.push_back(rung.name);
    return k::ResidentCtas{132, 1};  // 132 slots: 128 blocks leave no room for a second split
  };
  EXPECT_EQ(k::choose_kernel(ladder, p, resident), "pipelined");
  EXPECT_EQ(asked, std::vector<std::string>{"split_kv"});
}

TEST(KernelChoice, SameRuleForANominalDevice) {
  // The emulator's nominal 4 SMs x 2 blocks: one sequence with one KV head splits, 8 x 2 blocks
  // do not.
  const auto ladder = full_ladder();
  EXPECT_EQ(choose(1, 4, 1, 2048, ladder, {4, 2}), "split_kv");
  EXPECT_EQ(choose(8, 8, 2, 2048, ladder, {4, 2}), "pipelined");
  EXPECT_EQ(choose(1, 4, 1, 1000, ladder, {4, 2}), "pipelined");
}

TEST(KernelChoice, WithoutContextLengthsPlansForTheTableCapacity) {
  const auto ladder = full_ladder();
  std::vector<std::int32_t> lens;
  k::PagedDecodeParams p = shape(1, 32, 8, 32768, lens);
  p.context_lens = nullptr;
  EXPECT_EQ(k::choose_kernel(ladder, p, kHopperF16), "split_kv");
  p.max_blocks_per_seq = 512 / 16;
  EXPECT_EQ(k::choose_kernel(ladder, p, kHopperF16), "pipelined");
}

TEST(KernelChoice, FallsBackToWhatSupportsThePoint) {
  auto ladder = full_ladder();
  // GQA group 16 is beyond every rung but naive.
  EXPECT_EQ(choose(1, 128, 8, 32768, ladder), "naive");
  // A build without split_kv: the best plain rung even when splitting would help.
  ladder.pop_back();
  EXPECT_EQ(choose(1, 32, 8, 32768, ladder), "pipelined");
  // A build with split_kv only: it, whatever the shape.
  const std::vector<k::KernelInfo> only_split = {full_ladder().back()};
  EXPECT_EQ(choose(256, 32, 8, 1024, only_split), "split_kv");
  // Nothing takes head_dim 64 here: the first rung (unsupported_reason then says why).
  for (auto& info : ladder) info.head_dims = {128};
  std::vector<std::int32_t> lens;
  EXPECT_EQ(k::choose_kernel(ladder, shape(1, 32, 8, 1024, lens, /*head_dim=*/64), kHopperF16),
            "naive");
  EXPECT_EQ(k::choose_kernel({}, k::PagedDecodeParams{}, kHopperF16), "");
}

// ---- the split_kv workspace -----------------------------------------------------------------

TEST(SplitKvWorkspace, LayoutIsPartialOutThenLse) {
  std::vector<std::int32_t> lens;
  const k::PagedDecodeParams p = shape(3, 32, 8, 1024, lens);  // Hq 32, d 128
  const k::SplitKvWorkspace w = k::split_kv_workspace(p, 5);
  EXPECT_EQ(w.num_splits, 5);
  EXPECT_EQ(w.partial_out_offset, 0u);
  EXPECT_EQ(w.partial_out_bytes, std::size_t{3} * 32 * 5 * 128 * 4);  // [B][Hq][splits][d] fp32
  EXPECT_EQ(w.partial_lse_offset, w.partial_out_bytes);               // already 16-byte aligned
  EXPECT_EQ(w.partial_lse_bytes, std::size_t{3} * 32 * 5 * 4);        // [B][Hq][splits] fp32
  EXPECT_EQ(w.total_bytes, std::size_t{3} * 32 * 5 * (128 + 1) * 4);
  EXPECT_EQ(k::split_kv_workspace(p, 0).total_bytes, 0u);
}

TEST(SplitKvWorkspace, LseStartsAlignedAndBindSetsThePointers) {
  k::PagedDecodeParams p;
  p.batch = 1;
  p.num_q_heads = 1;
  p.head_dim = 3;  // no kernel takes it; the layout must still keep partial_lse aligned
  const k::SplitKvWorkspace w = k::split_kv_workspace(p, 3);
  EXPECT_EQ(w.partial_out_bytes, 36u);
  EXPECT_EQ(w.partial_lse_offset, 48u);
  EXPECT_EQ(w.total_bytes, 48u + 12u);
  alignas(16) unsigned char buffer[64] = {};
  w.bind(p, buffer);
  EXPECT_EQ(p.num_splits, 3);
  EXPECT_EQ(reinterpret_cast<unsigned char*>(p.partial_out), buffer);
  EXPECT_EQ(reinterpret_cast<unsigned char*>(p.partial_lse), buffer + 48);
}

// ---- the precondition check -----------------------------------------------------------------

struct Buffers {
  alignas(16) unsigned char q[64] = {}, out[64] = {}, k[64] = {}, v[64] = {};
  std::int32_t tables[4] = {}, lens[1] = {1};
  float ws[8] = {};
};

// A point every rung of full_ladder() takes, launch scope included.
k::PagedDecodeParams launchable(Buffers& b) {
  k::PagedDecodeParams p;
  p.q = b.q;
  p.out = b.out;
  p.k_cache = b.k;
  p.v_cache = b.v;
  p.block_tables = b.tables;
  p.context_lens = b.lens;
  p.batch = 1;
  p.num_q_heads = 8;
  p.num_kv_heads = 2;
  p.head_dim = 128;
  p.block_size = 16;
  p.max_blocks_per_seq = 4;
  p.num_blocks = 4;
  p.softmax_scale = 0.088f;
  p.num_splits = 2;
  p.partial_out = b.ws;
  p.partial_lse = b.ws + 4;
  return p;
}

// The message for `p` at `scope`, which must name the kernel and contain every piece of `want`.
void expect_refusal(const k::KernelInfo& info, const k::PagedDecodeParams& p,
                    const std::vector<std::string>& want, k::CheckScope scope) {
  const std::string why = k::unsupported_reason(info, p, scope);
  ASSERT_FALSE(why.empty()) << "accepted; expected: " << want.front();
  EXPECT_EQ(why.rfind("kernel '" + info.name + "' does not take ", 0), 0u) << why;
  for (const std::string& piece : want) EXPECT_NE(why.find(piece), std::string::npos) << why;
}

TEST(UnsupportedReason, AcceptsWhatTheRungTakes) {
  Buffers b;
  for (const k::KernelInfo& info : full_ladder()) {
    EXPECT_EQ(k::unsupported_reason(info, launchable(b), k::CheckScope::launch), "") << info.name;
  }
}

TEST(UnsupportedReason, ShapeMessagesNameTheValueAndTheValidChoices) {
  Buffers b;
  const k::KernelInfo gqa = full_ladder()[1];
  const k::KernelInfo naive = full_ladder()[0];
  const auto shape_scope = k::CheckScope::shape;
  k::PagedDecodeParams p = launchable(b);
  p.head_dim = 96;
  expect_refusal(gqa, p, {"head_dim 96", "valid: 64, 128, 256 in this build"}, shape_scope);
  p = launchable(b);
  p.kv_dtype = DType::f32;
  expect_refusal(gqa, p, {"KV dtype f32", "f16, bf16, fp8_e4m3, fp8_e5m2"}, shape_scope);
  p = launchable(b);
  p.q_dtype = DType::fp8_e4m3;
  expect_refusal(gqa, p, {"q/out dtype fp8_e4m3", "valid: f16, bf16"}, shape_scope);
  p = launchable(b);
  p.block_size = 24;
  expect_refusal(gqa, p, {"block size 24", "power of two >= 8"}, shape_scope);
  p.block_size = 4;
  expect_refusal(gqa, p, {"block size 4"}, shape_scope);
  p = launchable(b);
  p.num_q_heads = 6;
  p.num_kv_heads = 4;
  expect_refusal(gqa, p, {"num_q_heads 6 with num_kv_heads 4", "multiple"}, shape_scope);
  p.num_kv_heads = 0;
  expect_refusal(gqa, p, {"num_kv_heads 0"}, shape_scope);
  p = launchable(b);
  p.num_q_heads = 32;
  p.num_kv_heads = 2;
  expect_refusal(gqa, p, {"GQA group 16", "GQA groups up to 8"}, shape_scope);
  EXPECT_EQ(k::unsupported_reason(naive, p), "");  // naive takes any group
  p = launchable(b);
  p.batch = 65536;
  expect_refusal(gqa, p, {"batch 65536", "1..65535"}, shape_scope);
  p.batch = 0;
  expect_refusal(gqa, p, {"batch 0"}, shape_scope);
}

// A rung takes the variants its ladder.json entry lists and refuses the others by name, naming
// the rungs that take them and the cpu backend; a rung that takes them all does, and a sink flag
// without its logits is refused at launch.
TEST(UnsupportedReason, TheRungsRefuseTheVariantsTheyDoNotTake) {
  Buffers b;
  for (const k::KernelInfo& info : full_ladder()) {
    SCOPED_TRACE(info.name);
    k::PagedDecodeParams p = launchable(b);
    p.window = 4096;
    if (info.window) {
      EXPECT_EQ(k::unsupported_reason(info, p, k::CheckScope::shape), "");
    } else {
      expect_refusal(
          info, p,
          {"a sliding window of 4096 tokens", "'tc'", "kernels 'cpu' and 'cascade' take them"},
          k::CheckScope::shape);
    }
    p = launchable(b);
    p.has_sinks = true;
    if (info.sinks) {
      EXPECT_EQ(k::unsupported_reason(info, p, k::CheckScope::shape), "");
    } else {
      expect_refusal(info, p, {"attention sinks", "'tc', 'cascade'"}, k::CheckScope::shape);
    }
    p = launchable(b);
    p.softcap = 50.f;
    if (info.softcap) {
      EXPECT_EQ(k::unsupported_reason(info, p, k::CheckScope::shape), "");
    } else {
      expect_refusal(info, p, {"logit soft-capping", "full attention without"},
                     k::CheckScope::shape);
    }
  }
  // What ladder.json says, as compiled: the CUDA-core rungs take none, tc all three, cascade all
  // but windows.
  for (const k::KernelInfo& info : k::kernel_ladder()) {
    const bool tc = info.name == "tc";
    const bool cascade = info.name == "cascade";
    EXPECT_EQ(info.window, tc) << info.name;
    EXPECT_EQ(info.sinks, tc || cascade) << info.name;
    EXPECT_EQ(info.softcap, tc || cascade) << info.name;
  }
  k::KernelInfo takes = full_ladder()[0];
  takes.window = takes.sinks = takes.softcap = true;
  k::PagedDecodeParams p = launchable(b);
  p.window = 128;
  p.softcap = 30.f;
  p.has_sinks = true;
  EXPECT_EQ(k::unsupported_reason(takes, p, k::CheckScope::shape), "");
  expect_refusal(takes, p, {"has_sinks with a null sinks"}, k::CheckScope::launch);
  const float sinks[8] = {};
  p.sinks = sinks;
  EXPECT_EQ(k::unsupported_reason(takes, p, k::CheckScope::launch), "");
  // Only what is set and not taken is named.
  takes.window = false;
  const std::string why = k::unsupported_reason(takes, p, k::CheckScope::shape);
  EXPECT_NE(why.find("a sliding window of 128 tokens"), std::string::npos) << why;
  EXPECT_EQ(why.find("attention sinks"), std::string::npos) << why;
}

// The per-head rungs do not take MLA's absorbed shape (values narrower than the keys, inside
// them): each refuses it by name and points at the cpu backend (and the ladder's mla rung when
// the build has one); a rung that says it takes MLA does.
TEST(UnsupportedReason, TheRungsRefuseMla) {
  Buffers b;
  for (const k::KernelInfo& info : full_ladder()) {
    k::PagedDecodeParams p = launchable(b);
    p.v_head_dim = p.head_dim / 2;
    expect_refusal(info, p, {"MLA attention", "values the first", "kernel 'cpu' take MLA"},
                   k::CheckScope::shape);
    p.v_head_dim = p.head_dim;  // as wide as the keys: per-head K and V, not MLA
    EXPECT_EQ(k::unsupported_reason(info, p, k::CheckScope::shape), "") << info.name;
  }
  k::KernelInfo takes = full_ladder()[0];
  takes.mla = true;
  k::PagedDecodeParams p = launchable(b);
  p.v_head_dim = p.head_dim / 2;
  EXPECT_EQ(k::unsupported_reason(takes, p, k::CheckScope::shape), "");
}

TEST(UnsupportedReason, ShapeScopeIgnoresPointersLaunchScopeDoesNot) {
  const k::KernelInfo gqa = full_ladder()[1];
  Buffers b;
  k::PagedDecodeParams p = launchable(b);
  p.k_cache = nullptr;
  p.out = nullptr;
  EXPECT_EQ(k::unsupported_reason(gqa, p), "");  // shape is the default scope
  expect_refusal(gqa, p, {"a null out, k_cache", "all set"}, k::CheckScope::launch);
}

TEST(UnsupportedReason, LaunchMessages) {
  const k::KernelInfo gqa = full_ladder()[1];
  const k::KernelInfo split = full_ladder()[3];
  const auto launch = k::CheckScope::launch;
  Buffers b;
  k::PagedDecodeParams p = launchable(b);
  p.v_cache = b.v + 4;
  expect_refusal(gqa, p, {"v_cache that is not 16-byte aligned", "16-byte loads"}, launch);
  p = launchable(b);
  p.max_blocks_per_seq = 0;
  expect_refusal(gqa, p, {"max_blocks_per_seq 0", ">= 1"}, launch);
  p = launchable(b);
  p.num_blocks = 0;
  expect_refusal(gqa, p, {"num_blocks 0"}, launch);
  p = launchable(b);
  p.v_scale = 0.f;
  expect_refusal(gqa, p, {"v_scale 0", "> 0"}, launch);
  // The workspace is only a split rung's business.
  p = launchable(b);
  p.partial_lse = nullptr;
  p.num_splits = 0;
  EXPECT_EQ(k::unsupported_reason(gqa, p, launch), "");
  expect_refusal(split, p, {"num_splits 0", "1..65535"}, launch);
  p.num_splits = 2;
  expect_refusal(split, p, {"a null partial_lse", "split_kv_workspace()"}, launch);
}

// Layout scope reads the host tables, and nothing else: every context within its row's
// capacity, every entry a context reads inside the pool, each refusal naming the sequence, the
// entry, the value and the valid range. Launch scope checks the same; the device launch scope
// cannot read the tables (the backend checks its host copy).
TEST(UnsupportedReason, LayoutScopeBoundsContextsAndTheEntriesTheyRead) {
  const k::KernelInfo gqa = full_ladder()[1];
  const auto layout = k::CheckScope::layout;
  const auto launch = k::CheckScope::launch;
  Buffers b;
  // Two sequences of 4 entries each in a pool of 4 blocks of 16 tokens; sequence 1 reads 3.
  std::vector<std::int32_t> tables = {0, 1, 2, 3, /**/ 3, 2, 1, -1};
  std::vector<std::int32_t> lens = {64, 33};
  k::PagedDecodeParams p = launchable(b);
  p.batch = 2;
  p.block_tables = tables.data();
  p.context_lens = lens.data();
  for (const k::CheckScope scope : {layout, launch, k::CheckScope::launch_device}) {
    EXPECT_EQ(k::unsupported_reason(gqa, p, scope), "");
  }
  // The tensors are not the layout's business.
  k::PagedDecodeParams tables_only = p;
  tables_only.q = tables_only.k_cache = tables_only.v_cache = nullptr;
  tables_only.out = nullptr;
  EXPECT_EQ(k::unsupported_reason(gqa, tables_only, layout), "");
  tables_only.context_lens = nullptr;
  expect_refusal(gqa, tables_only, {"a null context_lens", "block_tables and context_lens"},
                 layout);

  lens[1] = 65;
  for (const k::CheckScope scope : {layout, launch}) {
    expect_refusal(gqa, p,
                   {"context_lens[1] = 65, more tokens than sequence 1's block table holds",
                    "(valid: 1..64 = max_blocks_per_seq 4 x block_size 16)"},
                   scope);
  }
  EXPECT_EQ(k::unsupported_reason(gqa, p, k::CheckScope::launch_device), "");
  for (const std::int32_t len : {0, -5}) {
    lens[1] = len;
    expect_refusal(gqa, p, {"context_lens[1] = " + std::to_string(len) + " (valid: 1..64"}, layout);
  }
  lens[1] = 33;

  tables[5] = 4;  // == num_blocks
  for (const k::CheckScope scope : {layout, launch}) {
    expect_refusal(gqa, p,
                   {"block_tables[1][1] = 4, one of the 3 entries sequence 1 reads for its 33 "
                    "tokens",
                    "(valid: 0..3, num_blocks 4 in the pool)"},
                   scope);
  }
  EXPECT_EQ(k::unsupported_reason(gqa, p, k::CheckScope::launch_device), "");
  tables[5] = -1;
  expect_refusal(gqa, p, {"block_tables[1][1] = -1", "valid: 0..3"}, layout);
  tables[5] = 2;

  // Entries past the ones a context reads are never read: anything goes there.
  for (const std::int32_t junk : {4, -7, 1 << 30}) {
    tables[7] = junk;
    EXPECT_EQ(k::unsupported_reason(gqa, p, layout), "") << junk;
    EXPECT_EQ(k::unsupported_reason(gqa, p, launch), "") << junk;
  }
  // Shape scope stays pointer-free: a layout-only view is checked there without the tables.
  lens[0] = 1000;
  EXPECT_EQ(k::unsupported_reason(gqa, p), "");
}

TEST(UnsupportedReason, ARungWithoutLimitsTakesAnyGroupAndBatch) {
  // The CPU decode's terms: any group, any batch, any power-of-two block size.
  k::KernelInfo cpu = full_ladder()[0];
  cpu.name = "cpu";
  cpu.min_block_size = 1;
  cpu.max_batch = 0;
  Buffers b;
  k::PagedDecodeParams p = launchable(b);
  p.batch = 100000;
  p.block_size = 1;
  p.num_q_heads = 64;
  p.num_kv_heads = 1;
  EXPECT_EQ(k::unsupported_reason(cpu, p), "");
  p.block_size = 3;
  expect_refusal(cpu, p, {"block size 3", "power of two >= 1"}, k::CheckScope::shape);
}

// ---- shared numeric facts -------------------------------------------------------------------

TEST(CommonMath, PowerOfTwoAndLog2e) {
  static_assert(is_power_of_two(1) && is_power_of_two(16) && is_power_of_two(1 << 30));
  static_assert(!is_power_of_two(0) && !is_power_of_two(-8) && !is_power_of_two(24));
  EXPECT_FLOAT_EQ(kLog2e, 1.4426950408889634f);
}

// ---- prefix-aware rungs --------------------------------------------------------------------

k::KernelInfo cascade_like() {
  k::KernelInfo info = full_ladder().back();  // split_kv's limits and workspace
  info.name = "cascade";
  info.prefix_aware = true;
  return info;
}

// `--kernel auto` never names a prefix-aware rung, whatever the ladder holds (it has not been
// measured on a GPU): the splitting rung before it when the planner splits, the highest other
// rung otherwise; and alone in a ladder it is only the "nothing runs" answer.
TEST(ChooseKernel, NeverAPrefixAwareRung) {
  auto ladder = full_ladder();
  ladder.push_back(cascade_like());
  EXPECT_EQ(choose(1, 32, 8, 32768, ladder), "split_kv");
  EXPECT_EQ(choose(64, 32, 8, 512, ladder), "pipelined");
  const std::vector<k::KernelInfo> splitting_only = {ladder[3], ladder.back()};
  EXPECT_EQ(choose(64, 32, 8, 512, splitting_only), "split_kv");
  EXPECT_EQ(choose(1, 32, 8, 32768, splitting_only), "split_kv");
}

// With a plan bound, the launch scope checks it in full (host pointers) and its counts; the
// device launch scope reads only the counts and pointers. No plan (0 groups) needs nothing.
TEST(UnsupportedReason, PrefixAwareRungChecksThePlan) {
  Buffers b;
  const k::KernelInfo cascade = cascade_like();
  k::PagedDecodeParams p = launchable(b);
  EXPECT_EQ(k::unsupported_reason(cascade, p, k::CheckScope::launch), "");  // no plan
  // Two sequences of 40 tokens (3 blocks of 16) sharing their first block, in a pool of 5.
  const std::vector<std::int32_t> tables = {0, 1, 3, -1, /**/ 0, 2, 4, -1};
  const std::vector<std::int32_t> lens = {40, 40};
  p.batch = 2;
  p.num_blocks = 5;
  p.block_tables = tables.data();
  p.context_lens = lens.data();
  const k::PrefixPlan plan = k::plan_prefixes(p);
  ASSERT_EQ(plan.num_groups(), 1);
  plan.bind(p);
  expect_refusal(cascade, p, {"num_prefix_chunks 0", "1..65535"}, k::CheckScope::launch);
  p.num_prefix_chunks = 2;
  expect_refusal(cascade, p, {"num_prefix_tiles 0", "prefix_tiles() of the plan (1)"},
                 k::CheckScope::launch);
  p.num_prefix_tiles = k::prefix_tiles(p);
  EXPECT_EQ(p.num_prefix_tiles, 1);
  EXPECT_EQ(k::unsupported_reason(cascade, p, k::CheckScope::launch), "");
  EXPECT_EQ(k::unsupported_reason(cascade, p, k::CheckScope::launch_device), "");
  // A plan the tables do not hold: named at launch scope, not read at device launch scope.
  k::PrefixPlan bad = plan;
  bad.group_tokens[0] = 32;
  bad.seq_prefix_tokens = {32, 32};
  bad.bind(p);
  expect_refusal(cascade, p, {"prefix plan: group 0", "block 1 is not the group's shared block"},
                 k::CheckScope::launch);
  EXPECT_EQ(k::unsupported_reason(cascade, p, k::CheckScope::launch_device), "");
  p.seq_prefix_tokens = nullptr;
  expect_refusal(cascade, p, {"a null array"}, k::CheckScope::launch_device);
  // A rung that is not prefix-aware ignores the plan.
  EXPECT_EQ(k::unsupported_reason(full_ladder().back(), p, k::CheckScope::launch), "");
}

}  // namespace
}  // namespace decodebench
