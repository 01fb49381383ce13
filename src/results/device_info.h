// The device record of a report: what a backend says about its device and what its ceilings
// measured. Backends fill it, the report layer writes and reads it; it lives with the report,
// which includes nothing from src/backends.
#pragma once

#include <cstdint>
#include <string>

namespace decodebench {

// What a report says about a device (docs/report-schema.md: devices[]). Bandwidths in B/s,
// FLOP rates in FLOP/s, sizes in bytes; 0 = not known on this backend.
struct Ceilings {
  double read = 0;                // measured read-only bandwidth
  double copy = 0;                // measured copy bandwidth, bytes read + bytes written
  double triad = 0;               // measured triad bandwidth, 3 arrays counted
  double fma_flops = 0;           // measured fp32 FMA peak (2 FLOP per FMA); 0 where not measured
  std::int64_t buffer_bytes = 0;  // size of each buffer the bandwidth ceilings used
  std::string note;  // where the method was bent (e.g. buffers capped to fit memory), else empty
  // The launch shape each bandwidth ceiling was best at, of those tried (cuda), e.g. "read 256x4,
  // copy 512x4, triad 256x8 of 256x2 256x4 256x8 512x4 1024x2 (threads per block x blocks per
  // SM)": a winner at the edge of the tried set says a wider set may do better. Empty elsewhere.
  std::string shapes;
  // Scope layer: the FLOP roof of the layer's GEMMs at the sweep's weights dtype
  // (Backend::gemm_ceiling: cpu measured with its GEMM library, cuda the datasheet's
  // tensor-core peak); 0 and empty where the sweep has no layer point.
  double gemm_flops = 0;
  std::string gemm_ceiling_name;  // "OpenBLAS cblas_sbgemm 2048^3 (measured)", ...
};

struct DeviceInfo {
  std::string backend;               // "cpu", "emu", "cuda"
  std::string name;                  // "NVIDIA H200", "Intel(R) Xeon(R) ...", ...
  int sm_count = 0;                  // SMs (cuda) or hardware threads used (cpu)
  std::int64_t l2_bytes = 0;         // L2 (cuda) or last-level cache (cpu)
  std::int64_t mem_bytes = 0;        // device memory (cuda) or usable host memory (cpu)
  double bandwidth_datasheet = 0;    // configs/devices.json, 0 if the device is not listed
  double bandwidth_theoretical = 0;  // 2 * memory clock * bus width / 8 (cuda only)
  double flops_peak = 0;             // datasheet or measured fp32 peak, FLOP/s
  // Dense tensor-core peaks of the datasheet (cuda only; 0 elsewhere or where not listed), FLOP/s.
  double flops_peak_tensor_f16 = 0;  // f16/bf16 inputs, fp32 accumulate: the tensor kernels' roof
  double flops_peak_tensor_fp8 = 0;  // fp8 inputs, for the record (our kernels feed fp8 as f16)
  Ceilings measured;                 // filled by Backend::measure_ceilings()
};

}  // namespace decodebench
