// The ceilings of a prediction from a datasheet row or from a report's measured device.
#include "calculator/roofs.h"

#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/dtype.h"
#include "common/errors.h"
#include "common/json_text.h"
#include "results/report.h"  // device_record_from_json

namespace decodebench::calculator {

Datasheet resolve_device(const std::string& text) {
  try {
    return datasheet_by_key(text);
  } catch (const InputError&) {
    if (std::optional<Datasheet> d = find_datasheet(text)) return *d;
    throw;  // the key error lists the valid keys
  }
}

Roofs roofs_from_datasheet(const Datasheet& d, DType weights) {
  Roofs r;
  r.sheet = d;
  if (is_fp8(weights) && d.tensor_fp8_flops > 0) {
    r.gemm_flops = d.tensor_fp8_flops;
    r.gemm_name = "tensor-core fp8 dense (datasheet)";
  } else if (is_fp8(weights)) {
    // No fp8 tensor cores (A100): fp8 weights are widened to f16 on the way in.
    r.gemm_flops = d.tensor_f16_flops;
    r.gemm_name = "tensor-core f16 dense (datasheet; no fp8 tensor cores)";
  } else {
    r.gemm_flops = d.tensor_f16_flops;
    r.gemm_name = fmt::format("tensor-core {} dense (datasheet)", dtype_name(weights));
  }
  return r;
}

namespace {

double positive(double x) { return x > 0 ? x : 0.0; }

}  // namespace

Roofs roofs_from_device(const DeviceInfo& d, const std::string& source, DType weights) {
  Roofs r;
  r.source = source;
  r.sheet.key = "report";
  r.sheet.name = d.name;
  const std::pair<const char*, double> measured[] = {
      {"read", d.measured.read}, {"copy", d.measured.copy}, {"triad", d.measured.triad}};
  for (const auto& [key, bw] : measured) {
    if (r.sheet.bandwidth > 0) break;
    r.sheet.bandwidth = positive(bw);
    r.bandwidth_name = fmt::format("measured {}", key);
  }
  if (r.sheet.bandwidth <= 0) {
    r.sheet.bandwidth = positive(d.bandwidth_datasheet);
    r.bandwidth_name = "datasheet";
  }
  if (r.sheet.bandwidth <= 0) {
    throw InputError(fmt::format(
        "--ceilings {}: devices[0] has no bandwidth (bandwidth.measured.read, copy, triad or "
        "bandwidth.datasheet); run `decodebench ceilings` or a sweep that measures them",
        source));
  }
  if (d.mem_bytes <= 0) {
    throw InputError(
        fmt::format("--ceilings {}: devices[0].mem_bytes must be a positive integer", source));
  }
  r.sheet.mem_bytes = d.mem_bytes;
  const double fma_measured = positive(d.measured.fma_flops);
  r.sheet.fp32_flops = fma_measured > 0 ? fma_measured : positive(d.flops_peak);
  r.fma_name = fma_measured > 0 ? "fp32 FMA (measured)" : "fp32 FMA (report's datasheet)";
  const double tensor_f16 = positive(d.flops_peak_tensor_f16);
  const double tensor_fp8 = positive(d.flops_peak_tensor_fp8);
  r.sheet.tensor_f16_flops = tensor_f16 > 0 ? tensor_f16 : r.sheet.fp32_flops;
  r.sheet.tensor_fp8_flops = tensor_fp8;
  // A CPU has no tensor cores: its tensor-core and cascade kernels run on the FMA units.
  r.tensor_name = tensor_f16 > 0 ? "tensor-core f16 dense (report's datasheet)"
                                 : "no tensor cores: " + r.fma_name;
  // The GEMM ceiling (measured by a sweep with layer points) is newer than most reports: where
  // it is, it wins.
  if (d.measured.gemm_flops > 0) {
    r.gemm_flops = d.measured.gemm_flops;
    r.gemm_name =
        d.measured.gemm_ceiling_name.empty() ? "GEMM (measured)" : d.measured.gemm_ceiling_name;
  }
  const double tensor_w = is_fp8(weights) && tensor_fp8 > 0 ? tensor_fp8 : tensor_f16;
  if (r.gemm_flops <= 0 && tensor_w > 0) {
    r.gemm_flops = tensor_w;
    r.gemm_name = fmt::format("tensor-core {} dense (report's datasheet)",
                              is_fp8(weights) && tensor_fp8 > 0 ? "fp8" : "f16");
  }
  if (r.gemm_flops <= 0 && r.sheet.fp32_flops > 0) {
    r.gemm_flops = r.sheet.fp32_flops;
    r.gemm_name = "no GEMM ceiling in the report: " + r.fma_name;
  }
  if (r.gemm_flops <= 0) r.gemm_name = "unknown (bytes only)";
  return r;
}

Roofs roofs_from_report(const std::string& path, DType weights) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("--ceilings: cannot open report {}", path));
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = parse_json_text(ss.view(), path);
  // A report (devices[0]) or the device record `decodebench ceilings --out` writes.
  const bool is_object = j.is_object();
  const auto devices = is_object ? j.find("devices") : j.end();
  const bool record = is_object && devices == j.end() && j.contains("bandwidth");
  if (!record && (!is_object || devices == j.end() || !devices->is_array() || devices->empty() ||
                  !(*devices)[0].is_object())) {
    throw InputError(fmt::format(
        "--ceilings {}: neither a report with devices[0] nor a device record with 'bandwidth' "
        "(expected a `decodebench sweep` report or a `decodebench ceilings --out` file)",
        path));
  }
  DeviceRecord d;
  try {
    d = device_record_from_json(record ? j : (*devices)[0]);
  } catch (const InputError& e) {
    throw InputError(fmt::format("--ceilings {}: {}", path, e.what()));
  }
  return roofs_from_device(d, path, weights);
}

}  // namespace decodebench::calculator
