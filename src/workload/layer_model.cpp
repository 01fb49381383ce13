#include "workload/layer_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "common/dtype.h"
#include "device/counter_rng.h"

namespace decodebench {

std::string_view stage_name(LayerStage s) {
  switch (s) {
    case LayerStage::qkv_proj: return "qkv_proj";
    case LayerStage::attention: return "attention";
    case LayerStage::o_proj: return "o_proj";
    case LayerStage::gate_up_proj: return "gate_up_proj";
    case LayerStage::down_proj: return "down_proj";
    case LayerStage::lm_head: return "lm_head";
  }
  return "?";
}

bool is_gemm(LayerStage s) { return s != LayerStage::attention; }

const std::array<std::string_view, 6> kLayerLeftOut = {
    "input RMSNorm",
    "rotary embedding of q and k",
    "appending this step's K and V to the cache (the attention reads the workload's q and KV, "
    "not qkv_proj's output: the same bytes)",
    "residual adds",
    "post-attention RMSNorm",
    "SiLU(gate) * up (down_proj reads the gate half of gate_up_proj's output)",
};

const float kActivationFp8Scale = kGeneratorBound / 448.0f;

GemmShape gemm_shape(const ModelShape& m, LayerStage stage, int batch) {
  if (!m.has_layer_shape()) {
    throw std::invalid_argument(fmt::format("model {} has no layer shape", m.name));
  }
  const std::int64_t hidden = m.hidden_size;
  const std::int64_t q_dim = std::int64_t{m.num_q_heads} * m.head_dim;
  const std::int64_t kv_dim = std::int64_t{m.num_kv_heads} * m.head_dim;
  const std::int64_t inter = m.intermediate_size;
  GemmShape g;
  g.stage = stage;
  g.m = batch;
  switch (stage) {
    case LayerStage::qkv_proj: g.n = q_dim + 2 * kv_dim, g.k = hidden; break;
    case LayerStage::o_proj: g.n = hidden, g.k = q_dim; break;
    case LayerStage::gate_up_proj: g.n = 2 * inter, g.k = hidden; break;
    case LayerStage::down_proj: g.n = hidden, g.k = inter; break;
    case LayerStage::lm_head: g.n = m.vocab_size, g.k = hidden; break;
    case LayerStage::attention: throw std::invalid_argument("attention is not a GEMM");
  }
  g.lda = stage == LayerStage::down_proj ? 2 * inter : g.k;
  return g;
}

namespace {

// What both the measured layer step and the modeled one need: the layer shape and dtypes the
// GEMMs take.
std::string layer_dtype_error(const ModelShape& m, DType weights, DType q_dtype);

}  // namespace

std::string layer_support_error(const ModelShape& m, DType weights, DType q_dtype) {
  if (m.is_moe() && m.has_layer_shape()) {
    // The backends' layer step runs one dense MLP; a batch's experts depend on routing.
    return fmt::format(
        "model {} is a mixture of experts ({} experts, {} per token): the measured layer step "
        "runs a dense MLP, and which experts a batch reads depends on routing (scope attention "
        "runs it; `decodebench model --scope layer` models it under uniform routing)",
        m.name, m.num_experts, m.experts_per_token);
  }
  return layer_dtype_error(m, weights, q_dtype);
}

std::string layer_model_error(const ModelShape& m, DType weights, DType q_dtype) {
  if (m.is_mla() && m.has_layer_shape()) {
    return fmt::format(
        "model {} uses MLA: its layer step (DeepSeek's low-rank projections, the up-projections "
        "absorbed into q and the output) is not modeled (scope attention models it)",
        m.name);
  }
  return layer_dtype_error(m, weights, q_dtype);
}

double expected_experts_touched(const ModelShape& m, int batch) {
  if (!m.is_moe() || batch <= 0) return 0;
  const double e = m.num_experts, k = std::min(m.experts_per_token, m.num_experts);
  return e * (1.0 - std::pow(1.0 - k / e, batch));
}

namespace {

std::string layer_dtype_error(const ModelShape& m, DType weights, DType q_dtype) {
  if (!m.has_layer_shape()) {
    return fmt::format(
        "model {} gives no layer shape: layer scope needs hidden_size, intermediate_size and "
        "vocab_size in its model file (the presets in configs/models have them)",
        m.name);
  }
  if (weights != DType::bf16 && weights != DType::f16 && weights != DType::fp8_e4m3) {
    return fmt::format("weights dtype must be bf16, f16 or fp8_e4m3, got {}", dtype_name(weights));
  }
  if (!is_fp8(weights) && weights != q_dtype) {
    return fmt::format(
        "{} weights need {} activations: a GEMM reads its input in the weights' type, and the "
        "q dtype ({}) is the activations' (set --q-dtype {})",
        dtype_name(weights), dtype_name(weights), dtype_name(q_dtype), dtype_name(weights));
  }
  return "";
}

}  // namespace

LayerTensor weight_tensor(LayerStage gemm) {
  switch (gemm) {
    case LayerStage::qkv_proj: return LayerTensor::w_qkv;
    case LayerStage::o_proj: return LayerTensor::w_o;
    case LayerStage::gate_up_proj: return LayerTensor::w_gate_up;
    case LayerStage::down_proj: return LayerTensor::w_down;
    case LayerStage::lm_head: return LayerTensor::w_lm_head;
    case LayerStage::attention: break;
  }
  throw std::invalid_argument("attention has no weight");
}

TensorScale weight_scale(const GemmShape& shape, DType weights) {
  const float inv_sqrt_k = 1.0f / std::sqrt(static_cast<float>(shape.k));
  if (!is_fp8(weights)) return {inv_sqrt_k, 1.0f};
  const float fmax = fp8_max(weights);
  return {fmax / kGeneratorBound, kGeneratorBound / fmax * inv_sqrt_k};
}

TensorScale input_scale(DType weights) {
  if (!is_fp8(weights)) return {1.0f, 1.0f};
  return {1.0f / kActivationFp8Scale, kActivationFp8Scale};
}

float weight_value(std::uint64_t seed, const GemmShape& shape, DType weights, std::int64_t n,
                   std::int64_t kk) {
  const TensorScale s = weight_scale(shape, weights);
  const auto tensor = static_cast<std::uint32_t>(weight_tensor(shape.stage));
  const float raw = counter_normal(seed, tensor, static_cast<std::uint64_t>(n * shape.k + kk));
  std::byte enc[4];
  encode_value(weights, raw * s.inv_scale, enc);
  return decode_value(weights, enc) * s.scale;
}

void weight_row(std::uint64_t seed, const GemmShape& shape, DType weights, std::int64_t n,
                std::span<float> out) {
  if (static_cast<std::int64_t>(out.size()) != shape.k) {
    throw std::invalid_argument(
        fmt::format("weight_row: {} floats for k = {}", out.size(), shape.k));
  }
  for (std::int64_t kk = 0; kk < shape.k; ++kk) out[kk] = weight_value(seed, shape, weights, n, kk);
}

GemmModel gemm_model(const GemmShape& shape, DType weights, DType activations) {
  GemmModel g;
  g.shape = shape;
  g.weight_bytes = shape.n * shape.k * static_cast<std::int64_t>(dtype_size(weights));
  g.input_bytes =
      shape.m * shape.k * static_cast<std::int64_t>(dtype_size(gemm_input_dtype(weights)));
  g.output_bytes = shape.m * shape.n * static_cast<std::int64_t>(dtype_size(activations));
  g.flops = 2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) *
            static_cast<double>(shape.k);
  return g;
}

namespace {

// An MoE layer's MLP stage (gate_up_proj or down_proj) for `rows` tokens, the mean over the
// model's layers (its first_dense_layers have a dense MLP of dense_intermediate_size): the
// weights of the routed experts the batch is expected to read (expected_experts_touched) and of
// the shared ones, each token's row through its experts_per_token routed and every shared
// expert, and in gate_up_proj the router (hidden x num_experts, in the weights dtype). The
// shape is one expert's over all rows.
GemmModel moe_gemm(const ModelShape& m, LayerStage stage, int rows, DType weights, DType act) {
  const GemmModel one = gemm_model(gemm_shape(m, stage, rows), weights, act);
  const double shared = m.shared_experts;
  const double visits = std::min(m.experts_per_token, m.num_experts) + shared;  // per token
  const double read = expected_experts_touched(m, rows) + shared;
  double weight = read * static_cast<double>(one.weight_bytes);
  double in = visits * static_cast<double>(one.input_bytes);
  double out = visits * static_cast<double>(one.output_bytes);
  double flops = visits * one.flops;
  if (stage == LayerStage::gate_up_proj) {
    GemmShape router{LayerStage::gate_up_proj, rows, m.num_experts, m.hidden_size};
    const GemmModel r = gemm_model(router, weights, act);
    weight += static_cast<double>(r.weight_bytes);
    out += static_cast<double>(r.output_bytes);  // the input is the experts' own x
    flops += r.flops;
  }
  const int dense_layers = std::clamp(m.first_dense_layers, 0, m.num_layers);
  if (dense_layers > 0 && m.dense_intermediate_size > 0) {
    ModelShape dense_model = m;
    dense_model.intermediate_size = m.dense_intermediate_size;
    const GemmModel dense = gemm_model(gemm_shape(dense_model, stage, rows), weights, act);
    const double moe_share = static_cast<double>(m.num_layers - dense_layers) / m.num_layers;
    const double dense_share = 1.0 - moe_share;
    weight = moe_share * weight + dense_share * static_cast<double>(dense.weight_bytes);
    in = moe_share * in + dense_share * static_cast<double>(dense.input_bytes);
    out = moe_share * out + dense_share * static_cast<double>(dense.output_bytes);
    flops = moe_share * flops + dense_share * dense.flops;
  }
  GemmModel g = one;
  g.weight_bytes = std::llround(weight);
  g.input_bytes = std::llround(in);
  g.output_bytes = std::llround(out);
  g.flops = flops;
  return g;
}

}  // namespace

LayerModel layer_model(const WorkloadSpec& spec, const PagedLayout& layout, DType weights) {
  const std::string why = layer_model_error(spec.model, weights, spec.q_dtype);
  if (!why.empty()) throw std::invalid_argument(why);
  const int rows = static_cast<int>(layout.context_lens.size());
  LayerModel lm;
  lm.attention = byte_model(spec, layout);
  for (std::size_t i = 0; i < kLayerGemms.size(); ++i) {
    const LayerStage stage = kLayerGemms[i];
    const bool mlp = stage == LayerStage::gate_up_proj || stage == LayerStage::down_proj;
    lm.gemms[i] = mlp && spec.model.is_moe()
                      ? moe_gemm(spec.model, stage, rows, weights, spec.q_dtype)
                      : gemm_model(gemm_shape(spec.model, stage, rows), weights, spec.q_dtype);
    lm.weight_bytes += lm.gemms[i].weight_bytes;
    lm.activation_bytes += lm.gemms[i].input_bytes + lm.gemms[i].output_bytes;
    lm.gemm_flops += lm.gemms[i].flops;
  }
  lm.lm_head = gemm_model(gemm_shape(spec.model, LayerStage::lm_head, rows), weights, spec.q_dtype);
  lm.bytes_min = lm.weight_bytes + lm.activation_bytes + lm.attention.min;
  lm.flops = lm.gemm_flops + lm.attention.flops;
  return lm;
}

std::int64_t params_from_shape(const ModelShape& m) {
  if (!m.has_layer_shape()) return 0;
  const std::int64_t hidden = m.hidden_size;
  std::int64_t attention = 0;  // one layer's projections
  if (m.is_mla()) {
    // DeepSeek's MLA: q (through q_lora_rank when given), the latent and RoPE key from hidden,
    // the latent's up-projection to every head's no-RoPE key and value, and the output.
    const std::int64_t hq = m.num_q_heads, qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    attention =
        (m.q_lora_rank > 0 ? hidden * m.q_lora_rank + m.q_lora_rank * hq * qk : hidden * hq * qk) +
        hidden * (m.kv_lora_rank + m.qk_rope_head_dim) +
        std::int64_t{m.kv_lora_rank} * hq * (m.qk_nope_head_dim + m.v_head_dim) +
        hq * m.v_head_dim * hidden;
  } else {
    for (LayerStage s : {LayerStage::qkv_proj, LayerStage::o_proj}) {
      const GemmShape g = gemm_shape(m, s, 1);
      attention += g.n * g.k;
    }
  }
  // gate, up and down: 3 x hidden x I per MLP. Every expert (routed and shared) is a copy; the
  // router is one hidden x num_experts matrix; the first first_dense_layers have a dense MLP.
  const std::int64_t mlp = 3 * hidden * m.intermediate_size;
  const std::int64_t moe_layer =
      m.is_moe() ? mlp * (m.num_experts + m.shared_experts) + hidden * m.num_experts : mlp;
  const std::int64_t dense_layers = m.is_moe() ? m.first_dense_layers : 0;
  const std::int64_t layers = attention * m.num_layers +
                              dense_layers * 3 * hidden * m.dense_intermediate_size +
                              (m.num_layers - dense_layers) * moe_layer;
  const std::int64_t embed = std::int64_t{m.vocab_size} * hidden;
  return embed + layers + (m.tie_word_embeddings ? 0 : embed);
}

std::int64_t model_weight_bytes(const ModelShape& m, DType weights) {
  const std::int64_t params = m.num_params > 0 ? m.num_params : params_from_shape(m);
  return params * static_cast<std::int64_t>(dtype_size(weights));
}

}  // namespace decodebench
