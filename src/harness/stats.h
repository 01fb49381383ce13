// Statistics of timed samples. SampleStats (and the definition of rel_noise) lives with the
// report's data model in report/point_result.h.
#pragma once

#include <span>

#include "results/point_result.h"

namespace decodebench {

// Percentiles by linear interpolation between order statistics (numpy's default "linear"):
// p(q) = x[floor(h)] + (h - floor(h)) * (x[floor(h)+1] - x[floor(h)]), h = q * (n - 1).
double percentile(std::span<const double> sorted, double q);

// Summary of `seconds` (any order). Throws std::invalid_argument when empty or any sample is
// negative or not finite.
SampleStats summarize(std::span<const double> seconds);

}  // namespace decodebench
