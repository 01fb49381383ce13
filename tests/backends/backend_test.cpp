// The backend factory and the datasheet table.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <utility>

#include <gtest/gtest.h>

#include "backends/backend.h"
#include "backends/datasheet.h"
#include "common/errors.h"
#include "kernels.h"
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
    const bool tensor = name == "tc" || name == "cascade" || name == "mla";
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

}  // namespace
}  // namespace decodebench
