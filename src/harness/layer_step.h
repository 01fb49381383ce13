// Scope "layer" in the runner (src/workload/layer_model.h): a layer point's model numbers, the
// validation of its GEMMs against reference products, and the record of its timed stages.
#pragma once

#include <span>
#include <string>

#include "backends/backend.h"
#include "results/point_result.h"
#include "workload/layer_model.h"

namespace decodebench {

// The layer model's bytes and FLOPs as the point's (bytes.min: weights + activations + the
// attention's minimum; kv_unique/kv_logical the attention's) and the layer record's static parts
// (stage shapes, bytes, FLOPs, left_out, weights dtype). Throws InputError where
// layer_support_error() is not empty.
void describe_layer(const WorkloadSpec& spec, const PagedLayout& layout, DType weights,
                    PointResult& r);

// One GEMM output against a double-precision reference product of the input it read and the
// weights as layer_model.h defines them, on every given row and `max_cols` evenly spaced output
// columns (the first and last included). An element passes when
//   |out - ref| <= rtol * (|ref| + rms)
// with rms the root mean square of the checked reference values (so a near-zero dot product is
// not judged by relative error alone) and rtol two units in the last place of the output dtype
// (bf16 2^-7, f16 2^-10): the output's rounding, with room for any summation order.
struct GemmCheck {
  bool ok = true;
  double max_rel = 0;  // max |out - ref| / (|ref| + rms)
  int mismatches = 0;
  int checked = 0;
  std::string first_mismatch;  // "row 3 col 517: got 0.25, ref 0.5"
};
GemmCheck check_gemm(const GemmShape& shape, DType weights, DType out_dtype, std::uint64_t seed,
                     const PreparedLayer::GemmValues& values, int max_cols = 256);

// After prepared.run(): every GEMM of the layer and the LM head on the validated rows (`rows`:
// indices into the batch). Fills each stage's max_rel_error; on a mismatch sets r.status wrong
// with the stage and the first mismatch in the reason, and returns false.
bool validate_gemms(PreparedLayer& prepared, const WorkloadSpec& spec, DType weights,
                    std::span<const int> rows, PointResult& r);

// After timing (r.time_s is the layer's): each stage's statistics and roofline time, the
// weights/KV time split, the point's roofline over the stages (roofline.h
// compute_layer_roofline), tokens/s with and without the LM head. `attention_unit` is the
// attention kernel's compute units; the GEMMs' roof is device.measured.gemm_flops.
void finish_layer(const PreparedLayer& prepared, const DeviceInfo& device,
                  ComputeUnit attention_unit, double paired_read_Bps, PointResult& r);

}  // namespace decodebench
