// The busy figure finished by the harness (src/harness/utilization.h): energy per step and per
// token from the power and the point's times, the check that notes an impossible busy figure
// (planted: more CPU time than the team's threads can spend, as a second spinning pool gives),
// never clamped, and the mean layer's combination of its kinds' windows.
#include "harness/utilization.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace decodebench {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

UtilizationRecord cpu(double cpu_time_s, double window_s, int threads) {
  UtilizationRecord u;
  u.source = BusySource::cpu_threads;
  u.threads = threads;
  u.cpu_time_s = cpu_time_s;
  u.window_s = window_s;
  u.busy = cpu_time_s / (window_s * threads);
  return u;
}

TEST(Utilization, EnergyPerStepAndPerTokenFromThePower) {
  UtilizationRecord u;
  u.source = BusySource::nvml;
  u.busy = 0.97;
  u.power_W = 500;
  finish_utilization(u, /*median_s=*/2e-3, /*tokens_per_s=*/4000);
  EXPECT_DOUBLE_EQ(u.energy_J_per_step, 1.0);
  EXPECT_DOUBLE_EQ(u.energy_J_per_token, 0.125);
  EXPECT_EQ(u.note, "");
}

TEST(Utilization, NoPowerOrNoTimesGiveNoEnergy) {
  UtilizationRecord u = cpu(1, 1, 1);  // the CPU has no power figure
  finish_utilization(u, 1e-3, 1000);
  EXPECT_TRUE(std::isnan(u.energy_J_per_step));
  EXPECT_TRUE(std::isnan(u.energy_J_per_token));
  UtilizationRecord g;
  g.source = BusySource::nvml;
  g.power_W = 300;
  finish_utilization(g, UtilizationRecord::kNotAvailable, 0);
  EXPECT_TRUE(std::isnan(g.energy_J_per_step));
  EXPECT_TRUE(std::isnan(g.energy_J_per_token));
}

TEST(Utilization, ABusyFigureWithinTheToleranceIsPlain) {
  for (double busy : {0.0, 0.4, 1.0, 1.0 + kBusyTolerance / 2}) {
    UtilizationRecord u = cpu(busy * 2, 1, 2);
    finish_utilization(u, 1e-3, 1000);
    EXPECT_EQ(u.note, "") << busy;
  }
}

// Planted: four threads' worth of CPU time in the windows of a two-thread step (another pool
// spinning beside the team). Noted, and the figure is kept as measured.
TEST(Utilization, MoreCpuTimeThanTheThreadsCanSpendIsNotedNotClamped) {
  UtilizationRecord u = cpu(/*cpu_time_s=*/4, /*window_s=*/1, /*threads=*/2);
  finish_utilization(u, 1e-3, 1000);
  EXPECT_DOUBLE_EQ(u.busy, 2.0);
  EXPECT_TRUE(contains(u.note, "busy 200.0 % is above 100 %")) << u.note;
  EXPECT_TRUE(contains(u.note, "the 2 threads of the step")) << u.note;
  finish_utilization(u, 1e-3, 1000);  // finishing twice notes once
  EXPECT_EQ(u.note.find("above 100"), u.note.rfind("above 100"));
}

TEST(Utilization, TheMeanLayerSumsItsKindsWindows) {
  const std::vector<UtilizationRecord> kinds = {cpu(0.3, 0.2, 2), cpu(0.5, 0.3, 2)};
  const UtilizationRecord u = combine_utilization(kinds);
  EXPECT_DOUBLE_EQ(u.cpu_time_s, 0.8);
  EXPECT_DOUBLE_EQ(u.window_s, 0.5);
  EXPECT_DOUBLE_EQ(u.busy, 0.8);
  EXPECT_EQ(u.threads, 2);
}

TEST(Utilization, AKindWithoutItsFigureLeavesTheMeanWithout) {
  UtilizationRecord broken;
  broken.threads = 2;
  broken.note = "thread 12 ended during the samples";
  const std::vector<UtilizationRecord> kinds = {cpu(0.3, 0.2, 2), broken};
  const UtilizationRecord u = combine_utilization(kinds);
  EXPECT_TRUE(std::isnan(u.busy));
  EXPECT_EQ(u.note, broken.note);
}

TEST(Utilization, GpuKindsShareOneSpan) {
  UtilizationRecord a;
  a.source = BusySource::nvml;
  a.busy = 0.9;
  a.power_W = 400;
  UtilizationRecord b = a;
  b.busy = 0.5;
  const std::vector<UtilizationRecord> kinds = {a, b};
  EXPECT_DOUBLE_EQ(combine_utilization(kinds).busy, 0.9);
  EXPECT_THROW(combine_utilization(std::vector<UtilizationRecord>{}), std::invalid_argument);
  const std::vector<UtilizationRecord> mixed = {a, cpu(1, 1, 1)};
  EXPECT_THROW(combine_utilization(mixed), std::invalid_argument);
}

}  // namespace
}  // namespace decodebench
