#include "results/knees.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "results/point_json.h"
#include "results/self_check.h"

namespace decodebench {

using nlohmann::json;

const char* const kKneesDefinition =
    "knee_batch = the smallest batch of the series whose value is >= 90% of the series' "
    "maximum (its plateau); the value is the achieved bandwidth at scope attention and the "
    "model's tokens/s at scope layer (\"metric\"); a series = ok points no self-check flagged, "
    "with equal scope, "
    "model, kernel (as requested, so 'auto' is one series even where its choice changes with "
    "batch), weights dtype (scope layer), kv_dtype, q_dtype, block_size, context, hit_rate and "
    "prefix_groups, ordered by batch";

namespace {

// Series identity; context as (kind, lo, hi); weights dtype "" at scope attention.
using SeriesKey = std::tuple<int, std::string, std::string, std::string, DType, DType, int, int,
                             int, int, double, int>;

SeriesKey series_key(const PointResult& p) {
  const std::string weights = p.layer ? std::string(dtype_name(p.layer->weights_dtype)) : "";
  return {static_cast<int>(p.scope),
          p.model,
          p.kernel_requested,
          weights,
          p.kv_dtype,
          p.q_dtype,
          p.block_size,
          static_cast<int>(p.context.kind),
          p.context.lo,
          p.context.hi,
          p.hit_rate,
          p.prefix_groups};
}

// What a series' knee is read from.
double knee_metric(const PointResult& p) {
  return p.scope == Scope::layer ? p.tokens_per_s : p.bandwidth.achieved;
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
    // A flagged point is no result (self_check.h), as one that is not ok.
    if (!counts_as_result(p) || !available(knee_metric(p))) continue;
    if (p.scope == Scope::layer && !p.layer) continue;
    series[series_key(p)].push_back(&p);
  }
  json knees = json::array();
  for (auto& kv : series) {
    // Not a structured binding: clang before 16 cannot capture one in the lambda below.
    std::vector<const PointResult*>& points = kv.second;
    std::sort(points.begin(), points.end(),
              [](const PointResult* a, const PointResult* b) { return a->batch < b->batch; });
    // Repeated batches in one series (e.g. merged reruns) keep the first.
    points.erase(std::unique(points.begin(), points.end(),
                             [](const PointResult* a, const PointResult* b) {
                               return a->batch == b->batch;
                             }),
                 points.end());
    std::vector<int> batch_list;
    std::vector<double> values;
    for (const PointResult* p : points) {
      batch_list.push_back(p->batch);
      values.push_back(knee_metric(*p));
    }
    const std::optional<Knee> k = find_knee(batch_list, values);
    if (!k) continue;
    const auto at_batch = [&](int b) {
      return *std::find_if(points.begin(), points.end(),
                           [b](const PointResult* p) { return p->batch == b; });
    };
    const PointResult* knee = at_batch(k->knee_batch);
    const PointResult* best = at_batch(k->plateau_batch);
    json batches = json::array();
    json bandwidth = json::array();
    for (const PointResult* p : points) {
      batches.push_back(p->batch);
      bandwidth.push_back(p->bandwidth.achieved);
    }
    const PointResult& first = *points.front();
    json entry = {
        {"scope", scope_name(first.scope)},
        {"metric", first.scope == Scope::layer ? "tokens_per_s" : "bandwidth"},
        {"model", first.model},
        {"kernel", first.kernel_requested},
        {"kv_dtype", dtype_name(first.kv_dtype)},
        {"q_dtype", dtype_name(first.q_dtype)},
        {"block_size", first.block_size},
        {"context", context_to_json(first.context)},
        {"hit_rate", first.hit_rate},
        {"prefix_groups", first.prefix_groups},
        {"knee_batch", knee->batch},
        {"knee_bandwidth", knee->bandwidth.achieved},
        {"max_bandwidth", best->bandwidth.achieved},
        {"max_batch", best->batch},
        {"batches", batches},
        {"bandwidth", bandwidth},
    };
    if (first.scope == Scope::layer) {
      // The plateau in tokens/s, and how the knee's bytes split: what a larger batch still
      // amortizes (weights) against what it adds (KV).
      const LayerRecord& l = *knee->layer;
      const double step_bytes = l.weight_bytes + l.kv_bytes;
      entry["weights_dtype"] = dtype_name(l.weights_dtype);
      entry["plateau_tokens_per_s"] = k->plateau;
      entry["knee_tokens_per_s"] = k->knee_value;
      entry["tokens_per_s"] = values;
      entry["weight_bytes_share_at_knee"] = step_bytes > 0 ? l.weight_bytes / step_bytes : 0.0;
      entry["kv_bytes_share_at_knee"] = step_bytes > 0 ? l.kv_bytes / step_bytes : 0.0;
    }
    knees.push_back(std::move(entry));
  }
  return knees;
}

std::string knee_series_label(const json& knee) {
  // value(): knees are kept as read, so a hand-edited or older entry may lack a key.
  std::string context = "?";
  if (knee.contains("context")) {
    try {
      context = context_label(context_from(JsonIn(knee["context"], "knee", "context")));
    } catch (const InputError&) {
    }
  }
  const std::string scope = knee.value("scope", "attention") == "layer"
                                ? fmt::format("layer w={} ", knee.value("weights_dtype", "?"))
                                : "";
  return fmt::format("{}{} {} kv={} q={} P={} ctx={} h={:g} G={}", scope, knee.value("kernel", "?"),
                     knee.value("model", "?"), knee.value("kv_dtype", "?"),
                     knee.value("q_dtype", "?"), knee.value("block_size", 0), context,
                     knee.value("hit_rate", 0.0), knee.value("prefix_groups", 1));
}

}  // namespace decodebench
