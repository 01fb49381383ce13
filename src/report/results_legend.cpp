#include "report/results_legend.h"

#include <algorithm>

#include <fmt/format.h>

#include "results/timing_record.h"

namespace decodebench {
namespace {

std::string tokens_legend(const Table& t, ScopesListed scopes) {
  const std::string lm_head =
      shown(t, "tok/s +lm_head") ? "; +lm_head adds the LM head's time once per step" : "";
  if (scopes.layer && scopes.attention) {
    return "tok/s: batch / (step time x layers): the layer's whole step (GEMMs and attention) "
           "at scope layer, attention only at scope attention" +
           lm_head + ".";
  }
  if (scopes.layer) {
    return "tok/s: batch / (step time x layers), the step being one layer's whole decode step "
           "(GEMMs and attention)" +
           lm_head + ".";
  }
  return "tok/s counts attention only: batch / (step time x layers).";
}

}  // namespace

bool shown(const Table& t, std::string_view title) {
  return std::any_of(t.columns.begin(), t.columns.end(),
                     [&](const Table::Column& c) { return c.title == title; });
}

ScopesListed scopes_listed(std::span<const LabelledReport> reports) {
  ScopesListed s;
  for (const LabelledReport& lr : reports) {
    for (const PointResult& p : lr.report->results) {
      (p.scope == Scope::layer ? s.layer : s.attention) = true;
    }
  }
  return s;
}

void add_column_legend(const Table& t, std::vector<std::string>& legend, bool single,
                       ScopesListed scopes) {
  legend.push_back(
      single ? "GB/s unique: the bytes a step must read (shared prefix blocks once, bytes.min) "
               "over the median time; GB/s logical: the same with the KV bytes a prefix-unaware "
               "kernel streams."
             : "GB/s: the bytes a step must read (shared prefix blocks once, bytes.min) over the "
               "median time.");
  if (shown(t, "% busy")) {
    legend.push_back(
        "% busy: how busy the device was over the timed steps, the figure a utilization "
        "dashboard shows (cpu: the CPU time of the process's threads over wall time x the "
        "step's threads; cuda: NVML's GPU utilization, the share of time a kernel ran); busy "
        "beside a low % roof is time spent waiting on memory.");
  }
  if (shown(t, "% roof")) {
    legend.push_back(
        "% roof: the roofline time (against the measured ceilings) over the median time.");
  }
  if (shown(t, "% datasheet")) {
    legend.push_back("% datasheet: the same against the datasheet bandwidth.");
  }
  if (shown(t, "% paired")) {
    legend.push_back(
        "% paired: the same against the read bandwidth measured right before each sample "
        "(cpu).");
  }
  if (shown(t, "bound")) {
    legend.push_back(
        "bound: the lower roof at the measured ceilings: mem (bandwidth), fma (the fp32 FMA "
        "peak) or tc (the tensor-core f16/bf16 peak); a kernel's compute roof is the one of the "
        "units it runs on.");
  }
  if (shown(t, "t weights")) {
    legend.push_back(
        "scope layer: one transformer layer's step (QKV, output and MLP GEMMs around the "
        "attention); GB/s and % roof count its weights, activations and KV, the roof sums each "
        "stage's (its GEMMs against the device line's layer GEMM ceiling, which `bound` then "
        "names fma on a CPU, tc on a GPU); t weights / t kv: "
        "the medians of its GEMM stages summed / of its attention stage; weights % bytes: the "
        "weights' share of weight + KV bytes.");
  }
  legend.push_back(tokens_legend(t, scopes));
  if (shown(t, "W") || shown(t, "J/tok")) {
    legend.push_back(
        "W: the GPU board's mean power over the samples (NVML's energy counter over their span); "
        "J/tok: W / tok/s, the energy per token of what tok/s counts.");
  }
}

// One line per distinct note of the points' busy figures (what is unavailable and why, or a
// caution), naming how many points and the first few indices.
void add_utilization_notes(std::span<const PointResult> points, const std::string& prefix,
                           std::vector<std::string>& legend) {
  std::vector<std::pair<std::string, std::vector<int>>> notes;  // by first appearance
  for (const PointResult& p : points) {
    if (p.status != PointStatus::ok || !p.utilization || p.utilization->note.empty()) continue;
    auto it = std::find_if(notes.begin(), notes.end(),
                           [&](const auto& n) { return n.first == p.utilization->note; });
    if (it == notes.end()) it = notes.insert(notes.end(), {p.utilization->note, {}});
    it->second.push_back(p.index);
  }
  constexpr std::size_t kListed = 8;
  for (const auto& [note, indices] : notes) {
    std::string which;
    for (std::size_t i = 0; i < indices.size() && i < kListed; ++i)
      which += fmt::format("{}{}", i ? ", " : "", indices[i]);
    if (indices.size() > kListed) which += ", ...";
    legend.push_back(fmt::format("{}busy of {} point{} ({}): {}", prefix, indices.size(),
                                 indices.size() == 1 ? "" : "s", which, note));
  }
}

// What made the cold points cold (TimingRecord: docs/design.md "Cold caches on the CPU"): one
// line for the rotated points with their copy counts, one per distinct reason a point was
// flushed instead. Nothing for a report where every cold point was flushed without a reason (a
// backend with no rotation, or a report from before it): the flush is the classic default.
void add_cold_notes(std::span<const PointResult> points, const std::string& prefix,
                    std::vector<std::string>& legend) {
  constexpr std::size_t kListed = 8;
  const auto listed = [&](const std::vector<int>& indices) {
    std::string which;
    for (std::size_t i = 0; i < indices.size() && i < kListed; ++i)
      which += fmt::format("{}{}", i ? ", " : "", indices[i]);
    if (indices.size() > kListed) which += ", ...";
    return fmt::format("{} point{} ({})", indices.size(), indices.size() == 1 ? "" : "s", which);
  };
  std::vector<int> rotated;
  int fewest = 0, most = 0;
  std::vector<std::pair<std::string, std::vector<int>>> flushed;  // by reason, first appearance
  for (const PointResult& p : points) {
    if (p.status != PointStatus::ok || !p.timing) continue;
    const TimingRecord& t = *p.timing;
    if (cold_method(t) == ColdMethod::rotation) {
      fewest = rotated.empty() ? t.rotation_copies : std::min(fewest, t.rotation_copies);
      most = std::max(most, t.rotation_copies);
      rotated.push_back(p.index);
    } else if (cold_method(t) == ColdMethod::flush) {
      auto it = std::find_if(flushed.begin(), flushed.end(),
                             [&](const auto& f) { return f.first == t.flush_reason; });
      if (it == flushed.end()) it = flushed.insert(flushed.end(), {t.flush_reason, {}});
      it->second.push_back(p.index);
    }
  }
  const bool any_reason =
      std::any_of(flushed.begin(), flushed.end(), [](const auto& f) { return !f.first.empty(); });
  if (rotated.empty() && !any_reason) return;
  if (!rotated.empty()) {
    legend.push_back(fmt::format(
        "{}cold by rotation, {}: each sample ran on the next of {} copies of the step's buffers, "
        "no flush; % paired is against a timed read of one copy per sample.",
        prefix, listed(rotated),
        fewest == most ? fmt::format("{}", most) : fmt::format("{} to {}", fewest, most)));
  }
  for (const auto& [reason, indices] : flushed) {
    legend.push_back(fmt::format("{}cold by a cache flush before each sample, {}{}{}", prefix,
                                 listed(indices), reason.empty() ? "" : ": ", reason));
  }
}

// `max_noises`: "0.50%", or side by side "a 0.50%, b 1.00%" where the reports differ.
void add_mark_legend(bool any_timeout, bool any_noisy, bool any_flagged,
                     const std::string& max_noises, bool single, std::vector<std::string>& legend) {
  const auto where = [&](const char* mark) {
    return single ? fmt::format("ok{}", mark) : fmt::format("{} after a median", mark);
  };
  if (any_timeout) {
    legend.push_back(fmt::format(
        "{}: stopped at the timeout before its stopping rule held (its reason names each unmet "
        "condition: samples, measured time or noise).",
        where("*")));
  }
  if (any_noisy) {
    legend.push_back(fmt::format("{}: noise above the max noise ({}).", where("~"), max_noises));
  }
  if (any_flagged) {
    legend.push_back(fmt::format(
        "{}: a self-check flagged it (bandwidth above the device's peak, or a cold flush smaller "
        "than 2x the cache; listed under not ok with its reason): kept as measured, but not a "
        "result, and left out of the knees.",
        where("!")));
  }
}

}  // namespace decodebench
