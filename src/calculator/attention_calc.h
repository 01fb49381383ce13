// The calculator at attention scope (`decodebench model --scope attention`): the attention of
// every layer only, as the calculator was before weights (its output is kept as it was, for
// scripts that read it). Per row:
//   bytes/step = what the kind streams, x num_layers: cascade (prefix-aware) the unique KV,
//                byte_model().min; cuda-core, tensor-core (prefix-unaware) the same with the
//                logical KV (every sequence reads its whole context)
//   t_roof     = max(bytes / BW, flops / FLOP_roof), all layers; FLOP_roof: the fp32 FMA peak
//                (cuda-core) or the dense f16 tensor-core peak (tensor-core, cascade); bound:
//                memory, fma or tensor, whichever term is larger
//   tokens/s   = batch / t_roof (attention only)
//   max batch  = largest B whose KV pool (all layers, whole blocks, shared prefix blocks counted
//                once per group) fits device memory minus the weights bytes
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "calculator/request.h"
#include "calculator/roofs.h"

namespace decodebench::calculator {

struct AttentionRow {
  std::string model, device, kv_dtype, context;
  // The model's windows, sinks and soft-cap (ModelShape::attention_summary), "" for none: a
  // windowed layer's bytes are its window's, summed layer by layer.
  std::string attention;
  double hit_rate = 0, hit_rate_actual = 0;
  int batch = 0, num_layers = 0;
  double kv_bytes_per_token_layer = 0, kv_bytes_per_token_all = 0;
  std::string kernel_kind;
  bool prefix_aware = false;
  ComputeUnit compute = ComputeUnit::fma;
  double bytes_step_layer = 0, bytes_step_all = 0;        // unique (byte_model().min), every kind
  double streamed_step_layer = 0, streamed_step_all = 0;  // what this kind reads
  double flops_step_all = 0;
  double intensity = 0;           // flops / the unique bytes (byte_model's), every kind
  double intensity_streamed = 0;  // flops / what this kind reads: the one its bound follows
  double flop_roof = 0;           // FLOP/s of this kind's compute ceiling
  double t_roof_s = 0, tokens_per_s = 0;
  std::string bound_by;  // memory, fma, tensor
  std::optional<std::int64_t> max_batch;
};

// The rows, with what the printers say about them.
struct AttentionResult {
  Roofs roofs;
  DType q_dtype = DType::f16;
  double weights_bytes = 0;  // subtracted from memory for the max batch
  int block_size = 16, prefix_groups = 1;
  std::vector<AttentionRow> rows;  // models x kv dtypes x contexts x hit rates x batches x kinds
};

// InputError for weights bytes outside [0, memory), an unknown model or a bad point.
AttentionResult attention_rows(const Request& req, const Roofs& roofs);

}  // namespace decodebench::calculator
