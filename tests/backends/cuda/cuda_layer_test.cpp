// The CUDA layer step on a real GPU (label `gpu`; every test skips with a message without a
// device, or without a cuBLASLt to load): each GEMM against a double-precision product of the
// values it read and the generator's weights, the chain of inputs (the attention's output into
// o_proj, the gate half into down_proj, the fp8 casts), x and the attention as at scope
// attention, layout-only and subset workloads, timing's shape, skip reasons, the roof.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cublaslt_loader.h"
#include "backends/cuda/cuda_backend.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "device/counter_rng.h"
#include "kernels.h"
#include "workload/layer_model.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

namespace k = kernels;

#define DECODEBENCH_REQUIRE_LAYER()                                                        \
  do {                                                                                     \
    if (!cuda_runtime_device_present()) {                                                  \
      GTEST_SKIP() << "no CUDA device visible: this test needs a GPU (label `gpu`)";       \
    }                                                                                      \
    if (!cuda::cublaslt().ok()) GTEST_SKIP() << "layer scope: " << cuda::cublaslt().error; \
  } while (0)

constexpr LayerStage kGemms[] = {LayerStage::qkv_proj, LayerStage::o_proj, LayerStage::gate_up_proj,
                                 LayerStage::down_proj, LayerStage::lm_head};

// Small and odd where it may be (batch 5, ragged contexts, shared prefixes), every GEMM
// dimension 16-byte aligned as fp8 needs: hidden 256, Hq d 512, Hkv d 256, I 384, vocab 1000.
WorkloadSpec layer_spec(const k::KernelInfo& kernel, DType q_dtype, int batch = 5) {
  WorkloadSpec s;
  s.model = {
      "gpu-layer-test", /*num_q_heads=*/4, /*num_kv_heads=*/2, kernel.head_dims.front(), 2, ""};
  s.model.hidden_size = 256;
  s.model.intermediate_size = 384;
  s.model.vocab_size = 1000;
  s.batch = batch;
  s.context = ContextSpec::ragged(1, 300);
  s.hit_rate = 0.5;
  s.prefix_groups = 2;
  s.kv_dtype = kernel.kv_dtypes.front();
  s.q_dtype = q_dtype;
  s.block_size = 16;
  s.seed = 77;
  return s;
}

Workload layout_only(const Workload& w) {
  Workload copy = w;
  copy.q.clear();
  copy.k_cache.clear();
  copy.v_cache.clear();
  return copy;
}

struct Dtypes {
  DType weights, q;
};
const Dtypes kDtypes[] = {{DType::bf16, DType::bf16},
                          {DType::f16, DType::f16},
                          {DType::fp8_e4m3, DType::bf16},
                          {DType::fp8_e4m3, DType::f16}};

std::string name_of(const Dtypes& d) {
  return std::string(dtype_name(d.weights)) + " weights, " + std::string(dtype_name(d.q)) + " q";
}

std::unique_ptr<PreparedLayer> prepare(Backend& b, const Workload& w, DType weights,
                                       bool warm = false) {
  LayerOptions o;
  o.weights_dtype = weights;
  TimingOptions t;
  t.warm_l2 = warm;
  return b.prepare_layer(w, k::kernel_ladder().front().name, o, t);
}

// The first element of `v` (GEMM `shape`'s values on `rows`) off the product of its input and
// the generator's weights by more than 1e-2 + 1e-2 |ref| (16-bit outputs of O(1) values; the
// input is what the GEMM read, so fp8 adds no error here), or "". `weights_of` names the shape
// whose weights the reference uses (a planted fault passes another).
std::string check_gemm(const PreparedLayer::GemmValues& v, const GemmShape& shape,
                       const GemmShape& weights_of, DType weights, std::uint64_t seed,
                       const std::vector<int>& rows) {
  const auto n = static_cast<std::size_t>(shape.n), kk = static_cast<std::size_t>(shape.k);
  if (v.input.size() != rows.size() * kk || v.output.size() != rows.size() * n) {
    return "sizes: input " + std::to_string(v.input.size()) + ", output " +
           std::to_string(v.output.size());
  }
  std::vector<float> w(kk);
  for (std::size_t j = 0; j < n; ++j) {
    weight_row(seed, weights_of, weights, static_cast<std::int64_t>(j), w);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      double ref = 0;
      for (std::size_t l = 0; l < kk; ++l) ref += double{v.input[i * kk + l]} * w[l];
      const double got = v.output[i * n + j];
      if (!(std::abs(got - ref) <= 1e-2 + 1e-2 * std::abs(ref))) {
        return std::string(stage_name(shape.stage)) + " row " + std::to_string(rows[i]) + " col " +
               std::to_string(j) + ": got " + std::to_string(got) + ", reference " +
               std::to_string(ref);
      }
    }
  }
  return "";
}

// What the cast before an fp8 GEMM makes of a 16-bit activation value.
float through_fp8(float v) {
  std::byte b;
  encode_value(DType::fp8_e4m3, v * input_scale(DType::fp8_e4m3).inv_scale, &b);
  return decode_value(DType::fp8_e4m3, &b) * kActivationFp8Scale;
}

// The step's input as the generator defines it: row r is sequence `seq`'s.
std::vector<float> host_x(const WorkloadSpec& spec, DType weights, int seq) {
  const auto hidden = static_cast<std::size_t>(spec.model.hidden_size);
  const TensorScale s = input_scale(weights);
  std::vector<float> row(hidden);
  for (std::size_t c = 0; c < hidden; ++c) {
    const float raw = counter_normal(spec.seed, static_cast<std::uint32_t>(LayerTensor::x),
                                     static_cast<std::uint64_t>(seq) * hidden + c);
    std::byte enc[4];
    encode_value(gemm_input_dtype(weights), raw * s.inv_scale, enc);
    row[c] = decode_value(gemm_input_dtype(weights), enc) * s.scale;
  }
  return row;
}

TEST(CudaLayerGpu, EveryGemmMatchesTheReference) {
  DECODEBENCH_REQUIRE_LAYER();
  auto b = make_cuda_backend(0);
  const k::KernelInfo& kernel = k::kernel_ladder().front();
  for (const Dtypes& d : kDtypes) {
    const WorkloadSpec spec = layer_spec(kernel, d.q);
    const Workload w = make_workload(spec);
    auto layer = prepare(*b, w, d.weights);
    layer->run();
    const std::vector<int> rows = {0, 2, 4};
    for (LayerStage stage : kGemms) {
      const GemmShape shape = gemm_shape(spec.model, stage, spec.batch);
      EXPECT_EQ(
          check_gemm(layer->gemm_values(stage, rows), shape, shape, d.weights, spec.seed, rows), "")
          << name_of(d);
    }
  }
}

// The reference check can fail: the qkv_proj output against o_proj's weights (same k, another
// tensor of the generator), and an output with one element changed.
TEST(CudaLayerGpu, PlantedWrongReferenceIsCaught) {
  DECODEBENCH_REQUIRE_LAYER();
  auto b = make_cuda_backend(0);
  const k::KernelInfo& kernel = k::kernel_ladder().front();
  const WorkloadSpec spec = layer_spec(kernel, DType::bf16);
  auto layer = prepare(*b, make_workload(spec), DType::bf16);
  layer->run();
  const std::vector<int> rows = {1};
  const GemmShape qkv = gemm_shape(spec.model, LayerStage::qkv_proj, spec.batch);
  GemmShape other = qkv;
  other.stage = LayerStage::o_proj;
  PreparedLayer::GemmValues v = layer->gemm_values(LayerStage::qkv_proj, rows);
  ASSERT_EQ(check_gemm(v, qkv, qkv, DType::bf16, spec.seed, rows), "");
  EXPECT_NE(check_gemm(v, qkv, other, DType::bf16, spec.seed, rows), "");
  v.output[17] += 0.5f;
  EXPECT_NE(check_gemm(v, qkv, qkv, DType::bf16, spec.seed, rows), "");
}

// Each GEMM reads what the one before wrote (the attention's output, the gate half, the fp8
// casts of them), x is the generator's, and the attention is scope attention's, bit for bit.
TEST(CudaLayerGpu, InputsChainThroughTheStep) {
  DECODEBENCH_REQUIRE_LAYER();
  auto b = make_cuda_backend(0);
  const k::KernelInfo& kernel = k::kernel_ladder().front();
  for (const Dtypes& d : kDtypes) {
    const WorkloadSpec spec = layer_spec(kernel, d.q);
    const Workload w = make_workload(spec);
    auto layer = prepare(*b, w, d.weights);
    layer->run();
    auto point = b->prepare(w, kernel.name, TimingOptions{});
    point->run();
    const std::vector<float> attention = layer->output();
    EXPECT_EQ(attention, point->output()) << name_of(d);

    const std::vector<int> rows = {0, 3, 4};
    const bool fp8 = is_fp8(d.weights);
    auto values = [&](LayerStage s) { return layer->gemm_values(s, rows); };
    // x
    const std::vector<float> x = values(LayerStage::qkv_proj).input;
    const auto hidden = static_cast<std::size_t>(spec.model.hidden_size);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::vector<float> want = host_x(spec, d.weights, rows[i]);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), x.begin() + i * hidden))
          << name_of(d) << ", x row " << rows[i];
    }
    // The previous stage's output, on the same rows: [rows][k] of what was read.
    auto expect_reads = [&](LayerStage stage, const std::vector<float>& source,
                            std::size_t source_ld) {
      const std::vector<float> in = values(stage).input;
      const auto kk = static_cast<std::size_t>(gemm_shape(spec.model, stage, spec.batch).k);
      ASSERT_EQ(in.size(), rows.size() * kk);
      for (std::size_t i = 0; i < rows.size(); ++i) {
        for (std::size_t c = 0; c < kk; ++c) {
          const float src = source[i * source_ld + c];
          const float want = fp8 ? through_fp8(src) : src;
          if (in[i * kk + c] != want) {
            ADD_FAILURE() << name_of(d) << ", " << stage_name(stage) << " row " << rows[i]
                          << " col " << c << ": read " << in[i * kk + c] << ", want " << want;
            return;
          }
        }
      }
    };
    const std::size_t q_dim = static_cast<std::size_t>(spec.model.num_q_heads) *
                              static_cast<std::size_t>(spec.model.head_dim);
    std::vector<float> att_rows;
    for (int r : rows) {
      att_rows.insert(att_rows.end(), attention.begin() + static_cast<std::ptrdiff_t>(r * q_dim),
                      attention.begin() + static_cast<std::ptrdiff_t>((r + 1) * q_dim));
    }
    expect_reads(LayerStage::o_proj, att_rows, q_dim);
    expect_reads(LayerStage::gate_up_proj, values(LayerStage::o_proj).output, hidden);
    expect_reads(LayerStage::down_proj, values(LayerStage::gate_up_proj).output,
                 2 * static_cast<std::size_t>(spec.model.intermediate_size));
    expect_reads(LayerStage::lm_head, values(LayerStage::down_proj).output, hidden);
  }
}

// A layout-only workload, and a layout-only subset of rows, give the values of the uploaded
// workload: the x rows are their sequences', the weights the same generator's.
TEST(CudaLayerGpu, LayoutOnlyAndSubsetWorkloads) {
  DECODEBENCH_REQUIRE_LAYER();
  auto b = make_cuda_backend(0);
  const k::KernelInfo& kernel = k::kernel_ladder().front();
  for (DType weights : {DType::bf16, DType::fp8_e4m3}) {
    const WorkloadSpec spec = layer_spec(kernel, DType::bf16, 7);
    const Workload full = make_workload(spec);
    auto a = prepare(*b, full, weights);
    auto l = prepare(*b, layout_only(full), weights);
    a->run();
    l->run();
    EXPECT_EQ(a->output(), l->output());
    const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6};
    for (LayerStage s : kGemms) {
      EXPECT_EQ(a->gemm_values(s, all).output, l->gemm_values(s, all).output) << stage_name(s);
    }
    const std::vector<int> seqs = {6, 2, 3};
    const Workload subset = make_workload(spec, full.layout, seqs);
    auto sub = prepare(*b, layout_only(subset), weights);
    sub->run();
    const std::vector<int> sub_rows = {0, 1, 2};
    const std::vector<float> x = sub->gemm_values(LayerStage::qkv_proj, sub_rows).input;
    const auto hidden = static_cast<std::size_t>(spec.model.hidden_size);
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      const std::vector<float> want = host_x(spec, weights, seqs[i]);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), x.begin() + i * hidden))
          << dtype_name(weights) << ", subset row " << i << " (sequence " << seqs[i] << ")";
    }
    const GemmShape qkv = gemm_shape(spec.model, LayerStage::qkv_proj, 3);
    const std::vector<int> rows = {0, 1, 2};
    EXPECT_EQ(check_gemm(sub->gemm_values(LayerStage::qkv_proj, rows), qkv, qkv, weights, spec.seed,
                         rows),
              "");
  }
}

// Timing's shape (no timing is asserted): one sample of each of the six stages per time_one,
// every one positive, qkv_proj..down_proj returned; the values unchanged by the timed steps.
TEST(CudaLayerGpu, TimingRecordsEveryStage) {
  DECODEBENCH_REQUIRE_LAYER();
  auto b = make_cuda_backend(0);
  const k::KernelInfo& kernel = k::kernel_ladder().front();
  const WorkloadSpec spec = layer_spec(kernel, DType::bf16);
  for (bool warm : {false, true}) {
    auto layer = prepare(*b, make_workload(spec), DType::fp8_e4m3, warm);
    layer->run();
    const std::vector<int> rows = {0, 4};
    const std::vector<float> before = layer->gemm_values(LayerStage::down_proj, rows).output;
    for (int i = 0; i < 3; ++i) EXPECT_GT(layer->time_one(), 0);
    const std::vector<std::vector<double>> stages = layer->stage_samples();
    ASSERT_EQ(stages.size(), static_cast<std::size_t>(kNumLayerStages));
    for (const std::vector<double>& s : stages) {
      ASSERT_EQ(s.size(), 3u);
      for (double t : s) EXPECT_GT(t, 0);
    }
    EXPECT_EQ(layer->timing().warm_l2, warm);
    EXPECT_EQ(layer->timing().steps_per_sample, 1);
    EXPECT_EQ(layer->gemm_values(LayerStage::down_proj, rows).output, before);
    const std::string lib = layer->gemm_library();
    EXPECT_EQ(lib.rfind("cuBLASLt ", 0), 0u) << lib;
    EXPECT_NE(lib.find("libcublasLt.so"), std::string::npos) << lib;
    EXPECT_NE(lib.find("padded"), std::string::npos) << lib;
  }
  EXPECT_THROW((void)prepare(*b, make_workload(spec), DType::bf16)
                   ->gemm_values(LayerStage::attention, std::vector<int>{0}),
               std::invalid_argument);
}

TEST(CudaLayerGpu, SkipReasonsAndRoof) {
  DECODEBENCH_REQUIRE_LAYER();
  auto b = make_cuda_backend(0);
  const k::KernelInfo& kernel = k::kernel_ladder().front();
  LayerOptions bf16;
  bf16.weights_dtype = DType::bf16;
  LayerOptions fp8;
  fp8.weights_dtype = DType::fp8_e4m3;
  const WorkloadSpec spec = layer_spec(kernel, DType::bf16);
  EXPECT_EQ(b->layer_skip_reason(spec, kernel.name, bf16), "");
  WorkloadSpec no_shape = spec;
  no_shape.model.hidden_size = 0;
  EXPECT_NE(b->layer_skip_reason(no_shape, kernel.name, bf16).find("hidden_size"),
            std::string::npos);
  WorkloadSpec f16_q = spec;
  f16_q.q_dtype = DType::f16;
  EXPECT_NE(b->layer_skip_reason(f16_q, kernel.name, bf16).find("--q-dtype"), std::string::npos);
  WorkloadSpec huge = spec;
  huge.model.vocab_size = 400'000'000;  // an LM head of 200 GB in bf16
  const std::string why = b->layer_skip_reason(huge, kernel.name, bf16);
  EXPECT_NE(why.find("layer step needs"), std::string::npos) << why;
  EXPECT_NE(why.find("GB free"), std::string::npos) << why;
  WorkloadSpec misaligned = spec;
  misaligned.model.vocab_size = 1001;  // fp8: a 1001-element output row is not 16-byte aligned
  EXPECT_NE(b->layer_skip_reason(misaligned, kernel.name, fp8).find("16-byte"), std::string::npos);
  EXPECT_EQ(b->layer_skip_reason(misaligned, kernel.name, bf16), "");
  EXPECT_THROW((void)prepare(*b, make_workload(f16_q), DType::bf16), InputError);

  const DeviceInfo info = b->device_info();
  const Backend::GemmCeiling roof = b->gemm_ceiling(DType::bf16);
  if (info.flops_peak_tensor_f16 > 0) {
    EXPECT_EQ(roof.flops, info.flops_peak_tensor_f16);
    EXPECT_EQ(roof.name, "tensor-core bf16 (datasheet)");
  } else {
    EXPECT_EQ(roof.flops, 0);
  }
  EXPECT_EQ(b->gemm_ceiling(DType::fp8_e4m3).flops, info.flops_peak_tensor_fp8);
}

}  // namespace
}  // namespace decodebench
