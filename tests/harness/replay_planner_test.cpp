// The replay planner (harness/replay_planner.h) on a fake backend: the scope it picks, the
// inputs it refuses before anything is measured, and each rate with the basis it names.
#include "harness/replay_planner.h"

#include <memory>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "common/errors.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

class PlannerFakeBackend final : public Backend {
 public:
  std::string name() const override { return "fake"; }
  DeviceInfo device_info() override {
    DeviceInfo d;
    d.backend = "fake";
    d.name = "Fake Device";
    d.mem_bytes = mem_bytes;
    return d;
  }
  Ceilings measure_ceilings() override {
    ++ceiling_calls;
    Ceilings c;
    c.read = read;
    return c;
  }
  std::vector<std::string> kernel_names() const override { return {"k"}; }
  ComputeUnit compute_unit(std::string_view) const override { return ComputeUnit::fma; }
  std::string choose_kernel(const WorkloadSpec&, const PagedLayout&) override { return "k"; }
  std::string skip_reason(const WorkloadSpec&, const PagedLayout&, std::string_view) override {
    return "";
  }
  std::unique_ptr<PreparedPoint> prepare(const Workload&, std::string_view,
                                         const TimingOptions&) override {
    throw std::logic_error("the planner never prepares a point");
  }
  GemmCeiling gemm_ceiling(DType) override { return {gemm_flops, "fake GEMM"}; }

  std::int64_t mem_bytes = std::int64_t{80} << 30;
  double read = 1e11;
  double gemm_flops = 1e14;
  int ceiling_calls = 0;
};

TEST(ReplayPlanner, ScopeAsGivenOrTheAttentionWithTheReason) {
  PlannerFakeBackend be;
  const ModelShape m = load_model("llama-3.1-8b");
  EXPECT_EQ(choose_replay_scope(be, m, DType::bf16, DType::bf16, 16, "attention").scope,
            Scope::attention);
  EXPECT_EQ(choose_replay_scope(be, m, DType::bf16, DType::bf16, 16, "layer").scope, Scope::layer);
  // The fake has no layer scope: "auto" falls back and says why.
  const ReplayScopeChoice c = choose_replay_scope(be, m, DType::bf16, DType::bf16, 16, "auto");
  EXPECT_EQ(c.scope, Scope::attention);
  EXPECT_NE(c.note.find("fake backend has no layer scope"), std::string::npos) << c.note;
}

TEST(ReplayPlanner, RefusesWhatCannotBeModeledBeforeMeasuring) {
  PlannerFakeBackend be;
  ModelShape m = load_model("llama-3.1-8b");
  ReplayDeviceRequest r;
  be.mem_bytes = std::int64_t{1} << 30;  // 1 GiB: less than the weights
  EXPECT_THROW(
      {
        try {
          plan_replay_device(be, m, DType::bf16, r);
        } catch (const InputError& e) {
          EXPECT_NE(std::string(e.what()).find("give --kv-pool"), std::string::npos) << e.what();
          throw;
        }
      },
      InputError);
  r.kv_pool_given = true;  // then the default pool is not needed
  EXPECT_NO_THROW(plan_replay_device(be, m, DType::bf16, r));
  m.num_params = 0;
  m.hidden_size = 0;  // no layer shape either: nothing to model the prefill from
  ASSERT_FALSE(m.has_layer_shape());
  EXPECT_THROW(plan_replay_device(be, m, DType::bf16, r), InputError);
  r.prefill_tokens_per_s = 1e4;  // given: no parameter count needed
  EXPECT_NO_THROW(plan_replay_device(be, m, DType::bf16, r));
  EXPECT_EQ(be.ceiling_calls, 0) << "nothing is measured while planning";
}

TEST(ReplayPlanner, RatesFromThisDeviceAGivenRateOrADatasheet) {
  PlannerFakeBackend be;
  const ModelShape m = load_model("llama-3.1-8b");
  ReplayDeviceRequest r;
  ReplayDevice d = plan_replay_device(be, m, DType::bf16, r);
  ASSERT_GT(d.params, 0);
  ReplayPlan plan;
  set_replay_rates(be, d, DType::bf16, r, plan);
  EXPECT_EQ(be.ceiling_calls, 1);
  EXPECT_EQ(plan.schedule.decode_read_bytes_per_s, 1e11);
  EXPECT_DOUBLE_EQ(plan.schedule.prefill_tokens_per_s, 1e14 / (2.0 * d.params));
  EXPECT_NE(plan.prefill_rate_basis.find("fake GEMM"), std::string::npos);
  EXPECT_NE(plan.schedule_device.find("this backend"), std::string::npos);
  EXPECT_EQ(d.device.measured.gemm_flops, 1e14);

  r.decode_read_bytes_per_s = 5e10;
  r.prefill_tokens_per_s = 2e3;
  set_replay_rates(be, d, DType::bf16, r, plan);
  EXPECT_EQ(plan.schedule.decode_read_bytes_per_s, 5e10);
  EXPECT_EQ(plan.schedule.prefill_tokens_per_s, 2e3);
  EXPECT_EQ(plan.read_rate_basis, "given (--decode-read-rate)");
  EXPECT_EQ(plan.prefill_rate_basis, "given (--prefill-rate)");

  ReplayDeviceRequest h200;
  h200.schedule_device = "h200";
  ReplayDevice dh = plan_replay_device(be, m, DType::bf16, h200);
  set_replay_rates(be, dh, DType::bf16, h200, plan);
  EXPECT_EQ(plan.schedule.decode_read_bytes_per_s, 4.8e12);
  EXPECT_NE(plan.schedule_device.find("datasheet"), std::string::npos);
}

// A planted fault: a read ceiling of 0 is refused, not turned into an infinite decode step.
TEST(ReplayPlanner, AZeroReadRateIsRefused) {
  PlannerFakeBackend be;
  be.read = 0;
  const ModelShape m = load_model("llama-3.1-8b");
  ReplayDeviceRequest r;
  ReplayDevice d = plan_replay_device(be, m, DType::bf16, r);
  ReplayPlan plan;
  EXPECT_THROW(set_replay_rates(be, d, DType::bf16, r, plan), RuntimeFailure);
}

}  // namespace
}  // namespace decodebench
