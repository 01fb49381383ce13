// Scope layer through the harness with a fake backend whose GEMMs are exact host products:
// validation of every GEMM (planted faults caught), the record of the timed stages, the layer
// roofline, tokens/s, the layer knees and the report's round trip.
#include <array>
#include <cmath>
#include <map>
#include <memory>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "device/counter_rng.h"
#include "harness/layer_step.h"
#include "harness/roofline.h"
#include "harness/runner.h"
#include "reference/reference.h"
#include "results/point_identity.h"
#include "results/report.h"
#include "support/host_test_util.h"

namespace decodebench {
namespace {

using test::TempDir;

// Rounds through the activation dtype, as a real GEMM's output is stored.
float round_to(DType t, float v) {
  std::byte b[4];
  encode_value(t, v, b);
  return decode_value(t, b);
}

// The layer step on the host: every GEMM an exact product (double) of the weights as
// layer_model.h defines them, rounded to the activation dtype; the attention the reference.
class FakeLayer : public PreparedLayer {
 public:
  FakeLayer(const Workload& w, DType weights, LayerStage bad_stage, int* time_calls)
      : spec_(w.spec), weights_(weights), bad_stage_(bad_stage), time_calls_(time_calls) {
    attention_ = reference_decode(w);
    const GemmShape qkv = gemm_shape(spec_.model, LayerStage::qkv_proj, spec_.batch);
    x_.resize(static_cast<std::size_t>(qkv.m * qkv.k));
    for (std::size_t i = 0; i < x_.size(); ++i) {
      x_[i] = round_to(spec_.q_dtype,
                       counter_normal(spec_.seed, static_cast<std::uint32_t>(LayerTensor::x), i));
    }
  }
  void run() override {
    ++runs_;
    outputs_[LayerStage::qkv_proj] = gemm(LayerStage::qkv_proj, x_);
    std::vector<float> att(attention_.size());
    for (std::size_t i = 0; i < att.size(); ++i) att[i] = round_to(spec_.q_dtype, attention_[i]);
    inputs_[LayerStage::o_proj] = att;
    outputs_[LayerStage::o_proj] = gemm(LayerStage::o_proj, att);
    outputs_[LayerStage::gate_up_proj] =
        gemm(LayerStage::gate_up_proj, outputs_[LayerStage::o_proj]);
    // down_proj reads the gate half: the first I of every 2 I row.
    const GemmShape down = gemm_shape(spec_.model, LayerStage::down_proj, spec_.batch);
    std::vector<float> gate(static_cast<std::size_t>(down.m * down.k));
    for (std::int64_t r = 0; r < down.m; ++r) {
      for (std::int64_t c = 0; c < down.k; ++c) {
        gate[r * down.k + c] = outputs_[LayerStage::gate_up_proj][r * down.lda + c];
      }
    }
    outputs_[LayerStage::down_proj] = gemm(LayerStage::down_proj, gate);
    outputs_[LayerStage::lm_head] = gemm(LayerStage::lm_head, outputs_[LayerStage::down_proj]);
    inputs_[LayerStage::qkv_proj] = x_;
    inputs_[LayerStage::gate_up_proj] = outputs_[LayerStage::o_proj];
    inputs_[LayerStage::down_proj] = gate;
    inputs_[LayerStage::lm_head] = outputs_[LayerStage::down_proj];
    // Column 0 of row 0: validation checks a subset of columns, always the first.
    if (bad_stage_ != LayerStage::attention) outputs_[bad_stage_][0] += 0.5f;
  }
  std::vector<float> output() override { return attention_; }
  double time_one() override {
    ++*time_calls_;
    // Stage times 1..6 ms: the layer is the first five.
    for (int s = 0; s < kNumLayerStages; ++s) stages_[s].push_back(1e-3 * (s + 1));
    return 15e-3;
  }
  TimingRecord timing() const override { return {TimingMethod::host_clock_per_step, 1, false}; }
  std::vector<std::vector<double>> stage_samples() const override {
    return {stages_.begin(), stages_.end()};
  }
  GemmValues gemm_values(LayerStage stage, std::span<const int> rows) override {
    if (runs_ == 0) throw std::logic_error("gemm_values() before run()");
    const GemmShape g = gemm_shape(spec_.model, stage, spec_.batch);
    GemmValues v;
    for (int r : rows) {
      const auto in = inputs_.at(stage).begin() + r * g.k;
      v.input.insert(v.input.end(), in, in + g.k);
      const auto out = outputs_.at(stage).begin() + r * g.n;
      v.output.insert(v.output.end(), out, out + g.n);
    }
    return v;
  }
  std::string gemm_library() const override { return "fake host products"; }

 private:
  std::vector<float> gemm(LayerStage stage, const std::vector<float>& in) const {
    const GemmShape g = gemm_shape(spec_.model, stage, spec_.batch);
    std::vector<float> out(static_cast<std::size_t>(g.m * g.n));
    std::vector<float> w(static_cast<std::size_t>(g.k));
    for (std::int64_t n = 0; n < g.n; ++n) {
      weight_row(spec_.seed, g, weights_, n, w);
      for (std::int64_t m = 0; m < g.m; ++m) {
        double acc = 0;
        for (std::int64_t k = 0; k < g.k; ++k) acc += double{in[m * g.k + k]} * w[k];
        out[m * g.n + n] = round_to(spec_.q_dtype, static_cast<float>(acc));
      }
    }
    return out;
  }

  WorkloadSpec spec_;
  DType weights_;
  LayerStage bad_stage_;
  int* time_calls_;
  int runs_ = 0;
  std::vector<float> attention_, x_;
  std::map<LayerStage, std::vector<float>> inputs_, outputs_;
  std::array<std::vector<double>, kNumLayerStages> stages_;
};

class FakeLayerBackend : public Backend {
 public:
  std::string name() const override { return "fake"; }
  DeviceInfo device_info() override {
    DeviceInfo d;
    d.backend = "fake";
    d.name = "Fake Device";
    return d;
  }
  Ceilings measure_ceilings() override {
    Ceilings c;
    c.read = 1e10;
    c.fma_flops = 1e11;
    return c;
  }
  std::vector<std::string> kernel_names() const override { return {"good"}; }
  ComputeUnit compute_unit(std::string_view) const override { return ComputeUnit::fma; }
  std::string choose_kernel(const WorkloadSpec&, const PagedLayout&) override { return "good"; }
  std::string skip_reason(const WorkloadSpec&, const PagedLayout&, std::string_view) override {
    return "";
  }
  std::unique_ptr<PreparedPoint> prepare(const Workload& w, std::string_view,
                                         const TimingOptions&) override {
    workload_ = std::make_unique<Workload>(w);
    return std::make_unique<FakeLayer>(*workload_, DType::bf16, LayerStage::attention, &time_calls);
  }
  std::string layer_skip_reason(const WorkloadSpec& spec, const PagedLayout&, std::string_view,
                                const LayerOptions& layer) override {
    if (layer.weights_dtype == DType::f16) return "fake has bf16 and fp8 GEMMs only";
    return spec.batch > 8 ? "the fake's weights do not fit" : "";
  }
  std::unique_ptr<PreparedLayer> prepare_layer(const Workload& w, std::string_view,
                                               const LayerOptions& layer,
                                               const TimingOptions&) override {
    ++layer_prepares;
    return std::make_unique<FakeLayer>(w, layer.weights_dtype, bad_stage, &time_calls);
  }
  GemmCeiling gemm_ceiling(DType weights) override {
    ++gemm_ceiling_calls;
    return {2e11, fmt::format("fake {} GEMM (measured)", dtype_name(weights))};
  }

  LayerStage bad_stage = LayerStage::attention;  // attention: no fault
  int time_calls = 0, layer_prepares = 0, gemm_ceiling_calls = 0;

 private:
  std::unique_ptr<Workload> workload_;
};

// Hq 4 x d 64 = 256 q features over a hidden size of 128: o_proj is not square.
std::string tiny_layer_model_json() {
  return R"({"name": "tiny-layer", "num_q_heads": 4, "num_kv_heads": 2, "head_dim": 64,
             "num_layers": 3, "hidden_size": 128, "intermediate_size": 192, "vocab_size": 300})";
}

class LayerStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.write("tiny-layer.json", tiny_layer_model_json()).string();
    attention_only_ = dir_.write("tiny.json", test::tiny_model_json()).string();
  }
  SweepConfig config(std::vector<int> batches) const {
    SweepConfig c;
    c.models = {model_};
    c.scopes = {Scope::layer};
    c.kernels = {"good"};
    c.batches = std::move(batches);
    c.contexts = {ContextSpec::fixed(40)};
    c.kv_dtypes = {DType::bf16};
    c.q_dtypes = {DType::bf16};
    c.block_sizes = {16};
    c.measure.min_samples = 3;
    c.measure.min_time_s = 0;
    c.measure.max_noise = 1;
    return c;
  }
  TempDir dir_;
  std::string model_, attention_only_;
};

TEST_F(LayerStepTest, LayerPointsAreValidatedTimedAndSplit) {
  FakeLayerBackend backend;
  const Report r = run_sweep(backend, config({1, 2, 4}));
  ASSERT_EQ(r.results.size(), 3u);
  EXPECT_EQ(backend.gemm_ceiling_calls, 1);  // once per sweep
  EXPECT_EQ(r.devices[0].measured.gemm_ceiling_name, "fake bf16 GEMM (measured)");
  for (const PointResult& p : r.results) {
    ASSERT_EQ(p.status, PointStatus::ok) << p.reason;
    EXPECT_EQ(p.scope, Scope::layer);
    ASSERT_TRUE(p.layer.has_value());
    const LayerRecord& l = *p.layer;
    ASSERT_EQ(l.stages.size(), static_cast<std::size_t>(kNumLayerStages));
    EXPECT_EQ(l.stages[0].name, "qkv_proj");
    EXPECT_EQ(l.stages[5].name, "lm_head");
    EXPECT_EQ(l.stages[0].n, 4 * 64 + 2 * 2 * 64);
    EXPECT_EQ(l.stages[4].k, 192);
    for (const StageRecord& st : l.stages) {
      EXPECT_EQ(st.time_s.samples, p.time_s.samples) << st.name;
      if (st.name != "attention") {
        EXPECT_TRUE(available(st.max_rel_error)) << st.name;
        EXPECT_LT(st.max_rel_error, 0x1p-7) << st.name;
      }
    }
    // The fake's stages take 1..6 ms: GEMMs (1 + 3 + 4 + 5) ms, attention 2 ms, LM head 6 ms.
    EXPECT_NEAR(l.time_weights_s, 13e-3, 1e-12);
    EXPECT_NEAR(l.time_kv_s, 2e-3, 1e-12);
    EXPECT_NEAR(p.tokens_per_s, p.batch / (15e-3 * 3), 1e-9);
    EXPECT_NEAR(l.tokens_per_s_with_lm_head, p.batch / (15e-3 * 3 + 6e-3), 1e-9);
    EXPECT_EQ(l.gemm_library, "fake host products");
    EXPECT_EQ(l.left_out.size(), kLayerLeftOut.size());
    // The point's bytes are the whole layer's: weights + activations + the attention's.
    EXPECT_DOUBLE_EQ(p.bytes.min, l.weight_bytes + l.activation_bytes + l.stages[1].bytes);
    EXPECT_DOUBLE_EQ(l.kv_bytes, p.bytes.kv_unique);
    EXPECT_TRUE(available(p.roofline.t_roof_s));
    ASSERT_TRUE(l.gemm_ceiling.has_value());
    EXPECT_DOUBLE_EQ(l.gemm_ceiling->flops, 2e11);
  }
  // Weights are read once whatever the batch: their share of the bytes falls as batch grows.
  EXPECT_DOUBLE_EQ(r.results[0].layer->weight_bytes, r.results[2].layer->weight_bytes);
  ASSERT_EQ(r.knees.size(), 1u);
  const auto& knee = r.knees[0];
  EXPECT_EQ(knee["scope"], "layer");
  EXPECT_EQ(knee["metric"], "tokens_per_s");
  EXPECT_EQ(knee["weights_dtype"], "bf16");
  EXPECT_EQ(knee["knee_batch"], 4);  // the fake's step time is constant: tokens/s ~ batch
  EXPECT_GT(knee["weight_bytes_share_at_knee"].get<double>(), 0.5);
}

TEST_F(LayerStepTest, AWrongGemmMakesThePointWrongAndUntimed) {
  for (LayerStage bad : {LayerStage::qkv_proj, LayerStage::o_proj, LayerStage::gate_up_proj,
                         LayerStage::down_proj, LayerStage::lm_head}) {
    FakeLayerBackend backend;
    backend.bad_stage = bad;
    const Report r = run_sweep(backend, config({2}));
    ASSERT_EQ(r.results.size(), 1u);
    const PointResult& p = r.results[0];
    EXPECT_EQ(p.status, PointStatus::wrong) << stage_name(bad);
    EXPECT_NE(p.reason.find(std::string(stage_name(bad))), std::string::npos) << p.reason;
    EXPECT_EQ(backend.time_calls, 0);
    EXPECT_FALSE(available(p.tokens_per_s));
  }
}

TEST_F(LayerStepTest, PointsTheLayerCannotTakeAreSkippedWithTheReason) {
  FakeLayerBackend backend;
  SweepConfig c = config({4, 16});
  c.models = {model_, attention_only_};
  const Report r = run_sweep(backend, c);
  ASSERT_EQ(r.results.size(), 4u);
  EXPECT_EQ(r.results[0].status, PointStatus::ok) << r.results[0].reason;
  EXPECT_EQ(r.results[1].status, PointStatus::skipped);
  EXPECT_NE(r.results[1].reason.find("do not fit"), std::string::npos);
  EXPECT_EQ(r.results[2].status, PointStatus::skipped);
  EXPECT_NE(r.results[2].reason.find("hidden_size"), std::string::npos) << r.results[2].reason;

  SweepConfig mismatch = config({1});
  mismatch.q_dtypes = {DType::f16};  // named: kept, though bf16 weights need bf16 activations
  const Report m = run_sweep(backend, mismatch);
  EXPECT_EQ(m.results[0].status, PointStatus::skipped);
  EXPECT_EQ(m.results[0].q_dtype, DType::f16);
  EXPECT_NE(m.results[0].reason.find("--q-dtype bf16"), std::string::npos) << m.results[0].reason;

  SweepConfig f16 = config({1});
  f16.q_dtypes = {DType::f16};
  f16.weights_dtype = DType::f16;
  EXPECT_EQ(run_sweep(backend, f16).results[0].reason, "fake has bf16 and fp8 GEMMs only");
}

// The q dtype left out (auto): both scopes run, the layer with bf16 activations as its bf16
// weights need, the attention with f16; the points record those dtypes and the config "auto".
// Before, the layer point was skipped for its f16 activations.
TEST_F(LayerStepTest, TheDefaultQDtypeRunsBothScopes) {
  FakeLayerBackend backend;
  SweepConfig c = config({1});
  c.scopes = {Scope::attention, Scope::layer};
  c.q_dtypes = SweepConfig{}.q_dtypes;
  const Report r = run_sweep(backend, c);
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].scope, Scope::attention);
  EXPECT_EQ(r.results[0].q_dtype, DType::f16);
  EXPECT_EQ(r.results[0].status, PointStatus::ok) << r.results[0].reason;
  EXPECT_EQ(r.results[1].scope, Scope::layer);
  EXPECT_EQ(r.results[1].q_dtype, DType::bf16);
  EXPECT_EQ(r.results[1].status, PointStatus::ok) << r.results[1].reason;
  EXPECT_EQ(r.config.at("q_dtype"), nlohmann::json::array({"auto"}));
}

TEST_F(LayerStepTest, BothScopesInOneSweepAreSeparatePointsAndSeries) {
  FakeLayerBackend backend;
  SweepConfig c = config({1, 2});
  c.scopes = {Scope::attention, Scope::layer};
  const Report r = run_sweep(backend, c);
  ASSERT_EQ(r.results.size(), 4u);
  EXPECT_EQ(r.results[0].scope, Scope::attention);
  EXPECT_FALSE(r.results[0].layer.has_value());
  EXPECT_EQ(r.results[2].scope, Scope::layer);
  EXPECT_NE(point_identity(r.results[0]), point_identity(r.results[2]));
  EXPECT_EQ(point_identity(r.results[0]).find("scope"), std::string::npos);  // as before scopes
  ASSERT_EQ(r.knees.size(), 2u);
  EXPECT_EQ(r.knees[0]["scope"], "attention");
  EXPECT_EQ(r.knees[1]["scope"], "layer");
}

TEST_F(LayerStepTest, TheLayerRecordSurvivesTheReport) {
  FakeLayerBackend backend;
  const Report r = run_sweep(backend, config({2}));
  const Report back = report_from_json(to_json(r));
  ASSERT_EQ(back.results.size(), 1u);
  const PointResult& p = back.results[0];
  EXPECT_EQ(p.scope, Scope::layer);
  ASSERT_TRUE(p.layer.has_value());
  EXPECT_EQ(to_json(p), to_json(r.results[0]));
  EXPECT_EQ(back.devices[0].measured.gemm_ceiling_name, r.devices[0].measured.gemm_ceiling_name);
  // An ok layer point without its record is a broken report.
  nlohmann::json j = to_json(r);
  j["results"][0].erase("layer");
  EXPECT_THROW(report_from_json(j), InputError);
}

TEST(CheckGemm, CatchesAnyWrongElementAndNaN) {
  ModelShape m;
  m.name = "t";
  m.num_q_heads = 2, m.num_kv_heads = 1, m.head_dim = 64, m.num_layers = 1;
  m.hidden_size = 64, m.intermediate_size = 96, m.vocab_size = 50;
  const GemmShape g = gemm_shape(m, LayerStage::o_proj, 3);
  PreparedLayer::GemmValues v;
  for (std::int64_t i = 0; i < g.m * g.k; ++i) v.input.push_back(std::sin(0.37f * i));
  std::vector<float> w(static_cast<std::size_t>(g.k));
  for (std::int64_t r = 0; r < g.m; ++r) {
    for (std::int64_t n = 0; n < g.n; ++n) {
      weight_row(5, g, DType::bf16, n, w);
      double acc = 0;
      for (std::int64_t k = 0; k < g.k; ++k) acc += double{v.input[r * g.k + k]} * w[k];
      v.output.push_back(round_to(DType::bf16, static_cast<float>(acc)));
    }
  }
  const GemmCheck good = check_gemm(g, DType::bf16, DType::bf16, 5, v);
  EXPECT_TRUE(good.ok) << good.first_mismatch;
  EXPECT_EQ(good.checked, g.m * g.n);
  EXPECT_FALSE(check_gemm(g, DType::bf16, DType::bf16, /*seed=*/6, v).ok);  // other weights
  auto bad = v;
  bad.output[g.n + 7] *= 1.1f;  // 10 % off, one element
  const GemmCheck caught = check_gemm(g, DType::bf16, DType::bf16, 5, bad);
  EXPECT_FALSE(caught.ok);
  EXPECT_EQ(caught.mismatches, 1);
  EXPECT_NE(caught.first_mismatch.find("row 1 col 7"), std::string::npos) << caught.first_mismatch;
  bad = v;
  bad.output[3] = std::nanf("");
  EXPECT_FALSE(check_gemm(g, DType::bf16, DType::bf16, 5, bad).ok);
  // A subset of columns still checks the first and the last.
  bad = v;
  bad.output[g.n - 1] += 1.0f;
  EXPECT_FALSE(check_gemm(g, DType::bf16, DType::bf16, 5, bad, /*max_cols=*/4).ok);
}

TEST(LayerRoofline, SumsTheStagesRoofs) {
  DeviceInfo d;
  d.measured.read = 1e9;
  d.bandwidth_datasheet = 2e9;
  // One memory-bound stage (1 ms at 1 GB/s) and one compute-bound one (1e9 FLOP at 1e11: 10 ms).
  const StageRoofInput stages[] = {{1e6, 1e3, 1e11}, {1e3, 1e9, 1e11}};
  RooflineInput in;
  in.bytes_min = 1e6 + 1e3;
  in.bytes_logical = in.bytes_min;
  in.batch = 2;
  in.num_layers = 4;
  const RooflineResult r = compute_layer_roofline(stages, in, ComputeCeiling{}, 0.022, d);
  EXPECT_NEAR(r.roofline.t_roof_s, 1e-3 + 1e-2, 1e-12);
  EXPECT_NEAR(r.roofline.fraction_measured, 0.011 / 0.022, 1e-12);
  EXPECT_NEAR(r.roofline.fraction_datasheet, (0.5e-3 + 1e-2) / 0.022, 1e-12);
  EXPECT_EQ(r.roofline.bound, Bound::compute);  // 10 of its 11 ms are FLOP terms
  EXPECT_NEAR(r.tokens_per_s, 2 / (0.022 * 4), 1e-9);
  EXPECT_NEAR(stage_roof_time(stages[0], 1e9), 1e-3, 1e-15);
  // An unknown FLOP roof leaves a stage its bytes.
  EXPECT_NEAR(stage_roof_time({1e3, 1e9, kNotAvailable}, 1e9), 1e-6, 1e-15);
}

}  // namespace
}  // namespace decodebench
