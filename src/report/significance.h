// Is one set of timed samples different from another? The statistics `decodebench compare`
// decides with (docs/design.md "Comparing two reports"): a rank test for "is there a shift at
// all" and a bootstrap interval for "how large is it", and the verdict they give together.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace decodebench {

double median_of(std::span<const double> x);  // NaN when empty

// Two-sided p-value of the Mann-Whitney U test of `a` against `b`: normal approximation with
// the tie correction of the variance and a continuity correction of 0.5 (scipy.stats.mannwhitneyu
// with method="asymptotic", its default use_continuity=True). 1 when every value is tied; NaN
// when a side is empty.
double mann_whitney_p(std::span<const double> a, std::span<const double> b);

struct Interval {
  double lo = 0, hi = 0;
};

inline constexpr int kBootstrapResamples = 2000;
inline constexpr std::uint64_t kBootstrapSeed = 0x5eed'dec0'debe'0c4dull;

// Percentile bootstrap interval of median(current) / median(baseline) at `confidence` (0.95):
// each side resampled with replacement, `resamples` times, from a fixed seed, so the same
// samples always give the same interval.
Interval bootstrap_median_ratio(std::span<const double> baseline, std::span<const double> current,
                                double confidence, int resamples = kBootstrapResamples,
                                std::uint64_t seed = kBootstrapSeed);

enum class Verdict { same, slower, faster, ambiguous };
std::string_view verdict_name(Verdict v);  // "SAME", "SLOWER", "FASTER", "AMBIGUOUS"

// The comparison of one point in one space (raw seconds, or normalized).
struct SpaceComparison {
  double ratio = 0;  // median(current) / median(baseline): > 1 is slower
  Interval ci;       // of the ratio, at confidence 1 - alpha
  double p_value = 1;
  int baseline_samples = 0, current_samples = 0;
  Verdict verdict = Verdict::ambiguous;
  std::string reason;  // why ambiguous without a test ("no samples"); else empty
};

// SLOWER:    p < alpha, ratio > 1 + threshold and the interval above 1 (ci.lo > 1)
// FASTER:    p < alpha, ratio < 1 / (1 + threshold) and the interval below 1 (ci.hi < 1)
// SAME:      otherwise, when the interval lies within [1 / (1 + threshold), 1 + threshold]
// AMBIGUOUS: otherwise (a shift not shown significant, an interval crossing 1, or one too wide
//            to rule a shift out); also with fewer than 2 samples on a side.
SpaceComparison compare_samples(std::span<const double> baseline, std::span<const double> current,
                                double alpha, double threshold);

// One verdict from the raw and the normalized space (docs/design.md has the table).
struct CombinedVerdict {
  Verdict verdict = Verdict::ambiguous;
  std::string decided_by;  // "raw", "normalized" or "both"
};
CombinedVerdict combine_verdicts(Verdict raw, Verdict normalized);

}  // namespace decodebench
