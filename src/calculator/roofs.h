// The ceilings a prediction runs against: a datasheet row (configs/devices.json, `--device`) or
// the measured device of a report or a `decodebench ceilings --out` file (`--ceilings`), each roof
// with the name the printers give it.
#pragma once

#include <string>

#include "backends/datasheet.h"
#include "results/device_info.h"
#include "workload/workload.h"  // DType, ComputeUnit

namespace decodebench::calculator {

// `sheet` carries what the attention reads (bandwidth, fp32_flops as the FMA roof,
// tensor_f16_flops as the tensor roof, mem_bytes); the GEMMs of layer scope run against
// gemm_flops.
struct Roofs {
  Datasheet sheet;
  std::string source = "datasheet";  // or the report's path
  std::string bandwidth_name = "datasheet";
  std::string fma_name = "fp32 FMA (datasheet)";
  std::string tensor_name = "tensor-core f16 dense (datasheet)";
  double gemm_flops = 0;  // 0: unknown, the GEMMs get only their byte term
  std::string gemm_name;
  // The attention's FLOP roof on these units: the tensor-core f16 peak or the fp32 FMA peak.
  double attention_flops(ComputeUnit u) const {
    return u == ComputeUnit::tensor_core ? sheet.tensor_f16_flops : sheet.fp32_flops;
  }
};

// The datasheet row for a key ("h200") or a device name ("NVIDIA H100 80GB HBM3"); InputError
// listing the valid keys for neither.
Datasheet resolve_device(const std::string& text);

// A datasheet row's roofs; the GEMM roof is the dense tensor-core peak of the weights dtype (the
// f16 one for fp8 weights on a device without fp8 tensor cores).
Roofs roofs_from_datasheet(const Datasheet& d, DType weights);

// A measured device's roofs (a report's device record), `source` naming where it comes from: the
// measured read bandwidth (else copy, else triad, else the datasheet's), the measured GEMM peak
// where there is one (else the tensor-core peak of the weights dtype, else the FMA peak, measured
// then datasheet), the FMA and tensor roofs for attention, and mem_bytes. InputError (starting
// "--ceilings SOURCE: ") without a bandwidth or a positive mem_bytes.
Roofs roofs_from_device(const DeviceInfo& d, const std::string& source, DType weights);

// The file's devices[0] (a report) or its one device record (`ceilings --out`), read with the
// report's device reader, then roofs_from_device. InputError naming the path otherwise.
Roofs roofs_from_report(const std::string& path, DType weights);

}  // namespace decodebench::calculator
