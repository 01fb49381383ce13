// The replay's measuring half on the real CPU backend: a small hand-made trace with a shared
// prefix is scheduled, its sampled steps are built (ragged contexts, shared pages), validated
// against the reference and timed with each kernel, and the report carries the replay section.
#include "harness/replay.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <optional>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "backends/backend.h"
#include "common/errors.h"
#include "report/replay_table.h"
#include "results/report.h"

namespace decodebench {
namespace {

// Block 32 tokens, page 16: requests 0-3 share a two-block system prompt (ids 0, 1).
Trace shared_prompt_trace() {
  Trace t;
  t.source = "hand-made";
  t.block_tokens = 32;
  t.has_prefix_info = true;
  const auto add = [&](double at, int input, int output, std::vector<std::uint64_t> ids) {
    t.requests.push_back({at, input, output, std::move(ids)});
  };
  add(0.00, 90, 12, {0, 1, 10});
  add(0.00, 100, 9, {0, 1, 20, 21});
  add(0.01, 70, 15, {0, 1, 30});
  add(0.02, 64, 6, {0, 1});
  add(0.03, 40, 10, {40, 41});
  return t;
}

ModelShape tiny_model() {
  ModelShape m;
  m.name = "tiny";
  m.num_q_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 64;
  m.num_layers = 2;
  return m;
}

ReplayPlan tiny_plan(std::vector<std::string> kernels) {
  ReplayPlan p;
  p.model = tiny_model();
  p.scope = Scope::attention;  // the tiny model has no layer shape
  p.kernels = std::move(kernels);
  p.block_size = 16;
  p.sample_steps = 3;
  p.schedule.rate_scale = 1;
  p.schedule.max_batch = 8;
  p.schedule.prefill_tokens_per_s = 1e5;
  p.schedule.decode_read_bytes_per_s = 1e10;
  p.schedule_device = "test";
  p.measure.measure.min_samples = 2;
  p.measure.measure.min_time_s = 0;
  p.measure.measure.max_noise = 1;
  p.measure.measure.timeout_s = 0.5;
  return p;
}

std::unique_ptr<Backend> cpu_or_skip() {
  try {
    return make_backend("cpu");
  } catch (const RuntimeFailure&) {
    return nullptr;
  }
}

TEST(Replay, SampledStepsPassValidationAndGiveTokensPerSecond) {
  auto be = cpu_or_skip();
  if (!be) GTEST_SKIP() << "no cpu backend";
  const Trace trace = shared_prompt_trace();
  const ReplayPlan plan = tiny_plan({"cpu", "cascade"});
  const std::vector<ReplaySetting> settings = {
      {.kv_pool_bytes = std::int64_t{1} << 20, .kv_dtype = DType::bf16}};
  const Report r = run_replay(*be, be->device_info(), trace, plan, settings);
  EXPECT_EQ(r.completion.state, Completion::State::complete) << r.completion.reason;
  ASSERT_EQ(r.results.size(), 6u);  // 3 steps x 2 kernels
  for (const PointResult& p : r.results) {
    EXPECT_EQ(p.status, PointStatus::ok) << p.index << ": " << p.reason;
    EXPECT_EQ(p.error.rows_checked, p.batch);  // every row against the reference
    EXPECT_GT(p.time_s.median, 0);
  }
  const nlohmann::json& cell = r.replay.at("settings").at(0);
  EXPECT_GT(cell.at("schedule").at("hit_rate").get<double>(), 0);  // the system prompt hits
  ASSERT_EQ(cell.at("kernels").size(), 2u);
  for (const auto& k : cell.at("kernels")) {
    ASSERT_TRUE(k.at("measured").is_object());
    EXPECT_GT(k.at("measured").at("tokens_per_s").get<double>(), 0);
    for (const auto& s : k.at("steps")) {
      const PointResult& p = r.results.at(s.at("result").get<std::size_t>());
      EXPECT_EQ(p.batch, s.at("batch").get<int>());
      EXPECT_EQ(p.kernel, s.at("kernel").get<std::string>());
    }
  }
  // The section survives the report's writer and reader, and the table prints it.
  const Report back = report_from_json(to_json(r));
  EXPECT_EQ(back.replay, r.replay);
  const std::string table = format_replay(back, OutputFormat::table);
  EXPECT_NE(table.find("cascade"), std::string::npos) << table;
  EXPECT_NE(table.find("lru"), std::string::npos) << table;
}

// A planted fault: a kernel the backend does not have makes every step skipped, and the
// setting publishes no tokens/s but the reason.
TEST(Replay, AStepThatDoesNotRunLeavesNoTokensPerSecond) {
  auto be = cpu_or_skip();
  if (!be) GTEST_SKIP() << "no cpu backend";
  const Trace trace = shared_prompt_trace();
  ReplayPlan plan = tiny_plan({"no-such-kernel"});
  plan.sample_steps = 1;
  const Report r = run_replay(*be, be->device_info(), trace, plan,
                              {{.kv_pool_bytes = std::int64_t{1} << 20, .kv_dtype = DType::bf16}});
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].status, PointStatus::skipped);
  const nlohmann::json& measured = r.replay.at("settings").at(0).at("kernels").at(0).at("measured");
  EXPECT_FALSE(measured.contains("tokens_per_s"));
  EXPECT_NE(measured.at("reason").get<std::string>().find("skipped"), std::string::npos);
}

// The cpu backend whose second prepare() blocks until released, as a long call that cannot poll
// the stop flag.
class StuckOnSecondStep : public Backend {
 public:
  explicit StuckOnSecondStep(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  DeviceInfo device_info() override { return inner_->device_info(); }
  Ceilings measure_ceilings() override { return inner_->measure_ceilings(); }
  std::vector<std::string> kernel_names() const override { return inner_->kernel_names(); }
  ComputeUnit compute_unit(std::string_view k) const override { return inner_->compute_unit(k); }
  std::string choose_kernel(const WorkloadSpec& s, const PagedLayout& l) override {
    return inner_->choose_kernel(s, l);
  }
  std::string skip_reason(const WorkloadSpec& s, const PagedLayout& l,
                          std::string_view k) override {
    return inner_->skip_reason(s, l, k);
  }
  std::unique_ptr<PreparedPoint> prepare(const Workload& w, std::string_view k,
                                         const TimingOptions& t) override {
    if (++prepares == 2) {
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return inner_->prepare(w, k, t);
  }
  std::atomic<int> prepares{0};
  std::atomic<bool> release{false};

 private:
  std::unique_ptr<Backend> inner_;
};

// The replay's steps are points of the same run as a sweep's (point_run.h): a stop that a stuck
// step does not heed is handed to abandon with the steps measured so far, marked interrupted,
// and the replay section holding them.
TEST(Replay, AStopThatAStuckStepDoesNotHeedIsHandedToAbandon) {
  auto cpu = cpu_or_skip();
  if (!cpu) GTEST_SKIP() << "no cpu backend";
  StuckOnSecondStep be(std::move(cpu));
  const Trace trace = shared_prompt_trace();
  ReplayPlan plan = tiny_plan({"cpu"});
  plan.measure.measure.warm_l2 = true;
  std::atomic<bool> stop{false};
  std::optional<Report> abandoned;
  ReplayRunOptions opt;
  opt.run.interrupted = &stop;
  opt.run.abandon_after_s = 0.2;
  opt.run.abandon = [&](const Report& r) {
    abandoned = r;
    be.release = true;  // (the CLI would end the process here)
  };
  std::thread signal([&] {
    while (be.prepares < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stop = true;
    // A replay without the watcher would wait here for ever: released after 10 s, it fails below.
    for (int i = 0; i < 2000 && !be.release; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    be.release = true;
  });
  const Report r =
      run_replay(be, be.device_info(), trace, plan,
                 {{.kv_pool_bytes = std::int64_t{1} << 20, .kv_dtype = DType::bf16}}, opt);
  signal.join();
  ASSERT_TRUE(abandoned.has_value());
  EXPECT_EQ(abandoned->completion.state, Completion::State::interrupted);
  EXPECT_NE(abandoned->completion.reason.find("replay step"), std::string::npos)
      << abandoned->completion.reason;
  ASSERT_EQ(abandoned->results.size(), 1u);  // the first step, measured before the stuck one
  EXPECT_EQ(abandoned->results[0].status, PointStatus::ok) << abandoned->results[0].reason;
  const nlohmann::json& steps =
      abandoned->replay.at("settings").at(0).at("kernels").at(0).at("steps");
  EXPECT_EQ(steps.size(), 1u) << abandoned->replay.dump();
  EXPECT_EQ(r.completion.state, Completion::State::interrupted);
}

TEST(Replay, StepPointCarriesTheLayoutsShape) {
  const Trace trace = shared_prompt_trace();
  const ReplayPlan plan = tiny_plan({"cpu"});
  ScheduleConfig c = plan.schedule;
  c.model = plan.model;
  c.kv_dtype = DType::bf16;
  c.page_tokens = 16;
  c.kv_pool_bytes = std::int64_t{1} << 20;
  const ReplaySchedule s = simulate_schedule(trace, c);
  ASSERT_FALSE(s.steps.empty());
  const std::int64_t step = static_cast<std::int64_t>(s.steps.size() / 2);
  const StepPoint sp = step_point(trace, s, step, plan, DType::bf16, "cpu", 7);
  EXPECT_EQ(sp.point.index, 7);
  EXPECT_EQ(sp.point.spec.batch, s.steps[step].batch);
  ASSERT_EQ(sp.layout.context_lens.size(), static_cast<std::size_t>(s.steps[step].batch));
  const auto [lo, hi] =
      std::minmax_element(sp.layout.context_lens.begin(), sp.layout.context_lens.end());
  EXPECT_EQ(sp.point.spec.context.lo, *lo);
  EXPECT_EQ(sp.point.spec.context.hi, *hi);
  EXPECT_NO_THROW(validate(sp.point.spec));
}

TEST(Replay, DistributionQuantilesInterpolateBetweenRanks) {
  const nlohmann::json d = distribution_json({4, 1, 3, 2, 5});
  EXPECT_EQ(d.at("count").get<int>(), 5);
  EXPECT_DOUBLE_EQ(d.at("mean").get<double>(), 3);
  EXPECT_DOUBLE_EQ(d.at("p50").get<double>(), 3);
  EXPECT_DOUBLE_EQ(d.at("p10").get<double>(), 1.4);
  EXPECT_DOUBLE_EQ(d.at("max").get<double>(), 5);
  EXPECT_EQ(distribution_json({}).at("count").get<int>(), 0);
}

TEST(Replay, ModelStepSecondsByScope) {
  PointResult r;
  r.status = PointStatus::ok;
  r.scope = Scope::attention;
  r.num_layers = 32;
  r.batch = 4;
  r.time_s.median = 1e-4;
  EXPECT_DOUBLE_EQ(model_step_seconds(r), 32e-4);
  r.scope = Scope::layer;
  r.layer = LayerRecord{};
  r.layer->tokens_per_s_with_lm_head = 100;
  EXPECT_DOUBLE_EQ(model_step_seconds(r), 0.04);
  r.status = PointStatus::wrong;
  EXPECT_TRUE(std::isnan(model_step_seconds(r)));  // kNotAvailable
}

}  // namespace
}  // namespace decodebench
