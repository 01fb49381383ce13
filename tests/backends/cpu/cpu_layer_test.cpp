// The cpu backend's layer scope: its GEMM libraries against a double-precision reference, the
// counter-generator weights, the step's stages, the weights cache and the skip reasons. Every
// GEMM test skips with the backend's own reason where the build has no GEMM library (or the CPU
// none of its bf16 kernels); the skip reasons are tested either way. No timing is asserted.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_layer.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "device/counter_rng.h"
#include "device/float_formats.h"
#include "reference/reference.h"
#include "workload/layer_model.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

ModelShape small_model() {
  ModelShape m{"small-layer", 4, 2, 64, 1, ""};
  m.hidden_size = 256;
  m.intermediate_size = 512;
  m.vocab_size = 1000;
  return m;
}

WorkloadSpec small_spec(std::uint64_t seed = 11) {
  WorkloadSpec s;
  s.model = small_model();
  s.batch = 5;
  s.context = ContextSpec::ragged(1, 90);
  s.hit_rate = 0.5;
  s.kv_dtype = DType::bf16;
  s.q_dtype = DType::bf16;
  s.seed = seed;
  return s;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The check a GEMM's values get: each output row against the double-precision product of its
// input row and the weights as layer_model.h defines them (weight_row), elementwise within the
// bf16 output's tolerance (reference.h's, as the attention's). `values` holds `rows` rows.
Comparison check_gemm(const GemmShape& shape, DType weights, std::uint64_t seed,
                      const PreparedLayer::GemmValues& values, std::size_t rows) {
  const auto n = static_cast<std::size_t>(shape.n), k = static_cast<std::size_t>(shape.k);
  if (values.input.size() != rows * k || values.output.size() != rows * n)
    throw std::invalid_argument("check_gemm: values of another shape");
  std::vector<float> ref(rows * n), w(k);
  for (std::size_t j = 0; j < n; ++j) {
    weight_row(seed, shape, weights, static_cast<std::int64_t>(j), w);
    for (std::size_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (std::size_t i = 0; i < k; ++i)
        acc += static_cast<double>(values.input[r * k + i]) * static_cast<double>(w[i]);
      ref[r * n + j] = static_cast<float>(acc);
    }
  }
  return compare_outputs(values.output, ref, 1, static_cast<int>(n),
                         tolerance_for(DType::bf16, DType::bf16));
}

// Skips the calling test with the backend's reason when it cannot run the layer here.
#define SKIP_UNLESS_LAYER(backend, spec)                                                \
  do {                                                                                  \
    const std::string why = (backend).layer_skip_reason((spec), "cpu", LayerOptions{}); \
    if (!why.empty()) GTEST_SKIP() << why;                                              \
  } while (0)

// ---- the generator -----------------------------------------------------------------------------

TEST(CpuLayerWeights, FillIsWeightValueBitForBit) {
  for (DType dt : {DType::bf16, DType::f16, DType::fp8_e4m3}) {
    for (LayerStage s : {LayerStage::qkv_proj, LayerStage::down_proj}) {
      const GemmShape shape = gemm_shape(small_model(), s, 1);
      std::vector<std::byte> w(static_cast<std::size_t>(shape.n * shape.k) * dtype_size(dt));
      cpu::fill_weight(5, shape, dt, w.data());
      const TensorScale scale = weight_scale(shape, dt);
      for (std::int64_t n = 0; n < shape.n; n += 7)
        for (std::int64_t kk = 0; kk < shape.k; kk += 3) {
          const std::size_t at = static_cast<std::size_t>(n * shape.k + kk) * dtype_size(dt);
          ASSERT_EQ(decode_value(dt, &w[at]) * scale.scale, weight_value(5, shape, dt, n, kk))
              << dtype_name(dt) << " " << stage_name(s) << " [" << n << "][" << kk << "]";
        }
    }
  }
}

TEST(CpuLayerWeights, InputRowsFollowTheirSequence) {
  const int hidden = 256;
  const std::vector<int> sequences = {3, 0};
  std::vector<std::byte> x(2 * hidden * 2);
  cpu::fill_input(9, hidden, DType::bf16, sequences, x.data());
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < hidden; ++i) {
      const float want = counter_normal(9, static_cast<std::uint32_t>(LayerTensor::x),
                                        static_cast<std::uint64_t>(sequences[r] * hidden + i));
      std::uint16_t bits;
      std::memcpy(&bits, &x[static_cast<std::size_t>(r * hidden + i) * 2], 2);
      ASSERT_EQ(bits, floatfmt::float_to_bf16(want)) << r << " " << i;
    }
}

// ---- the libraries, alone ----------------------------------------------------------------------

// Every library and every way it runs a product, on odd shapes (one row, a strided input),
// bf16-exact inputs, against a double product: what the bench times is what is checked.
TEST(CpuGemmLibraries, EveryEntryMatchesReference) {
  auto libs = cpu::gemm_libraries();
  if (libs.empty()) GTEST_SKIP() << cpu::missing_gemm_library();
  const std::int64_t n = 37, k = 70;
  std::vector<std::uint16_t> w(static_cast<std::size_t>(n * k));
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = floatfmt::float_to_bf16(static_cast<float>(static_cast<int>(i * 7 % 23) - 11) / 16.f);
  for (auto& lib : libs) {
    auto weights = lib->prepare_weights(reinterpret_cast<const std::byte*>(w.data()), n, k);
    for (std::int64_t m : {1, 3}) {
      for (std::int64_t lda : {k, 2 * k + 3}) {
        std::vector<std::uint16_t> x(static_cast<std::size_t>(m * lda));
        for (std::size_t i = 0; i < x.size(); ++i)
          x[i] =
              floatfmt::float_to_bf16(static_cast<float>(static_cast<int>(i * 5 % 19) - 9) / 8.f);
        for (const std::string& entry : lib->entries(m, k, lda)) {
          std::unique_ptr<cpu::GemmPlan> plan;
          try {
            plan = lib->plan(*weights, m, lda, entry);
          } catch (const RuntimeFailure& e) {
            // Only a library without bf16 kernels on this CPU may refuse a plan.
            EXPECT_FALSE(lib->supports(DType::bf16)) << lib->name() << ": " << e.what();
            continue;
          }
          std::vector<std::uint16_t> y(static_cast<std::size_t>(m * n));
          plan->run(reinterpret_cast<const std::byte*>(x.data()),
                    reinterpret_cast<std::byte*>(y.data()));
          for (std::int64_t r = 0; r < m; ++r)
            for (std::int64_t j = 0; j < n; ++j) {
              double ref = 0;
              for (std::int64_t i = 0; i < k; ++i)
                ref += static_cast<double>(floatfmt::bf16_to_float(x[r * lda + i])) *
                       floatfmt::bf16_to_float(w[j * k + i]);
              // The inputs are small multiples of 1/128: the product is exact in fp32, so the
              // output is ref rounded to bf16 (half an ulp, 2^-9 relative).
              const float got = floatfmt::bf16_to_float(y[r * n + j]);
              ASSERT_NEAR(got, ref, std::abs(ref) / 256 + 1e-6)
                  << lib->name() << " " << plan->entry_point() << " m " << m << " lda " << lda
                  << " [" << r << "][" << j << "]";
            }
        }
      }
    }
    EXPECT_THROW(lib->plan(*weights, 1, k, "no-such-entry"), InputError);
  }
}

// ---- the layer through the backend ------------------------------------------------------------

TEST(CpuLayer, EveryGemmMatchesReference) {
  auto backend = make_cpu_backend();
  const WorkloadSpec spec = small_spec();
  SKIP_UNLESS_LAYER(*backend, spec);
  const Workload w = make_workload(spec);
  auto layer = backend->prepare_layer(w, "cpu", {}, {});
  layer->run();
  const std::vector<int> rows = {0, 2, 4};
  for (LayerStage s : {LayerStage::qkv_proj, LayerStage::o_proj, LayerStage::gate_up_proj,
                       LayerStage::down_proj, LayerStage::lm_head}) {
    const GemmShape shape = gemm_shape(spec.model, s, spec.batch);
    const auto values = layer->gemm_values(s, rows);
    const Comparison cmp = check_gemm(shape, DType::bf16, spec.seed, values, rows.size());
    EXPECT_TRUE(cmp.ok) << stage_name(s) << ": " << cmp.report;
    EXPECT_EQ(cmp.checked, rows.size() * static_cast<std::size_t>(shape.n));
  }
  EXPECT_TRUE(contains(layer->gemm_library(), "oneDNN") ||
              contains(layer->gemm_library(), "OpenBLAS"))
      << layer->gemm_library();
}

// The stages are chained: each GEMM reads what the one before it wrote.
TEST(CpuLayer, StagesReadTheirPredecessorsOutput) {
  auto backend = make_cpu_backend();
  const WorkloadSpec spec = small_spec();
  SKIP_UNLESS_LAYER(*backend, spec);
  const Workload w = make_workload(spec);
  auto layer = backend->prepare_layer(w, "cpu", {}, {});
  layer->run();
  const std::vector<int> rows = {1, 3};
  const int hidden = spec.model.hidden_size, inter = spec.model.intermediate_size;
  // qkv_proj reads x.
  std::vector<std::byte> x(static_cast<std::size_t>(2 * hidden) * 2);
  cpu::fill_input(spec.seed, hidden, DType::bf16, rows, x.data());
  EXPECT_EQ(layer->gemm_values(LayerStage::qkv_proj, rows).input, decode_to_float(x, DType::bf16));
  // o_proj reads the attention's output.
  const std::vector<float> attn = layer->output();
  const std::size_t q_dim = static_cast<std::size_t>(spec.model.num_q_heads * spec.model.head_dim);
  std::vector<float> attn_rows;
  for (int r : rows)
    attn_rows.insert(attn_rows.end(), attn.begin() + r * q_dim, attn.begin() + (r + 1) * q_dim);
  EXPECT_EQ(layer->gemm_values(LayerStage::o_proj, rows).input, attn_rows);
  // gate_up_proj reads o_proj's output; down_proj the gate half of gate_up_proj's; lm_head
  // down_proj's.
  EXPECT_EQ(layer->gemm_values(LayerStage::gate_up_proj, rows).input,
            layer->gemm_values(LayerStage::o_proj, rows).output);
  const std::vector<float> gate_up = layer->gemm_values(LayerStage::gate_up_proj, rows).output;
  std::vector<float> gate;
  for (std::size_t r = 0; r < rows.size(); ++r)
    gate.insert(gate.end(), gate_up.begin() + static_cast<std::ptrdiff_t>(r * 2 * inter),
                gate_up.begin() + static_cast<std::ptrdiff_t>(r * 2 * inter + inter));
  EXPECT_EQ(layer->gemm_values(LayerStage::down_proj, rows).input, gate);
  EXPECT_EQ(layer->gemm_values(LayerStage::lm_head, rows).input,
            layer->gemm_values(LayerStage::down_proj, rows).output);
  EXPECT_THROW(layer->gemm_values(LayerStage::attention, rows), std::invalid_argument);
  EXPECT_THROW(layer->gemm_values(LayerStage::o_proj, std::vector<int>{5}), std::invalid_argument);
}

// The check catches a wrong output element and weights of another seed.
TEST(CpuLayer, CheckCatchesPlantedFaults) {
  auto backend = make_cpu_backend();
  const WorkloadSpec spec = small_spec();
  SKIP_UNLESS_LAYER(*backend, spec);
  const Workload w = make_workload(spec);
  auto layer = backend->prepare_layer(w, "cpu", {}, {});
  layer->run();
  const std::vector<int> rows = {0, 4};
  const GemmShape shape = gemm_shape(spec.model, LayerStage::gate_up_proj, spec.batch);
  auto values = layer->gemm_values(LayerStage::gate_up_proj, rows);
  ASSERT_TRUE(check_gemm(shape, DType::bf16, spec.seed, values, rows.size()).ok);
  values.output[777] += 0.05f;
  const Comparison one_wrong = check_gemm(shape, DType::bf16, spec.seed, values, rows.size());
  EXPECT_FALSE(one_wrong.ok);
  EXPECT_EQ(one_wrong.mismatches, 1u);
  values.output[777] -= 0.05f;
  EXPECT_FALSE(check_gemm(shape, DType::bf16, spec.seed + 1, values, rows.size()).ok);
}

// A subset workload (the harness validates huge points on some sequences): each row is its
// sequence's, so its GEMM outputs are the full point's rows.
TEST(CpuLayer, SubsetRowsAreTheirSequencesRows) {
  auto backend = make_cpu_backend();
  const WorkloadSpec spec = small_spec();
  SKIP_UNLESS_LAYER(*backend, spec);
  const Workload full = make_workload(spec);
  const std::vector<int> sequences = {1, 4};
  const Workload sub = make_workload(spec, full.layout, sequences);
  auto a = backend->prepare_layer(full, "cpu", {}, {});
  a->run();
  auto b = backend->prepare_layer(sub, "cpu", {}, {});
  b->run();
  for (LayerStage s : {LayerStage::qkv_proj, LayerStage::lm_head})
    EXPECT_EQ(a->gemm_values(s, sequences).output, b->gemm_values(s, std::vector<int>{0, 1}).output)
        << stage_name(s);
}

TEST(CpuLayer, AttentionIsThePointsAttention) {
  auto backend = make_cpu_backend();
  const WorkloadSpec spec = small_spec();
  SKIP_UNLESS_LAYER(*backend, spec);
  const Workload w = make_workload(spec);
  for (const char* kernel : {"cpu", "cascade"}) {
    auto point = backend->prepare(w, kernel, {});
    point->run();
    auto layer = backend->prepare_layer(w, kernel, {}, {});
    layer->run();
    EXPECT_EQ(layer->output(), point->output()) << kernel;
  }
}

TEST(CpuLayer, StageSamplesKeepEveryStage) {
  auto backend = make_cpu_backend();
  const WorkloadSpec spec = small_spec();
  SKIP_UNLESS_LAYER(*backend, spec);
  const Workload w = make_workload(spec);
  for (bool warm : {false, true}) {
    auto layer = backend->prepare_layer(w, "cascade", {}, TimingOptions{warm});
    layer->run();
    std::vector<double> totals;
    for (int i = 0; i < 3; ++i) totals.push_back(layer->time_one());
    const auto samples = layer->stage_samples();
    ASSERT_EQ(samples.size(), static_cast<std::size_t>(kNumLayerStages));
    for (const auto& stage : samples) {
      ASSERT_EQ(stage.size(), 3u);
      for (double t : stage) EXPECT_GT(t, 0.0);
    }
    // The layer is qkv_proj..down_proj: the five stages' sum, the LM head apart.
    for (int i = 0; i < 3; ++i) {
      double sum = 0;
      for (int s = 0; s <= static_cast<int>(LayerStage::down_proj); ++s) sum += samples[s][i];
      EXPECT_NEAR(totals[i], sum, 1e-9 + 1e-9 * sum);
    }
    EXPECT_EQ(layer->paired_read_samples().size(), warm ? 0u : 3u);
    EXPECT_EQ(layer->timing().warm_l2, warm);
    // The layer keeps the flush (its weights are not rotated) and says so.
    EXPECT_EQ(cold_method(layer->timing()), warm ? ColdMethod::warm : ColdMethod::flush);
    if (!warm) {
      EXPECT_NE(layer->timing().flush_reason.find("layer scope"), std::string::npos);
    }
  }
}

TEST(CpuLayer, WeightsCachedPerModelAndSeed) {
  auto backend = make_cpu_backend();
  WorkloadSpec spec = small_spec();
  SKIP_UNLESS_LAYER(*backend, spec);
  const Workload w1 = make_workload(spec);
  spec.batch = 2;  // the next point of a batch series
  const Workload w2 = make_workload(spec);
  spec.seed += 1;
  const Workload w3 = make_workload(spec);
  auto a = backend->prepare_layer(w1, "cpu", {}, {});
  auto b = backend->prepare_layer(w2, "cpu", {}, {});
  auto c = backend->prepare_layer(w3, "cpu", {}, {});
  const auto& wa = dynamic_cast<cpu::CpuLayer&>(*a).weights();
  const auto& wb = dynamic_cast<cpu::CpuLayer&>(*b).weights();
  const auto& wc = dynamic_cast<cpu::CpuLayer&>(*c).weights();
  EXPECT_EQ(&wa, &wb);
  EXPECT_EQ(wa.data(LayerStage::lm_head), wb.data(LayerStage::lm_head));
  EXPECT_NE(&wa, &wc);
  EXPECT_EQ(wc.seed(), spec.seed);
  EXPECT_NE(std::memcmp(wa.data(LayerStage::qkv_proj), wc.data(LayerStage::qkv_proj), 64), 0);
  // The first layer still reads its own weights after the cache moved on.
  a->run();
  const std::vector<int> rows = {0};
  EXPECT_TRUE(check_gemm(gemm_shape(spec.model, LayerStage::o_proj, 5), DType::bf16, spec.seed - 1,
                         a->gemm_values(LayerStage::o_proj, rows), 1)
                  .ok);
}

TEST(CpuLayer, GemmCeilingIsMeasured) {
  auto backend = make_cpu_backend();
  SKIP_UNLESS_LAYER(*backend, small_spec());
  const Backend::GemmCeiling c = backend->gemm_ceiling(DType::bf16);
  EXPECT_GT(c.flops, 0);
  EXPECT_TRUE(contains(c.name, "2048^3 (measured)")) << c.name;
  EXPECT_EQ(backend->gemm_ceiling(DType::f16).flops, 0);
}

TEST(CpuLayer, SkipReasons) {
  auto backend = make_cpu_backend();
  const WorkloadSpec spec = small_spec();
  const std::string bf16 = backend->layer_skip_reason(spec, "cpu", {});
  if (cpu::gemm_libraries().empty()) {
    EXPECT_TRUE(contains(bf16, "libdnnl-dev")) << bf16;
  }
  // Another weights dtype names the one that runs.
  for (const auto& lib : cpu::gemm_libraries()) {
    EXPECT_TRUE(contains(lib->unsupported_reason(DType::f16), "bf16 only"));
    EXPECT_FALSE(lib->supports(DType::fp8_e4m3));
  }
  WorkloadSpec f16 = spec;
  f16.q_dtype = DType::f16;
  for (DType wt : {DType::f16, DType::fp8_e4m3}) {
    const std::string why = backend->layer_skip_reason(f16, "cpu", LayerOptions{wt});
    EXPECT_TRUE(contains(why, "bf16")) << why;
    EXPECT_THROW(backend->prepare_layer(make_workload(f16), "cpu", LayerOptions{wt}, {}),
                 InputError);
  }
  // bf16 weights with f16 activations, a model without its layer shape, an unknown kernel.
  EXPECT_TRUE(contains(backend->layer_skip_reason(f16, "cpu", {}), "--q-dtype bf16"));
  WorkloadSpec attention_only = spec;
  attention_only.model = ModelShape{"attn", 4, 2, 64, 1, ""};
  EXPECT_TRUE(contains(backend->layer_skip_reason(attention_only, "cpu", {}), "hidden_size"));
  EXPECT_TRUE(contains(backend->layer_skip_reason(spec, "gqa", {}), "valid: cpu"));
  // Weights that cannot fit: a 2 M x 65 k LM head alone is 260 GB of bf16.
  WorkloadSpec huge = spec;
  huge.model.hidden_size = 65536;
  huge.model.vocab_size = 2'000'000;
  if (bf16.empty()) {
    const std::string why = backend->layer_skip_reason(huge, "cpu", {});
    EXPECT_TRUE(contains(why, "memory")) << why;
  }
}

TEST(CpuLayer, LayoutOnlyWorkloadRefused) {
  auto backend = make_cpu_backend();
  const WorkloadSpec spec = small_spec();
  SKIP_UNLESS_LAYER(*backend, spec);
  Workload w = make_workload(spec);
  w.k_cache.clear();
  EXPECT_THROW(backend->prepare_layer(w, "cpu", {}, {}), InputError);
}

}  // namespace
}  // namespace decodebench
