// The busy figure of a timed point, finished (docs/design.md "Busy beside the roof"): what a
// backend measured (PreparedPoint::utilization), the figures that need the point's own times,
// and the check that keeps an impossible busy figure from reading as a real one.
#pragma once

#include <span>

#include "results/utilization_record.h"

namespace decodebench {

// A busy fraction above 1 + kBusyTolerance is impossible for the threads or the GPU counted and
// gets a note (its figure is kept as measured: never clamped). The CPU windows bound each
// thread's CPU time by construction (src/backends/cpu/cpu_busy.h), so the tolerance covers only
// the thread CPU clocks drifting against the wall clock.
inline constexpr double kBusyTolerance = 0.02;

// Fills energy_J_per_step = power_W * median_s and energy_J_per_token = power_W / tokens_per_s
// (the point's tokens/s, so energy per token of what tokens_per_s counts: NaN where either is
// unknown or not positive), and appends to `note` when busy exceeds 1 + kBusyTolerance.
void finish_utilization(UtilizationRecord& u, double median_s, double tokens_per_s);

// A model whose layers differ times one step of each kind per sample (the runner's mean layer):
// cpu_threads: their windows and CPU times summed, busy over the sums; nvml: the first kind's
// (every kind read the same counters over the same span). Notes joined, each once. Throws
// std::invalid_argument for an empty list or mixed sources.
UtilizationRecord combine_utilization(std::span<const UtilizationRecord> kinds);

}  // namespace decodebench
