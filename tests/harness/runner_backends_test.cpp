// The runner end to end on the real CPU backend with the real workload and reference: small
// odd points (ragged contexts, prefix sharing, a subset-validated batch) come out ok, with
// times, bandwidths and knees in the report. (The emu backend's path through the runner is
// `decodebench check --backend emu`, tested with the CLI.)
#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "backends/backend.h"
#include "common/errors.h"
#include "harness/runner.h"
#include "report/format.h"

namespace decodebench {
namespace {

SweepConfig small_sweep(const std::string& backend) {
  SweepConfig c;
  c.models = {"llama-3.1-8b"};
  c.batches = {1, 3, 7};
  c.contexts = {ContextSpec::fixed(33), ContextSpec::ragged(9, 40)};
  c.hit_rates = {0, 0.5};
  c.kv_dtypes = {DType::f16};
  c.kernels = {"auto"};
  c.backend = backend;
  c.measure.min_samples = 3;
  c.measure.min_time_s = 0;
  c.measure.max_noise = 1;
  c.measure.timeout_s = 0.5;
  c.validate_max_rows = 4;  // batch 7 validates a subset
  return c;
}

void expect_all_ok(const Report& r, std::size_t points) {
  ASSERT_EQ(r.results.size(), points);
  EXPECT_EQ(r.completion.state, Completion::State::complete);
  for (const auto& p : r.results) {
    EXPECT_EQ(p.status, PointStatus::ok) << p.index << ": " << p.reason;
    EXPECT_GT(p.time_s.median, 0);
    EXPECT_GT(p.bandwidth.achieved, 0);
    EXPECT_GT(p.tokens_per_s, 0);
    EXPECT_NE(p.kernel, "auto");
    EXPECT_EQ(p.error.rows_checked, std::min(p.batch, 4));
  }
}

TEST(RunRealBackends, CpuSweep) {
  std::unique_ptr<Backend> be;
  try {
    be = make_backend("cpu");
  } catch (const RuntimeFailure& e) {
    GTEST_SKIP() << e.what();
  }
  RunOptions opt;
  opt.ceilings = Ceilings{};  // not measured here (seconds); fractions come out null
  const Report r = run_sweep(*be, small_sweep("cpu"), opt);
  expect_all_ok(r, 12);
  EXPECT_TRUE(std::isnan(r.results[0].roofline.fraction_measured));
  for (const auto& p : r.results) {  // a host clock per step, caches flushed (not --warm)
    ASSERT_TRUE(p.timing.has_value()) << p.index;
    EXPECT_EQ(p.timing->method, TimingMethod::host_clock_per_step);
    EXPECT_EQ(p.timing->steps_per_sample, 1);
    EXPECT_FALSE(p.timing->warm_l2);
  }
  EXPECT_FALSE(r.knees.empty());
  // Every timed point carries its busy figure: the process's threads over the OpenMP team
  // (devices[].sm_count), a share of it, each window holding its step.
  for (const auto& p : r.results) {
    ASSERT_TRUE(p.utilization.has_value()) << p.index;
    const UtilizationRecord& u = *p.utilization;
    EXPECT_EQ(u.source, BusySource::cpu_threads);
    EXPECT_EQ(u.threads, r.devices[0].sm_count);
    EXPECT_EQ(u.note, "") << p.index;
    EXPECT_GT(u.busy, 0) << p.index;
    EXPECT_LE(u.busy, 1.05) << p.index;
    EXPECT_DOUBLE_EQ(u.busy, u.cpu_time_s / (u.window_s * u.threads));
    EXPECT_GE(u.window_s, std::accumulate(p.samples.begin(), p.samples.end(), 0.0)) << p.index;
    EXPECT_TRUE(std::isnan(u.power_W));  // busy only on a CPU
    EXPECT_TRUE(std::isnan(u.energy_J_per_token));
  }
  const std::string table = format_results(r, OutputFormat::table);
  EXPECT_NE(table.find("llama-3.1-8b"), std::string::npos);
  EXPECT_NE(table.find("% busy"), std::string::npos);
}

}  // namespace
}  // namespace decodebench
