#include "harness/layer_step.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "harness/roofline.h"
#include "harness/stats.h"

namespace decodebench {

namespace {

// Output columns to check: `max_cols` evenly spaced ones, the first and the last included.
std::vector<std::int64_t> check_columns(std::int64_t n, int max_cols) {
  std::vector<std::int64_t> cols;
  if (n <= max_cols || max_cols < 2) {
    for (std::int64_t c = 0; c < n; ++c) cols.push_back(c);
    return cols;
  }
  for (int i = 0; i < max_cols; ++i) cols.push_back(i * (n - 1) / (max_cols - 1));
  cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
  return cols;
}

double gemm_rtol(DType out) { return out == DType::f16 ? 0x1p-10 : 0x1p-7; }

StageRecord& stage_of(PointResult& r, LayerStage s) {
  return r.layer->stages.at(static_cast<std::size_t>(s));
}

}  // namespace

void describe_layer(const WorkloadSpec& spec, const PagedLayout& layout, DType weights,
                    PointResult& r) {
  const std::string why = layer_support_error(spec.model, weights, spec.q_dtype);
  if (!why.empty()) throw InputError(why);
  const LayerModel lm = layer_model(spec, layout, weights);
  r.bytes.kv_logical = static_cast<double>(lm.attention.kv_logical);
  r.bytes.kv_unique = static_cast<double>(lm.attention.kv_unique);
  r.bytes.min = static_cast<double>(lm.bytes_min);
  r.flops = lm.flops;
  r.arithmetic_intensity = r.bytes.min > 0 ? r.flops / r.bytes.min : 0;
  LayerRecord l;
  l.weights_dtype = weights;
  l.left_out.assign(kLayerLeftOut.begin(), kLayerLeftOut.end());
  l.weight_bytes = static_cast<double>(lm.weight_bytes);
  l.kv_bytes = static_cast<double>(lm.attention.kv_unique);
  l.activation_bytes = static_cast<double>(lm.activation_bytes);
  l.gemm_flops = lm.gemm_flops;
  l.attention_flops = lm.attention.flops;
  l.stages.resize(kNumLayerStages);
  const auto fill_gemm = [&](const GemmModel& g) {
    StageRecord& st = l.stages.at(static_cast<std::size_t>(g.shape.stage));
    st.m = g.shape.m, st.n = g.shape.n, st.k = g.shape.k;
    st.bytes = static_cast<double>(g.bytes());
    st.flops = g.flops;
  };
  for (const GemmModel& g : lm.gemms) fill_gemm(g);
  fill_gemm(lm.lm_head);
  StageRecord& att = l.stages.at(static_cast<std::size_t>(LayerStage::attention));
  att.bytes = static_cast<double>(lm.attention.min);
  att.flops = lm.attention.flops;
  for (int s = 0; s < kNumLayerStages; ++s) {
    l.stages[static_cast<std::size_t>(s)].name = stage_name(static_cast<LayerStage>(s));
  }
  r.layer = std::move(l);
}

GemmCheck check_gemm(const GemmShape& shape, DType weights, DType out_dtype, std::uint64_t seed,
                     const PreparedLayer::GemmValues& values, int max_cols) {
  if (shape.m <= 0 || values.input.size() % static_cast<std::size_t>(shape.k) != 0) {
    throw std::logic_error(fmt::format("{}: {} input values for k = {}", stage_name(shape.stage),
                                       values.input.size(), shape.k));
  }
  const std::size_t rows = values.input.size() / static_cast<std::size_t>(shape.k);
  if (values.output.size() != rows * static_cast<std::size_t>(shape.n)) {
    throw std::logic_error(fmt::format("{}: {} output values for {} rows x n = {}",
                                       stage_name(shape.stage), values.output.size(), rows,
                                       shape.n));
  }
  const std::vector<std::int64_t> cols = check_columns(shape.n, max_cols);
  std::vector<double> ref(rows * cols.size());
  std::vector<float> w(static_cast<std::size_t>(shape.k));
  for (std::size_t c = 0; c < cols.size(); ++c) {
    weight_row(seed, shape, weights, cols[c], w);
    for (std::size_t row = 0; row < rows; ++row) {
      const float* x = values.input.data() + row * static_cast<std::size_t>(shape.k);
      double acc = 0;
      for (std::int64_t kk = 0; kk < shape.k; ++kk) acc += double{x[kk]} * double{w[kk]};
      ref[row * cols.size() + c] = acc;
    }
  }
  double sq = 0;
  for (double v : ref) sq += v * v;
  const double rms = ref.empty() ? 0 : std::sqrt(sq / static_cast<double>(ref.size()));
  const double rtol = gemm_rtol(out_dtype);
  GemmCheck out;
  for (std::size_t row = 0; row < rows; ++row) {
    for (std::size_t c = 0; c < cols.size(); ++c) {
      const double want = ref[row * cols.size() + c];
      const double got =
          values
              .output[row * static_cast<std::size_t>(shape.n) + static_cast<std::size_t>(cols[c])];
      const double err = std::abs(got - want);
      const double rel = err / (std::abs(want) + rms);
      ++out.checked;
      if (!(rel <= rtol)) {  // NaN fails
        if (out.mismatches++ == 0) {
          out.first_mismatch =
              fmt::format("row {} col {}: got {:g}, ref {:g}", row, cols[c], got, want);
        }
        out.ok = false;
      }
      if (std::isnan(rel) || rel > out.max_rel) out.max_rel = std::isnan(rel) ? NAN : rel;
    }
  }
  return out;
}

bool validate_gemms(PreparedLayer& prepared, const WorkloadSpec& spec, DType weights,
                    std::span<const int> rows, PointResult& r) {
  std::vector<LayerStage> gemms(kLayerGemms.begin(), kLayerGemms.end());
  gemms.push_back(LayerStage::lm_head);
  for (LayerStage s : gemms) {
    const GemmShape shape = gemm_shape(spec.model, s, spec.batch);
    const GemmCheck check =
        check_gemm(shape, weights, spec.q_dtype, spec.seed, prepared.gemm_values(s, rows));
    stage_of(r, s).max_rel_error = check.max_rel;
    if (check.ok) continue;
    r.status = PointStatus::wrong;
    r.reason = fmt::format(
        "{} ({} x {} x {}): {} of {} checked elements outside |out - ref| <= {:g} * (|ref| + "
        "rms) ({} of {} sequences checked): {}",
        stage_name(s), shape.m, shape.n, shape.k, check.mismatches, check.checked,
        gemm_rtol(spec.q_dtype), rows.size(), spec.batch, check.first_mismatch);
    return false;
  }
  return true;
}

void finish_layer(const PreparedLayer& prepared, const DeviceInfo& device,
                  ComputeUnit attention_unit, double paired_read_Bps, PointResult& r) {
  LayerRecord& l = *r.layer;
  l.gemm_library = prepared.gemm_library();
  const std::vector<std::vector<double>> samples = prepared.stage_samples();
  if (samples.size() != static_cast<std::size_t>(kNumLayerStages)) {
    throw std::logic_error(
        fmt::format("{} stage sample lists, expected {}", samples.size(), kNumLayerStages));
  }
  ComputeCeiling gemm;
  gemm.unit = device.backend == "cpu" ? ComputeUnit::fma : ComputeUnit::tensor_core;
  gemm.name = device.measured.gemm_ceiling_name.empty() ? "GEMM (unknown)"
                                                        : device.measured.gemm_ceiling_name;
  if (device.measured.gemm_flops > 0) gemm.flops = device.measured.gemm_flops;
  l.gemm_ceiling = gemm;
  const ComputeCeiling att_roof = compute_ceiling(device, attention_unit);
  const double bw = measured_bandwidth_roof(device.measured);
  std::vector<StageRoofInput> layer_stages;
  l.time_weights_s = 0;
  for (int s = 0; s < kNumLayerStages; ++s) {
    const auto stage = static_cast<LayerStage>(s);
    StageRecord& st = stage_of(r, stage);
    st.time_s = summarize(samples[static_cast<std::size_t>(s)]);
    const StageRoofInput in{st.bytes, st.flops,
                            stage == LayerStage::attention ? att_roof.flops : gemm.flops};
    st.t_roof_s = stage_roof_time(in, bw);
    if (stage == LayerStage::lm_head) continue;
    layer_stages.push_back(in);
    if (stage == LayerStage::attention) {
      l.time_kv_s = st.time_s.median;
    } else {
      l.time_weights_s += st.time_s.median;
    }
  }
  RooflineInput in;
  in.bytes_min = r.bytes.min;
  in.bytes_logical = r.bytes.min - r.bytes.kv_unique + r.bytes.kv_logical;
  in.flops = r.flops;
  in.batch = r.batch;
  in.num_layers = r.num_layers;
  const RooflineResult roof =
      compute_layer_roofline(layer_stages, in, gemm, r.time_s.median, device, paired_read_Bps);
  r.bandwidth = roof.bandwidth;
  r.roofline = roof.roofline;
  r.tokens_per_s = roof.tokens_per_s;
  const double lm_head = stage_of(r, LayerStage::lm_head).time_s.median;
  if (r.num_layers > 0 && available(lm_head)) {
    l.tokens_per_s_with_lm_head = r.batch / (r.time_s.median * r.num_layers + lm_head);
  }
}

}  // namespace decodebench
