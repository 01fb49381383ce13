// The CUDA layer step's decisions that need no GPU (src/backends/cuda/cuda_layer_plan.h): the
// cuBLASLt call of each GEMM (checked against a plain column-major GEMM that does what
// cublasLtMatmul does with those parameters, so a wrong transpose or leading dimension shows as
// wrong numbers), the chain of GEMM inputs, the fp8 call checks, the footprint and skip reason,
// the compute roof.
#include "backends/cuda/cuda_layer_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/cuda_plan.h"
#include "common/dtype.h"
#include "device/counter_rng.h"
#include "workload/layer_model.h"

namespace decodebench::cuda {
namespace {

ModelShape llama_8b() {
  ModelShape m{"llama-3.1-8b", 32, 8, 128, 32, ""};
  m.hidden_size = 4096;
  m.intermediate_size = 14336;
  m.vocab_size = 128256;
  return m;
}

// Small, with every dimension different so a swapped one shows: hidden 24, Hq d = 2 x 8,
// Hkv d = 1 x 8, I 20, vocab 40.
ModelShape tiny() {
  ModelShape m{"tiny", 2, 1, 8, 1, ""};
  m.hidden_size = 24;
  m.intermediate_size = 20;
  m.vocab_size = 40;
  return m;
}

// ---- the call parameters -------------------------------------------------------------------

TEST(CudaLayerPlan, Bf16QkvIsTnWithTheBatchAsColumns) {
  const GemmShape s = gemm_shape(llama_8b(), LayerStage::qkv_proj, 7);
  const GemmCall c = plan_gemm(s, DType::bf16, DType::bf16);
  EXPECT_EQ(c.trans_a, CUBLAS_OP_T);
  EXPECT_EQ(c.trans_b, CUBLAS_OP_N);
  EXPECT_EQ(c.m, 6144u);  // (32 + 2 x 8) x 128 features
  EXPECT_EQ(c.n, 7u);     // the batch, unpadded for 16-bit weights
  EXPECT_EQ(c.k, 4096u);
  EXPECT_EQ(c.a_rows, 4096u);  // W [6144][4096] row-major = column-major 4096 x 6144
  EXPECT_EQ(c.a_cols, 6144u);
  EXPECT_EQ(c.lda, 4096);
  EXPECT_EQ(c.b_rows, 4096u);  // x [7][4096] = column-major 4096 x 7
  EXPECT_EQ(c.b_cols, 7u);
  EXPECT_EQ(c.ldb, 4096);
  EXPECT_EQ(c.d_rows, 6144u);  // y^T: column-major 6144 x 7 = y [7][6144] row-major
  EXPECT_EQ(c.d_cols, 7u);
  EXPECT_EQ(c.ldd, 6144);
  EXPECT_EQ(c.a_type, CUDA_R_16BF);
  EXPECT_EQ(c.b_type, CUDA_R_16BF);
  EXPECT_EQ(c.c_type, CUDA_R_16BF);
  EXPECT_EQ(c.d_type, CUDA_R_16BF);
  EXPECT_EQ(c.compute, CUBLAS_COMPUTE_32F);
  EXPECT_EQ(c.scale_type, CUDA_R_32F);
  EXPECT_EQ(c.alpha, 1.0f);
  EXPECT_EQ(c.beta, 0.0f);
  EXPECT_FALSE(c.fp8);
  EXPECT_EQ(gemm_call_error(c), "");
  EXPECT_EQ(plan_gemm(s, DType::f16, DType::f16).a_type, CUDA_R_16F);
  EXPECT_EQ(plan_gemm(s, DType::f16, DType::f16).d_type, CUDA_R_16F);
}

TEST(CudaLayerPlan, Bf16DownProjReadsTheGateHalfInPlace) {
  const GemmShape s = gemm_shape(llama_8b(), LayerStage::down_proj, 3);
  const GemmCall c = plan_gemm(s, DType::bf16, DType::bf16);
  EXPECT_EQ(c.m, 4096u);
  EXPECT_EQ(c.k, 14336u);
  EXPECT_EQ(c.b_rows, 14336u);  // the first I columns of each row ...
  EXPECT_EQ(c.ldb, 2 * 14336);  // ... of gate_up_proj's [3][2 I] output
  EXPECT_EQ(c.lda, 14336);
}

TEST(CudaLayerPlan, Fp8IsE4m3WithScalesInAlphaAndAPaddedBatch) {
  for (DType act : {DType::bf16, DType::f16}) {
    const GemmShape s = gemm_shape(llama_8b(), LayerStage::down_proj, 7);
    const GemmCall c = plan_gemm(s, DType::fp8_e4m3, act);
    EXPECT_TRUE(c.fp8);
    EXPECT_EQ(c.a_type, CUDA_R_8F_E4M3);
    EXPECT_EQ(c.b_type, CUDA_R_8F_E4M3);
    EXPECT_EQ(c.d_type, act == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F);
    EXPECT_EQ(c.c_type, c.d_type);
    EXPECT_EQ(c.trans_a, CUBLAS_OP_T);
    EXPECT_EQ(c.trans_b, CUBLAS_OP_N);
    EXPECT_EQ(c.n, 16u);  // 7 rows padded to kFp8RowPad
    EXPECT_EQ(c.b_cols, 16u);
    EXPECT_EQ(c.d_cols, 16u);
    EXPECT_EQ(c.ldb, 14336);  // the packed e4m3 copy of the gate half, not 2 I
    EXPECT_EQ(c.fast_accum, 0);
    const float want = weight_scale(s, DType::fp8_e4m3).scale * kActivationFp8Scale;
    EXPECT_FLOAT_EQ(c.alpha, want);
    EXPECT_NE(c.alpha, 1.0f);
    EXPECT_EQ(gemm_call_error(c), "") << gemm_call_error(c);
  }
}

TEST(CudaLayerPlan, CallRowsAndInputStrides) {
  EXPECT_EQ(gemm_call_rows(1, DType::fp8_e4m3), 16);
  EXPECT_EQ(gemm_call_rows(16, DType::fp8_e4m3), 16);
  EXPECT_EQ(gemm_call_rows(17, DType::fp8_e4m3), 32);
  EXPECT_EQ(gemm_call_rows(7, DType::bf16), 7);
  EXPECT_EQ(gemm_call_rows(7, DType::f16), 7);
  const GemmShape down = gemm_shape(llama_8b(), LayerStage::down_proj, 2);
  EXPECT_EQ(gemm_input_ld(down, DType::bf16), 2 * 14336);
  EXPECT_EQ(gemm_input_ld(down, DType::fp8_e4m3), 14336);
}

TEST(CudaLayerPlan, RefusesWhatLayerScopeRefuses) {
  const GemmShape s = gemm_shape(llama_8b(), LayerStage::o_proj, 2);
  EXPECT_THROW(plan_gemm(s, DType::bf16, DType::f16), std::invalid_argument);
  EXPECT_THROW(plan_gemm(s, DType::f32, DType::f32), std::invalid_argument);
  EXPECT_THROW(plan_gemm(s, DType::fp8_e5m2, DType::bf16), std::invalid_argument);
  EXPECT_THROW(plan_gemm(s, DType::fp8_e4m3, DType::f32), std::invalid_argument);
  EXPECT_NO_THROW(plan_gemm(s, DType::fp8_e4m3, DType::f16));
}

// Each requirement of cuBLASLt fp8 matmul, broken one at a time, is named; 16-bit calls of any
// odd size pass.
TEST(CudaLayerPlan, Fp8CallErrorsNameWhatIsWrong) {
  const GemmCall good =
      plan_gemm(gemm_shape(llama_8b(), LayerStage::qkv_proj, 5), DType::fp8_e4m3, DType::bf16);
  ASSERT_EQ(gemm_call_error(good), "");
  auto error_of = [&](auto change) {
    GemmCall c = good;
    change(c);
    return gemm_call_error(c);
  };
  EXPECT_NE(error_of([](GemmCall& c) { c.trans_b = CUBLAS_OP_T; }).find("TN form"),
            std::string::npos);
  EXPECT_NE(error_of([](GemmCall& c) { c.compute = CUBLAS_COMPUTE_32F_FAST_TF32; }).find("32F"),
            std::string::npos);
  EXPECT_NE(error_of([](GemmCall& c) { c.d_type = CUDA_R_8F_E5M2; }).find("bf16, f16 or f32"),
            std::string::npos);
  EXPECT_NE(error_of([](GemmCall& c) { c.lda = 4100; }).find("weight's row (k) is 4100 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([](GemmCall& c) { c.ldb = 4104; }).find("input's row stride"),
            std::string::npos);
  EXPECT_NE(error_of([](GemmCall& c) { c.ldd = 6148; }).find("output's row (n) is 12296 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([](GemmCall& c) { c.n = 5; }).find("batch (rows) is 5 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([](GemmCall& c) { c.k = 0; }).find("empty GEMM"), std::string::npos);
  const GemmCall odd =
      plan_gemm(gemm_shape(tiny(), LayerStage::lm_head, 3), DType::bf16, DType::bf16);
  EXPECT_EQ(gemm_call_error(odd), "");
}

// ---- the mapping does what the step means ----------------------------------------------------

// What cublasLtMatmul computes for `c` on column-major memory (element (i, j) of a matrix with
// leading dimension ld at i + j ld): D = alpha op(A) op(B) + beta C, C = D. Plain loops, double.
std::vector<double> column_major_matmul(const GemmCall& c, const std::vector<double>& a,
                                        const std::vector<double>& b) {
  std::vector<double> d(static_cast<std::size_t>(c.ldd) * c.n, 0.0);
  for (std::uint64_t j = 0; j < c.n; ++j) {
    for (std::uint64_t i = 0; i < c.m; ++i) {
      double sum = 0;
      for (std::uint64_t l = 0; l < c.k; ++l) {
        const double av = c.trans_a == CUBLAS_OP_N ? a.at(i + l * c.lda) : a.at(l + i * c.lda);
        const double bv = c.trans_b == CUBLAS_OP_N ? b.at(l + j * c.ldb) : b.at(j + l * c.ldb);
        sum += av * bv;
      }
      d.at(i + j * c.ldd) = c.alpha * sum;
    }
  }
  return d;
}

// The largest |difference| between cuBLASLt's D (read back as the row-major y [rows][n]) and
// y[r][j] = sum_kk x[r][kk] W[j][kk] on the step's row-major buffers (W [n][k]; x [rows][lda],
// its first k columns read), or -1 when D's memory is not the size y needs.
double mapping_error(const GemmShape& s, const GemmCall& c) {
  std::vector<double> w(static_cast<std::size_t>(s.n * s.k));    // [n][k]
  std::vector<double> x(static_cast<std::size_t>(s.m * s.lda));  // [m][lda]
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = counter_normal(1, 1, i);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = counter_normal(1, 2, i);
  const std::vector<double> d = column_major_matmul(c, w, x);
  if (d.size() < static_cast<std::size_t>(s.m * s.n)) return -1;
  double worst = 0;
  for (std::int64_t r = 0; r < s.m; ++r) {
    for (std::int64_t j = 0; j < s.n; ++j) {
      double want = 0;
      for (std::int64_t kk = 0; kk < s.k; ++kk) want += x[r * s.lda + kk] * w[j * s.k + kk];
      worst = std::max(worst, std::abs(d[static_cast<std::size_t>(r * s.n + j)] - want));
    }
  }
  return worst;
}

TEST(CudaLayerPlan, ColumnMajorCallComputesTheRowMajorProduct) {
  for (LayerStage stage : {LayerStage::qkv_proj, LayerStage::o_proj, LayerStage::gate_up_proj,
                           LayerStage::down_proj, LayerStage::lm_head}) {
    const GemmShape s = gemm_shape(tiny(), stage, 3);
    const GemmCall c = plan_gemm(s, DType::bf16, DType::bf16);
    EXPECT_LT(mapping_error(s, c), 1e-9) << stage_name(stage);
    EXPECT_GE(mapping_error(s, c), 0) << stage_name(stage);
  }
}

// The check can fail: a call without the transpose of A, with B's leading dimension packed
// where down_proj reads a strided gate half, or with the features and the batch swapped, gives
// wrong numbers (or reads outside the buffers, which .at() turns into an exception).
TEST(CudaLayerPlan, PlantedWrongMappingsAreCaught) {
  const GemmShape down = gemm_shape(tiny(), LayerStage::down_proj, 3);
  const GemmCall good = plan_gemm(down, DType::bf16, DType::bf16);
  auto caught = [&](GemmCall c) {
    try {
      return mapping_error(down, c) > 1e-6 || mapping_error(down, c) < 0;
    } catch (const std::out_of_range&) {
      return true;
    }
  };
  GemmCall no_transpose = good;
  no_transpose.trans_a = CUBLAS_OP_N;
  no_transpose.lda = down.n;
  EXPECT_TRUE(caught(no_transpose));
  GemmCall packed = good;
  packed.ldb = down.k;  // reads the up half of the previous row: wrong for rows > 0
  EXPECT_TRUE(caught(packed));
  GemmCall swapped = good;
  std::swap(swapped.m, swapped.n);
  swapped.ldd = static_cast<std::int64_t>(swapped.m);
  EXPECT_TRUE(caught(swapped));
}

// ---- the chain of inputs -------------------------------------------------------------------

TEST(CudaLayerPlan, InputChainSixteenBitReadsInPlace) {
  const ModelShape m = llama_8b();
  struct Want {
    LayerStage stage;
    bool from_x;
    LayerStage source;
    std::int64_t ld, cols;
  };
  const Want wants[] = {
      {LayerStage::qkv_proj, true, LayerStage::attention, 4096, 4096},
      {LayerStage::o_proj, false, LayerStage::attention, 4096, 4096},
      {LayerStage::gate_up_proj, false, LayerStage::o_proj, 4096, 4096},
      {LayerStage::down_proj, false, LayerStage::gate_up_proj, 28672, 14336},
      {LayerStage::lm_head, false, LayerStage::down_proj, 4096, 4096},
  };
  for (const Want& w : wants) {
    const GemmInputPlan in = gemm_input_plan(gemm_shape(m, w.stage, 4), DType::bf16, DType::bf16);
    EXPECT_EQ(in.from_x, w.from_x) << stage_name(w.stage);
    if (!w.from_x) {
      EXPECT_EQ(in.source, w.source) << stage_name(w.stage);
    }
    EXPECT_EQ(in.source_ld, w.ld) << stage_name(w.stage);
    EXPECT_EQ(in.cols, w.cols) << stage_name(w.stage);
    EXPECT_FALSE(in.cast) << stage_name(w.stage);
    EXPECT_EQ(in.read_dtype, DType::bf16);
    EXPECT_EQ(in.read_ld, w.ld) << stage_name(w.stage);
    EXPECT_EQ(in.scale, 1.0f);
  }
  EXPECT_THROW(
      gemm_input_plan(GemmShape{LayerStage::attention, 1, 1, 1, 1}, DType::bf16, DType::bf16),
      std::invalid_argument);
}

TEST(CudaLayerPlan, InputChainFp8CastsAllButX) {
  const ModelShape m = llama_8b();
  for (LayerStage stage : {LayerStage::qkv_proj, LayerStage::o_proj, LayerStage::gate_up_proj,
                           LayerStage::down_proj, LayerStage::lm_head}) {
    const GemmShape s = gemm_shape(m, stage, 4);
    const GemmInputPlan in = gemm_input_plan(s, DType::fp8_e4m3, DType::f16);
    const bool x = stage == LayerStage::qkv_proj;
    EXPECT_EQ(in.from_x, x) << stage_name(stage);
    EXPECT_EQ(in.cast, !x) << stage_name(stage);
    EXPECT_EQ(in.source_dtype, x ? DType::fp8_e4m3 : DType::f16) << stage_name(stage);
    EXPECT_EQ(in.read_dtype, DType::fp8_e4m3);
    EXPECT_EQ(in.read_ld, s.k) << stage_name(stage);  // packed
    EXPECT_EQ(in.source_ld, s.lda) << stage_name(stage);
    EXPECT_EQ(in.scale, kActivationFp8Scale);
    EXPECT_FLOAT_EQ(in.cast_inv_scale, 1.0f / kActivationFp8Scale);
    // The matmul reads what the cast writes.
    EXPECT_EQ(plan_gemm(s, DType::fp8_e4m3, DType::f16).ldb, in.read_ld);
  }
}

// ---- memory, device, roof ------------------------------------------------------------------

TEST(CudaLayerPlan, FootprintOfLlama8b) {
  const ModelShape m = llama_8b();
  const std::size_t gemm_n = 6144 + 4096 + 28672 + 4096 + 128256;
  const std::size_t weights =
      6144ull * 4096 + 4096ull * 4096 + 28672ull * 4096 + 4096ull * 14336 + 128256ull * 4096;
  const LayerFootprint b = layer_footprint(m, 64, DType::bf16, DType::bf16, 1000);
  EXPECT_EQ(b.weights, 2 * weights);
  EXPECT_EQ(b.x, 64u * 4096 * 2);
  EXPECT_EQ(b.outputs, 64u * gemm_n * 2);
  EXPECT_EQ(b.quantized, 0u);
  EXPECT_EQ(b.workspace, kCublasLtWorkspaceBytes);
  EXPECT_EQ(b.attention, 1000u);
  EXPECT_EQ(b.total(), b.weights + b.x + b.outputs + b.workspace + 1000);
  const LayerFootprint f = layer_footprint(m, 5, DType::fp8_e4m3, DType::bf16, 0);
  EXPECT_EQ(f.weights, weights);
  EXPECT_EQ(f.x, 16u * 4096);  // padded rows, e4m3
  EXPECT_EQ(f.outputs, 16u * gemm_n * 2);
  EXPECT_EQ(f.quantized, 16u * (4096 + 4096 + 14336 + 4096));
}

TEST(CudaLayerPlan, MemorySkipReasonNamesTheParts) {
  LayerFootprint f;
  f.weights = 16'000'000'000;
  f.attention = 4'000'000'000;
  f.workspace = kCublasLtWorkspaceBytes;
  EXPECT_EQ(layer_memory_skip_reason(f, 30'000'000'000), "");
  const std::string why = layer_memory_skip_reason(f, 18'000'000'000);
  EXPECT_NE(why.find("layer step needs 20.03 GB"), std::string::npos) << why;
  EXPECT_NE(why.find("weights 16.00 GB"), std::string::npos) << why;
  EXPECT_NE(why.find("KV and attention 4.00 GB"), std::string::npos) << why;
  EXPECT_NE(why.find("18.00 GB free"), std::string::npos) << why;
  // Fits only without the headroom: skipped.
  EXPECT_NE(layer_memory_skip_reason(f, f.total() + kMemoryHeadroomBytes / 2), "");
}

TEST(CudaLayerPlan, Fp8NeedsAdaOrLater) {
  EXPECT_EQ(fp8_gemm_device_error(9, 0), "");
  EXPECT_EQ(fp8_gemm_device_error(8, 9), "");
  EXPECT_EQ(fp8_gemm_device_error(10, 0), "");
  const std::string why = fp8_gemm_device_error(8, 0);
  EXPECT_NE(why.find("8.9"), std::string::npos) << why;
  EXPECT_NE(why.find("this device is 8.0"), std::string::npos) << why;
}

TEST(CudaLayerPlan, TensorCeilingIsTheDatasheetsForTheDtype) {
  DeviceInfo h200;
  h200.name = "NVIDIA H200";
  h200.flops_peak_tensor_f16 = 989e12;
  h200.flops_peak_tensor_fp8 = 1979e12;
  const Backend::GemmCeiling bf16 = tensor_gemm_ceiling(h200, DType::bf16);
  EXPECT_EQ(bf16.flops, 989e12);
  EXPECT_EQ(bf16.name, "tensor-core bf16 (datasheet)");
  EXPECT_EQ(tensor_gemm_ceiling(h200, DType::f16).name, "tensor-core f16 (datasheet)");
  const Backend::GemmCeiling fp8 = tensor_gemm_ceiling(h200, DType::fp8_e4m3);
  EXPECT_EQ(fp8.flops, 1979e12);
  EXPECT_EQ(fp8.name, "tensor-core fp8_e4m3 (datasheet)");
  DeviceInfo unknown;
  unknown.name = "NVIDIA Nonesuch";
  const Backend::GemmCeiling none = tensor_gemm_ceiling(unknown, DType::bf16);
  EXPECT_EQ(none.flops, 0);
  EXPECT_NE(none.name.find("NVIDIA Nonesuch"), std::string::npos) << none.name;
}

TEST(CudaLayerPlan, DataTypes) {
  EXPECT_EQ(cuda_data_type(DType::f32), CUDA_R_32F);
  EXPECT_EQ(cuda_data_type(DType::f16), CUDA_R_16F);
  EXPECT_EQ(cuda_data_type(DType::bf16), CUDA_R_16BF);
  EXPECT_EQ(cuda_data_type(DType::fp8_e4m3), CUDA_R_8F_E4M3);
  EXPECT_EQ(cuda_data_type(DType::fp8_e5m2), CUDA_R_8F_E5M2);
}

}  // namespace
}  // namespace decodebench::cuda
