// The CPU decode of MLA (cpu_decode_mla.cpp) against the reference on every compiled path: head
// counts that fill vectors and ones that do not, every float KV format, block sizes, ragged
// contexts, prefix sharing and splits; the faults the check must catch (the scale of the absorbed
// width instead of the model's, a token dropped); and what it refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_decode.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "reference/reference.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

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
  int num_splits = 0;  // 0: planned
  double hit_rate = 0;
  DType q = DType::bf16;
};

// A failing case prints its name and shape, not gtest's byte dump of the struct.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name << " (Hq " << c.hq << ", B " << c.batch << ", P " << c.block_size << ", kv "
      << dtype_name(c.kv) << ")";
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
  s.seed = 17;
  return make_workload(s);
}

std::vector<float> run_cpu(kernels::PagedDecodeParams p, int rows,
                           const cpu::DecodeOptions& options) {
  std::vector<std::byte> out(static_cast<std::size_t>(rows) * p.num_q_heads * p.v_head_dim * 2);
  p.out = out.data();
  cpu::paged_decode(p, options);
  return decode_to_float(out, p.q_dtype);
}

Comparison against_reference(const Workload& w, const kernels::PagedDecodeParams& p,
                             const cpu::DecodeOptions& options) {
  return compare_outputs(run_cpu(p, w.rows(), options), reference_decode(w), p.num_q_heads,
                         p.v_head_dim, tolerance_for(w.spec.q_dtype, w.spec.kv_dtype));
}

std::vector<cpu::DecodePath> compiled_paths() {
  std::vector<cpu::DecodePath> paths;
  if (cpu::avx512_compiled()) paths.push_back(cpu::DecodePath::avx512);
  if (cpu::avx2_compiled()) paths.push_back(cpu::DecodePath::avx2);
  paths.push_back(cpu::DecodePath::portable);
  return paths;
}

ContextSpec ragged(int lo, int hi) { return ContextSpec::ragged(lo, hi); }

// 16 heads (one AVX-512 vector, two AVX2 ones), 5 (padded), 24 (a pair and a single score
// block), 128 (DeepSeek-V3); tiles cut mid-block and blocks larger than a tile; splits.
const Case kCases[] = {
    // name                 Hq  B  context         P   kv
    {"h16_bf16", 16, 3, ragged(1, 150), 16, DType::bf16},
    {"h5_f16_p8", 5, 3, ragged(1, 150), 8, DType::f16, 0, 0, DType::f16},
    {"h24_fp8e4m3", 24, 2, ragged(60, 140), 16, DType::fp8_e4m3},
    {"h16_fp8e5m2_p128", 16, 2, ragged(100, 300), 128, DType::fp8_e5m2},
    {"h16_f32_p1", 16, 2, ragged(1, 70), 1, DType::f32},
    {"h16_split3", 16, 1, ContextSpec::fixed(333), 16, DType::bf16, 3},
    {"h128_v3_heads", 128, 2, ragged(50, 130), 64, DType::bf16},
    {"h16_prefix", 16, 4, ContextSpec::fixed(200), 16, DType::bf16, 0, 0.5},
};

class CpuMlaCase : public ::testing::TestWithParam<Case> {};

TEST_P(CpuMlaCase, EveryPathMatchesReference) {
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

INSTANTIATE_TEST_SUITE_P(Mla, CpuMlaCase, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// The faults: q.k scaled by 1/sqrt(576) (the absorbed width, what a generic kernel would use)
// instead of the model's; the last token of every context dropped. Each is caught.
TEST(CpuMla, PlantedFaultsAreCaught) {
  const Case c{"fault", 16, 3, ragged(60, 200), 16, DType::bf16};
  const Workload w = workload_of(c);
  for (cpu::DecodePath path : compiled_paths()) {
    SCOPED_TRACE(cpu::resolved_path_name(path));
    cpu::DecodeOptions options;
    options.path = path;
    ASSERT_TRUE(against_reference(w, w.params(), options).ok);

    kernels::PagedDecodeParams absorbed_scale = w.params();
    absorbed_scale.softmax_scale = 1.0f / std::sqrt(576.0f);
    EXPECT_FALSE(against_reference(w, absorbed_scale, options).ok) << "scale of the width 576";

    std::vector<std::int32_t> shorter = w.layout.context_lens;
    for (std::int32_t& len : shorter) len -= 1;
    kernels::PagedDecodeParams dropped = w.params();
    dropped.context_lens = shorter.data();
    EXPECT_FALSE(against_reference(w, dropped, options).ok) << "last token dropped";
  }
}

TEST(CpuMla, RefusesWhatItDoesNotTake) {
  const Workload w = workload_of({"refuse", 16, 2, ragged(10, 40), 16, DType::bf16});
  kernels::PagedDecodeParams p = w.params();
  p.kv_dtype = DType::int8;
  EXPECT_NE(cpu::unsupported_reason(p).find("MLA"), std::string::npos)
      << cpu::unsupported_reason(p);
  p = w.params();
  p.window = 64;
  EXPECT_NE(cpu::unsupported_reason(p).find("MLA"), std::string::npos);
  p = w.params();
  EXPECT_NE(cpu::cascade_unsupported_reason(p).find("kernel 'cpu' takes MLA"), std::string::npos);
  std::vector<std::byte> elsewhere(w.k_cache.size());
  p.v_cache = elsewhere.data();
  EXPECT_NE(cpu::unsupported_reason(p, kernels::CheckScope::launch).find("v_cache"),
            std::string::npos);
  // A 576-wide head that is not MLA: no instance of the per-head decode.
  p = w.params();
  p.v_head_dim = 0;
  EXPECT_NE(cpu::unsupported_reason(p).find("576"), std::string::npos);
}

// The integer formats are refused at the workload, naming the float ones.
TEST(CpuMla, IntegerKvIsRefusedAtTheWorkload) {
  WorkloadSpec s;
  s.model = mla_model(16);
  s.kv_dtype = DType::int4;
  try {
    validate(s);
    FAIL() << "int4 MLA accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("MLA"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace decodebench
