// The calculator at layer scope (`decodebench model`, the default): the whole decode step of the
// model, its series over batch and their knees.
//   stages    = per layer qkv_proj, attention, o_proj, gate_up_proj, down_proj; the lm_head
//               once per step
//   t_stage   = max(bytes / BW, flops / roof): GEMMs against the GEMM roof (the dense tensor-core
//               peak of the weights dtype; a report's measured GEMM peak), attention against its
//               kind's roof and reading its kind's KV bytes
//   t_step    = num_layers x sum of the layer's t_stage + t_lm_head
//   tokens/s  = batch / t_step
//   knee      = per series (every row but batch) find_knee() over the listed batches
//   max batch = largest B with all weights once + the KV pool of all layers + the activations of
//               B sequences <= device memory
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calculator/memory_fit.h"
#include "calculator/request.h"
#include "calculator/roofs.h"
#include "results/knees.h"  // Knee, find_knee
#include "workload/layer_model.h"

namespace decodebench::calculator {

// One stage's roofline: max(bytes / bandwidth, flops / flop_roof).
struct StageTime {
  LayerStage stage = LayerStage::qkv_proj;
  double bytes = 0, flops = 0, flop_roof = 0, t_s = 0;
  bool compute_bound = false;  // the FLOP term wins
};
StageTime stage_time(LayerStage stage, double bytes, double flops, double roof, double bw);

struct LayerRow {
  std::size_t series = 0;  // index into LayerResult::series
  std::string model, kv_dtype, context, kernel_kind;
  std::string attention;  // ModelShape::attention_summary, "" for none (as AttentionRow's)
  // A mixture of experts: the routed experts a layer reads at this batch, expected under
  // uniform routing (expected_experts_touched), of num_experts; both 0 for a dense model.
  double experts_read = 0;
  int num_experts = 0, experts_per_token = 0;
  double hit_rate = 0, hit_rate_actual = 0;
  int batch = 0, num_layers = 0;
  bool prefix_aware = false;
  ComputeUnit attention_compute = ComputeUnit::fma;
  std::int64_t weight_bytes_layer = 0, weight_bytes_lm_head = 0;
  double weight_bytes_step = 0;  // all layers + the LM head once
  double kv_unique_step = 0, kv_logical_step = 0, kv_streamed_step = 0;  // all layers
  double activation_bytes_step = 0;  // GEMM inputs and outputs, q, out, tables
  double bytes_step = 0;             // weights + KV streamed + activations
  double flops_step = 0, gemm_flops_step = 0;
  std::vector<StageTime> layer_stages;  // one layer, in run order
  StageTime lm_head;
  double t_layer_s = 0, t_step_s = 0, tokens_per_s = 0;
  double weight_share = 0, kv_share = 0;  // of bytes_step
  std::string bound_by;                   // memory, gemm, attention, gemm+attention
  std::optional<std::int64_t> max_batch;
  double model_weight_bytes_in_memory = 0;
  bool fits() const { return !max_batch || batch <= *max_batch; }
};

// Every row sharing model, KV dtype, context, hit rate and kernel kind.
struct Series {
  std::string model, kv_dtype, context, kernel_kind;
  double hit_rate = 0;
  std::vector<std::size_t> rows;  // into LayerResult::rows: ascending batch, distinct
  std::optional<Knee> knee;
  std::optional<std::size_t> at_knee;     // the row at the knee's batch
  std::optional<std::int64_t> max_batch;  // of the series' knee row
};

struct LayerResult {
  Roofs roofs;
  DType weights_dtype = DType::bf16, activation_dtype = DType::bf16;
  int block_size = 16, prefix_groups = 1;
  std::vector<LayerRow> rows;  // models x kv dtypes x contexts x hit rates x batches x kinds
  std::vector<Series> series;  // per model x kv dtype x context x hit rate x kind
  std::vector<DoesNotFit> not_fitting;  // models without rows
};

// InputError for negative weights bytes, a model without its layer shape or with dtypes layer
// scope cannot run, or a bad point.
LayerResult layer_rows(const Request& req, const Roofs& roofs);

// Fills each series' rows (ascending distinct batches, from each row's `series`), knee, row at
// the knee and max batch. The series' rows must be empty.
void find_knees(std::vector<Series>& series, const std::vector<LayerRow>& rows);

// memory, gemm, attention or gemm+attention: which stages' FLOP term wins.
std::string bound_label(bool gemm, bool attention);

// What the step leaves out: the layer's (kLayerLeftOut) and the model's ends.
std::vector<std::string_view> layer_left_out();

// The knees' rule in words (JSON "knees_definition").
extern const char* const kLayerKneesDefinition;

}  // namespace decodebench::calculator
