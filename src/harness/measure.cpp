#include "harness/measure.h"

#include <chrono>
#include <numeric>

#include <fmt/format.h>

#include "common/errors.h"
#include "harness/stats.h"

namespace decodebench {

double steady_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

namespace {

void check_options(const MeasureOptions& opt) {
  if (opt.min_samples < 1) {
    throw InputError(fmt::format("min_samples must be >= 1, got {}", opt.min_samples));
  }
  if (!(opt.min_time_s >= 0)) {
    throw InputError(fmt::format("min_time_s must be >= 0, got {}", opt.min_time_s));
  }
  if (!(opt.max_noise >= 0)) {
    throw InputError(
        fmt::format("max_noise must be >= 0 (e.g. 0.005 = 0.5 %), got {}", opt.max_noise));
  }
  if (!(opt.timeout_s > 0)) {
    throw InputError(fmt::format("timeout_s must be > 0, got {}", opt.timeout_s));
  }
}

}  // namespace

StopReason stop_reason(std::span<const double> samples, const MeasureOptions& opt,
                       double wall_elapsed_s) {
  if (samples.empty()) return StopReason::not_yet;
  const int n = static_cast<int>(samples.size());
  const double measured = std::accumulate(samples.begin(), samples.end(), 0.0);
  if (n >= opt.min_samples && measured >= opt.min_time_s) {
    // With a single sample there is no noise estimate; min_samples = 1 means "don't care".
    const SampleStats st = summarize(samples);
    const bool quiet = n == 1 ? opt.min_samples == 1 : st.rel_noise <= opt.max_noise;
    if (quiet) return StopReason::converged;
  }
  if (wall_elapsed_s >= opt.timeout_s) return StopReason::timeout;
  return StopReason::not_yet;
}

std::vector<std::string> unmet_conditions(std::span<const double> samples,
                                          const MeasureOptions& opt) {
  std::vector<std::string> unmet;
  const int n = static_cast<int>(samples.size());
  if (n < opt.min_samples)
    unmet.push_back(fmt::format("{} samples (asked >= {})", n, opt.min_samples));
  const double measured = std::accumulate(samples.begin(), samples.end(), 0.0);
  if (measured < opt.min_time_s) {
    unmet.push_back(fmt::format("{:.3g} s measured (asked >= {:g} s)", measured, opt.min_time_s));
  }
  // One sample has no noise estimate; stop_reason then asks only for min_samples = 1.
  if (n >= 2) {
    const double noise = summarize(samples).rel_noise;
    if (!(noise <= opt.max_noise)) {
      unmet.push_back(
          fmt::format("noise {:.2f}% (asked <= {:.2f}%)", 100 * noise, 100 * opt.max_noise));
    }
  }
  return unmet;
}

std::vector<double> measure(PreparedPoint& point, const MeasureOptions& opt,
                            const std::atomic<bool>* stop) {
  return measure(point, opt, steady_seconds, stop);
}

std::vector<double> measure(PreparedPoint& point, const MeasureOptions& opt, const WallClock& now,
                            const std::atomic<bool>* stop) {
  check_options(opt);
  const auto poll = [stop] {
    if (stop && stop->load()) throw Interrupted();
  };
  poll();
  point.run();  // warm-up: first-touch page faults, instruction cache, lazy module loading
  std::vector<double> samples;
  point.begin_utilization();
  const double start = now();
  // Recomputing the statistics after every sample is O(n log n) per sample; fine for the few
  // thousand samples a 10 s timeout allows for the shortest steps.
  for (;;) {
    poll();
    samples.push_back(point.time_one());
    if (stop_reason(samples, opt, now() - start) != StopReason::not_yet) break;
  }
  point.end_utilization();
  return samples;
}

}  // namespace decodebench
