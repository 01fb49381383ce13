// The tensor-core MLA rung (kernels/paged_decode/mla.cuh) through the SIMT emulator, against the
// CPU reference: head counts of one MMA tile, a padded tile, several tiles in one block and
// several blocks; every compiled float KV format, q in and out of the MMA type (the hi + lo
// split), block sizes, ragged contexts, shared prefixes, one split and several. The faults the
// check must catch: the scale of the absorbed width instead of the model's, a token dropped.
// And what the rung refuses and how the planner counts its work.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/dtype.h"
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

// DeepSeek's latent (512 + 64) under `hq` heads, with deepseek-v2-lite's softmax scale.
ModelShape mla_model(int hq) {
  ModelShape m{"mla-test", hq, 1, 576, 1, ""};
  m.kv_lora_rank = 512;
  m.qk_rope_head_dim = 64;
  m.qk_nope_head_dim = 128;
  m.v_head_dim = 128;
  m.attention_scale = 0.11472138679292612;
  return m;
}

struct Case {
  const char* name;
  int hq;
  int batch;
  ContextSpec context;
  int block_size;
  DType kv;
  DType q = DType::bf16;
  int num_splits = 1;
  double hit_rate = 0;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name << " (Hq " << c.hq << ", B " << c.batch << ", P " << c.block_size << ", kv "
      << dtype_name(c.kv) << ", q " << dtype_name(c.q) << ", splits " << c.num_splits << ")";
}

const kernels::KernelInfo* mla_rung() { return kernels::find_kernel("mla"); }

bool compiled(const kernels::KernelInfo& k, DType kv) {
  return std::find(k.kv_dtypes.begin(), k.kv_dtypes.end(), kv) != k.kv_dtypes.end();
}

Workload workload_of(const Case& c) {
  WorkloadSpec s;
  s.model = mla_model(c.hq);
  s.batch = c.batch;
  s.context = c.context;
  s.block_size = c.block_size;
  s.kv_dtype = c.kv;
  s.q_dtype = c.q;
  s.hit_rate = c.hit_rate;
  s.seed = 29;
  return make_workload(s);
}

struct Run {
  kernels::LaunchResult launch;
  std::vector<float> out;
};

// The rung on `params` (the workload's, perhaps with a planted fault) with `num_splits` splits
// and the workspace split_kv_workspace lays out for them (poisoned: a slot never written is NaN).
Run run_mla(const kernels::PagedDecodeParams& params, int num_splits) {
  kernels::PagedDecodeParams p = params;
  std::vector<std::byte> out(static_cast<std::size_t>(p.batch) * p.num_q_heads * p.v_head_dim *
                             dtype_size(p.q_dtype));
  p.out = out.data();
  const kernels::SplitKvWorkspace layout = kernels::split_kv_workspace(p, num_splits);
  std::vector<float> workspace((layout.total_bytes + sizeof(float) - 1) / sizeof(float),
                               std::nanf(""));
  layout.bind(p, workspace.data());
  Run r;
  r.launch = kernels::emu::launch_paged_decode("mla", p, /*stream=*/nullptr);
  r.out = decode_to_float(out, p.q_dtype);
  return r;
}

Comparison against_reference(const Workload& w, const kernels::PagedDecodeParams& p,
                             int num_splits) {
  const Run r = run_mla(p, num_splits);
  EXPECT_TRUE(r.launch.ok()) << r.launch.message;
  return compare_outputs(r.out, reference_decode(w), p.num_q_heads, p.v_head_dim,
                         tolerance_for(w.spec.q_dtype, w.spec.kv_dtype));
}

const ContextSpec ragged(int lo, int hi) { return ContextSpec::ragged(lo, hi); }

// 16 heads (one tile), 24 (a padded second tile), 64 (four tiles: 512 threads), 128 (two
// blocks); tiles cut mid-block and blocks larger than a tile; q split (f16 KV under bf16 q).
const Case kCases[] = {
    // name              Hq  B  context          P   kv               q            splits hit
    {"h16_bf16", 16, 3, ragged(1, 150), 16, DType::bf16},
    {"h16_f16_qsplit_p8", 16, 3, ragged(1, 150), 8, DType::f16},
    {"h16_f16_q_f16", 16, 2, ragged(20, 90), 16, DType::f16, DType::f16},
    {"h24_fp8_split2", 24, 2, ragged(60, 200), 16, DType::fp8_e4m3, DType::bf16, 2},
    {"h64_bf16_split3_p64", 64, 1, ContextSpec::fixed(333), 64, DType::bf16, DType::bf16, 3},
    {"h128_bf16_p128", 128, 1, ragged(40, 120), 128, DType::bf16},
    {"h16_prefix", 16, 4, ContextSpec::fixed(200), 16, DType::bf16, DType::bf16, 1, 0.5},
};

class MlaCase : public ::testing::TestWithParam<Case> {};

TEST_P(MlaCase, MatchesTheReference) {
  const kernels::KernelInfo* k = mla_rung();
  if (k == nullptr) GTEST_SKIP() << "mla not compiled in this build";
  const Case& c = GetParam();
  if (!compiled(*k, c.kv)) GTEST_SKIP() << dtype_name(c.kv) << " not compiled in this build";
  const Workload w = workload_of(c);
  EXPECT_EQ(kernels::unsupported_reason(*k, w.params()), "");
  const Comparison cmp = against_reference(w, w.params(), c.num_splits);
  EXPECT_TRUE(cmp.ok) << cmp.report;
}

INSTANTIATE_TEST_SUITE_P(Mla, MlaCase, ::testing::ValuesIn(kCases),
                         [](const auto& test) { return std::string(test.param.name); });

// The faults, each with one split and several: q . k scaled by 1/sqrt(576), the absorbed width,
// instead of the model's scale; the last token of every context dropped. Each is caught.
TEST(Mla, PlantedFaultsAreCaught) {
  const kernels::KernelInfo* k = mla_rung();
  if (k == nullptr) GTEST_SKIP() << "mla not compiled in this build";
  const DType kv = compiled(*k, DType::bf16) ? DType::bf16 : k->kv_dtypes.front();
  for (int splits : {1, 3}) {
    SCOPED_TRACE("splits " + std::to_string(splits));
    const Workload w = workload_of({"fault", 16, 3, ragged(60, 200), 16, kv});
    ASSERT_TRUE(against_reference(w, w.params(), splits).ok);

    kernels::PagedDecodeParams absorbed_scale = w.params();
    absorbed_scale.softmax_scale = 1.0f / std::sqrt(576.0f);
    EXPECT_FALSE(against_reference(w, absorbed_scale, splits).ok) << "scale of the width 576";

    std::vector<std::int32_t> shorter = w.layout.context_lens;
    for (std::int32_t& len : shorter) len -= 1;
    kernels::PagedDecodeParams dropped = w.params();
    dropped.context_lens = shorter.data();
    EXPECT_FALSE(against_reference(w, dropped, splits).ok) << "last token dropped";
  }
}

TEST(Mla, RefusesWhatItDoesNotTake) {
  const kernels::KernelInfo* k = mla_rung();
  if (k == nullptr) GTEST_SKIP() << "mla not compiled in this build";
  const Workload w = workload_of({"refuse", 16, 2, ragged(10, 40), 16, k->kv_dtypes.front()});
  kernels::PagedDecodeParams p = w.params();
  EXPECT_EQ(kernels::unsupported_reason(*k, p), "");
  kernels::PagedDecodeParams per_head = p;
  per_head.v_head_dim = 0;  // a 576-wide head with its own V: not MLA
  EXPECT_NE(kernels::unsupported_reason(*k, per_head).find("per-head K and V"), std::string::npos)
      << kernels::unsupported_reason(*k, per_head);
  kernels::PagedDecodeParams narrow = p;
  narrow.v_head_dim = 256;
  EXPECT_NE(kernels::unsupported_reason(*k, narrow).find("values the first 512"), std::string::npos)
      << kernels::unsupported_reason(*k, narrow);
  kernels::PagedDecodeParams window = p;
  window.window = 64;
  EXPECT_NE(kernels::unsupported_reason(*k, window).find("sliding window"), std::string::npos);
  // Every other rung refuses MLA and names this one.
  for (const kernels::KernelInfo& other : kernels::kernel_ladder()) {
    if (other.mla) continue;  // the rung itself
    const std::string why = kernels::unsupported_reason(other, p);
    EXPECT_NE(why.find("kernel 'mla'"), std::string::npos) << other.name << ": " << why;
  }
}

// The planner counts the rung's thread blocks (batch x head blocks) and its 32-token units; the
// head tiles per block follow the heads and whether q needs a hi + lo split.
TEST(Mla, PlannerCountsTheRungsBlocksAndUnits) {
  kernels::PagedDecodeParams p;
  p.num_q_heads = 128;
  p.num_kv_heads = 1;
  p.head_dim = 576;
  p.v_head_dim = 512;
  p.kv_dtype = DType::bf16;
  p.q_dtype = DType::bf16;
  EXPECT_EQ(kernels::mla_head_tiles(p), 4);
  EXPECT_EQ(kernels::mla_head_blocks(p), 2);
  p.kv_dtype = DType::fp8_e4m3;  // f16 MMA under bf16 q: split, half the heads per block
  EXPECT_EQ(kernels::mla_head_tiles(p), 2);
  EXPECT_EQ(kernels::mla_head_blocks(p), 4);
  p.num_q_heads = 24;
  EXPECT_EQ(kernels::mla_head_tiles(p), 2);
  EXPECT_EQ(kernels::mla_head_blocks(p), 1);
  p.num_q_heads = 16;
  p.kv_dtype = DType::bf16;
  EXPECT_EQ(kernels::mla_head_tiles(p), 1);

  // One sequence of 8192 tokens at 16 heads on 132 SMs x 1: one block, so the context is cut
  // into as many 32-token units' splits as the wave and the 256-token minimum allow.
  p.batch = 1;
  p.block_size = 64;
  p.max_blocks_per_seq = 128;
  const kernels::ResidentCtas gpu{132, 1};
  EXPECT_EQ(kernels::plan_num_splits(p, gpu), kernels::plan_pieces_in_units(1, 8192, 32, gpu));
  EXPECT_EQ(kernels::plan_num_splits(p, gpu), 32);  // 8192 / 256
  p.batch = 132;                                    // a full wave of blocks: no split
  EXPECT_EQ(kernels::plan_num_splits(p, gpu), 1);
  const kernels::SplitKvWorkspace ws = kernels::split_kv_workspace(p, 3);
  EXPECT_EQ(ws.partial_out_bytes, std::size_t{132} * 16 * 3 * 512 * sizeof(float));
}

}  // namespace
}  // namespace decodebench
