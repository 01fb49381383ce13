// The backend factory, the datasheet table and the emu backend, in process.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <utility>

#include <gtest/gtest.h>

#include "backends/backend.h"
#include "backends/datasheet.h"
#include "backends/emu/emu_backend.h"
#include "backends/planted_tables.h"
#include "common/errors.h"
#include "reference/reference.h"
#include "support/host_test_util.h"

namespace decodebench {
namespace {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(BackendFactory, NamesAndErrors) {
  const std::vector<std::string> names = backend_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "emu"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "cpu"), names.end());
  EXPECT_EQ(make_backend("emu")->name(), "emu");
  EXPECT_EQ(make_backend("cpu")->name(), "cpu");
  EXPECT_EQ(make_backend("auto")->name(), cuda_device_present() ? "cuda" : "cpu");

  EXPECT_THROW(make_backend("gpu"), InputError);
  const std::string msg = error_of([] { make_backend("gpu"); });
  EXPECT_NE(msg.find("'gpu'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("auto, cpu, emu"), std::string::npos) << msg;
  if (!cuda_device_present()) {
    EXPECT_THROW(make_backend("cuda"), RuntimeFailure);
    EXPECT_NE(error_of([] { make_backend("cuda"); }).find("cuda"), std::string::npos);
  }
}

// The harness takes a kernel's FLOP roof from the units the backend says it runs on: every CPU
// kernel on fp32 FMA, a ladder rung on what ladder.json's "compute" says (tc: tensor cores).
TEST(BackendFactory, ComputeUnitOfEachKernel) {
  auto cpu = make_backend("cpu");
  for (const std::string& name : cpu->kernel_names()) {
    EXPECT_EQ(cpu->compute_unit(name), ComputeUnit::fma) << name;
  }
  auto emu = make_backend("emu");
  for (const std::string& name : emu->kernel_names()) {
    const bool tensor = name == "tc" || name == "cascade";
    EXPECT_EQ(emu->compute_unit(name), tensor ? ComputeUnit::tensor_core : ComputeUnit::fma)
        << name;
    EXPECT_EQ(emu->compute_unit(name), kernels::find_kernel(name)->compute) << name;
  }
  const std::string msg = error_of([&] { emu->compute_unit("nope"); });
  EXPECT_NE(msg.find("unknown kernel 'nope'"), std::string::npos) << msg;
}

TEST(Datasheet, NamesMatchTheLongestPattern) {
  EXPECT_EQ(find_datasheet("NVIDIA H100 80GB HBM3")->key, "h100-sxm");
  EXPECT_EQ(find_datasheet("NVIDIA H100 PCIe")->key, "h100-pcie");
  EXPECT_EQ(find_datasheet("NVIDIA H100 NVL")->key, "h100-nvl");
  EXPECT_EQ(find_datasheet("NVIDIA H200")->key, "h200");
  EXPECT_EQ(find_datasheet("NVIDIA H200 NVL")->key, "h200-nvl");  // not plain h200
  EXPECT_EQ(find_datasheet("NVIDIA A100-SXM4-80GB")->key, "a100-80gb");
  EXPECT_EQ(find_datasheet("NVIDIA A100-SXM4-40GB")->key, "a100-40gb");
  EXPECT_EQ(find_datasheet("nvidia l40s")->key, "l40s");   // case-insensitive
  EXPECT_EQ(find_datasheet("NVIDIA L4")->key, "l4");       // a model number is whole:
  EXPECT_FALSE(find_datasheet("NVIDIA L40").has_value());  // not L4
  EXPECT_EQ(find_datasheet("NVIDIA H20")->key, "h20");
  EXPECT_EQ(find_datasheet("NVIDIA B200")->key, "b200");
  EXPECT_EQ(find_datasheet("NVIDIA GB200")->key, "gb200");
  EXPECT_EQ(find_datasheet("NVIDIA GeForce RTX 4090")->key, "rtx-4090");
  EXPECT_EQ(find_datasheet("NVIDIA GeForce RTX 5090")->key, "rtx-5090");
  EXPECT_FALSE(find_datasheet("NVIDIA GeForce RTX 3090").has_value());
  EXPECT_FALSE(find_datasheet("Intel(R) Xeon(R) Processor").has_value());

  const Datasheet h200 = datasheet_by_key("H200");
  EXPECT_DOUBLE_EQ(h200.bandwidth, 4.8e12);
  EXPECT_EQ(h200.mem_bytes, 141'000'000'000LL);
  EXPECT_DOUBLE_EQ(datasheet_by_key("h100-sxm").bandwidth, 3.35e12);
  EXPECT_DOUBLE_EQ(datasheet_by_key("h100-pcie").bandwidth, 2.0e12);
  EXPECT_DOUBLE_EQ(datasheet_by_key("h100-nvl").bandwidth, 3.9e12);
  EXPECT_DOUBLE_EQ(datasheet_by_key("a100-80gb").bandwidth, 2.039e12);
  EXPECT_DOUBLE_EQ(datasheet_by_key("a100-40gb").bandwidth, 1.555e12);
  EXPECT_DOUBLE_EQ(datasheet_by_key("l40s").bandwidth, 0.864e12);
  for (const Datasheet& d : all_datasheets()) {
    EXPECT_GT(d.fp32_flops, 0) << d.key;
    // Dense tensor peaks sit above the fp32 FMA peak (GeForce, accumulating in fp32 at half
    // rate: 2x; L40S: 4x; Hopper: 15x; Blackwell B200: 30x), and fp8 doubles f16 where listed
    // (L40S's printed 733 / 362.05 = 2.02): a swapped pair fails here, a sparse figure in
    // DenseTensorCorePeaks.
    EXPECT_GT(d.tensor_f16_flops, 1.5 * d.fp32_flops) << d.key;
    EXPECT_LT(d.tensor_f16_flops, 40 * d.fp32_flops) << d.key;
    if (d.tensor_fp8_flops > 0) {
      EXPECT_NEAR(d.tensor_fp8_flops / d.tensor_f16_flops, 2, 0.05) << d.key;
    }
  }

  const std::string msg = error_of([] { datasheet_by_key("mi300x"); });
  EXPECT_NE(msg.find("'mi300x'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("devices.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("h100-sxm"), std::string::npos) << msg;
}

// Dense tensor-core peaks (datasheet sparse figures halved; configs/devices.json's _comment).
TEST(Datasheet, DenseTensorCorePeaks) {
  for (const char* key : {"h100-sxm", "h200"}) {
    EXPECT_DOUBLE_EQ(datasheet_by_key(key).tensor_f16_flops, 989.4e12) << key;
    EXPECT_DOUBLE_EQ(datasheet_by_key(key).tensor_fp8_flops, 1978.9e12) << key;
  }
  EXPECT_DOUBLE_EQ(datasheet_by_key("h100-pcie").tensor_f16_flops, 756e12);
  EXPECT_DOUBLE_EQ(datasheet_by_key("h100-pcie").tensor_fp8_flops, 1513e12);
  EXPECT_DOUBLE_EQ(datasheet_by_key("h100-nvl").tensor_f16_flops, 835.5e12);
  EXPECT_DOUBLE_EQ(datasheet_by_key("l40s").tensor_f16_flops, 362.05e12);
  EXPECT_DOUBLE_EQ(datasheet_by_key("l40s").tensor_fp8_flops, 733e12);
  for (const char* key : {"a100-80gb", "a100-80gb-pcie", "a100-40gb"}) {
    EXPECT_DOUBLE_EQ(datasheet_by_key(key).tensor_f16_flops, 312e12) << key;
    EXPECT_EQ(datasheet_by_key(key).tensor_fp8_flops, 0) << key;  // Ampere has no fp8 MMA
  }
  // Half the printed sparse figures: L4 242 / 485, B200 4.5 / 9 PFLOPS, GB200 5 / 10 per GPU.
  EXPECT_DOUBLE_EQ(datasheet_by_key("l4").tensor_f16_flops, 121e12);
  EXPECT_DOUBLE_EQ(datasheet_by_key("l4").tensor_fp8_flops, 242.5e12);
  EXPECT_DOUBLE_EQ(datasheet_by_key("b200").tensor_f16_flops, 2250e12);
  EXPECT_DOUBLE_EQ(datasheet_by_key("gb200").tensor_f16_flops, 2500e12);
  EXPECT_DOUBLE_EQ(datasheet_by_key("h20").tensor_f16_flops, 148e12);  // printed dense
  // GeForce: the fp32-accumulate rate, half the fp16-accumulate one the boxes print first.
  EXPECT_DOUBLE_EQ(datasheet_by_key("rtx-4090").tensor_f16_flops, 165.2e12);
  EXPECT_DOUBLE_EQ(datasheet_by_key("rtx-5090").tensor_f16_flops, 209.5e12);
  EXPECT_EQ(datasheet_by_key("rtx-5090").tensor_fp8_flops, 0);  // not listed
}

// The static model's issue bound reads SMs and clock of the H100 SXM and the H200; the fields
// are optional, so a row may leave them out.
TEST(Datasheet, SmCountClockAndComputeCapability) {
  for (const char* key : {"h100-sxm", "h200"}) {
    const Datasheet d = datasheet_by_key(key);
    EXPECT_EQ(d.sm_count, 132) << key;
    EXPECT_DOUBLE_EQ(d.boost_clock_hz, 1.98e9) << key;
    EXPECT_EQ(d.compute_capability, "9.0") << key;
  }
  // Where a row gives SMs and clock, they make its fp32 peak: 2 FLOP x 128 lanes per SM (L4,
  // RTX 4090, RTX 5090: 58, 128, 170 SMs).
  for (const char* key : {"l4", "rtx-4090", "rtx-5090"}) {
    const Datasheet d = datasheet_by_key(key);
    EXPECT_NEAR(2.0 * 128 * d.sm_count * d.boost_clock_hz / d.fp32_flops, 1.0, 0.01) << key;
  }
  // The compute capabilities scripts/cuda-arch.sh maps (8.0 and newer).
  for (const auto& [key, cc] :
       {std::pair{"a100-80gb", "8.0"}, std::pair{"l4", "8.9"}, std::pair{"h20", "9.0"},
        std::pair{"b200", "10.0"}, std::pair{"gb200", "10.0"}, std::pair{"rtx-5090", "12.0"}}) {
    EXPECT_EQ(datasheet_by_key(key).compute_capability, cc) << key;
  }
  const auto path = std::filesystem::temp_directory_path() / "decodebench_optional_devices.json";
  std::ofstream(path) << R"({"devices": [{"key": "x", "name": "X", "match": ["X"],
      "bandwidth": 1e12, "fp32_flops": 1e12, "tensor_f16_flops": 1e13, "mem_bytes": 1e9}]})";
  const std::vector<Datasheet> rows = load_datasheets(path);
  std::filesystem::remove(path);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].sm_count, 0);
  EXPECT_EQ(rows[0].boost_clock_hz, 0);
  EXPECT_EQ(rows[0].compute_capability, "");
}

TEST(Datasheet, MalformedFileNamesFileAndKey) {
  const auto path = std::filesystem::temp_directory_path() / "decodebench_bad_devices.json";
  auto load_error = [&](const std::string& text) {
    std::ofstream(path) << text;
    return error_of([&] { load_datasheets(path); });
  };
  std::string msg = load_error(R"({"devices": [{"key": "x", "name": "X", "match": ["X"],
      "bandwidth": 1e12, "fp32_flops": 1e12, "tensor_f16_flops": 1e13, "mem_bytes": 1e9, "peak": 3}]})");
  EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("peak"), std::string::npos) << msg;
  msg = load_error(R"({"devices": [{"key": "x", "name": "X", "match": ["X"],
      "bandwidth": -1, "fp32_flops": 1e12, "tensor_f16_flops": 1e13, "mem_bytes": 1e9}]})");
  EXPECT_NE(msg.find("devices[x].bandwidth"), std::string::npos) << msg;
  msg = load_error(R"({"devices": [{"key": "x", "name": "X", "match": ["X"],
      "bandwidth": 1e12, "fp32_flops": 1e12, "tensor_f16_flops": 1e13, "mem_bytes": 1e9, "sm_count": 13.5}]})");
  EXPECT_NE(msg.find("devices[x].sm_count"), std::string::npos) << msg;
  EXPECT_NE(msg.find("positive integer"), std::string::npos) << msg;
  msg = load_error(R"({"devices": [{"key": "x", "name": "X", "match": ["X"],
      "bandwidth": 1e12, "fp32_flops": 1e12, "tensor_f16_flops": 1e13, "mem_bytes": 1e9, "boost_clock_hz": 0}]})");
  EXPECT_NE(msg.find("devices[x].boost_clock_hz"), std::string::npos) << msg;
  msg = load_error(R"({"devices": [{"key": "x", "name": "X", "match": ["X"],
      "bandwidth": 1e12, "fp32_flops": 1e12, "tensor_f16_flops": 1e13, "mem_bytes": 1e9, "compute_capability": 9}]})");
  EXPECT_NE(msg.find("devices[x].compute_capability"), std::string::npos) << msg;
  EXPECT_NE(msg.find("MAJOR.MINOR"), std::string::npos) << msg;
  // The tensor-core roof is required: a row without it names the key and what it is.
  msg = load_error(R"({"devices": [{"key": "x", "name": "X", "match": ["X"],
      "bandwidth": 1e12, "fp32_flops": 1e12, "mem_bytes": 1e9}]})");
  EXPECT_NE(msg.find("devices[x].tensor_f16_flops"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tensor-core"), std::string::npos) << msg;
  msg = load_error(R"({"devices": [{"key": "x", "name": "X", "match": ["X"],
      "bandwidth": 1e12, "fp32_flops": 1e12, "tensor_f16_flops": 1e13, "tensor_fp8_flops": 0,
      "mem_bytes": 1e9}]})");
  EXPECT_NE(msg.find("devices[x].tensor_fp8_flops"), std::string::npos) << msg;
  EXPECT_NE(msg.find("positive number"), std::string::npos) << msg;
  msg = load_error(R"({"gpus": []})");
  EXPECT_NE(msg.find("'gpus'"), std::string::npos) << msg;
  msg = load_error("{not json");
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  std::filesystem::remove(path);
}

// The links a KV cache crosses between tiers: every row parsed, a key found whatever its case,
// an unknown one named with the valid keys, a malformed row named by file and key.
TEST(Datasheet, Links) {
  const std::vector<LinkDatasheet> links = all_link_datasheets();
  ASSERT_GE(links.size(), 5u);
  const LinkDatasheet gen5 = link_by_key("PCIe-Gen5-x16");
  EXPECT_DOUBLE_EQ(gen5.to_device, 63.0e9);
  EXPECT_DOUBLE_EQ(gen5.to_host, 63.0e9);
  EXPECT_FALSE(gen5.source.empty());
  for (const char* key : {"pcie-gen4-x16", "nvlink-c2c", "rdma-200g", "rdma-400g"})
    EXPECT_GT(link_by_key(key).to_device, 0) << key;
  const std::string unknown = error_of([] { link_by_key("pcie-gen9"); });
  EXPECT_NE(unknown.find("'pcie-gen9'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("nvlink-c2c"), std::string::npos) << unknown;
  const std::string device = R"({"key": "x", "name": "X", "match": ["X"], "bandwidth": 1e12,
      "fp32_flops": 1e12, "tensor_f16_flops": 1e13, "mem_bytes": 1e9})";
  const auto link_error = [&](const std::string& links_json) {
    return error_of([&] {
      parse_link_datasheets(R"({"devices": [)" + device + R"(], "links": )" + links_json + "}",
                            "bad.json");
    });
  };
  std::string msg = link_error(R"([{"key": "l", "name": "L", "to_device": 0, "to_host": 1e9,
      "source": "s"}])");
  EXPECT_NE(msg.find("links[l].to_device"), std::string::npos) << msg;
  msg = link_error(R"([{"key": "l", "name": "L", "to_device": 1e9, "to_host": 1e9}])");
  EXPECT_NE(msg.find("links[0].source"), std::string::npos) << msg;
  msg = link_error(R"([{"key": "l", "name": "L", "to_device": 1e9, "to_host": 1e9, "source": "s",
      "latency": 1}])");
  EXPECT_NE(msg.find("latency"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bad.json"), std::string::npos) << msg;
}

// Inputs the fuzzer (tests/fuzz/fuzz_datasheet) found: a memory size beyond int64 was cast from
// double (undefined), an SM count beyond int wrapped to a small positive one.
TEST(Datasheet, OutOfRangeValuesAreRejected) {
  const auto error = [](const std::string& extra) {
    return error_of([&] {
      parse_datasheets(R"({"devices": [{"key": "x", "name": "X", "match": ["X"], "bandwidth": 1e12,
          "fp32_flops": 1e12, "tensor_f16_flops": 1e14, )" +
                           extra + "}]}",
                       "d.json");
    });
  };
  std::string msg = error(R"("mem_bytes": 1e300)");
  EXPECT_NE(msg.find("devices[x].mem_bytes"), std::string::npos) << msg;
  msg = error(R"("mem_bytes": 1e9, "sm_count": 4294967297)");
  EXPECT_NE(msg.find("devices[x].sm_count"), std::string::npos) << msg;
  msg = error(R"("mem_bytes": 1e400)");
  EXPECT_NE(msg.find("d.json: not valid JSON"), std::string::npos) << msg;
}

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
  EXPECT_NE(emu->skip_reason(g16, "gqa").find("GQA groups up to 8"), std::string::npos);
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
TEST(EmuBackend, UnwrittenOutputIsCaughtAndARunMatchesTheReference) {
  auto emu = make_emu_backend();
  const Workload w = make_workload(tiny_spec(2, 37, 8, 2));
  const Tolerance tol = tolerance_for(w.spec.q_dtype, w.spec.kv_dtype);
  const std::vector<float> ref = reference_decode(w);
  for (const std::string& kernel : emu->kernel_names()) {
    auto point = emu->prepare(w, kernel, TimingOptions{});
    const std::vector<float> before = point->output();
    ASSERT_EQ(before.size(), ref.size());
    EXPECT_TRUE(std::isnan(before[0]));
    EXPECT_FALSE(compare_outputs(before, ref, 8, 128, tol).ok) << kernel;
    point->run();
    const auto cmp = compare_outputs(point->output(), ref, 8, 128, tol);
    EXPECT_TRUE(cmp.ok) << kernel << ": " << cmp.report;
    EXPECT_GT(point->time_one(), 0);
  }
  // A layout-only workload (no host tensors) is refused with InputError, as backend.h asks.
  Workload layout_only = w;
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
