// The measurement loop (docs/design.md "Timing"): one strategy for every backend, the backend's
// PreparedPoint::time_one() supplies one sample of one step (CUDA events around every launch of
// the step with the L2 flushed before, or around N warm steps back to back divided by N; a
// steady clock on the CPU) and PreparedPoint::timing() says which.
#pragma once

#include <atomic>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "harness/sweep_config.h"

namespace decodebench {

// Wall clock in seconds, injectable for tests.
using WallClock = std::function<double()>;
double steady_seconds();

// A stop request (SIGINT/SIGTERM) seen in the middle of a point: the point is left unfinished.
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

// Takes samples until the stopping rule of MeasureOptions holds or the timeout passes, and
// returns them (seconds, in order). One untimed warm-up run() comes first; the point's
// begin_utilization() follows it, right before the first sample, and end_utilization() follows
// the last (PreparedPoint: how busy the device was over the samples). Throws InputError
// for options out of range (min_samples < 1, negative times, max_noise < 0). Exceptions from
// the point propagate. `stop` (may be null) is polled before the warm-up and between samples:
// once set, measure throws Interrupted, so a stop waits for one sample at most.
std::vector<double> measure(PreparedPoint& point, const MeasureOptions& opt,
                            const std::atomic<bool>* stop = nullptr);
std::vector<double> measure(PreparedPoint& point, const MeasureOptions& opt, const WallClock& now,
                            const std::atomic<bool>* stop = nullptr);

// The rule itself, on samples taken so far (for tests and for explaining why a point stopped).
enum class StopReason { not_yet, converged, timeout };
StopReason stop_reason(std::span<const double> samples, const MeasureOptions& opt,
                       double wall_elapsed_s);
// Each condition of the rule that `samples` do not meet, with its figure and what was asked:
// "12 samples (asked >= 20)", "0.02 s measured (asked >= 0.3 s)", "noise 1.84% (asked <= 1.00%)".
// Empty when the rule holds.
std::vector<std::string> unmet_conditions(std::span<const double> samples,
                                          const MeasureOptions& opt);

}  // namespace decodebench
