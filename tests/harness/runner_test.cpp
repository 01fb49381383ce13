// run_sweep / run_check_point with fake backends: validation before timing, a planted wrong
// element, skips, errors, a device failure mid-sweep, interruption and checkpoints.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "common/errors.h"
#include "harness/measure.h"
#include "harness/point_run.h"
#include "harness/runner.h"
#include "reference/reference.h"
#include "results/point_identity.h"
#include "results/self_check.h"
#include "support/host_test_util.h"

namespace decodebench {
namespace {

using test::TempDir;

// Outputs the reference itself (exactly right), optionally with one element off by `delta`.
class FakePrepared : public PreparedPoint {
 public:
  FakePrepared(const Workload& w, int bad_row, float delta, int* time_calls)
      : out_(reference_decode(w)), time_calls_(time_calls) {
    if (bad_row >= 0) {
      const std::size_t row =
          static_cast<std::size_t>(w.spec.model.num_q_heads) * w.spec.model.head_dim;
      out_[bad_row * row + row / 2 + 1] += delta;  // one element in the middle of the row
    }
  }
  void run() override { ++runs_; }
  std::vector<float> output() override {
    if (runs_ == 0) throw std::logic_error("output() before run()");
    return out_;
  }
  double time_one() override {
    ++*time_calls_;
    ++samples_;
    return step_s_;
  }
  std::vector<double> paired_read_samples() const override {  // half the fake read ceiling
    return std::vector<double>(static_cast<std::size_t>(samples_), 5e9);
  }
  // Chosen on the first sample, as the cuda backend's warm timing does: read after measuring.
  TimingRecord timing() const override {
    if (cold_) return {TimingMethod::events_per_step, 1, /*warm_l2=*/false};
    return {TimingMethod::graph_replay, *time_calls_ > 0 ? 7 : 0, /*warm_l2=*/true};
  }
  std::optional<FlushRecord> flush_record() const override { return flush_; }
  // Planted faults for the self-checks: cold samples of `step_s`, this flush.
  void plant(bool cold, double step_s, std::optional<FlushRecord> flush) {
    cold_ = cold;
    step_s_ = step_s;
    flush_ = flush;
  }
  // As a GPU's: 90 % busy at 400 W, once the span of the samples is closed.
  void begin_utilization() override { spans_ += "["; }
  void end_utilization() override { spans_ += "]"; }
  std::optional<UtilizationRecord> utilization() const override {
    UtilizationRecord u;
    u.source = BusySource::nvml;
    u.note = spans_;  // which hooks ran, for the test
    if (spans_ == "[]") {
      u.busy = 0.9;
      u.power_W = 400;
    }
    return u;
  }

 private:
  std::vector<float> out_;
  int runs_ = 0;
  int* time_calls_;
  int samples_ = 0;  // this point's own (time_calls_ counts every point's)
  std::string spans_;
  bool cold_ = false;
  double step_s_ = 1e-3;
  std::optional<FlushRecord> flush_;
};

class FakeBackend : public Backend {
 public:
  std::string name() const override { return "fake"; }
  DeviceInfo device_info() override {
    DeviceInfo d;
    d.backend = "fake";
    d.name = "Fake Device";
    d.bandwidth_datasheet = 2e10;
    return d;
  }
  Ceilings measure_ceilings() override {
    ++ceiling_calls;
    Ceilings c;
    c.read = 1e10;
    return c;
  }
  std::vector<std::string> kernel_names() const override { return {"good", "bad", "big"}; }
  // "big" stands for a tensor-core kernel, the others for CUDA-core ones.
  ComputeUnit compute_unit(std::string_view kernel) const override {
    return kernel == "big" ? ComputeUnit::tensor_core : ComputeUnit::fma;
  }
  std::string choose_kernel(const WorkloadSpec& spec, const PagedLayout&) override {
    return spec.batch >= 4 ? "big" : "good";
  }
  std::string skip_reason(const WorkloadSpec& spec, const PagedLayout&,
                          std::string_view kernel) override {
    if (spec.batch > skip_above_batch) return "does not fit the fake device";
    if (kernel == "big" && spec.batch < 4) return "big wants batch >= 4";
    return "";
  }
  std::unique_ptr<PreparedPoint> prepare(const Workload& w, std::string_view kernel,
                                         const TimingOptions&) override {
    ++prepare_calls;
    if (prepare_calls == fail_on_prepare) throw RuntimeFailure("fake device lost");
    if (prepare_calls == throw_logic_on_prepare) throw std::logic_error("fake bug");
    const int bad = kernel == "bad" ? (bad_row >= 0 ? bad_row : w.spec.batch - 1) : -1;
    if (w.k_cache.empty()) {  // layout-only (backend.h): generate the data "on the device"
      ++layout_only_offers;
      if (!accepts_layout_only) throw InputError("fake backend needs host data");
      EXPECT_EQ(w.rows(), w.spec.batch);
      EXPECT_EQ(static_cast<int>(w.source_block_ids.size()), w.layout.num_blocks);
      return std::make_unique<FakePrepared>(make_workload(w.spec), bad, delta, &time_calls);
    }
    auto p = std::make_unique<FakePrepared>(w, bad, delta, &time_calls);
    p->plant(cold, step_s, flush);
    return p;
  }

  int prepare_calls = 0, ceiling_calls = 0, time_calls = 0;
  int fail_on_prepare = -1;
  int throw_logic_on_prepare = -1;
  int skip_above_batch = 1 << 30;
  int bad_row = -1;  // -1: the last row
  bool accepts_layout_only = false;
  int layout_only_offers = 0;
  float delta = 0.25f;
  bool cold = false;  // cold samples (events_per_step) with the flush below
  double step_s = 1e-3;
  std::optional<FlushRecord> flush;
};

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override { model_ = dir_.write("tiny.json", test::tiny_model_json()).string(); }
  SweepConfig config(std::vector<std::string> kernels, std::vector<int> batches) const {
    SweepConfig c;
    c.models = {model_};
    c.kernels = std::move(kernels);
    c.batches = std::move(batches);
    c.contexts = {ContextSpec::fixed(17)};
    c.measure.min_samples = 3;
    c.measure.min_time_s = 0;
    c.measure.timeout_s = 5;
    return c;
  }
  TempDir dir_;
  std::string model_;
};

// The self-checks run on every timed point: a timer around nothing (1 ns steps: far above the
// fake's 20 GB/s datasheet) and a flush of one byte against a 100-byte cache are both flagged,
// the row kept ok with its figures, and left out of the knees. Warm points are not held to it.
// The one rule for how a point's measurement ends (sweep and replay both use it): each way out
// of `measure`, and a point that is not ok keeps no samples.
TEST(MeasureGuarded, EachWayAPointEnds) {
  const auto with_samples = [] {
    PointResult r;
    r.status = PointStatus::ok;
    r.samples = {1e-3, 2e-3};
    return r;
  };
  PointResult ok = with_samples();
  EXPECT_EQ(measure_guarded(ok, [](PointResult&) {}), PointEnd::measured);
  EXPECT_EQ(ok.samples.size(), 2u);
  PointResult device = with_samples();
  EXPECT_EQ(measure_guarded(device, [](PointResult&) { throw RuntimeFailure("sticky error"); }),
            PointEnd::device_failed);
  EXPECT_EQ(device.status, PointStatus::error);
  EXPECT_EQ(device.reason, "sticky error");
  EXPECT_TRUE(device.samples.empty());
  PointResult own = with_samples();
  EXPECT_EQ(measure_guarded(own, [](PointResult&) { throw std::runtime_error("bad shape"); }),
            PointEnd::measured);
  EXPECT_EQ(own.status, PointStatus::error);
  EXPECT_TRUE(own.samples.empty());
  PointResult stopped = with_samples();
  EXPECT_EQ(measure_guarded(stopped, [](PointResult&) { throw Interrupted(); }),
            PointEnd::interrupted);
  Report report;
  mark_device_failure(report, "replay step 7", "sticky error");
  EXPECT_EQ(report.completion.state, Completion::State::device_failure);
  EXPECT_EQ(report.completion.reason, "device failure at replay step 7: sticky error");
}

TEST_F(RunnerTest, PlantedImpossibleBandwidthAndSmallFlushAreFlagged) {
  FakeBackend be;
  be.cold = true;
  be.step_s = 1e-9;
  be.flush = FlushRecord{1, 100};
  const Report r = run_sweep(be, config({"good"}, {1, 3}));
  ASSERT_EQ(r.results.size(), 2u);
  for (const auto& p : r.results) {
    EXPECT_EQ(p.status, PointStatus::ok) << p.reason;
    EXPECT_DOUBLE_EQ(p.time_s.median, 1e-9);  // kept as measured
    ASSERT_TRUE(p.flush);
    EXPECT_EQ(p.flush->flush_bytes, 1);
    ASSERT_EQ(p.flags.size(), 2u);
    EXPECT_EQ(p.flags[0].name, kFlagAboveDatasheet);
    EXPECT_NE(p.flags[0].reason.find("exceeds the Fake Device datasheet 20.0 GB/s"),
              std::string::npos)
        << p.flags[0].reason;
    EXPECT_EQ(p.flags[1].name, kFlagSmallFlush);
  }
  EXPECT_TRUE(r.knees.empty()) << r.knees.dump();

  FakeBackend sane;  // cold, 1 ms steps (well under the read ceiling), a flush of 2x the cache
  sane.cold = true;
  sane.flush = FlushRecord{200, 100};
  for (const auto& p : run_sweep(sane, config({"good"}, {1, 3})).results) {
    EXPECT_TRUE(p.flags.empty()) << p.flags[0].reason;
  }
  FakeBackend warm;  // warm: 1 ns from a cache is no fault, and a warm point records no flush
  warm.step_s = 1e-9;
  warm.flush = FlushRecord{1, 100};
  for (const auto& p : run_sweep(warm, config({"good"}, {1, 3})).results) {
    EXPECT_TRUE(p.flags.empty()) << p.flags[0].reason;
    EXPECT_FALSE(p.flush);
  }
}

TEST_F(RunnerTest, CorrectPointsAreTimedAndPublished) {
  FakeBackend be;
  const Report r = run_sweep(be, config({"good"}, {1, 3}));
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(be.ceiling_calls, 1);
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].measured.read, 1e10);
  EXPECT_EQ(r.completion.state, Completion::State::complete);
  for (const auto& p : r.results) {
    EXPECT_EQ(p.status, PointStatus::ok) << p.reason;
    EXPECT_EQ(p.time_s.samples, 3);
    EXPECT_DOUBLE_EQ(p.time_s.median, 1e-3);
    EXPECT_DOUBLE_EQ(p.bandwidth.achieved, p.bytes.min / 1e-3);
    EXPECT_DOUBLE_EQ(p.roofline.fraction_measured, p.bytes.min / 1e10 / 1e-3);
    EXPECT_DOUBLE_EQ(p.roofline.paired_read_Bps, 5e9);  // from the prepared point
    ASSERT_TRUE(p.timing.has_value());                  // as the point says, after the samples
    EXPECT_EQ(p.timing->method, TimingMethod::graph_replay);
    EXPECT_EQ(p.timing->steps_per_sample, 7);
    EXPECT_TRUE(p.timing->warm_l2);
    EXPECT_DOUBLE_EQ(p.roofline.fraction_paired, p.bytes.min / 5e9 / 1e-3);
    EXPECT_DOUBLE_EQ(p.tokens_per_s, p.batch / (1e-3 * 3));  // tiny model: 3 layers
    // The busy figure as the point gives it after its span, finished with the point's times.
    ASSERT_TRUE(p.utilization.has_value());
    EXPECT_EQ(p.utilization->note, "[]");
    EXPECT_DOUBLE_EQ(p.utilization->busy, 0.9);
    EXPECT_DOUBLE_EQ(p.utilization->energy_J_per_step, 400 * 1e-3);
    EXPECT_DOUBLE_EQ(p.utilization->energy_J_per_token, 400 / p.tokens_per_s);
    EXPECT_EQ(p.error.max_abs, 0);
    EXPECT_EQ(p.error.rows_checked, p.batch);
    EXPECT_GT(p.bytes.min, 0);
    EXPECT_EQ(p.model, "tiny");
  }
  EXPECT_EQ(r.config, to_json(config({"good"}, {1, 3})));
}

TEST_F(RunnerTest, AWrongElementMakesThePointWrongAndUntimed) {
  FakeBackend be;
  const Report r = run_sweep(be, config({"good", "bad"}, {2}));
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].status, PointStatus::ok);
  const PointResult& bad = r.results[1];
  EXPECT_EQ(bad.status, PointStatus::wrong);
  EXPECT_NE(bad.reason.find("1 of"), std::string::npos) << bad.reason;
  EXPECT_NEAR(bad.error.max_abs, 0.25, 1e-6);
  EXPECT_FALSE(bad.error.first_mismatch.empty());
  // No throughput of any kind is published for a wrong point, and it was never timed.
  EXPECT_TRUE(std::isnan(bad.time_s.median));
  EXPECT_TRUE(std::isnan(bad.bandwidth.achieved));
  EXPECT_TRUE(std::isnan(bad.tokens_per_s));
  EXPECT_FALSE(bad.utilization.has_value());
  EXPECT_TRUE(std::isnan(bad.roofline.fraction_measured));
  EXPECT_TRUE(bad.samples.empty());
  EXPECT_FALSE(bad.timing.has_value());
  EXPECT_EQ(be.time_calls, 3);  // only the good point's samples
}

TEST_F(RunnerTest, LargeBatchesValidateASubsetWithTheRightRows) {
  FakeBackend be;
  SweepConfig c = config({"good", "bad"}, {37});
  c.validate_max_rows = 5;
  be.bad_row = 36;  // the last sequence is always in the subset
  const Report r = run_sweep(be, c);
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].status, PointStatus::ok) << r.results[0].reason;  // rows mapped right
  EXPECT_EQ(r.results[0].error.rows_checked, 5);
  EXPECT_EQ(r.results[1].status, PointStatus::wrong);
}

TEST_F(RunnerTest, SubsetPointsAreOfferedLayoutOnlyWithAFallback) {
  for (bool accepts : {true, false}) {
    FakeBackend be;
    be.accepts_layout_only = accepts;
    SweepConfig c = config({"good"}, {37, 3});
    c.validate_max_rows = 5;
    RunOptions opt;
    opt.layout_only_above_bytes = 1000;  // batch 37 x 17 tokens is ~330 kB: above
    const Report r = run_sweep(be, c, opt);
    ASSERT_EQ(r.results.size(), 2u);
    EXPECT_EQ(r.results[0].status, PointStatus::ok) << r.results[0].reason;
    EXPECT_EQ(r.results[1].status, PointStatus::ok) << r.results[1].reason;
    EXPECT_EQ(be.layout_only_offers, 1);  // only the subset-validated point (batch 37)
    EXPECT_EQ(be.prepare_calls, accepts ? 2 : 3);
  }
}

TEST_F(RunnerTest, SmallSubsetPointsAreMaterializedOnTheHost) {
  FakeBackend be;
  be.accepts_layout_only = true;
  SweepConfig c = config({"good"}, {37});
  c.validate_max_rows = 5;
  const Report r = run_sweep(be, c);  // default threshold 256 MiB
  EXPECT_EQ(r.results[0].status, PointStatus::ok);
  EXPECT_EQ(be.layout_only_offers, 0);
}

TEST_F(RunnerTest, AutoIsResolvedAndRecorded) {
  FakeBackend be;
  const Report r = run_sweep(be, config({"auto"}, {1, 5}));
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].kernel, "good");
  EXPECT_EQ(r.results[1].kernel, "big");
  for (const auto& p : r.results) EXPECT_EQ(p.kernel_requested, "auto");
}

// The roofline takes the FLOP roof of the units of the kernel that ran ("auto" resolved first):
// the fake device has neither figure, so both ceilings are named unknown.
TEST_F(RunnerTest, RooflineUsesTheComputeRoofOfTheKernelThatRan) {
  FakeBackend be;
  const Report r = run_sweep(be, config({"auto"}, {1, 4}));
  ASSERT_EQ(r.results.size(), 2u);
  const PointResult& cuda_core = r.results[0];
  const PointResult& tensor = r.results[1];
  ASSERT_EQ(cuda_core.kernel, "good");
  ASSERT_EQ(tensor.kernel, "big");
  ASSERT_TRUE(cuda_core.roofline.compute_ceiling.has_value());
  ASSERT_TRUE(tensor.roofline.compute_ceiling.has_value());
  EXPECT_EQ(cuda_core.roofline.compute_ceiling->unit, ComputeUnit::fma);
  EXPECT_EQ(cuda_core.roofline.compute_ceiling->name, "fp32 FMA (unknown)");
  EXPECT_EQ(tensor.roofline.compute_ceiling->unit, ComputeUnit::tensor_core);
  EXPECT_EQ(tensor.roofline.compute_ceiling->name, "tensor-core f16/bf16 (unknown)");
}

TEST_F(RunnerTest, SkippedPointsCarryTheBackendsReasonAndTheSweepGoesOn) {
  FakeBackend be;
  be.skip_above_batch = 2;
  const Report r = run_sweep(be, config({"good"}, {1, 3, 2}));
  ASSERT_EQ(r.results.size(), 3u);
  EXPECT_EQ(r.results[0].status, PointStatus::ok);
  EXPECT_EQ(r.results[1].status, PointStatus::skipped);
  EXPECT_EQ(r.results[1].reason, "does not fit the fake device");
  EXPECT_GT(r.results[1].bytes.min, 0);  // the model's numbers are still there
  EXPECT_EQ(r.results[2].status, PointStatus::ok);
  EXPECT_EQ(be.prepare_calls, 2);
}

TEST_F(RunnerTest, ADeviceFailureStopsTheSweepKeepingFinishedPoints) {
  FakeBackend be;
  be.fail_on_prepare = 3;
  const Report r = run_sweep(be, config({"good"}, {1, 2, 3, 4, 5}));
  ASSERT_EQ(r.results.size(), 5u);
  EXPECT_EQ(r.results[0].status, PointStatus::ok);
  EXPECT_EQ(r.results[1].status, PointStatus::ok);
  EXPECT_EQ(r.results[2].status, PointStatus::error);
  EXPECT_EQ(r.results[3].status, PointStatus::not_run);  // listed, so a resume can run them
  EXPECT_EQ(r.results[4].status, PointStatus::not_run);
  EXPECT_EQ(r.results[4].batch, 5);
  EXPECT_EQ(points_finished(r), 3);
  EXPECT_NE(r.results[2].reason.find("fake device lost"), std::string::npos);
  EXPECT_EQ(r.completion.state, Completion::State::device_failure);
  EXPECT_EQ(r.completion.points_planned, 5);
  EXPECT_NE(r.completion.reason.find("fake device lost"), std::string::npos);
}

class FailingCeilings : public FakeBackend {
 public:
  Ceilings measure_ceilings() override { throw std::runtime_error("fake ceilings broke"); }
};

// An error outside any point propagates, and the file left behind says failed with the error,
// never running (planted: the ceilings throw; a checkpoint writer that fails on the first point).
TEST_F(RunnerTest, AnErrorOutsideAPointLeavesTheReportFailedNotRunning) {
  FailingCeilings be;
  std::vector<Report> written;
  RunOptions opt;
  opt.checkpoint = [&](const Report& r) { written.push_back(r); };
  EXPECT_THROW(run_sweep(be, config({"good"}, {1, 2}), opt), std::runtime_error);
  ASSERT_GE(written.size(), 2u);
  EXPECT_EQ(written.front().completion.state, Completion::State::running);
  EXPECT_EQ(written.back().completion.state, Completion::State::failed);
  EXPECT_EQ(written.back().completion.reason, "stopped by an error: fake ceilings broke");
  EXPECT_EQ(partial_note(written.back()).rfind("failed: stopped by an error", 0), 0u)
      << partial_note(written.back());

  FakeBackend fine;
  written.clear();
  int calls = 0;
  opt.checkpoint = [&](const Report& r) {
    if (++calls == 2) throw std::runtime_error("disk full");
    written.push_back(r);
  };
  EXPECT_THROW(run_sweep(fine, config({"good"}, {1, 2}), opt), std::runtime_error);
  ASSERT_FALSE(written.empty());
  EXPECT_EQ(written.back().completion.state, Completion::State::failed);
  EXPECT_EQ(written.back().completion.reason, "stopped by an error: disk full");
  EXPECT_EQ(points_finished(written.back()), 1);  // the point before the failed write is kept
}

TEST_F(RunnerTest, OtherExceptionsMakeOnePointErrorAndTheSweepGoesOn) {
  FakeBackend be;
  be.throw_logic_on_prepare = 1;
  const Report r = run_sweep(be, config({"good"}, {1, 2}));
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].status, PointStatus::error);
  EXPECT_NE(r.results[0].reason.find("fake bug"), std::string::npos);
  EXPECT_EQ(r.results[1].status, PointStatus::ok);
  EXPECT_EQ(r.completion.state, Completion::State::complete);
}

TEST_F(RunnerTest, InterruptKeepsFinishedPointsAndCheckpointsSeeEachOne) {
  FakeBackend be;
  std::atomic<bool> stop{false};
  std::vector<int> checkpoint_finished;
  std::vector<Completion::State> checkpoint_states;
  std::vector<int> progress_done;
  RunOptions opt;
  opt.interrupted = &stop;
  opt.checkpoint = [&](const Report& r) {
    EXPECT_EQ(r.results.size(), 4u);  // every planned point, the rest not_run
    checkpoint_finished.push_back(points_finished(r));
    checkpoint_states.push_back(r.completion.state);
    // The first one comes before the ceilings: a sweep killed there leaves a report too.
    if (checkpoint_finished.size() == 1) {
      EXPECT_EQ(be.ceiling_calls, 0);
    }
  };
  opt.progress = [&](int done, int total, double elapsed, const PointResult&) {
    progress_done.push_back(done);
    EXPECT_EQ(total, 4);
    EXPECT_GE(elapsed, 0);
    if (done == 2) stop = true;
  };
  const Report r = run_sweep(be, config({"good"}, {1, 2, 3, 4}), opt);
  ASSERT_EQ(r.results.size(), 4u);
  EXPECT_EQ(points_finished(r), 2);
  EXPECT_EQ(r.results[2].status, PointStatus::not_run);
  EXPECT_EQ(r.results[3].status, PointStatus::not_run);
  EXPECT_EQ(r.completion.state, Completion::State::interrupted);
  EXPECT_EQ(checkpoint_finished, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(checkpoint_states, std::vector<Completion::State>(3, Completion::State::running));
  EXPECT_EQ(progress_done, (std::vector<int>{1, 2}));
}

// Sets the stop flag from inside the sampling of one point.
class StopWhileSampling : public FakeBackend {
 public:
  std::atomic<bool>* stop = nullptr;
  int stop_after_time_calls = 5;
  std::unique_ptr<PreparedPoint> prepare(const Workload& w, std::string_view kernel,
                                         const TimingOptions& t) override {
    auto inner = FakeBackend::prepare(w, kernel, t);
    struct Wrapped : PreparedPoint {
      std::unique_ptr<PreparedPoint> p;
      StopWhileSampling* be;
      void run() override { p->run(); }
      std::vector<float> output() override { return p->output(); }
      double time_one() override {
        const double t = p->time_one();
        if (be->time_calls == be->stop_after_time_calls) *be->stop = true;
        return t;
      }
      TimingRecord timing() const override { return p->timing(); }
    };
    auto w2 = std::make_unique<Wrapped>();
    w2->p = std::move(inner);
    w2->be = this;
    return w2;
  }
};

TEST_F(RunnerTest, AnInterruptDuringSamplingStopsAtTheNextSample) {
  StopWhileSampling be;
  std::atomic<bool> stop{false};
  be.stop = &stop;
  RunOptions opt;
  opt.interrupted = &stop;
  SweepConfig c = config({"good"}, {1, 2});
  c.measure.min_samples = 4;  // point 0 takes 4 samples, point 1 is stopped at its first
  const Report r = run_sweep(be, c, opt);
  EXPECT_EQ(be.time_calls, 5);  // no sample after the flag
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].status, PointStatus::ok);
  EXPECT_EQ(r.results[1].status, PointStatus::not_run);
  EXPECT_TRUE(r.results[1].samples.empty());  // nothing half-measured is published
  EXPECT_EQ(r.completion.state, Completion::State::interrupted);
  EXPECT_NE(r.completion.reason.find("during point 1"), std::string::npos) << r.completion.reason;
}

TEST_F(RunnerTest, AnInterruptDuringTheLastPointIsNotIgnored) {
  StopWhileSampling be;
  std::atomic<bool> stop{false};
  be.stop = &stop;
  be.stop_after_time_calls = 1;
  RunOptions opt;
  opt.interrupted = &stop;
  const Report r = run_sweep(be, config({"good"}, {1}), opt);
  EXPECT_EQ(r.results[0].status, PointStatus::not_run);
  EXPECT_EQ(r.completion.state, Completion::State::interrupted);
}

TEST_F(RunnerTest, ResumeRunsOnlyWhatIsMissingAndKeepsTheRest) {
  const SweepConfig c = config({"good", "bad"}, {1, 2, 3});
  FakeBackend whole;
  const Report want = run_sweep(whole, c);
  ASSERT_EQ(want.results.size(), 6u);

  FakeBackend first;
  std::atomic<bool> stop{false};
  RunOptions opt;
  opt.interrupted = &stop;
  opt.progress = [&](int done, int, double, const PointResult&) { stop = done == 4; };
  Report cut = run_sweep(first, c, opt);
  ASSERT_EQ(points_finished(cut), 4);
  cut.results[1].status = PointStatus::not_run;  // as a resume would find a gap too
  cut.results.pop_back();                        // and a point missing altogether

  FakeBackend second;
  RunOptions resume;
  resume.resume = &cut;
  std::vector<int> progress_done;
  resume.progress = [&](int done, int, double, const PointResult&) {
    progress_done.push_back(done);
  };
  const Report r = run_sweep(second, c, resume);
  EXPECT_EQ(second.ceiling_calls, 0);  // the report's ceilings are reused
  EXPECT_EQ(second.prepare_calls, 3);  // points 1, 4 and 5
  EXPECT_EQ(progress_done, (std::vector<int>{4, 5, 6}));
  ASSERT_EQ(r.results.size(), want.results.size());
  for (std::size_t i = 0; i < r.results.size(); ++i) {
    EXPECT_EQ(r.results[i].index, want.results[i].index);
    EXPECT_EQ(point_identity(r.results[i]), point_identity(want.results[i]));
    EXPECT_EQ(r.results[i].status, want.results[i].status) << i;
  }
  for (int i : {0, 2, 3}) EXPECT_EQ(to_json(r.results[i]), to_json(cut.results[i])) << i;
  EXPECT_EQ(r.completion.state, Completion::State::complete);
  EXPECT_EQ(r.created, cut.created);
}

TEST_F(RunnerTest, ResumeRefusesAnotherSweepsReportNamingWhatDiffers) {
  const SweepConfig c = config({"good"}, {1, 2});
  FakeBackend be;
  const Report prev = run_sweep(be, c);
  const auto refused = [&](const Report& p, const SweepConfig& cfg, const std::string& names) {
    FakeBackend other;
    RunOptions o;
    o.resume = &p;
    try {
      run_sweep(other, cfg, o);
      ADD_FAILURE() << "not refused: " << names;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
    }
    EXPECT_EQ(other.prepare_calls, 0);
  };
  SweepConfig more = c;
  more.batches = {1, 2, 3};
  refused(prev, more, "config.batch");
  SweepConfig samples = c;
  samples.measure.min_samples = 7;
  refused(prev, samples, "config.measure.min_samples (report 3, now 7)");
  Report sha = prev;
  sha.tool.git_sha = "0123456789ab";
  refused(sha, c, "tool (report");
  Report device = prev;
  device.devices[0].name = "Other Device";
  refused(device, c, "device (report fake 'Other Device', now fake 'Fake Device')");
  Report alien = prev;
  alien.results[1].batch = 9;
  refused(alien, c, "the report's point 1 is");
}

// Ceilings that block until released, as a long measurement that cannot poll the flag.
class SlowCeilings : public FakeBackend {
 public:
  std::atomic<bool> release{false};
  Ceilings measure_ceilings() override {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return FakeBackend::measure_ceilings();
  }
};

TEST_F(RunnerTest, AStopThatAStuckCallDoesNotHeedIsHandedToAbandon) {
  SlowCeilings be;
  std::atomic<bool> stop{false};
  std::optional<Report> abandoned;
  double abandoned_after = -1;
  const double start = steady_seconds();
  RunOptions opt;
  opt.interrupted = &stop;
  opt.abandon_after_s = 0.2;
  opt.abandon = [&](const Report& r) {
    abandoned = r;
    abandoned_after = steady_seconds() - start;
    be.release = true;  // (the CLI would end the process here)
  };
  // The signal comes while the ceilings run: a moment after the first checkpoint.
  std::thread signal;
  opt.checkpoint = [&](const Report&) {
    if (signal.joinable()) return;
    signal = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      stop = true;
    });
  };
  const Report r = run_sweep(be, config({"good"}, {1, 2}), opt);
  signal.join();
  ASSERT_TRUE(abandoned.has_value());
  EXPECT_GE(abandoned_after, 0.2);
  EXPECT_LT(abandoned_after, 2.0);
  EXPECT_EQ(abandoned->completion.state, Completion::State::interrupted);
  EXPECT_NE(abandoned->completion.reason.find("ceilings"), std::string::npos)
      << abandoned->completion.reason;
  EXPECT_EQ(points_finished(*abandoned), 0);
  EXPECT_EQ(r.completion.state, Completion::State::interrupted);
}

TEST_F(RunnerTest, GivenCeilingsAreNotRemeasured) {
  FakeBackend be;
  RunOptions opt;
  Ceilings c;
  c.read = 5e9;
  opt.ceilings = c;
  const Report r = run_sweep(be, config({"good"}, {1}), opt);
  EXPECT_EQ(be.ceiling_calls, 0);
  EXPECT_EQ(r.devices[0].measured.read, 5e9);
}

TEST_F(RunnerTest, BadInputIsRejectedBeforeAnythingRuns) {
  FakeBackend be;
  EXPECT_THROW(run_sweep(be, config({"nope"}, {1})), InputError);
  try {
    run_sweep(be, config({"nope"}, {1}));
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("good, bad, big"), std::string::npos) << e.what();
  }
  // An impossible shape (head_dim 48) is found before the first point runs.
  const auto odd = dir_.write("odd.json", R"({"name": "odd", "num_q_heads": 4,
      "num_kv_heads": 2, "head_dim": 48, "num_layers": 1})");
  SweepConfig c = config({"good"}, {1});
  c.models = {model_, odd.string()};
  EXPECT_THROW(run_sweep(be, c), InputError);
  EXPECT_EQ(be.prepare_calls, 0);
}

TEST_F(RunnerTest, Fp8PointsReportTheQuantizationError) {
  FakeBackend be;
  SweepConfig c = config({"good"}, {2});
  c.kv_dtypes = {DType::fp8_e4m3, DType::f16};
  const Report r = run_sweep(be, c);
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].status, PointStatus::ok);
  EXPECT_GT(r.results[0].error.quant_rel, 1e-4);  // e4m3 has 3 mantissa bits
  EXPECT_LT(r.results[0].error.quant_rel, 0.2);
  EXPECT_TRUE(std::isnan(r.results[1].error.quant_rel));  // f16: not reported
}

TEST_F(RunnerTest, CheckPointValidatesWithoutTiming) {
  FakeBackend be;
  const auto points = expand(config({"good", "bad"}, {3}));
  ASSERT_EQ(points.size(), 2u);
  const PointResult ok = run_check_point(be, points[0]);
  EXPECT_EQ(ok.status, PointStatus::ok);
  EXPECT_EQ(ok.time_s.samples, 0);
  const PointResult wrong = run_check_point(be, points[1]);
  EXPECT_EQ(wrong.status, PointStatus::wrong);
  EXPECT_EQ(be.time_calls, 0);
}

// ---- a model whose layers differ ----------------------------------------------------------

// Outputs what the reference says for the layer kind it is given, or (ignore_window) for full
// attention whatever the window: a backend that drops the window. A windowed step takes 1 ms, a
// full one 3 ms.
class KindBackend : public FakeBackend {
 public:
  std::unique_ptr<PreparedPoint> prepare(const Workload& w, std::string_view,
                                         const TimingOptions&) override {
    windows_seen.push_back(w.spec.model.uniform_window());
    Workload as_run = w;
    if (ignore_window) as_run.spec.model = w.spec.model.with_window(0);
    return std::make_unique<Timed>(as_run, windows_seen.back() > 0 ? 1e-3 : 3e-3, &time_calls);
  }
  bool ignore_window = false;
  std::vector<int> windows_seen;

 private:
  class Timed : public FakePrepared {
   public:
    Timed(const Workload& w, double t, int* calls) : FakePrepared(w, -1, 0, calls), t_(t) {}
    double time_one() override {
      FakePrepared::time_one();
      return t_;
    }

   private:
    double t_;
  };
};

// gemma-2's pattern on 4 layers: layers 0 and 2 windowed (8 tokens), 1 and 3 full. Each kind is
// validated against its own reference, a sample is the mean layer's time, and tokens/s and the
// bytes sum the layers one by one.
TEST_F(RunnerTest, AModelWithWindowedAndFullLayersTimesEachKind) {
  const std::string mixed =
      dir_.write("mixed.json",
                 R"({"name": "mixed", "num_q_heads": 4, "num_kv_heads": 2, "head_dim": 64,
                     "num_layers": 4, "sliding_window": 8,
                     "window_layers": {"local": 1, "every": 2}})")
          .string();
  SweepConfig c = config({"good"}, {3});
  c.models = {mixed};
  c.contexts = {ContextSpec::fixed(40)};
  KindBackend be;
  const Report r = run_sweep(be, c);
  ASSERT_EQ(r.results.size(), 1u);
  const PointResult& p = r.results[0];
  ASSERT_EQ(p.status, PointStatus::ok) << p.reason;
  EXPECT_EQ(be.windows_seen, (std::vector<int>{8, 0}));
  EXPECT_DOUBLE_EQ(p.time_s.median, 2e-3);                      // (1 + 3) / 2 ms
  EXPECT_DOUBLE_EQ(p.tokens_per_s, 3 / (2 * 1e-3 + 2 * 3e-3));  // 2 windowed + 2 full layers
  EXPECT_EQ(p.sliding_window, 8);
  EXPECT_EQ(p.windowed_layers, 2);
  // Each kind's span was opened and closed; on a GPU they share it: the first kind's figure.
  ASSERT_TRUE(p.utilization.has_value());
  EXPECT_DOUBLE_EQ(p.utilization->busy, 0.9);
  EXPECT_DOUBLE_EQ(p.utilization->energy_J_per_token, 400 / p.tokens_per_s);
  // KV per layer: a windowed layer reads the blocks holding its last 8 tokens (tokens 32..39:
  // block 2, 8 tokens), a full one all 40; the mean layer 24 tokens per sequence.
  const double per_token = 2 * 2 * 64 * 2;  // K and V, Hkv 2, d 64, f16
  EXPECT_DOUBLE_EQ(p.bytes.kv_logical, 3 * 24 * per_token);

  KindBackend wrong;
  wrong.ignore_window = true;
  const Report w = run_sweep(wrong, c);
  ASSERT_EQ(w.results.size(), 1u);
  EXPECT_EQ(w.results[0].status, PointStatus::wrong);
  EXPECT_NE(w.results[0].reason.find("its 2 layers with a 8-token window"), std::string::npos)
      << w.results[0].reason;
}

}  // namespace
}  // namespace decodebench
