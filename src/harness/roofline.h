// Roofline math of docs/design.md "Byte and FLOP model" for one timed point.
//   t_roof = max(bytes_min / BW, flops / FLOP_roof)       roofline_fraction = t_roof / t
//   achieved_bandwidth = bytes_min / t                    logical = bytes_logical / t
//   tokens_per_s = batch / (t * num_layers)               attention-only
// The measured bandwidth roof is the read-only ceiling (a decode step is a read stream); where
// a backend did not measure it, copy, then triad. The FLOP roof is the peak of the units the
// kernel runs on (compute_ceiling): the fp32 FMA peak (measured, else the datasheet's) for a
// CUDA-core or CPU kernel, the datasheet's dense f16/bf16 tensor-core peak for a tensor-core
// one; with no such figure only the memory roof applies. A roof that is not known (0) makes its
// fraction NaN (null in the JSON), never 0 or infinity.
#pragma once

#include <span>

#include "backends/backend.h"
#include "results/point_result.h"

namespace decodebench {

// The model's numbers for one point (src/workload/byte_model.h computes them).
struct RooflineInput {
  double bytes_min = 0;      // kv_unique + q + out + tables + lens
  double bytes_logical = 0;  // bytes_min with kv_logical in place of kv_unique
  double flops = 0;          // useful FLOPs, 4 Hq L d: not what padded MMA rows issue
  int batch = 0;
  int num_layers = 0;
  ComputeUnit compute = ComputeUnit::fma;  // the kernel's units (Backend::compute_unit)
};

double measured_bandwidth_roof(const Ceilings& c);  // read, else copy, else triad, else 0

// The FLOP roof of `unit` on `d`, named:
//   fma:          "fp32 FMA (measured)" measured.fma_flops, else "fp32 FMA (datasheet)" flops_peak
//   tensor_core:  "tensor-core f16/bf16 (datasheet)" flops_peak_tensor_f16 (our tensor kernels
//                 feed fp8 KV as f16, so the fp8 peak is never their roof)
// and "... (unknown)" with flops NaN where the device has no figure (the emulator, a GPU that
// configs/devices.json does not list).
ComputeCeiling compute_ceiling(const DeviceInfo& d, ComputeUnit unit);

struct RooflineResult {
  BandwidthRecord bandwidth;
  RooflineRecord roofline;
  double tokens_per_s = kNotAvailable;
};

// `t_s` is the median step time (> 0). Throws std::invalid_argument on t_s <= 0 or batch <= 0.
// `paired_read_Bps` (NaN: none) is the read bandwidth measured alongside the samples; it gives
// roofline.fraction_paired.
RooflineResult compute_roofline(const RooflineInput& in, double t_s, const DeviceInfo& device,
                                double paired_read_Bps = kNotAvailable);

// Scope layer: the stages run one after another, so the step's roof is the sum of its stages'
//   t_roof = sum_s max(bytes_s / BW, flops_s / roof_s)
// (the GEMMs against the GEMM ceiling, the attention against its kernel's units; a stage whose
// roof is unknown counts its bytes only). bound: whichever kind of term makes up most of t_roof;
// roofline.compute_ceiling: the GEMMs'. Fractions, bandwidth and tokens/s as compute_roofline.
struct StageRoofInput {
  double bytes = 0;
  double flops = 0;
  double flop_roof = kNotAvailable;  // FLOP/s; NaN or 0: unknown
};
// One stage's roof time at bandwidth `bw` (NaN when bw is not known).
double stage_roof_time(const StageRoofInput& s, double bw);
RooflineResult compute_layer_roofline(std::span<const StageRoofInput> stages,
                                      const RooflineInput& in, const ComputeCeiling& gemm_ceiling,
                                      double t_s, const DeviceInfo& device,
                                      double paired_read_Bps = kNotAvailable);

}  // namespace decodebench
