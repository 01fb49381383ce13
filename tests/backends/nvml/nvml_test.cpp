// NVML loaded at run time (src/backends/nvml.h) against a fake library with scripted readings
// (fake_nvml.cpp): found through $DECODEBENCH_NVML_LIBRARY and by path, the device by PCI bus id
// or index, and the figures a GPU point carries computed exactly from the script: busy, energy,
// power and, through src/harness/utilization.h, J per step and per token. Planted faults: an
// energy counter that goes backwards, a library lacking a symbol, no library, failing calls, a
// utilization above 100 %; each gives unavailable figures with the reason, never an exception.
// A wrong unit (mJ taken as J) is shown to be caught by the exact check.
#include <dlfcn.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "backends/nvml.h"
#include "backends/nvml/fake_nvml.h"
#include "harness/utilization.h"

namespace decodebench::nvml {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The loaded fake's script (the same copy of the library NVML's loader opens: dlopen counts).
FakeNvmlScript& script(const char* path = FAKE_NVML_PATH) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(lib, nullptr) << dlerror();
  auto get = reinterpret_cast<FakeNvmlScript* (*)()>(dlsym(lib, "fake_nvml_script"));
  auto reset = reinterpret_cast<void (*)()>(dlsym(lib, "fake_nvml_reset"));
  EXPECT_NE(get, nullptr);
  reset();
  return *get();
}

// A clock that starts at 100 s and moves `step` seconds on every read.
SpanMeter::Clock fake_clock(double step) {
  return [t = 100.0, step]() mutable {
    const double now = t;
    t += step;
    return now;
  };
}

class NvmlTest : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv(kLibraryEnv); }
  void TearDown() override { unsetenv(kLibraryEnv); }
};

// One span on the fake: begin, end, the record.
UtilizationRecord span(Device* device, double clock_step = 2.0) {
  SpanMeter meter(device, fake_clock(clock_step));
  meter.begin();
  meter.end();
  return meter.record();
}

// ---- loading ---------------------------------------------------------------------------------

TEST_F(NvmlTest, LoadsTheLibraryOfTheEnvironmentAndFindsTheDeviceByBusId) {
  FakeNvmlScript& s = script();
  setenv(kLibraryEnv, FAKE_NVML_PATH, 1);
  {
    const std::unique_ptr<Device> d = Device::open("0000:3B:00.0");
    ASSERT_TRUE(d->ok()) << d->error();
    EXPECT_EQ(d->library(), FAKE_NVML_PATH);
    EXPECT_EQ(s.init_calls, 1);
    EXPECT_EQ(s.by_bus_calls, 1);
    EXPECT_EQ(s.by_index_calls, 0);
    EXPECT_STREQ(s.last_bus_id, "0000:3B:00.0");
    EXPECT_EQ(s.shutdown_calls, 0);
  }
  EXPECT_EQ(s.shutdown_calls, 1);  // nvmlShutdown when the device goes
}

TEST_F(NvmlTest, WithoutABusIdTheDeviceIsFoundByIndex) {
  FakeNvmlScript& s = script();
  const std::unique_ptr<Device> d = Device::open_library(FAKE_NVML_PATH, "", 3);
  ASSERT_TRUE(d->ok()) << d->error();
  EXPECT_EQ(s.by_index_calls, 1);
  EXPECT_EQ(s.last_index, 3u);
  EXPECT_EQ(s.by_bus_calls, 0);
}

TEST_F(NvmlTest, TheDefaultLibraryIsTheDriversSoname) {
  EXPECT_STREQ(kDefaultLibrary, "libnvidia-ml.so.1");
  EXPECT_STREQ(kLibraryEnv, "DECODEBENCH_NVML_LIBRARY");
}

// ---- the figures, exactly --------------------------------------------------------------------

// The script's figures: the counter moves 1,300,000 mJ between the two readings, which the fake
// clock puts 2 s apart: 1300 J, 650 W, equal to the board's 650,000 mW reading; busy 97 %. At
// a median of 1 ms and 800 tokens/s (batch 64 over 80 layers): 0.65 J per step, 0.8125 J per
// token. Checks every figure against the script, so a wrong unit anywhere fails it.
void expect_scripted_figures(const UtilizationRecord& u) {
  EXPECT_EQ(u.source, BusySource::nvml);
  EXPECT_DOUBLE_EQ(u.busy, 0.97);
  EXPECT_EQ(u.threads, 0);
  EXPECT_TRUE(std::isnan(u.cpu_time_s));
  EXPECT_DOUBLE_EQ(u.window_s, 2.0);
  EXPECT_DOUBLE_EQ(u.energy_J, 1300.0);
  EXPECT_DOUBLE_EQ(u.power_W, 650.0);
  EXPECT_DOUBLE_EQ(u.power_reading_W, 650.0);
  EXPECT_DOUBLE_EQ(u.energy_J_per_step, 0.65);
  EXPECT_DOUBLE_EQ(u.energy_J_per_token, 0.8125);
  EXPECT_EQ(u.note, "");
}

// The failures `check` reports, intercepted (they do not fail the test).
template <class Check>
std::string failures_of(Check check) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter intercept(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    check();
  }
  std::string text;
  for (int i = 0; i < results.size(); ++i) text += results.GetTestPartResult(i).message();
  return text;
}

constexpr double kMedianS = 1e-3;
constexpr double kTokensPerS = 64 / (kMedianS * 80);  // batch 64, 80 layers: 800 tokens/s

TEST_F(NvmlTest, FiguresFromTheScriptExactly) {
  FakeNvmlScript& s = script();
  setenv(kLibraryEnv, FAKE_NVML_PATH, 1);
  const std::unique_ptr<Device> d = Device::open("0000:3B:00.0");
  UtilizationRecord u = span(d.get());
  EXPECT_EQ(s.energy_calls, 2);  // once before the samples, once after
  finish_utilization(u, kMedianS, kTokensPerS);
  expect_scripted_figures(u);
  // J per token is the power over the tokens/s: the two agree.
  EXPECT_DOUBLE_EQ(u.energy_J_per_token * kTokensPerS, u.power_W);
}

// The exact check catches a unit slip: what mJ read as J would give (every energy and power
// figure 1000x), and a power reading of mW read as W.
TEST_F(NvmlTest, AMilliJouleTakenForAJouleIsCaught) {
  script();
  const std::unique_ptr<Device> d = Device::open_library(FAKE_NVML_PATH, "0000:3B:00.0");
  UtilizationRecord good = span(d.get());
  finish_utilization(good, kMedianS, kTokensPerS);
  UtilizationRecord mj_as_j = good;
  mj_as_j.energy_J *= 1000;
  mj_as_j.power_W *= 1000;
  finish_utilization(mj_as_j, kMedianS, kTokensPerS);
  const std::string caught = failures_of([&] { expect_scripted_figures(mj_as_j); });
  for (const char* figure :
       {"u.energy_J\n", "u.power_W\n", "u.energy_J_per_step\n", "u.energy_J_per_token\n"}) {
    EXPECT_TRUE(contains(caught, figure)) << figure << " not caught:\n" << caught;
  }
  UtilizationRecord mw_as_w = good;
  mw_as_w.power_reading_W *= 1000;
  EXPECT_TRUE(
      contains(failures_of([&] { expect_scripted_figures(mw_as_w); }), "u.power_reading_W"));
  EXPECT_EQ(failures_of([&] { expect_scripted_figures(good); }), "");
}

// ---- planted faults: unavailable, with the reason --------------------------------------------

TEST_F(NvmlTest, ACounterGoingBackwardsLeavesEnergyAndPowerUnavailable) {
  FakeNvmlScript& s = script();
  s.energy_step_mJ = -1000;
  const std::unique_ptr<Device> d = Device::open_library(FAKE_NVML_PATH, "0000:3B:00.0");
  UtilizationRecord u = span(d.get());
  finish_utilization(u, kMedianS, kTokensPerS);
  EXPECT_TRUE(std::isnan(u.energy_J));
  EXPECT_TRUE(std::isnan(u.power_W));
  EXPECT_TRUE(std::isnan(u.energy_J_per_step));
  EXPECT_TRUE(std::isnan(u.energy_J_per_token));
  EXPECT_TRUE(contains(u.note,
                       "energy counter went backwards (5000000 mJ before the samples, "
                       "4999000 mJ after)"))
      << u.note;
  // What did not fail is still there.
  EXPECT_DOUBLE_EQ(u.busy, 0.97);
  EXPECT_DOUBLE_EQ(u.power_reading_W, 650.0);
}

TEST_F(NvmlTest, ALibraryWithoutTheEnergyCounterGivesTheRest) {
  script(FAKE_NVML_NO_ENERGY_PATH);
  const std::unique_ptr<Device> d = Device::open_library(FAKE_NVML_NO_ENERGY_PATH, "0000:3B:00.0");
  ASSERT_TRUE(d->ok()) << d->error();
  const UtilizationRecord u = span(d.get());
  EXPECT_TRUE(std::isnan(u.energy_J));
  EXPECT_TRUE(std::isnan(u.power_W));
  EXPECT_TRUE(
      contains(u.note, "energy and power unavailable: " + std::string(FAKE_NVML_NO_ENERGY_PATH) +
                           " lacks nvmlDeviceGetTotalEnergyConsumption"))
      << u.note;
  EXPECT_DOUBLE_EQ(u.busy, 0.97);
  EXPECT_DOUBLE_EQ(u.power_reading_W, 650.0);
}

TEST_F(NvmlTest, ALibraryLackingTheRequiredSymbolsIsUnavailable) {
  // libm is a real library with none of NVML's functions.
  const std::unique_ptr<Device> d = Device::open_library("libm.so.6", "0000:3B:00.0");
  EXPECT_FALSE(d->ok());
  EXPECT_TRUE(contains(d->error(),
                       "libm.so.6 lacks nvmlInit_v2, nvmlShutdown, "
                       "nvmlDeviceGetHandleByPciBusId_v2"))
      << d->error();
}

TEST_F(NvmlTest, NoLibraryMeansEveryFigureUnavailable) {
  setenv(kLibraryEnv, "/nonexistent/libnvidia-ml.so.1", 1);
  const std::unique_ptr<Device> d = Device::open("0000:3B:00.0");
  EXPECT_FALSE(d->ok());
  EXPECT_TRUE(contains(d->error(), "NVML unavailable: cannot load /nonexistent/libnvidia-ml.so.1"))
      << d->error();
  UtilizationRecord u = span(d.get());
  finish_utilization(u, kMedianS, kTokensPerS);
  EXPECT_EQ(u.source, BusySource::nvml);
  for (double x : {u.busy, u.window_s, u.energy_J, u.power_W, u.power_reading_W,
                   u.energy_J_per_step, u.energy_J_per_token}) {
    EXPECT_TRUE(std::isnan(x));
  }
  EXPECT_EQ(u.note, d->error());
  // Readings say the same, never throw.
  EXPECT_EQ(d->energy_mJ().error, d->error());
  EXPECT_EQ(d->power_mW().error, d->error());
}

TEST_F(NvmlTest, AFailingInitIsUnavailableAndNotShutDown) {
  FakeNvmlScript& s = script();
  s.init_return = 999;
  {
    const std::unique_ptr<Device> d = Device::open_library(FAKE_NVML_PATH, "0000:3B:00.0");
    EXPECT_FALSE(d->ok());
    EXPECT_TRUE(contains(d->error(), "nvmlInit_v2: Unknown Error (NVML error 999)")) << d->error();
  }
  EXPECT_EQ(s.shutdown_calls, 0);
}

TEST_F(NvmlTest, ABusIdNvmlDoesNotKnowIsUnavailable) {
  FakeNvmlScript& s = script();
  s.handle_return = 6;
  const std::unique_ptr<Device> d = Device::open_library(FAKE_NVML_PATH, "0000:99:00.0");
  EXPECT_FALSE(d->ok());
  EXPECT_TRUE(contains(d->error(), "no device with PCI bus id 0000:99:00.0")) << d->error();
  EXPECT_TRUE(contains(d->error(), "Not Found (NVML error 6)")) << d->error();
  EXPECT_TRUE(std::isnan(span(d.get()).busy));
}

TEST_F(NvmlTest, FailingReadingsLeaveTheirFiguresUnavailable) {
  FakeNvmlScript& s = script();
  s.utilization_return = 3;  // NVML_ERROR_NOT_SUPPORTED (a MIG instance, say)
  s.power_return = 3;
  const std::unique_ptr<Device> d = Device::open_library(FAKE_NVML_PATH, "0000:3B:00.0");
  const UtilizationRecord u = span(d.get());
  EXPECT_TRUE(std::isnan(u.busy));
  EXPECT_TRUE(std::isnan(u.power_reading_W));
  EXPECT_TRUE(contains(u.note,
                       "busy unavailable: nvmlDeviceGetUtilizationRates: Not Supported "
                       "(NVML error 3)"))
      << u.note;
  EXPECT_TRUE(contains(u.note, "power reading unavailable: nvmlDeviceGetPowerUsage")) << u.note;
  EXPECT_DOUBLE_EQ(u.power_W, 650.0);  // the energy counter still gives the power
}

TEST_F(NvmlTest, AUtilizationAboveAHundredIsRefused) {
  FakeNvmlScript& s = script();
  s.utilization_gpu = 140;
  const std::unique_ptr<Device> d = Device::open_library(FAKE_NVML_PATH, "0000:3B:00.0");
  const UtilizationRecord u = span(d.get());
  EXPECT_TRUE(std::isnan(u.busy));
  EXPECT_TRUE(contains(u.note, "GPU utilization of 140 %, not a percentage")) << u.note;
}

TEST_F(NvmlTest, ASpanShorterThanNvmlsPeriodIsNoted) {
  script();
  const std::unique_ptr<Device> d = Device::open_library(FAKE_NVML_PATH, "0000:3B:00.0");
  const UtilizationRecord u = span(d.get(), /*clock_step=*/0.25);
  EXPECT_DOUBLE_EQ(u.busy, 0.97);            // kept
  EXPECT_DOUBLE_EQ(u.power_W, 1300 / 0.25);  // the same energy over a quarter of a second
  EXPECT_TRUE(contains(u.note, "less than NVML's utilization period")) << u.note;
}

TEST_F(NvmlTest, NoDeviceOrNoSpanIsUnavailable) {
  EXPECT_TRUE(contains(span(nullptr).note, "no NVML device"));
  SpanMeter never(nullptr);
  EXPECT_TRUE(contains(never.record().note, "not measured"));
  EXPECT_TRUE(contains(span(Device::unavailable("cudaDeviceGetPCIBusId: x").get()).note,
                       "NVML unavailable: cudaDeviceGetPCIBusId: x"));
}

TEST(NvmlRecord, ASpanThatIsNotPositiveGivesNoPower) {
  SpanReadings r;
  r.energy_begin_mJ.value = 10;
  r.energy_end_mJ.value = 20;
  r.begin_s = r.end_s = 5;
  r.utilization_percent.value = 50;
  r.power_mW.value = 1500;
  const UtilizationRecord u = record_from(r);
  EXPECT_TRUE(std::isnan(u.power_W));
  EXPECT_TRUE(contains(u.note, "not positive")) << u.note;
  EXPECT_DOUBLE_EQ(u.busy, 0.5);
  EXPECT_DOUBLE_EQ(u.power_reading_W, 1.5);
}

}  // namespace
}  // namespace decodebench::nvml
