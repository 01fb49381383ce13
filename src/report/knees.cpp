#include "report/knees.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "common/dtype.h"

namespace decodebench {

using nlohmann::json;

const char* const kKneesDefinition =
    "knee_batch = the smallest batch of the series whose achieved bandwidth is >= 90% of the "
    "series' maximum achieved bandwidth; a series = ok points with equal model, kernel (as "
    "requested, so 'auto' is one series even where its choice changes with batch), "
    "kv_dtype, q_dtype, block_size, context, hit_rate and prefix_groups, ordered by batch";

namespace {

// Series identity; context as (kind, lo, hi).
using SeriesKey =
    std::tuple<std::string, std::string, DType, DType, int, int, int, int, double, int>;

SeriesKey series_key(const PointResult& p) {
  return {p.model,        p.kernel_requested, p.kv_dtype,
          p.q_dtype,      p.block_size,       static_cast<int>(p.context.kind),
          p.context.lo,   p.context.hi,       p.hit_rate,
          p.prefix_groups};
}

}  // namespace

std::optional<Knee> find_knee(std::span<const int> batches, std::span<const double> values) {
  if (batches.size() != values.size() || batches.size() < 2) return std::nullopt;
  Knee k;
  std::size_t best = 0;
  for (std::size_t i = 1; i < values.size(); ++i) {
    if (values[i] > values[best]) best = i;
  }
  k.plateau = values[best];
  k.plateau_batch = batches[best];
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] >= kKneeFraction * k.plateau) {
      k.knee_batch = batches[i];
      k.knee_value = values[i];
      break;
    }
  }
  return k;
}

json compute_knees(std::span<const PointResult> results) {
  std::map<SeriesKey, std::vector<const PointResult*>> series;
  for (const auto& p : results) {
    if (p.status != PointStatus::ok || !available(p.bandwidth.achieved)) continue;
    series[series_key(p)].push_back(&p);
  }
  json knees = json::array();
  for (auto& [key, points] : series) {
    if (points.size() < 2) continue;
    std::sort(points.begin(), points.end(),
              [](const PointResult* a, const PointResult* b) { return a->batch < b->batch; });
    // Repeated batches in one series (e.g. merged reruns) keep the first.
    points.erase(std::unique(points.begin(), points.end(),
                             [](const PointResult* a, const PointResult* b) {
                               return a->batch == b->batch;
                             }),
                 points.end());
    if (points.size() < 2) continue;
    const PointResult* best = *std::max_element(
        points.begin(), points.end(), [](const PointResult* a, const PointResult* b) {
          return a->bandwidth.achieved < b->bandwidth.achieved;
        });
    const PointResult* knee = nullptr;
    for (const PointResult* p : points) {
      if (p->bandwidth.achieved >= kKneeFraction * best->bandwidth.achieved) {
        knee = p;
        break;
      }
    }
    json batches = json::array();
    json bandwidth = json::array();
    for (const PointResult* p : points) {
      batches.push_back(p->batch);
      bandwidth.push_back(p->bandwidth.achieved);
    }
    const PointResult& first = *points.front();
    json context = first.context.kind == ContextSpec::Kind::fixed
                       ? json{{"kind", "fixed"}, {"values", {first.context.lo}}}
                       : json{{"kind", "ragged"}, {"values", {first.context.lo, first.context.hi}}};
    knees.push_back({
        {"model", first.model},
        {"kernel", first.kernel_requested},
        {"kv_dtype", dtype_name(first.kv_dtype)},
        {"q_dtype", dtype_name(first.q_dtype)},
        {"block_size", first.block_size},
        {"context", context},
        {"hit_rate", first.hit_rate},
        {"prefix_groups", first.prefix_groups},
        {"knee_batch", knee->batch},
        {"knee_bandwidth", knee->bandwidth.achieved},
        {"max_bandwidth", best->bandwidth.achieved},
        {"max_batch", best->batch},
        {"batches", batches},
        {"bandwidth", bandwidth},
    });
  }
  return knees;
}

std::string knee_series_label(const json& knee) {
  // value(): knees are kept as read, so a hand-edited or older entry may lack a key.
  std::string context = "?";
  const json values =
      knee.contains("context") ? knee["context"].value("values", json::array()) : json::array();
  if (values.size() == 1) context = fmt::format("{}", values[0].dump());
  if (values.size() == 2) context = fmt::format("{}:{}", values[0].dump(), values[1].dump());
  return fmt::format("{} {} kv={} q={} P={} L={} h={:g} G={}", knee.value("kernel", "?"),
                     knee.value("model", "?"), knee.value("kv_dtype", "?"),
                     knee.value("q_dtype", "?"), knee.value("block_size", 0), context,
                     knee.value("hit_rate", 0.0), knee.value("prefix_groups", 1));
}

}  // namespace decodebench
