// Knees of the batch curves: where adding sequences stops buying bandwidth.
//
// Definition (written once per report, as "knees_definition" next to "knees"): a series is the set
// of ok points that no self-check flagged (results/self_check.h) sharing (model, kernel as
// requested -- "auto" stays one series even where its choice changes with batch --, kv_dtype,
// q_dtype, block_size, context, hit_rate, prefix_groups), ordered by batch. Its knee is the
// smallest batch whose achieved bandwidth is
// >= kKneeFraction (90 %) of the series' maximum. For a serving engineer that is the smallest
// batch that already gets (nearly) all the bandwidth this kernel can pull at this context: below
// it the GPU is latency-bound and extra sequences are nearly free; above it each added sequence
// costs proportionally more step time. Series with fewer than 2 ok points have no knee.
#pragma once

#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "results/point_result.h"

namespace decodebench {

inline constexpr double kKneeFraction = 0.9;

// The rule itself, for a measured series and a predicted one alike (`decodebench model`):
// `batches` ascending and distinct, `values` (bandwidth, tokens/s) aligned with them. The knee is
// the first batch whose value is >= kKneeFraction of the largest; the plateau is that largest
// value and plateau_batch the first batch reaching it. nullopt below 2 points.
struct Knee {
  int knee_batch = 0;
  double knee_value = 0;
  double plateau = 0;
  int plateau_batch = 0;
};
std::optional<Knee> find_knee(std::span<const int> batches, std::span<const double> values);

// The definition above in words, as the report writes it ("knees_definition").
extern const char* const kKneesDefinition;

// One JSON object per series: {model, kernel, kv_dtype, q_dtype, block_size, context, hit_rate,
// prefix_groups, knee_batch, knee_bandwidth, max_bandwidth, max_batch, batches[], bandwidth[]}.
nlohmann::json compute_knees(std::span<const PointResult> results);

// "auto llama-3.1-8b kv=f16 q=f16 P=16 L=8192 h=0.5 G=1" for one knee object (printers).
std::string knee_series_label(const nlohmann::json& knee);

}  // namespace decodebench
