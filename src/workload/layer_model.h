// One transformer layer's decode step for the whole batch (sweep scope "layer"): the weight GEMMs
// around the paged attention, their test data and their byte and FLOP model. Written once: the
// backends run these shapes, the harness validates and reports them, `decodebench model` predicts
// from them (docs/design.md "Layer scope").
//
// A GEMM is y[m][n] = sum_k x[m][k] * W[n][k] with W row-major [n][k] (how a checkpoint stores a
// Linear's weight) and m = the batch. The stages, in the order a step runs them:
//   qkv_proj      x [B][hidden]                 -> [B][(Hq + 2 Hkv) d]
//   attention     q [B][Hq][d], the paged KV    -> [B][Hq d]     (the point's rung, as at scope
//                                                                  attention)
//   o_proj        the attention's output        -> [B][hidden]
//   gate_up_proj  o_proj's output               -> [B][2 I]      (gate and up, one fused GEMM)
//   down_proj     the gate half of gate_up's    -> [B][hidden]   (read with row stride 2 I)
// and once per step, after the last layer (timed, reported as its own term, not in the layer):
//   lm_head       down_proj's output            -> [B][vocab]
// What the step leaves out is named in every layer report (kLayerLeftOut).
//
// Dtypes: the weights are the sweep's weights dtype; activations (every GEMM's output, the
// attention's q and output) are the point's q dtype. A GEMM reads its input in the weights
// dtype: with 16-bit weights that is the activation dtype itself (so the two must match,
// layer_support_error), with fp8 weights each input is quantized to fp8 first with the fixed
// per-tensor scale kActivationFp8Scale (a cast the step includes).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "workload/byte_model.h"
#include "workload/scope.h"
#include "workload/workload.h"

namespace decodebench {

enum class LayerStage { qkv_proj, attention, o_proj, gate_up_proj, down_proj, lm_head };
inline constexpr int kNumLayerStages = 6;
inline constexpr std::array<LayerStage, 4> kLayerGemms = {
    LayerStage::qkv_proj, LayerStage::o_proj, LayerStage::gate_up_proj, LayerStage::down_proj};
std::string_view stage_name(LayerStage s);  // "qkv_proj", ...
bool is_gemm(LayerStage s);                 // every stage but attention

// What the step leaves out, for the report: cheap elementwise work next to the bytes it moves.
extern const std::array<std::string_view, 6> kLayerLeftOut;

struct GemmShape {
  LayerStage stage = LayerStage::qkv_proj;
  std::int64_t m = 0;    // rows: the batch
  std::int64_t n = 0;    // output features
  std::int64_t k = 0;    // input features
  std::int64_t lda = 0;  // row stride of the input, elements (k, except down_proj: 2 I)
};
// The shape of `stage` (a GEMM) for `batch` sequences of `m`. Throws std::invalid_argument for
// attention or a model without its layer shape (ModelShape::has_layer_shape).
GemmShape gemm_shape(const ModelShape& m, LayerStage stage, int batch);

// "" when layer scope can run this model with these dtypes; else why not (the model file lacks
// hidden_size / intermediate_size / vocab_size; weights not bf16, f16 or fp8_e4m3; 16-bit
// weights of another type than the q dtype).
// A mixture of experts is refused: the backends run a dense MLP.
std::string layer_support_error(const ModelShape& m, DType weights, DType q_dtype);
// "" when layer_model() can model this model's step: as layer_support_error, but a mixture of
// experts is modeled (its MLP as the experts a batch is expected to read) and an MLA model is
// refused (its projections are not modeled).
std::string layer_model_error(const ModelShape& m, DType weights, DType q_dtype);
// The routed experts a batch of `batch` tokens reads in one MoE layer, expected under uniform
// routing (each token picks experts_per_token distinct experts of num_experts):
// E (1 - (1 - k/E)^B); 0 for a dense model.
double expected_experts_touched(const ModelShape& m, int batch);

// The dtype a GEMM's input is read in: the weights dtype (see the top of this file).
inline DType gemm_input_dtype(DType weights) { return weights; }

// The activations' dtype when none is asked for: 16-bit weights' own type (the only one they
// take), else `otherwise` (fp8 weights take f16 or bf16 activations alike).
inline DType default_activation_dtype(DType weights, DType otherwise) {
  return weights == DType::bf16 || weights == DType::f16 ? weights : otherwise;
}

// --- test data ----------------------------------------------------------------------------
// Counter-generator tensors (kernels/device/counter_rng.h) of the layer, next to Tensor::q/k/v.
// Element i of a weight is counter_normal(seed, tensor, i) * inv_scale, encoded in the weights
// dtype; the value it stands for is the encoded value times `scale`. Weights are N(0, 1/k), so
// every GEMM's outputs stay O(1) through the step.
enum class LayerTensor : std::uint32_t {
  x = 16,  // the step's input [B][hidden], N(0, 1) in the GEMM input dtype
  w_qkv,
  w_o,
  w_gate_up,
  w_down,
  w_lm_head,
};
LayerTensor weight_tensor(LayerStage gemm);  // throws std::invalid_argument for attention

// Fixed per-tensor fp8 scale of the activations a GEMM reads with fp8 weights: stored = value /
// scale, saturating. Activations are O(1) (|x| <= kGeneratorBound for the input), so the
// generator's bound maps to the format's largest value.
extern const float kActivationFp8Scale;

struct TensorScale {
  float inv_scale = 1;  // what the generator's normal is multiplied by before encoding
  float scale = 1;      // what an encoded element is multiplied by to give its value
};
// Weights of `shape` in `weights`: 16-bit: inv_scale 1/sqrt(k), scale 1; fp8: the bound maps to
// the format's largest value (inv_scale fp8_max/kGeneratorBound), scale
// kGeneratorBound/(fp8_max sqrt(k)).
TensorScale weight_scale(const GemmShape& shape, DType weights);
// The input x: 16-bit inv_scale = scale = 1; fp8: inv_scale 1/kActivationFp8Scale, scale
// kActivationFp8Scale.
TensorScale input_scale(DType weights);

// The value element (row n, column kk) of `shape`'s weight stands for, exactly as a backend that
// filled it from the generator holds it (encoded, decoded, times scale): for the harness's
// reference products on a subset.
float weight_value(std::uint64_t seed, const GemmShape& shape, DType weights, std::int64_t n,
                   std::int64_t kk);
// A whole row n of the weight, [k] floats (faster than k weight_value calls).
void weight_row(std::uint64_t seed, const GemmShape& shape, DType weights, std::int64_t n,
                std::span<float> out);

// --- bytes and FLOPs ----------------------------------------------------------------------
struct GemmModel {
  GemmShape shape;
  std::int64_t weight_bytes = 0;  // n k sizeof(weights): read once per step, whatever the batch
  std::int64_t input_bytes = 0;   // m k sizeof(input dtype)
  std::int64_t output_bytes = 0;  // m n sizeof(q dtype)
  double flops = 0;               // 2 m n k
  std::int64_t bytes() const { return weight_bytes + input_bytes + output_bytes; }
};
GemmModel gemm_model(const GemmShape& shape, DType weights, DType activations);

struct LayerModel {
  std::array<GemmModel, 4> gemms;     // in kLayerGemms order
  ByteModel attention;                // byte_model(): KV, q, out, tables of the attention stage
  GemmModel lm_head;                  // once per step, not part of the layer's sums below
  std::int64_t weight_bytes = 0;      // the four GEMMs' weights
  std::int64_t activation_bytes = 0;  // the four GEMMs' inputs and outputs
  std::int64_t bytes_min = 0;         // weight_bytes + activation_bytes + attention.min
  double gemm_flops = 0;              // the four GEMMs
  double flops = 0;                   // gemm_flops + attention.flops
};
// Throws std::invalid_argument where layer_model_error() is not empty. For a mixture of experts
// gate_up_proj and down_proj are the mean layer's expected reads (moe_gemm in layer_model.cpp).
LayerModel layer_model(const WorkloadSpec& spec, const PagedLayout& layout, DType weights);

// Parameters of the model from its shapes: embeddings, every layer's attention and MLP weights,
// the LM head unless tied (norms and biases are not counted: < 0.1 %). The presets' published
// num_params is checked against it.
std::int64_t params_from_shape(const ModelShape& m);
// Bytes of every weight in device memory: num_params (else params_from_shape) x sizeof(weights).
std::int64_t model_weight_bytes(const ModelShape& m, DType weights);

}  // namespace decodebench
