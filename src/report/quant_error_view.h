// `decodebench quant-error`'s result and its views: per KV format, the accuracy measures
// (quant/quant_error.h) per layer and overall, next to the bytes a decode step reads in that
// format and the tokens/s a sweep measured for it in the same run.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "quant/quant_error.h"
#include "report/table.h"

namespace decodebench {

struct QuantFormatResult {
  quant::KvFormat format = quant::KvFormat::f16;
  std::vector<quant::ErrorMeasures> layers;  // QuantErrorResult::layers' order
  quant::ErrorMeasures overall;
  // The speed half, at the sweep's point (model, batch, context).
  double bytes_per_step = 0;  // KV (codes, scales, zeros) + q + out of one attention step
  // batch / (num_layers x bytes_per_step / measured read ceiling): the bandwidth bound
  double tokens_per_s_roof = 0;
  double tokens_per_s = 0;   // measured by the sweep (batch / (step time x layers)); 0: not
  std::string kernel;        // the kernel that ran
  std::string status;        // the sweep table's status with its marks ("ok", "ok*~"); "" no sweep
  std::string not_measured;  // why tokens_per_s is 0 (empty when measured)
};

struct QuantErrorResult {
  std::string data;                 // "gaussian", "outliers" or the directory
  std::vector<std::string> layers;  // case names
  int num_q_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 0;
  // The sweep's point; backend empty when no sweep ran (--no-speed).
  std::string backend, device, model;
  int batch = 0, context = 0, num_layers = 0;
  double read_ceiling_Bps = 0;
  std::vector<QuantFormatResult> formats;
};

// One row per format (overall), or with `per_layer` a row per (format, layer) after it.
Table quant_error_table(const QuantErrorResult& r, bool per_layer);
// The JSON of docs/report-schema.md "quant-error".
nlohmann::json quant_error_json(const QuantErrorResult& r);
// Its reader, strict (every key, unknown keys refused), so `decodebench report` re-prints a
// saved document as the command printed it. InputError naming `source` and the key.
QuantErrorResult quant_error_from_json(const nlohmann::json& j, const std::string& source);
// The lines above and below the table: what the data and the speed point were.
std::string quant_error_header(const QuantErrorResult& r);
std::string quant_error_footer(const QuantErrorResult& r);

}  // namespace decodebench
