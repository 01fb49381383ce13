// The roofs of a datasheet row and of a measured device: which bandwidth and which GEMM peak win,
// the names the printers show, a report's and a ceilings file's device read alike, bad files.
#include "calculator/roofs.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/errors.h"
#include "results/report.h"          // to_json(DeviceRecord)
#include "support/host_test_util.h"  // TempDir, expect_input_error

namespace decodebench::calculator {
namespace {

using decodebench::test::expect_input_error;
using decodebench::test::TempDir;
using nlohmann::json;

TEST(RoofsFromDatasheet, GemmRoofFollowsTheWeightsDtype) {
  const Datasheet h200 = resolve_device("h200");
  const Roofs bf16 = roofs_from_datasheet(h200, DType::bf16);
  EXPECT_EQ(bf16.sheet.bandwidth, 4.8e12);
  EXPECT_EQ(bf16.gemm_flops, 989.4e12);
  EXPECT_EQ(bf16.gemm_name, "tensor-core bf16 dense (datasheet)");
  EXPECT_EQ(bf16.attention_flops(ComputeUnit::fma), 66.9e12);
  EXPECT_EQ(bf16.attention_flops(ComputeUnit::tensor_core), 989.4e12);
  const Roofs fp8 = roofs_from_datasheet(h200, DType::fp8_e4m3);
  EXPECT_EQ(fp8.gemm_flops, 1978.9e12);
  EXPECT_EQ(fp8.gemm_name, "tensor-core fp8 dense (datasheet)");
  // The A100 has no fp8 tensor cores: fp8 weights run at the f16 peak.
  const Roofs a100 = roofs_from_datasheet(resolve_device("a100-80gb"), DType::fp8_e4m3);
  EXPECT_EQ(a100.gemm_flops, 312e12);
  EXPECT_NE(a100.gemm_name.find("no fp8 tensor cores"), std::string::npos) << a100.gemm_name;
}

TEST(RoofsFromDatasheet, ResolvesAKeyOrADeviceName) {
  EXPECT_EQ(resolve_device("H200").key, "h200");
  EXPECT_EQ(resolve_device("NVIDIA H100 80GB HBM3").key, "h100-sxm");
  expect_input_error([] { resolve_device("no-such-gpu"); }, {"no-such-gpu", "h200"});
}

// A CPU's record: no read ceiling, no tensor cores, a measured FMA peak.
DeviceRecord cpu_record() {
  DeviceRecord d;
  d.backend = "cpu";
  d.name = "Fake CPU";
  d.sm_count = 16;
  d.mem_bytes = 64000000000LL;
  d.measured.copy = 4.0e10;
  d.measured.triad = 3.0e10;
  d.measured.fma_flops = 1.0e12;
  d.flops_peak = 2.0e12;
  return d;
}

TEST(RoofsFromReport, ACpuReportsMeasuredCeilings) {
  TempDir dir;
  const json report = {{"schema_version", 1}, {"devices", json::array({to_json(cpu_record())})}};
  const std::string path = dir.write("report.json", report.dump()).string();
  const Roofs r = roofs_from_report(path, DType::bf16);
  EXPECT_EQ(r.source, path);
  EXPECT_EQ(r.sheet.key, "report");
  EXPECT_EQ(r.sheet.name, "Fake CPU");
  EXPECT_EQ(r.sheet.bandwidth, 4.0e10);  // no read ceiling: copy is next
  EXPECT_EQ(r.bandwidth_name, "measured copy");
  EXPECT_EQ(r.sheet.mem_bytes, 64000000000LL);
  EXPECT_EQ(r.sheet.fp32_flops, 1.0e12);  // measured beats the datasheet's 2e12
  EXPECT_EQ(r.fma_name, "fp32 FMA (measured)");
  // No tensor cores: the tensor-core kinds and the GEMMs run on the FMA units.
  EXPECT_EQ(r.attention_flops(ComputeUnit::tensor_core), 1.0e12);
  EXPECT_EQ(r.tensor_name, "no tensor cores: fp32 FMA (measured)");
  EXPECT_EQ(r.gemm_flops, 1.0e12);
  EXPECT_EQ(r.gemm_name, "no GEMM ceiling in the report: fp32 FMA (measured)");

  // A measured GEMM ceiling wins; the bare record of `ceilings --out` reads the same.
  DeviceRecord g = cpu_record();
  g.measured.gemm_flops = 2.5e11;
  g.measured.gemm_ceiling_name = "OpenBLAS sbgemm";
  const Roofs rg =
      roofs_from_report(dir.write("record.json", to_json(g).dump()).string(), DType::bf16);
  EXPECT_EQ(rg.gemm_flops, 2.5e11);
  EXPECT_EQ(rg.gemm_name, "OpenBLAS sbgemm");
  EXPECT_EQ(rg.sheet.bandwidth, 4.0e10);
}

TEST(RoofsFromReport, AGpuRecordTakesItsTensorPeaks) {
  DeviceRecord d = cpu_record();
  d.measured = {};
  d.bandwidth_datasheet = 3.35e12;
  d.flops_peak = 66.9e12;
  d.flops_peak_tensor_f16 = 989.4e12;
  d.flops_peak_tensor_fp8 = 1978.9e12;
  const Roofs r = roofs_from_device(d, "gpu.json", DType::fp8_e4m3);
  EXPECT_EQ(r.sheet.bandwidth, 3.35e12);
  EXPECT_EQ(r.bandwidth_name, "datasheet");
  EXPECT_EQ(r.fma_name, "fp32 FMA (report's datasheet)");
  EXPECT_EQ(r.attention_flops(ComputeUnit::tensor_core), 989.4e12);
  EXPECT_EQ(r.gemm_flops, 1978.9e12);
  EXPECT_EQ(r.gemm_name, "tensor-core fp8 dense (report's datasheet)");
  EXPECT_EQ(roofs_from_device(d, "gpu.json", DType::bf16).gemm_flops, 989.4e12);
}

// The committed reports read through the report's device reader: one with a measured GEMM
// ceiling (a layer sweep), one from before layer scope without it.
TEST(RoofsFromReport, CommittedReports) {
  const std::string root = DECODEBENCH_SOURCE_DIR;
  const Roofs knee =
      roofs_from_report(root + "/results/cpu-amd-epyc-zen4-2vcpu/knee/knee-cpu.json", DType::bf16);
  EXPECT_EQ(knee.sheet.name, "AMD EPYC (family 25 model 17)");
  EXPECT_EQ(knee.bandwidth_name, "measured read");
  EXPECT_NEAR(knee.sheet.bandwidth, 28.47e9, 0.01e9);
  EXPECT_EQ(knee.gemm_name, "oneDNN bf16 matmul 2048^3 (measured)");
  EXPECT_EQ(knee.sheet.mem_bytes, 24663023616);
  const Roofs prefix = roofs_from_report(
      root + "/results/cpu-amd-epyc-zen3-2vcpu/prefix/prefix-cpu.json", DType::bf16);
  EXPECT_EQ(prefix.gemm_name, "no GEMM ceiling in the report: fp32 FMA (measured)");
  EXPECT_EQ(prefix.gemm_flops, prefix.sheet.fp32_flops);
}

TEST(RoofsFromReport, BadFilesNameThePathAndWhy) {
  TempDir dir;
  const std::string d = dir.path().string();
  expect_input_error([&] { roofs_from_report(d + "/none.json", DType::bf16); },
                     {"--ceilings", "cannot open", "none.json"});
  dir.write("rows.json", R"({"rows": []})");
  expect_input_error([&] { roofs_from_report(d + "/rows.json", DType::bf16); },
                     {"rows.json", "devices[0]"});
  DeviceRecord none = cpu_record();
  none.measured = {};
  dir.write("no_bw.json", to_json(none).dump());
  expect_input_error([&] { roofs_from_report(d + "/no_bw.json", DType::bf16); },
                     {"no_bw.json", "no bandwidth"});
  DeviceRecord no_mem = cpu_record();
  no_mem.mem_bytes = 0;
  dir.write("no_mem.json", to_json(no_mem).dump());
  expect_input_error([&] { roofs_from_report(d + "/no_mem.json", DType::bf16); },
                     {"no_mem.json", "mem_bytes must be a positive integer"});
  // A key the report schema requires is missing: the reader names it.
  json partial = to_json(cpu_record());
  partial["bandwidth"]["measured"].erase("triad");
  dir.write("partial.json", partial.dump());
  expect_input_error([&] { roofs_from_report(d + "/partial.json", DType::bf16); },
                     {"partial.json", "bandwidth.measured.triad", "missing"});
}

}  // namespace
}  // namespace decodebench::calculator
