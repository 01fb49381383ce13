// Layer-scope rows: each stage's roofline, the step, its bytes by kind, max batch, and the knee
// of every series.
#include "calculator/layer_calc.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "workload/byte_model.h"

namespace decodebench::calculator {

StageTime stage_time(LayerStage stage, double bytes, double flops, double roof, double bw) {
  StageTime st{stage, bytes, flops, roof};
  const double t_mem = bytes / bw;
  const double t_flop = roof > 0 ? flops / roof : 0.0;
  st.t_s = std::max(t_mem, t_flop);
  st.compute_bound = t_flop > t_mem;
  return st;
}

std::string bound_label(bool gemm, bool attention) {
  if (gemm && attention) return "gemm+attention";
  if (gemm) return "gemm";
  if (attention) return "attention";
  return "memory";
}

std::vector<std::string_view> layer_left_out() {
  std::vector<std::string_view> v(kLayerLeftOut.begin(), kLayerLeftOut.end());
  v.push_back("the embedding lookup (batch rows of the table, not the whole of it)");
  v.push_back("the final RMSNorm and sampling");
  return v;
}

const char* const kLayerKneesDefinition =
    "A series is every row sharing model, KV dtype, context, hit rate and kernel kind, ordered "
    "by batch. Its plateau is the largest predicted tokens/s over the listed batches, its knee "
    "the smallest listed batch reaching 90 % of the plateau: the rule of the sweep's measured "
    "knees (find_knee), here on tokens/s. Series with one batch have no knee.";

namespace {

// One row: the model's step at this point for this kind.
LayerRow layer_row(const LayerModel& lm, const KernelKind& kind, const Roofs& roofs, int batch,
                   int num_layers) {
  const ByteModel& bm = lm.attention;
  const double bw = roofs.sheet.bandwidth;
  const double layers = num_layers;
  LayerRow r;
  r.batch = batch;
  r.num_layers = num_layers;
  r.kernel_kind = kind.name;
  r.prefix_aware = kind.prefix_aware;
  r.attention_compute = kind.compute;
  const double kv_read = static_cast<double>(kind.prefix_aware ? bm.kv_unique : bm.kv_logical);
  const double attn_other = static_cast<double>(bm.min - bm.kv_unique);
  bool gemm_bound = false, attention_bound = false;
  for (std::size_t g = 0, stage = 0; stage < 5; ++stage) {
    if (stage == 1) {
      r.layer_stages.push_back(stage_time(LayerStage::attention, kv_read + attn_other, bm.flops,
                                          roofs.attention_flops(kind.compute), bw));
      attention_bound = r.layer_stages.back().compute_bound;
    } else {
      const GemmModel& gm = lm.gemms[g++];
      r.layer_stages.push_back(stage_time(gm.shape.stage, static_cast<double>(gm.bytes()), gm.flops,
                                          roofs.gemm_flops, bw));
      gemm_bound = gemm_bound || r.layer_stages.back().compute_bound;
    }
    r.t_layer_s += r.layer_stages.back().t_s;
  }
  r.lm_head = stage_time(LayerStage::lm_head, static_cast<double>(lm.lm_head.bytes()),
                         lm.lm_head.flops, roofs.gemm_flops, bw);
  gemm_bound = gemm_bound || r.lm_head.compute_bound;
  r.t_step_s = layers * r.t_layer_s + r.lm_head.t_s;
  r.tokens_per_s = batch / r.t_step_s;
  r.weight_bytes_layer = lm.weight_bytes;
  r.weight_bytes_lm_head = lm.lm_head.weight_bytes;
  r.weight_bytes_step =
      layers * static_cast<double>(lm.weight_bytes) + static_cast<double>(lm.lm_head.weight_bytes);
  r.kv_unique_step = layers * static_cast<double>(bm.kv_unique);
  r.kv_logical_step = layers * static_cast<double>(bm.kv_logical);
  r.kv_streamed_step = layers * kv_read;
  r.activation_bytes_step = layers * (static_cast<double>(lm.activation_bytes) + attn_other) +
                            static_cast<double>(lm.lm_head.input_bytes + lm.lm_head.output_bytes);
  r.bytes_step = r.weight_bytes_step + r.kv_streamed_step + r.activation_bytes_step;
  r.gemm_flops_step = layers * lm.gemm_flops + lm.lm_head.flops;
  r.flops_step = r.gemm_flops_step + layers * bm.flops;
  r.weight_share = r.weight_bytes_step / r.bytes_step;
  r.kv_share = r.kv_streamed_step / r.bytes_step;
  r.bound_by = bound_label(gemm_bound, attention_bound);
  return r;
}

}  // namespace

LayerResult layer_rows(const Request& req, const Roofs& roofs) {
  const Datasheet& device = roofs.sheet;
  const DType weights = req.weights_dtype;
  LayerResult out;
  out.roofs = roofs;
  out.weights_dtype = weights;
  // The activations are the q dtype; 16-bit weights need it to be theirs (layer_model.h).
  out.activation_dtype = req.q_dtype.value_or(is_fp8(weights) ? DType::bf16 : weights);
  out.block_size = req.block_size;
  out.prefix_groups = req.prefix_groups;
  const DType act = out.activation_dtype;
  if (req.weights_bytes && *req.weights_bytes < 0) {
    throw InputError(fmt::format("--weights-bytes must be >= 0 (got {:.0f})", *req.weights_bytes));
  }

  std::vector<ModelShape> shapes;
  for (const std::string& name : req.models) {
    ModelShape m = load_model(name);
    const std::string why = layer_model_error(m, weights, act);
    if (!why.empty()) {
      throw InputError(
          fmt::format("--scope layer: {} (--scope attention needs only the attention "
                      "shape)",
                      why));
    }
    shapes.push_back(std::move(m));
  }

  for (const ModelShape& model : shapes) {
    const double weights_mem =
        req.weights_bytes.value_or(static_cast<double>(model_weight_bytes(model, weights)));
    const double budget = static_cast<double>(device.mem_bytes) - weights_mem;
    if (budget <= 0) {
      out.not_fitting.push_back(
          does_not_fit(model, device, weights, weights_mem, req.weights_bytes.has_value()));
      continue;
    }
    const double workspace = workspace_bytes_per_sequence(model, weights, act);
    for (DType kv : req.kv_dtypes) {
      for (const ContextSpec& ctx : req.contexts) {
        for (double h : req.hit_rates) {
          const std::size_t first_series = out.series.size();
          for (const KernelKind& kind : req.kinds) {
            Series s;
            s.model = model.name;
            s.kv_dtype = std::string(dtype_name(kv));
            s.context = context_label(ctx);
            s.hit_rate = h;
            s.kernel_kind = kind.name;
            out.series.push_back(std::move(s));
          }
          for (int batch : req.batches) {
            const WorkloadSpec spec = point_spec(req, model, kv, act, ctx, h, batch);
            const PagedLayout layout = build_layout(spec);
            const LayerModel lm = layer_model(spec, layout, weights);
            // Windowed layers hold only their window's blocks: per sequence, not per block.
            const KvHeld held =
                kv_held(model, ctx.hi, spec.block_size, lm.attention.kv_bytes_per_token);
            const std::optional<std::int64_t> max_batch = max_batch_in_memory(
                spec, held.full_bytes_per_block, budget, workspace + held.windowed_bytes_per_seq);
            for (std::size_t ki = 0; ki < req.kinds.size(); ++ki) {
              LayerRow r = layer_row(lm, req.kinds[ki], roofs, batch, model.num_layers);
              r.series = first_series + ki;
              r.model = model.name;
              r.attention = model.attention_summary();
              r.experts_read = expected_experts_touched(model, batch);
              r.num_experts = model.num_experts;
              r.experts_per_token = model.experts_per_token;
              r.kv_dtype = std::string(dtype_name(kv));
              r.context = context_label(ctx);
              r.hit_rate = h;
              r.hit_rate_actual = layout.hit_rate_actual;
              r.max_batch = max_batch;
              r.model_weight_bytes_in_memory = weights_mem;
              out.rows.push_back(std::move(r));
            }
          }
        }
      }
    }
  }
  find_knees(out.series, out.rows);
  return out;
}

void find_knees(std::vector<Series>& series, const std::vector<LayerRow>& rows) {
  for (std::size_t i = 0; i < rows.size(); ++i) series[rows[i].series].rows.push_back(i);
  for (Series& s : series) {
    const auto batch_of = [&](std::size_t i) { return rows[i].batch; };
    std::stable_sort(s.rows.begin(), s.rows.end(),
                     [&](std::size_t a, std::size_t b) { return batch_of(a) < batch_of(b); });
    s.rows.erase(
        std::unique(s.rows.begin(), s.rows.end(),
                    [&](std::size_t a, std::size_t b) { return batch_of(a) == batch_of(b); }),
        s.rows.end());
    std::vector<int> bs;
    std::vector<double> tps;
    for (std::size_t i : s.rows) {
      bs.push_back(rows[i].batch);
      tps.push_back(rows[i].tokens_per_s);
    }
    s.knee = find_knee(bs, tps);
    if (!s.knee) continue;
    for (std::size_t i : s.rows) {
      if (rows[i].batch == s.knee->knee_batch) s.at_knee = i;
    }
    s.max_batch = rows[*s.at_knee].max_batch;
  }
}

}  // namespace decodebench::calculator
