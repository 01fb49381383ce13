// The integer KV formats (int8, int4, int4_token) on the tensor-core rungs `tc` and `cascade`
// through the SIMT emulator, against the reference reading quant::dequantize's values: every
// compiled head_dim (256 only on the long contexts and forced chunks: the sanitizer builds run
// these too), GQA groups 1..8, block sizes 8 (the rungs' minimum) and 16 (and 64),
// ragged contexts, split counts, cascade's shared prefixes (several groups, forced chunks), q
// of both dtypes; and planted faults, each a scale or zero array the kernel must read (dropped:
// zeros set to 0, scales to 1), stale scales past a context's end, and int4 codes with their
// nibbles swapped, which the same comparison must catch. tc_test.cpp and
// cascade_test.cpp also run every compiled KV dtype, these included, on their shapes.
#include <gtest/gtest.h>

#include <algorithm>
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

namespace k = kernels;

constexpr DType kIntFormats[] = {DType::int8, DType::int4, DType::int4_token};

struct Case {
  int batch = 3;
  ContextSpec context = ContextSpec::ragged(9, 150);
  int num_q_heads = 8;
  int num_kv_heads = 2;
  DType q_dtype = DType::f16;
  int block_size = 16;
  double hit_rate = 0;
  int prefix_groups = 1;
  int num_splits = 0;  // 0: planned (4 SMs x 2 blocks); else forced (and num_prefix_chunks)
  int num_prefix_chunks = 1;
};

// What a planted fault does to the params before the launch.
// stale_past_end: every per-token scale and zero of the slots past a sequence's end in its last
// block set to NaN (what an allocator's recycled block may hold), which a kernel must never let
// reach the output. *_nibbles_swapped: the two codes of every byte exchanged, which is what a
// kernel reading nibbles in the wrong order sees.
enum class Plant {
  none,
  k_zeros_dropped,
  v_zeros_dropped,
  k_scales_one,
  v_scales_one,
  stale_past_end,
  k_nibbles_swapped,
  v_nibbles_swapped
};

struct IntRun {
  k::LaunchResult launch;
  std::vector<float> out;
  int prefix_groups = 0;
};

IntRun run(const std::string& kernel, const Workload& w, const Case& c, Plant plant = Plant::none) {
  k::PagedDecodeParams p = w.params();
  const k::KernelInfo* info = k::find_kernel(kernel);
  k::PrefixPlan plan;
  if (info->prefix_aware) {
    plan = k::plan_prefixes(p);
    plan.bind(p);
  }
  const k::SplitKvWorkspace layout =
      c.num_splits > 0 ? k::split_kv_workspace(
                             p, c.num_splits,
                             info->prefix_aware && plan.num_groups() > 0 ? c.num_prefix_chunks : 0)
                       : k::plan_workspace(*info, p, k::ResidentCtas{4, 2});
  std::vector<float> ws(layout.total_bytes / sizeof(float) + 1, std::nanf(""));
  layout.bind(p, ws.data());
  // The planted copies: zeros 0 (the zero term dropped), scales 1.0 (the scale dropped).
  std::vector<std::uint16_t> planted;
  const auto plant_array = [&](const std::vector<std::uint16_t>& a, std::uint16_t value) {
    planted.assign(a.size(), value);
    return planted.data();
  };
  std::vector<std::uint16_t> stale[4];
  std::vector<std::byte> swapped;
  const auto swap_nibbles = [&](const std::vector<std::byte>& codes) {
    swapped = codes;
    for (std::byte& b : swapped) b = (b << 4) | (b >> 4);
    return swapped.data();
  };
  const auto plant_stale = [&](const std::vector<std::uint16_t>& a, int per_token) {
    std::vector<std::uint16_t> s = a;
    if (s.empty() || per_token == 0) return s;
    for (int b = 0; b < p.batch; ++b) {
      const int len = w.layout.context_lens[static_cast<std::size_t>(b)];
      const int last = (len - 1) / p.block_size;
      const int blk =
          w.layout.block_tables[static_cast<std::size_t>(b) * p.max_blocks_per_seq + last];
      for (int slot = len % p.block_size; slot > 0 && slot < p.block_size; ++slot) {
        for (int h = 0; h < p.num_kv_heads; ++h) {
          const std::size_t row =
              (static_cast<std::size_t>(blk) * p.num_kv_heads + h) * p.block_size + slot;
          for (int g = 0; g < per_token; ++g) s[row * per_token + g] = 0x7E00;  // f16 NaN
        }
      }
    }
    return s;
  };
  switch (plant) {
    case Plant::none: break;
    case Plant::stale_past_end: {
      const int groups = p.kv_dtype == DType::int8 ? 1 : p.head_dim / kInt4GroupChannels;
      const int k_per_token = p.kv_dtype == DType::int4 ? 0 : groups;  // int4 keys: per block
      stale[0] = plant_stale(w.k_scales, k_per_token);
      stale[1] = plant_stale(w.k_zeros, k_per_token);
      stale[2] = plant_stale(w.v_scales, groups);
      stale[3] = plant_stale(w.v_zeros, groups);
      if (!stale[0].empty()) p.k_scales = stale[0].data();
      if (!stale[1].empty()) p.k_zeros = stale[1].data();
      if (!stale[2].empty()) p.v_scales = stale[2].data();
      if (!stale[3].empty()) p.v_zeros = stale[3].data();
      break;
    }
    case Plant::k_zeros_dropped: p.k_zeros = plant_array(w.k_zeros, 0); break;
    case Plant::v_zeros_dropped: p.v_zeros = plant_array(w.v_zeros, 0); break;
    case Plant::k_scales_one: p.k_scales = plant_array(w.k_scales, 0x3C00); break;
    case Plant::v_scales_one: p.v_scales = plant_array(w.v_scales, 0x3C00); break;
    case Plant::k_nibbles_swapped: p.k_cache = swap_nibbles(w.k_cache); break;
    case Plant::v_nibbles_swapped: p.v_cache = swap_nibbles(w.v_cache); break;
  }
  const std::size_t n = static_cast<std::size_t>(w.rows()) * p.num_q_heads * p.head_dim;
  std::vector<std::uint16_t> bits(n, 0xffff);  // NaN in f16 and bf16: must be written
  p.out = bits.data();
  IntRun r;
  r.prefix_groups = plan.num_groups();
  r.launch = k::emu::launch_paged_decode(kernel, p, /*stream=*/nullptr);
  r.out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    r.out[i] = p.q_dtype == DType::f16 ? floatfmt::f16_to_float(bits[i])
                                       : floatfmt::bf16_to_float(bits[i]);
  }
  return r;
}

bool compiled(const k::KernelInfo* info, DType kv) {
  return info != nullptr &&
         std::find(info->kv_dtypes.begin(), info->kv_dtypes.end(), kv) != info->kv_dtypes.end();
}

// `c` on `kernel` for every integer format and compiled head_dim; with `want_prefix`, the planner
// must find a shared prefix (so cascade's prefix pass runs).
void expect_matches_reference(const std::string& kernel, const Case& c, const std::string& what,
                              bool want_prefix = false, int max_head_dim = 256) {
  const k::KernelInfo* info = k::find_kernel(kernel);
  if (info == nullptr) GTEST_SKIP() << kernel << " not compiled in this build";
  int ran = 0;
  for (DType kv : kIntFormats) {
    if (!compiled(info, kv)) continue;
    for (int d : info->head_dims) {
      if (d > max_head_dim) continue;
      SCOPED_TRACE(kernel + ", " + what + ", d " + std::to_string(d) + ", KV " +
                   std::string(dtype_name(kv)));
      const Workload w = make_workload(testing_support::decode_spec(c, d, kv, 2026));
      const IntRun r = run(kernel, w, c);
      ASSERT_TRUE(r.launch.ok()) << r.launch.message;
      if (want_prefix) {
        ASSERT_GT(r.prefix_groups, 0);
      }
      const Comparison cmp = compare_outputs(r.out, reference_decode(w), c.num_q_heads, d,
                                             tolerance_for(c.q_dtype, kv));
      EXPECT_TRUE(cmp.ok) << cmp.mismatches << " of " << cmp.checked << " off; " << cmp.report;
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << kernel << " is built for no integer format";
}

TEST(IntKvEmu, TcEveryGroupAndBlockSize) {
  for (int group = 1; group <= 8; ++group) {
    for (int block : {8, 16, 32}) {
      // Both of 8 and 16 at group 4; one of them at the others; 32 at groups 3 and 6.
      if (block == 32 ? group % 3 != 0 : block == (group % 2 == 0 ? 8 : 16) && group != 4) continue;
      Case c;
      c.num_q_heads = 2 * group;
      c.q_dtype = group % 3 == 0 ? DType::bf16 : DType::f16;
      c.block_size = block;
      c.num_splits = group % 2 == 0 ? 0 : 3;  // planned, or 3 forced
      expect_matches_reference(
          "tc", c, "group " + std::to_string(group) + ", block " + std::to_string(block),
          /*want_prefix=*/false, /*max_head_dim=*/128);
    }
  }
}

// Stale scales past a sequence's end (NaN) must not reach the output, on both rungs and at block
// sizes 8 (int4's own instance), 16 and 32; the contexts end inside a block.
TEST(IntKvEmu, StaleScalesPastTheEndAreNeverRead) {
  int ran = 0;
  for (const char* kernel : {"tc", "cascade"}) {
    const k::KernelInfo* info = k::find_kernel(kernel);
    for (DType kv : kIntFormats) {
      if (!compiled(info, kv)) continue;
      for (int block : {8, 16, 32}) {
        SCOPED_TRACE(std::string(kernel) + ", " + std::string(dtype_name(kv)) + ", block " +
                     std::to_string(block));
        Case c;
        c.batch = 4;
        c.context = ContextSpec::ragged(37, 141);
        c.block_size = block;
        c.hit_rate = 0.5;  // cascade: the prefix pass too
        const int d = info->head_dims.front();
        const Workload w = make_workload(testing_support::decode_spec(c, d, kv, 7));
        const IntRun r = run(kernel, w, c, Plant::stale_past_end);
        ASSERT_TRUE(r.launch.ok()) << r.launch.message;
        const Comparison cmp = compare_outputs(r.out, reference_decode(w), c.num_q_heads, d,
                                               tolerance_for(c.q_dtype, kv));
        EXPECT_TRUE(cmp.ok) << cmp.mismatches << " of " << cmp.checked << " off; " << cmp.report;
        ++ran;
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "no tensor-core rung built for an integer format";
}

TEST(IntKvEmu, TcLongRaggedContextsAndSplits) {
  for (int splits : {1, 5}) {
    Case c;
    c.batch = 2;
    c.context = ContextSpec::ragged(200, 700);
    c.num_q_heads = 8;
    c.block_size = 64;
    c.num_splits = splits;
    expect_matches_reference("tc", c, std::to_string(splits) + " splits");
  }
}

TEST(IntKvEmu, CascadeSharedPrefixes) {
  for (const auto& [hq, hkv, batch] : {std::tuple{2, 2, 5}, {8, 2, 6}, {8, 1, 5}}) {
    for (int block : {8, 16}) {
      Case c;
      c.batch = batch;
      c.num_q_heads = hq;
      c.num_kv_heads = hkv;
      c.block_size = block;
      c.context = ContextSpec::ragged(60, 200);
      c.hit_rate = 0.6;
      c.prefix_groups = 2;
      c.q_dtype = hq == 8 && hkv == 1 ? DType::bf16 : DType::f16;
      expect_matches_reference(
          "cascade", c, "group " + std::to_string(hq / hkv) + ", block " + std::to_string(block),
          /*want_prefix=*/true, /*max_head_dim=*/128);
    }
  }
}

TEST(IntKvEmu, CascadeForcedChunksAndSplits) {
  Case c;
  c.batch = 4;
  c.context = ContextSpec::ragged(150, 260);
  c.hit_rate = 0.9;
  c.num_splits = 2;
  c.num_prefix_chunks = 3;
  expect_matches_reference("cascade", c, "2 splits, 3 prefix chunks", /*want_prefix=*/true);
}

// Each scale and zero array the kernels read, dropped in a planted copy, and the int4 codes with
// their nibble order reversed must fail the same comparison that passes without them: a kernel
// ignoring an array, or reading nibbles the other way round, could not pass.
TEST(IntKvEmu, DroppedScalesAndZerosAreCaught) {
  struct Fault {
    DType kv;
    Plant plant;
    const char* what;
  };
  const Fault faults[] = {
      {DType::int8, Plant::k_scales_one, "int8 K scales"},
      {DType::int8, Plant::v_scales_one, "int8 V scales"},
      {DType::int4, Plant::k_scales_one, "int4 K scales"},
      {DType::int4, Plant::k_zeros_dropped, "int4 K zeros"},
      {DType::int4, Plant::v_scales_one, "int4 V scales"},
      {DType::int4, Plant::v_zeros_dropped, "int4 V zeros"},
      {DType::int4_token, Plant::k_scales_one, "int4_token K scales"},
      {DType::int4_token, Plant::k_zeros_dropped, "int4_token K zeros"},
      {DType::int4_token, Plant::v_scales_one, "int4_token V scales"},
      {DType::int4_token, Plant::v_zeros_dropped, "int4_token V zeros"},
      {DType::int4, Plant::k_nibbles_swapped, "int4 K nibble order"},
      {DType::int4, Plant::v_nibbles_swapped, "int4 V nibble order"},
      {DType::int4_token, Plant::k_nibbles_swapped, "int4_token K nibble order"},
      {DType::int4_token, Plant::v_nibbles_swapped, "int4_token V nibble order"},
  };
  int ran = 0;
  for (const char* kernel : {"tc", "cascade"}) {
    const k::KernelInfo* info = k::find_kernel(kernel);
    for (const Fault& f : faults) {
      if (!compiled(info, f.kv)) continue;
      SCOPED_TRACE(std::string(kernel) + ", " + f.what);
      Case c;
      c.batch = 4;
      c.hit_rate = 0.5;  // cascade: the prefix pass too
      const int d = info->head_dims.front();
      const Workload w = make_workload(testing_support::decode_spec(c, d, f.kv, 99));
      const std::vector<float> ref = reference_decode(w);
      const Tolerance tol = tolerance_for(c.q_dtype, f.kv);
      const IntRun clean = run(kernel, w, c);
      ASSERT_TRUE(clean.launch.ok()) << clean.launch.message;
      EXPECT_TRUE(compare_outputs(clean.out, ref, c.num_q_heads, d, tol).ok);
      const IntRun planted = run(kernel, w, c, f.plant);
      ASSERT_TRUE(planted.launch.ok()) << planted.launch.message;
      EXPECT_FALSE(compare_outputs(planted.out, ref, c.num_q_heads, d, tol).ok);
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << "no tensor-core rung built for an integer format";
}

}  // namespace
}  // namespace decodebench
