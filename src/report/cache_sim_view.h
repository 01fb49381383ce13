// `decodebench cache-sim`'s document and its views: the trace's identity, the model's KV bytes
// and each setting's result (trace/cache_sim.h), read back strictly from the JSON document so
// that `decodebench report` re-prints a saved run exactly as cache-sim printed it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/cache_sim.h"

namespace decodebench {

struct CacheSimDocument {
  // The trace (trace_summary_json).
  std::string trace_source, trace_format;
  int block_tokens = 0;
  std::int64_t requests = 0, input_tokens = 0, output_tokens = 0;
  double span_s = 0;
  bool has_prefix_info = false;
  // The model and KV format that turn tokens into FLOPs and bytes.
  std::string model, params_source, kv_dtype;
  double params = 0;
  double kv_bytes_per_token = 0;  // over every layer
  int num_layers = 0;             // 0: a document written before it was recorded
  // A model with windowed layers (0 without): its window, how many layers have it, and the KV
  // bytes per token of each kind of layer (they sum to kv_bytes_per_token).
  int sliding_window = 0, windowed_layers = 0;
  double kv_bytes_per_token_full = 0, kv_bytes_per_token_windowed = 0;
  std::vector<CacheSimResult> settings;
};

CacheSimDocument cache_sim_document(const Trace& trace, const ModelShape& model, DType kv_dtype,
                                    const std::vector<CacheSimResult>& results);

// The document's "cache_sim" section read back (docs/report-schema.md "cache_sim"); InputError
// naming `source` and the key for anything missing, mistyped or unknown.
CacheSimDocument cache_sim_from_json(const nlohmann::json& cache_sim, const std::string& source);

// The views: the table cache-sim prints (header lines, the table, each link's trade), as text
// or Markdown, and its CSV.
std::string cache_sim_table_text(const CacheSimDocument& d, bool markdown = false);
std::string cache_sim_csv_text(const std::vector<CacheSimResult>& results);

}  // namespace decodebench
