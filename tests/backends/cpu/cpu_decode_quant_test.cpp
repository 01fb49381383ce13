// The CPU decode on the integer KV formats (int8, int4, int4_token) against the reference, which
// reads the same codes through quant::dequantize: every compiled path x head_dim 64/128/256 x
// GQA 1/2/4/8 (passes of 1, 2, 4 and 8 heads) x block size 1/8/16/64 over ragged contexts, split
// and not; the cascade with shared prefixes, with several passes over every tile; planted faults
// in the scales and zeros; and the byte model against what the workload really stores.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_decode.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "device/float_formats.h"
#include "quant/kv_quant.h"
#include "reference/reference.h"
#include "workload/byte_model.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

namespace k = kernels;

constexpr DType kIntFormats[] = {DType::int8, DType::int4, DType::int4_token};

struct Shape {
  int hq, hkv, head_dim, batch;
  ContextSpec context;
  int block_size;
  double hit_rate = 0;
};

Workload workload_of(DType kv, const Shape& s, DType q = DType::f16) {
  WorkloadSpec spec;
  spec.model = ModelShape{"test", s.hq, s.hkv, s.head_dim, 1, ""};
  spec.batch = s.batch;
  spec.context = s.context;
  spec.hit_rate = s.hit_rate;
  spec.prefix_groups = 2;
  spec.kv_dtype = kv;
  spec.q_dtype = q;
  spec.block_size = s.block_size;
  spec.seed = 99;
  return make_workload(spec);
}

std::vector<cpu::DecodePath> compiled_paths() {
  std::vector<cpu::DecodePath> paths;
  if (cpu::avx512_compiled()) paths.push_back(cpu::DecodePath::avx512);
  if (cpu::avx2_compiled()) paths.push_back(cpu::DecodePath::avx2);
  paths.push_back(cpu::DecodePath::portable);
  return paths;
}

std::vector<float> run(k::PagedDecodeParams p, const Workload& w, const cpu::DecodeOptions& o,
                       bool cascade = false) {
  std::vector<std::byte> out(static_cast<std::size_t>(w.rows()) * p.num_q_heads * p.head_dim * 2);
  p.out = out.data();
  if (cascade)
    cpu::paged_decode_cascade(p, o);
  else
    cpu::paged_decode(p, o);
  return decode_to_float(out, p.q_dtype);
}

Comparison compare(const std::vector<float>& out, const Workload& w) {
  return compare_outputs(out, reference_decode(w), w.spec.model.num_q_heads, w.spec.model.head_dim,
                         tolerance_for(w.spec.q_dtype, w.spec.kv_dtype));
}

// Every format x path x head_dim x group x block size; contexts ragged 1..150 so every tail of
// the 16- and 8-token score groups and of the tiles occurs, and P = 1/8 puts several blocks in
// one score group (int4's per-block key scales change inside it).
TEST(CpuDecodeQuant, EveryFormatPathHeadDimGroupAndBlockSize) {
  int index = 0;
  for (DType kv : kIntFormats)
    for (cpu::DecodePath path : compiled_paths())
      for (int d : {64, 128, 256})
        for (int group : {1, 2, 4, 8})
          for (int block : {1, 8, 16, 64}) {
            const Workload w =
                workload_of(kv, {2 * group, 2, d, 3, ContextSpec::ragged(1, 150), block});
            cpu::DecodeOptions o;
            o.path = path;
            o.num_threads = 2;
            o.num_splits = index++ % 2 == 0 ? 1 : 3;
            SCOPED_TRACE(std::string(dtype_name(kv)) + " " + cpu::resolved_path_name(path) +
                         " d=" + std::to_string(d) + " g=" + std::to_string(group) +
                         " P=" + std::to_string(block) + " splits=" + std::to_string(o.num_splits));
            const Comparison cmp = compare(run(w.params(), w, o), w);
            EXPECT_TRUE(cmp.ok) << cmp.report;
          }
}

// Longer contexts and bf16 q: many tiles, planned splits.
TEST(CpuDecodeQuant, LongContextsBf16) {
  for (DType kv : kIntFormats)
    for (cpu::DecodePath path : compiled_paths()) {
      const Workload w =
          workload_of(kv, {8, 2, 128, 3, ContextSpec::ragged(900, 1500), 16}, DType::bf16);
      cpu::DecodeOptions o;
      o.path = path;
      SCOPED_TRACE(std::string(dtype_name(kv)) + " " + cpu::resolved_path_name(path));
      const Comparison cmp = compare(run(w.params(), w, o), w);
      EXPECT_TRUE(cmp.ok) << cmp.report;
    }
}

// The cascade reads each shared prefix once for its group: the same scales must be found
// through the shared blocks.
TEST(CpuDecodeQuant, CascadeWithSharedPrefixes) {
  for (DType kv : kIntFormats)
    for (cpu::DecodePath path : compiled_paths())
      for (int group : {1, 4}) {
        const Workload w =
            workload_of(kv, {2 * group, 2, 128, 5, ContextSpec::ragged(100, 400), 16, 0.7});
        k::PagedDecodeParams p = w.params();
        const k::PrefixPlan plan = k::plan_prefixes(p);
        ASSERT_GT(plan.num_groups(), 0);
        plan.bind(p);
        cpu::DecodeOptions o;
        o.path = path;
        o.num_threads = 2;
        SCOPED_TRACE(std::string(dtype_name(kv)) + " " + cpu::resolved_path_name(path) +
                     " g=" + std::to_string(group));
        const Comparison cmp = compare(run(p, w, o, /*cascade=*/true), w);
        EXPECT_TRUE(cmp.ok) << cmp.report;
      }
}

// Several passes over every tile: a prefix group's members x query heads are more rows than one
// pass takes (8), so each unit is scored pass after pass, and block sizes 1 to 64 put 1 to 128
// blocks in one tile: int4 keys change their channel scales (and so q') inside a score group at
// small P, so a kernel that reused one block's q' for the next block, or one pass's weights in
// another pass, would be caught here.
TEST(CpuDecodeQuant, CascadePassesOverEveryBlockSize) {
  for (DType kv : kIntFormats)
    for (cpu::DecodePath path : compiled_paths())
      for (int block : {1, 4, 16, 64}) {
        const Workload w =
            workload_of(kv, {8, 2, 64, 9, ContextSpec::ragged(150, 300), block, 0.8});
        k::PagedDecodeParams p = w.params();
        const k::PrefixPlan plan = k::plan_prefixes(p);
        ASSERT_GT(plan.num_groups(), 0);
        plan.bind(p);
        cpu::DecodeOptions o;
        o.path = path;
        o.num_threads = 2;
        SCOPED_TRACE(std::string(dtype_name(kv)) + " " + cpu::resolved_path_name(path) +
                     " P=" + std::to_string(block));
        const Comparison cmp = compare(run(p, w, o, /*cascade=*/true), w);
        EXPECT_TRUE(cmp.ok) << cmp.report;
      }
}

// Planted faults: a kernel that ignored a scale or zero (or read the wrong one) would pass a
// test whose scales were all alike. Doubling one scale (or moving one zero) of a row or block
// that a context reads changes the reference; the kernel must follow it exactly.
TEST(CpuDecodeQuant, FollowsEveryScaleAndZero) {
  for (DType kv : kIntFormats)
    for (bool key : {true, false})
      for (bool zero : {false, true}) {
        if (zero && !quant::has_zeros(kv)) continue;
        Workload w = workload_of(kv, {4, 2, 64, 2, ContextSpec::fixed(40), 16});
        std::vector<std::uint16_t>& a =
            key ? (zero ? w.k_zeros : w.k_scales) : (zero ? w.v_zeros : w.v_scales);
        ASSERT_FALSE(a.empty());
        const std::vector<float> before = reference_decode(w);
        // Entry 3 of block 0's arrays: read by sequence 0 (block 0 is its first block).
        const float old = floatfmt::f16_to_float(a[3]);
        a[3] = floatfmt::float_to_f16(zero ? old + 1.0f : 2.0f * old);
        const std::vector<float> after = reference_decode(w);
        SCOPED_TRACE(std::string(dtype_name(kv)) + (key ? " K" : " V") +
                     (zero ? " zero" : " scale"));
        EXPECT_GT(quantization_error(after, before), 1e-2)
            << "the planted fault changes too little";
        for (cpu::DecodePath path : compiled_paths()) {
          cpu::DecodeOptions o;
          o.path = path;
          const Comparison cmp = compare(run(w.params(), w, o), w);
          EXPECT_TRUE(cmp.ok) << cpu::resolved_path_name(path) << ": " << cmp.report;
        }
      }
}

// The byte model counts what the workload really holds: codes, scales and zeros of every block.
TEST(CpuDecodeQuant, ByteModelCountsCodesScalesAndZeros) {
  for (DType kv : kIntFormats)
    for (int block : {1, 16, 64}) {
      const Workload w = workload_of(kv, {8, 2, 128, 3, ContextSpec::fixed(256), block});
      const ByteModel b = byte_model(w.spec, w.layout);
      const double stored = static_cast<double>(
          w.k_cache.size() + w.v_cache.size() +
          2 * (w.k_scales.size() + w.k_zeros.size() + w.v_scales.size() + w.v_zeros.size()));
      const double tokens = static_cast<double>(w.layout.num_blocks) * block;
      SCOPED_TRACE(std::string(dtype_name(kv)) + " P=" + std::to_string(block));
      EXPECT_DOUBLE_EQ(b.kv_bytes_per_token, stored / tokens);
    }
  // The numbers of the definitions (docs/design.md "KV formats"), per token and KV head, d 128:
  // int8 128 + 2 each for K and V; int4 K 64 + 4 * 128 / 16, V 64 + 4 * 4; int4_token 64 + 16.
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_head(DType::int8, 128, 16), 260);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_head(DType::int4, 128, 16), 96 + 80);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_head(DType::int4_token, 128, 16), 160);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_head(DType::f16, 128, 16), 512);
}

// The tensor-core rungs read these formats (when built for them: DECODEBENCH_INT_KV_DTYPES);
// the CUDA-core rungs refuse them, naming the rungs and the backend that read them.
TEST(CpuDecodeQuant, GpuRungsRefuseWithTheReason) {
  const Workload w = workload_of(DType::int4, {8, 2, 128, 1, ContextSpec::fixed(64), 16});
  for (const k::KernelInfo& rung : k::kernel_ladder()) {
    if (rung.mla_only) continue;  // refuses the per-head shape first; its formats: mla_test.cpp
    const std::string why = k::unsupported_reason(rung, w.params());
    const bool reads = std::find(rung.kv_dtypes.begin(), rung.kv_dtypes.end(), DType::int4) !=
                       rung.kv_dtypes.end();
    if (reads) {
      EXPECT_EQ(rung.compute, ComputeUnit::tensor_core) << rung.name;
      EXPECT_EQ(why, "") << rung.name;
      continue;
    }
    EXPECT_NE(why.find("KV dtype int4"), std::string::npos) << why;
    EXPECT_NE(why.find("kernels 'tc', 'cascade' (tensor cores"), std::string::npos) << why;
    EXPECT_NE(why.find("cpu backend"), std::string::npos) << why;
  }
  EXPECT_EQ(cpu::unsupported_reason(w.params()), "");
}

}  // namespace
}  // namespace decodebench
