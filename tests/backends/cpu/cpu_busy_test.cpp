// The cpu backend's busy figure (src/backends/cpu/cpu_busy.h): the thread CPU clocks read around
// a window. Nothing here asserts a speed: a window in which this thread spins for 20 ms of its
// own CPU time must count at least that, and no thread can spend more than the window; a CPU
// point measured through the backend gives busy in (0, 1.05] with the OpenMP team as its
// threads. Planted: a thread that ends inside a window and one that starts during the samples
// make the figure unavailable, with the reason.
#include "backends/cpu/cpu_busy.h"

#include <gtest/gtest.h>
#include <omp.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "workload/workload.h"

namespace decodebench::cpu {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

double own_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Spins until this thread has used `seconds` of CPU time (however long that takes in wall time).
void spin_for_cpu(double seconds) {
  const double until = own_cpu_s() + seconds;
  volatile double sink = 0;
  while (own_cpu_s() < until) sink = sink + 1;
}

TEST(ThreadBusyMeter, ListsThisThread) {
  const std::vector<pid_t> tids = process_thread_ids();
  EXPECT_NE(std::find(tids.begin(), tids.end(), gettid()), tids.end());
  EXPECT_TRUE(std::is_sorted(tids.begin(), tids.end()));
}

TEST(ThreadBusyMeter, CountsTheCpuTimeSpentInTheWindowAndNoMoreThanItHolds) {
  const int threads = static_cast<int>(process_thread_ids().size());
  ThreadBusyMeter meter(threads);
  meter.reset();
  ASSERT_EQ(meter.listed(), threads);
  for (int i = 0; i < 2; ++i) {
    meter.start();
    spin_for_cpu(0.02);
    meter.stop();
  }
  meter.finish();
  const UtilizationRecord u = meter.record();
  EXPECT_EQ(u.source, BusySource::cpu_threads);
  EXPECT_EQ(u.note, "");
  EXPECT_EQ(u.threads, threads);
  EXPECT_EQ(meter.windows(), 2);
  EXPECT_GE(u.cpu_time_s, 0.04);  // this thread's own 2 x 20 ms
  EXPECT_GE(u.window_s, 0.04);    // which took at least as long
  // Every listed thread's CPU time is read inside the window: at most window x threads.
  EXPECT_GT(u.busy, 0);
  EXPECT_LE(u.busy, 1.05);
  EXPECT_DOUBLE_EQ(u.busy, u.cpu_time_s / (u.window_s * threads));
}

TEST(ThreadBusyMeter, ResetStartsAfresh) {
  ThreadBusyMeter meter(1);
  meter.reset();
  meter.start();
  meter.stop();
  EXPECT_EQ(meter.windows(), 1);
  meter.reset();
  EXPECT_EQ(meter.windows(), 0);
  meter.stop();  // a stop without its start adds nothing
  EXPECT_EQ(meter.windows(), 0);
}

TEST(ThreadBusyMeter, WithoutAWindowThereIsNoFigure) {
  ThreadBusyMeter meter(2);
  meter.reset();
  meter.finish();
  const UtilizationRecord u = meter.record();
  EXPECT_TRUE(std::isnan(u.busy));
  EXPECT_TRUE(contains(u.note, "no timed step")) << u.note;
  EXPECT_THROW(ThreadBusyMeter(0), std::invalid_argument);
}

// Planted: a thread listed when the samples began ends inside a window; its CPU time cannot be
// read, so the figure is unavailable rather than short.
TEST(ThreadBusyMeter, AThreadEndingDuringTheSamplesLeavesNoFigure) {
  std::promise<void> go;
  std::thread t([f = go.get_future()]() mutable { f.wait(); });
  ThreadBusyMeter meter(2);
  meter.reset();
  meter.start();
  go.set_value();
  t.join();
  meter.stop();
  meter.finish();
  const UtilizationRecord u = meter.record();
  EXPECT_TRUE(std::isnan(u.busy));
  EXPECT_TRUE(std::isnan(u.cpu_time_s));
  EXPECT_TRUE(contains(u.note, "ended during the samples")) << u.note;
}

// Planted: a thread started after the samples began is not counted; the figure says so.
TEST(ThreadBusyMeter, AThreadStartedDuringTheSamplesLeavesNoFigure) {
  ThreadBusyMeter meter(2);
  meter.reset();
  meter.start();
  std::promise<void> go;
  std::thread t([f = go.get_future()]() mutable { f.wait(); });
  meter.stop();
  meter.finish();
  go.set_value();
  t.join();
  const UtilizationRecord u = meter.record();
  EXPECT_TRUE(std::isnan(u.busy));
  EXPECT_TRUE(contains(u.note, "threads changed during the samples (started: ")) << u.note;
}

// A CPU point through the backend: the OpenMP team is the denominator, every window holds its
// step (so the windows add up to at least the samples), and the figure is a share.
TEST(ThreadBusyMeter, ACpuPointIsBusyAShareOfItsTeam) {
  WorkloadSpec s;
  s.model = ModelShape{"test", 8, 2, 128, 1, ""};
  s.batch = 4;
  s.context = ContextSpec::fixed(300);
  s.block_size = 16;
  s.seed = 3;
  const Workload w = make_workload(s);
  auto backend = make_cpu_backend();
  TimingOptions warm;
  warm.warm_l2 = true;
  for (const TimingOptions& timing : {TimingOptions{}, warm}) {
    auto point = backend->prepare(w, "cpu", timing);
    point->run();
    point->begin_utilization();
    std::vector<double> samples;
    for (int i = 0; i < 5; ++i) samples.push_back(point->time_one());
    point->end_utilization();
    const std::optional<UtilizationRecord> u = point->utilization();
    ASSERT_TRUE(u.has_value());
    EXPECT_EQ(u->source, BusySource::cpu_threads);
    EXPECT_EQ(u->threads, omp_get_max_threads());
    EXPECT_EQ(u->note, "");
    EXPECT_GT(u->busy, 0);
    EXPECT_LE(u->busy, 1.05);
    EXPECT_GE(u->window_s, std::accumulate(samples.begin(), samples.end(), 0.0));
    EXPECT_GT(u->cpu_time_s, 0);
  }
}

}  // namespace
}  // namespace decodebench::cpu
