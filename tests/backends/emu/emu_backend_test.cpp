// The emu backend, in process: kernel choice, skip reasons, prefix planning, the reference
// comparison, bad block tables and the ceiling kernels. Its own suite, linked without the cpu
// backend, so the sanitizer builds (which run every emu-labelled suite) need not compile it.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/emu/emu_backend.h"
#include "backends/planted_tables.h"
#include "common/errors.h"
#include "kernels.h"
#include "reference/reference.h"
#include "support/host_test_util.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

WorkloadSpec tiny_spec(int batch, int context, int hq, int hkv) {
  WorkloadSpec s;
  s.model = {"tiny", hq, hkv, 128, 1, ""};
  s.batch = batch;
  s.context = ContextSpec::fixed(context);
  s.block_size = 16;
  s.seed = 3;
  return s;
}

TEST(EmuBackend, ChoosesSplitKvOnlyWhenThePlannerSplits) {
  auto emu = make_emu_backend();
  const auto names = emu->kernel_names();
  const bool has_split = std::find(names.begin(), names.end(), "split_kv") != names.end();
  // One sequence, one KV head, 2048 tokens: 1 block of the 4 x 2 slots of the nominal device
  // wants splits (the GPU's rule: kernels::choose_kernel with kEmuResidentCtas), as many as the
  // planner gives for it.
  const std::string few = emu->choose_kernel(tiny_spec(1, 2048, 4, 1));
  if (has_split) {
    EXPECT_EQ(few, "split_kv");
    const WorkloadSpec spec = tiny_spec(1, 2048, 4, 1);
    const PagedLayout layout = build_layout(spec);
    EXPECT_EQ(kernels::plan_num_splits(shape_params(spec, layout), kEmuResidentCtas), 8);
  }
  // Too short to repay the merge launch (< kSplitKvMinContext tokens): no split.
  EXPECT_NE(emu->choose_kernel(tiny_spec(1, 1000, 4, 1)), "split_kv");
  // 8 sequences x 2 KV heads fill the 4 x 2 slots: no split, the highest rung without a
  // workspace.
  const std::string many = emu->choose_kernel(tiny_spec(8, 2048, 8, 2));
  EXPECT_NE(many, "split_kv");
  std::string highest_unsplit;
  for (const std::string& name : names) {
    if (!kernels::find_kernel(name)->uses_workspace) highest_unsplit = name;
  }
  EXPECT_EQ(many, highest_unsplit);
}

TEST(EmuBackend, SkipReasons) {
  auto emu = make_emu_backend();
  EXPECT_EQ(emu->skip_reason(tiny_spec(2, 17, 8, 2), "naive"), "");
  const std::string big = emu->skip_reason(tiny_spec(4, 8192, 32, 8), "naive");
  EXPECT_NE(big.find("too large for the emulator"), std::string::npos) << big;
  EXPECT_NE(big.find("--backend cpu or cuda"), std::string::npos) << big;
  EXPECT_NE(emu->skip_reason(tiny_spec(1, 17, 8, 2), "nope").find("unknown kernel"),
            std::string::npos);
  WorkloadSpec g16 = tiny_spec(1, 17, 16, 1);
  if (kernels::find_kernel("gqa") != nullptr) {  // a narrowed build may leave the rung out
    EXPECT_NE(emu->skip_reason(g16, "gqa").find("GQA groups up to 8"), std::string::npos);
  }
  EXPECT_EQ(emu->skip_reason(g16, "naive"), "");  // naive takes any group
  EXPECT_EQ(emu->measure_ceilings().read, 0);     // not measured, by design
  EXPECT_NE(emu->device_info().name.find("not GPU timings"), std::string::npos);
}

// A prefix-aware rung plans the shared prefixes at prepare time from the workload's tables: with
// sharing the point runs the prefix pass and matches the reference; `--kernel auto` never picks
// it.
TEST(EmuBackend, PrefixAwareRungPlansItsPrefixesAtPrepare) {
  auto emu = make_emu_backend();
  for (const kernels::KernelInfo& info : kernels::kernel_ladder()) {
    if (!info.prefix_aware || info.head_dims.front() != 128) continue;
    for (const double h : {0.0, 0.9}) {
      WorkloadSpec s = tiny_spec(3, 45, 8, 2);
      s.hit_rate = h;
      s.kv_dtype = info.kv_dtypes.front();
      const Workload w = make_workload(s);
      auto point = emu->prepare(w, info.name, TimingOptions{});
      point->run();
      const auto cmp = compare_outputs(point->output(), reference_decode(w), 8, 128,
                                       tolerance_for(s.q_dtype, s.kv_dtype));
      EXPECT_TRUE(cmp.ok) << info.name << " h " << h << ": " << cmp.report;
      EXPECT_NE(emu->choose_kernel(s), info.name);
      EXPECT_NE(emu->choose_kernel(tiny_spec(1, 2048, 4, 1)), info.name);
    }
  }
}

// Planted fault: a prepared point that never ran must not look like a valid output. The output
// buffer starts as NaN, so the reference comparison catches an element the kernel never writes.
// A rung of MLA's shape only runs a latent of 16 heads (no V pool, 512-wide output).
TEST(EmuBackend, UnwrittenOutputIsCaughtAndARunMatchesTheReference) {
  auto emu = make_emu_backend();
  const Workload per_head = make_workload(tiny_spec(2, 37, 8, 2));
  WorkloadSpec latent = tiny_spec(2, 37, 16, 1);
  latent.model.head_dim = 576;
  latent.model.kv_lora_rank = 512;
  latent.model.qk_rope_head_dim = 64;
  latent.model.qk_nope_head_dim = 128;
  latent.model.v_head_dim = 128;
  for (const std::string& kernel : emu->kernel_names()) {
    const kernels::KernelInfo& info = *kernels::find_kernel(kernel);
    const bool mla = info.mla_only;
    // A format this build compiled for the rung (a sanitizer build narrows them), q in its MMA
    // type.
    latent.kv_dtype = info.kv_dtypes.front();
    latent.q_dtype = latent.kv_dtype == DType::bf16 ? DType::bf16 : DType::f16;
    const Workload w = mla ? make_workload(latent) : per_head;
    const int hq = w.spec.model.num_q_heads;
    const int dv = w.spec.model.value_dim();
    const Tolerance tol = tolerance_for(w.spec.q_dtype, w.spec.kv_dtype);
    const std::vector<float> ref = reference_decode(w);
    auto point = emu->prepare(w, kernel, TimingOptions{});
    const std::vector<float> before = point->output();
    ASSERT_EQ(before.size(), ref.size());
    EXPECT_TRUE(std::isnan(before[0]));
    EXPECT_FALSE(compare_outputs(before, ref, hq, dv, tol).ok) << kernel;
    point->run();
    const auto cmp = compare_outputs(point->output(), ref, hq, dv, tol);
    EXPECT_TRUE(cmp.ok) << kernel << ": " << cmp.report;
    EXPECT_GT(point->time_one(), 0);
  }
  // A layout-only workload (no host tensors) is refused with InputError, as backend.h asks.
  Workload layout_only = per_head;
  layout_only.k_cache.clear();
  EXPECT_THROW(emu->prepare(layout_only, "naive", TimingOptions{}), InputError);
}

// Planted faults in the block tables: every rung refuses them at prepare with the registry's
// sentence, so no point exists to run, and the launcher's own check (launch scope) refuses them
// too without writing the output. An out-of-range entry its sequence never reads is accepted,
// and the point matches the reference.
TEST(EmuBackend, BadBlockTablesAreRefusedBeforeAnyLaunch) {
  auto emu = make_emu_backend();
  for (const test::PlantedTable& c : test::planted_tables(tiny_spec(3, 40, 8, 2))) {
    const Workload& w = c.workload;
    const std::vector<float> ref = c.refusal.empty() ? reference_decode(w) : std::vector<float>{};
    for (const std::string& kernel : emu->kernel_names()) {
      if (kernels::find_kernel(kernel)->mla_only) continue;  // refuses these per-head shapes
      SCOPED_TRACE(c.name + ", kernel " + kernel);
      if (c.refusal.empty()) {
        auto point = emu->prepare(w, kernel, TimingOptions{});
        point->run();
        const auto cmp = compare_outputs(point->output(), ref, 8, 128,
                                         tolerance_for(w.spec.q_dtype, w.spec.kv_dtype));
        EXPECT_TRUE(cmp.ok) << cmp.report;
        continue;
      }
      std::vector<std::string> parts = c.refusal;
      parts.push_back("emu backend: kernel '" + kernel + "' does not take ");
      test::expect_input_error([&] { (void)emu->prepare(w, kernel, TimingOptions{}); }, parts);

      const std::vector<std::byte> unwritten(w.q.size(), std::byte{0xFF});
      std::vector<std::byte> out = unwritten;
      kernels::PagedDecodeParams p = w.params();
      p.out = out.data();
      const kernels::LaunchResult r = kernels::emu::launch_paged_decode(kernel, p, nullptr);
      EXPECT_EQ(r.status, kernels::LaunchStatus::unsupported) << r.message;
      for (const std::string& part : c.refusal) {
        EXPECT_NE(r.message.find(part), std::string::npos) << r.message;
      }
      EXPECT_TRUE(out == unwritten);
    }
  }
}

TEST(EmuBackend, CeilingKernelsCheckOut) {
  auto emu = make_emu_backend();
  const auto checks = emu->check_ceiling_kernels();
  ASSERT_EQ(checks.size(), 3u);
  for (const auto& c : checks) EXPECT_TRUE(c.ok) << c.name << ": " << c.detail;
}

}  // namespace
}  // namespace decodebench
