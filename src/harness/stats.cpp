#include "harness/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace decodebench {

namespace {
// p90 - p10 of a normal distribution spans 2 * z(0.9) = 2 * 1.28155 standard deviations.
constexpr double kP10P90Sigmas = 2 * 1.2815515655446004;
// Standard error of the median of n normal samples ~ sqrt(pi / 2) * sigma / sqrt(n).
constexpr double kMedianEfficiency = 1.2533141373155003;
}  // namespace

double percentile(std::span<const double> sorted, double q) {
  if (sorted.empty()) throw std::invalid_argument("percentile of no samples");
  if (!(q >= 0 && q <= 1)) throw std::invalid_argument("percentile q must be in [0, 1]");
  const double h = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

SampleStats summarize(std::span<const double> seconds) {
  if (seconds.empty()) throw std::invalid_argument("summarize: no samples");
  for (double s : seconds) {
    if (!std::isfinite(s) || s < 0) {
      throw std::invalid_argument("summarize: samples must be finite and non-negative");
    }
  }
  std::vector<double> x(seconds.begin(), seconds.end());
  std::sort(x.begin(), x.end());
  SampleStats st;
  st.samples = static_cast<int>(x.size());
  st.min = x.front();
  st.max = x.back();
  st.median = percentile(x, 0.5);
  st.p10 = percentile(x, 0.1);
  st.p90 = percentile(x, 0.9);
  st.mean = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
  if (x.size() >= 2 && st.median > 0) {
    const double sigma = (st.p90 - st.p10) / kP10P90Sigmas;
    st.rel_noise = kMedianEfficiency * sigma / std::sqrt(static_cast<double>(x.size())) / st.median;
  }
  return st;
}

}  // namespace decodebench
