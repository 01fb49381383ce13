// Statistics on known samples and the stopping rule with a fake point and a fake clock.
#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/errors.h"
#include "harness/measure.h"
#include "harness/stats.h"

namespace decodebench {
namespace {

TEST(Stats, KnownSamples) {
  // 1..10 shuffled: numpy.percentile(range(1, 11), [10, 50, 90]) = 1.9, 5.5, 9.1.
  const std::vector<double> x = {7, 3, 10, 1, 5, 9, 2, 8, 6, 4};
  const SampleStats s = summarize(x);
  EXPECT_EQ(s.samples, 10);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 10);
  EXPECT_DOUBLE_EQ(s.median, 5.5);
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  EXPECT_NEAR(s.p10, 1.9, 1e-12);
  EXPECT_NEAR(s.p90, 9.1, 1e-12);
  // rel_noise = 1.2533 * ((9.1 - 1.9) / 2.5631) / sqrt(10) / 5.5
  const double sigma = (9.1 - 1.9) / (2 * 1.2815515655446004);
  EXPECT_NEAR(s.rel_noise, 1.2533141373155003 * sigma / std::sqrt(10.0) / 5.5, 1e-12);
}

TEST(Stats, NoiseShrinksWithMoreSamplesOfTheSameSpread) {
  std::vector<double> a, b;
  for (int i = 0; i < 10; ++i) a.push_back(1.0 + 0.01 * (i % 5));
  for (int i = 0; i < 1000; ++i) b.push_back(1.0 + 0.01 * (i % 5));
  EXPECT_NEAR(summarize(b).rel_noise / summarize(a).rel_noise, std::sqrt(10.0 / 1000.0), 1e-3);
}

TEST(Stats, OutliersDoNotMoveTheMedianOrTheNoise) {
  std::vector<double> x(100, 1.0);
  for (int i = 0; i < 100; ++i) x[i] += 1e-3 * (i % 10);
  const SampleStats clean = summarize(x);
  x[3] = 50;  // one preempted sample
  x[77] = 80;
  const SampleStats dirty = summarize(x);
  EXPECT_NEAR(dirty.median, clean.median, 1e-3);
  // Two outliers move p90 by at most a rank or so: the noise changes by a few tens of percent,
  // where stddev/mean would jump from 0.3 % to over 500 %.
  EXPECT_LT(dirty.rel_noise, 1.25 * clean.rel_noise);
  EXPECT_DOUBLE_EQ(dirty.max, 80);
}

TEST(Stats, SingleSampleHasNoNoiseEstimate) {
  const std::vector<double> x = {2.0};
  const SampleStats s = summarize(x);
  EXPECT_EQ(s.samples, 1);
  EXPECT_DOUBLE_EQ(s.median, 2.0);
  EXPECT_DOUBLE_EQ(s.p10, 2.0);
  EXPECT_TRUE(std::isnan(s.rel_noise));
}

TEST(Stats, RejectsEmptyAndBadSamples) {
  EXPECT_THROW(summarize(std::vector<double>{}), std::invalid_argument);
  EXPECT_THROW(summarize(std::vector<double>{1, NAN}), std::invalid_argument);
  EXPECT_THROW(summarize(std::vector<double>{1, -1}), std::invalid_argument);
}

// A point whose i-th sample is times(i); the fake clock advances by `wall_per_sample` per
// sample, so timeouts are deterministic.
class FakePoint : public PreparedPoint {
 public:
  FakePoint(std::function<double(int)> times, double& clock, double wall_per_sample)
      : times_(std::move(times)), clock_(clock), wall_per_sample_(wall_per_sample) {}
  void run() override {
    ++runs;
    events += "r";
  }
  std::vector<float> output() override { return {}; }
  double time_one() override {
    clock_ += wall_per_sample_;
    events += "t";
    return times_(samples++);
  }
  TimingRecord timing() const override { return {}; }
  void begin_utilization() override { events += "["; }
  void end_utilization() override { events += "]"; }
  int runs = 0;
  int samples = 0;
  std::string events;  // r: run, t: time_one, [ ]: begin and end of the utilization span

 private:
  std::function<double(int)> times_;
  double& clock_;
  double wall_per_sample_;
};

MeasureOptions options(int min_samples, double min_time, double max_noise, double timeout) {
  MeasureOptions o;
  o.min_samples = min_samples;
  o.min_time_s = min_time;
  o.max_noise = max_noise;
  o.timeout_s = timeout;
  return o;
}

TEST(Measure, StopsAtMinSamplesWhenQuietAndLongEnough) {
  double clock = 0;
  FakePoint p([](int) { return 0.1; }, clock, 0.1);  // identical samples: noise 0
  const auto s = measure(p, options(10, 0.5, 0.005, 100), [&] { return clock; });
  EXPECT_EQ(s.size(), 10u);
  EXPECT_EQ(p.runs, 1);  // one warm-up
}

// The busy figure's span holds exactly the samples: after the warm-up, closed after the last.
TEST(Measure, TheUtilizationSpanHoldsExactlyTheSamples) {
  double clock = 0;
  FakePoint p([](int) { return 0.1; }, clock, 0.1);
  const auto s = measure(p, options(3, 0, 1, 100), [&] { return clock; });
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(p.events, "r[ttt]");
}

TEST(Measure, StopsAtMinTimeWhenSamplesAreShort) {
  double clock = 0;
  FakePoint p([](int) { return 0.01; }, clock, 0.01);
  const auto s = measure(p, options(10, 0.5, 0.005, 100), [&] { return clock; });
  EXPECT_EQ(s.size(), 50u);  // 50 x 10 ms = 0.5 s
}

TEST(Measure, KeepsGoingUntilTheNoiseIsLowEnough) {
  // Alternating 1.0 / 1.1: p90 - p10 stays 0.1, so the noise falls as 1/sqrt(n):
  // rel_noise(n) = 1.2533 * (0.1 / 2.5631) / sqrt(n) / 1.05 <= 0.005  <=>  n >= 87.
  double clock = 0;
  FakePoint p([](int i) { return i % 2 ? 1.1 : 1.0; }, clock, 1.0);
  const MeasureOptions opt = options(10, 0.5, 0.005, 1e9);
  const auto s = measure(p, opt, [&] { return clock; });
  EXPECT_EQ(stop_reason(s, opt, 0), StopReason::converged);
  const std::span<const double> one_less(s.data(), s.size() - 1);
  EXPECT_EQ(stop_reason(one_less, opt, 0), StopReason::not_yet);
  EXPECT_LE(summarize(s).rel_noise, 0.005);
  EXPECT_GT(summarize(one_less).rel_noise, 0.005);
  EXPECT_GE(s.size(), 80u);
  EXPECT_LE(s.size(), 100u);
}

TEST(Measure, StopsAtTheTimeoutWhenNeverQuiet) {
  // Noise that never settles at 0.1 %: a spread that doubles every 10 samples.
  double clock = 0;
  FakePoint p([](int i) { return 1.0 + (i % 2) * std::pow(2.0, i / 10); }, clock, 0.5);
  const MeasureOptions opt = options(10, 0.5, 0.001, 10);
  const auto s = measure(p, opt, [&] { return clock; });
  EXPECT_EQ(s.size(), 20u);  // 20 samples x 0.5 s wall = the 10 s timeout
  EXPECT_EQ(stop_reason(s, opt, 10), StopReason::timeout);
}

// The reason a point stopped names each condition that failed with its figure, and only those:
// the same rule as stop_reason, so a converged sample set names none.
TEST(Measure, UnmetConditionsNameEachFailedOneWithItsFigure) {
  const MeasureOptions opt = options(20, 0.3, 0.01, 4);
  const std::vector<double> short_quiet(94, 212e-6);  // many fast steps: time is what fails
  EXPECT_EQ(unmet_conditions(short_quiet, opt),
            (std::vector<std::string>{"0.0199 s measured (asked >= 0.3 s)"}));
  std::vector<double> few_noisy;
  for (int i = 0; i < 12; ++i) few_noisy.push_back(i % 2 ? 0.01 : 0.02);
  const std::vector<std::string> unmet = unmet_conditions(few_noisy, opt);
  ASSERT_EQ(unmet.size(), 3u);
  EXPECT_EQ(unmet[0], "12 samples (asked >= 20)");
  EXPECT_EQ(unmet[1], "0.18 s measured (asked >= 0.3 s)");
  EXPECT_EQ(unmet[2].rfind("noise ", 0), 0u) << unmet[2];
  EXPECT_NE(unmet[2].find("(asked <= 1.00%)"), std::string::npos) << unmet[2];
  // Converged by stop_reason's rule: nothing unmet; one condition short: exactly that one.
  const std::vector<double> enough(40, 0.01);
  EXPECT_EQ(stop_reason(enough, opt, 0), StopReason::converged);
  EXPECT_TRUE(unmet_conditions(enough, opt).empty());
  const std::span<const double> one_short(enough.data(), 19);
  EXPECT_EQ(unmet_conditions(one_short, opt).size(), 2u);  // samples and time
}

TEST(Measure, TimeoutStillTakesAtLeastOneSample) {
  double clock = 0;
  FakePoint p([](int) { return 5.0; }, clock, 5.0);
  const auto s = measure(p, options(10, 0.5, 0.005, 1), [&] { return clock; });
  EXPECT_EQ(s.size(), 1u);
}

TEST(Measure, RejectsBadOptions) {
  double clock = 0;
  FakePoint p([](int) { return 1.0; }, clock, 1.0);
  auto now = [&] { return clock; };
  EXPECT_THROW(measure(p, options(0, 0.5, 0.005, 10), now), InputError);
  EXPECT_THROW(measure(p, options(10, -1, 0.005, 10), now), InputError);
  EXPECT_THROW(measure(p, options(10, 0.5, -0.1, 10), now), InputError);
  EXPECT_THROW(measure(p, options(10, 0.5, 0.005, 0), now), InputError);
}

}  // namespace
}  // namespace decodebench
