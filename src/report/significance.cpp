#include "report/significance.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <fmt/format.h>

namespace decodebench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Median of `x`, reordering it (nth_element: the bootstrap calls this 4000 times a point).
double median_in_place(std::vector<double>& x) {
  const std::size_t n = x.size();
  if (n == 0) return kNaN;
  const auto mid = x.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(x.begin(), mid, x.end());
  const double upper = *mid;
  if (n % 2 == 1) return upper;
  return 0.5 * (*std::max_element(x.begin(), mid) + upper);
}

// numpy's "linear" percentile of sorted values.
double percentile_sorted(const std::vector<double>& s, double q) {
  const double h = q * static_cast<double>(s.size() - 1);
  const auto i = static_cast<std::size_t>(std::floor(h));
  if (i + 1 >= s.size()) return s.back();
  return s[i] + (h - static_cast<double>(i)) * (s[i + 1] - s[i]);
}

}  // namespace

double median_of(std::span<const double> x) {
  std::vector<double> v(x.begin(), x.end());
  return median_in_place(v);
}

double mann_whitney_p(std::span<const double> a, std::span<const double> b) {
  const std::size_t na = a.size(), nb = b.size(), n = na + nb;
  if (na == 0 || nb == 0) return kNaN;
  struct Value {
    double x;
    bool from_a;
  };
  std::vector<Value> all;
  all.reserve(n);
  for (double x : a) all.push_back({x, true});
  for (double x : b) all.push_back({x, false});
  std::sort(all.begin(), all.end(), [](const Value& l, const Value& r) { return l.x < r.x; });
  // Ranks 1..n, ties given the mean of the ranks they span; sum(t^3 - t) over tie groups.
  double rank_sum_a = 0, tie_term = 0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && all[j].x == all[i].x) ++j;
    const double t = static_cast<double>(j - i);
    const double mean_rank = 0.5 * static_cast<double>(i + 1 + j);
    for (std::size_t k = i; k < j; ++k) {
      if (all[k].from_a) rank_sum_a += mean_rank;
    }
    tie_term += t * t * t - t;
    i = j;
  }
  const double fa = static_cast<double>(na), fb = static_cast<double>(nb);
  const double fn = static_cast<double>(n);
  const double u_a = rank_sum_a - fa * (fa + 1) / 2;
  const double mean = fa * fb / 2;
  const double var = fa * fb / 12 * ((fn + 1) - tie_term / (fn * (fn - 1)));
  if (!(var > 0)) return 1.0;  // every value tied: no evidence of a shift
  const double z = (std::abs(u_a - mean) - 0.5) / std::sqrt(var);
  return std::min(1.0, std::erfc(z / std::sqrt(2.0)));
}

Interval bootstrap_median_ratio(std::span<const double> baseline, std::span<const double> current,
                                double confidence, int resamples, std::uint64_t seed) {
  if (baseline.empty() || current.empty() || resamples < 1) return {kNaN, kNaN};
  // mt19937_64's sequence is fixed by the standard; `% n` rather than a distribution, whose
  // algorithm is not, so every standard library draws the same indices (the bias of `% n` is
  // below 1e-15 for any sample count a report holds).
  std::mt19937_64 rng(seed);
  std::vector<double> draw_b(baseline.size()), draw_c(current.size());
  auto resample = [&rng](std::span<const double> from, std::vector<double>& into) {
    for (double& x : into) x = from[rng() % from.size()];
    return median_in_place(into);
  };
  std::vector<double> ratios(static_cast<std::size_t>(resamples));
  for (double& r : ratios) {
    const double mb = resample(baseline, draw_b);
    r = resample(current, draw_c) / mb;
  }
  std::sort(ratios.begin(), ratios.end());
  const double tail = (1 - confidence) / 2;
  return {percentile_sorted(ratios, tail), percentile_sorted(ratios, 1 - tail)};
}

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::same: return "SAME";
    case Verdict::slower: return "SLOWER";
    case Verdict::faster: return "FASTER";
    case Verdict::ambiguous: return "AMBIGUOUS";
  }
  return "AMBIGUOUS";
}

SpaceComparison compare_samples(std::span<const double> baseline, std::span<const double> current,
                                double alpha, double threshold) {
  SpaceComparison c;
  c.baseline_samples = static_cast<int>(baseline.size());
  c.current_samples = static_cast<int>(current.size());
  c.ratio = median_of(current) / median_of(baseline);
  if (baseline.size() < 2 || current.size() < 2) {
    c.ci = {kNaN, kNaN};
    c.p_value = kNaN;
    c.verdict = Verdict::ambiguous;
    c.reason = baseline.empty() || current.empty()
                   ? "no samples"
                   : fmt::format("too few samples to test ({} baseline, {} current; need 2)",
                                 baseline.size(), current.size());
    return c;
  }
  c.p_value = mann_whitney_p(baseline, current);
  c.ci = bootstrap_median_ratio(baseline, current, 1 - alpha);
  const double hi = 1 + threshold, lo = 1 / (1 + threshold);
  const bool significant = c.p_value < alpha;
  // A gap needs the printed interval to exclude 1 as well: the rank test can reject on a shift
  // of the whole distribution while the medians' interval still crosses 1, and a verdict the
  // interval beside it contradicts cannot be trusted.
  if (significant && c.ratio > hi && c.ci.lo > 1) {
    c.verdict = Verdict::slower;
  } else if (significant && c.ratio < lo && c.ci.hi < 1) {
    c.verdict = Verdict::faster;
  } else if (c.ci.lo >= lo && c.ci.hi <= hi) {
    c.verdict = Verdict::same;
  } else {
    c.verdict = Verdict::ambiguous;
  }
  return c;
}

CombinedVerdict combine_verdicts(Verdict raw, Verdict normalized) {
  auto is_gap = [](Verdict v) { return v == Verdict::slower || v == Verdict::faster; };
  if (raw == normalized) return {raw, "both"};
  // One space sees no change: the other's gap is what the bandwidth swing explains (or the
  // other cannot tell), so the space that is sure of "same" decides.
  if (raw == Verdict::same) return {Verdict::same, "raw"};
  if (normalized == Verdict::same) return {Verdict::same, "normalized"};
  // Left: SLOWER vs FASTER, or a gap vs AMBIGUOUS.
  if (is_gap(raw) && is_gap(normalized)) return {Verdict::ambiguous, "both"};
  return {Verdict::ambiguous, raw == Verdict::ambiguous ? "raw" : "normalized"};
}

}  // namespace decodebench
