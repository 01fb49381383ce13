#include "harness/roofline.h"

#include <algorithm>
#include <stdexcept>

namespace decodebench {

double measured_bandwidth_roof(const Ceilings& c) {
  if (c.read > 0) return c.read;
  if (c.copy > 0) return c.copy;
  if (c.triad > 0) return c.triad;
  return 0;
}

ComputeCeiling compute_ceiling(const DeviceInfo& d, ComputeUnit unit) {
  ComputeCeiling c;
  c.unit = unit;
  if (unit == ComputeUnit::tensor_core) {
    const bool known = d.flops_peak_tensor_f16 > 0;
    c.name = known ? "tensor-core f16/bf16 (datasheet)" : "tensor-core f16/bf16 (unknown)";
    if (known) c.flops = d.flops_peak_tensor_f16;
    return c;
  }
  if (d.measured.fma_flops > 0) {
    c.name = "fp32 FMA (measured)";
    c.flops = d.measured.fma_flops;
  } else if (d.flops_peak > 0) {
    c.name = "fp32 FMA (datasheet)";
    c.flops = d.flops_peak;
  } else {
    c.name = "fp32 FMA (unknown)";
  }
  return c;
}

namespace {

struct Roof {
  double t = kNotAvailable;
  Bound bound = Bound::memory;
};

// Roofline time against one bandwidth ceiling; NaN when that ceiling is unknown. An unknown
// FLOP roof (NaN) leaves the memory roof alone.
Roof roof_time(double bytes, double flops, double bandwidth, double flop_peak) {
  Roof r;
  if (!(bandwidth > 0)) return r;
  const double t_mem = bytes / bandwidth;
  const double t_flop = flop_peak > 0 ? flops / flop_peak : 0;
  r.t = std::max(t_mem, t_flop);
  r.bound = t_flop > t_mem ? Bound::compute : Bound::memory;
  return r;
}

}  // namespace

RooflineResult compute_roofline(const RooflineInput& in, double t_s, const DeviceInfo& device,
                                double paired_read_Bps) {
  if (!(t_s > 0)) throw std::invalid_argument("compute_roofline: time must be > 0");
  if (in.batch <= 0) throw std::invalid_argument("compute_roofline: batch must be > 0");
  RooflineResult out;
  out.bandwidth.achieved = in.bytes_min / t_s;
  out.bandwidth.logical = in.bytes_logical / t_s;
  if (in.num_layers > 0) out.tokens_per_s = in.batch / (t_s * in.num_layers);
  const ComputeCeiling ceiling = compute_ceiling(device, in.compute);
  const double flops_peak = ceiling.flops;
  const Roof measured =
      roof_time(in.bytes_min, in.flops, measured_bandwidth_roof(device.measured), flops_peak);
  const Roof datasheet = roof_time(in.bytes_min, in.flops, device.bandwidth_datasheet, flops_peak);
  out.roofline.compute_ceiling = ceiling;
  out.roofline.t_roof_s = measured.t;
  out.roofline.bound = available(measured.t) ? measured.bound : datasheet.bound;
  out.roofline.fraction_measured = measured.t / t_s;  // NaN stays NaN
  out.roofline.fraction_datasheet = datasheet.t / t_s;
  if (paired_read_Bps > 0) {
    out.roofline.paired_read_Bps = paired_read_Bps;
    out.roofline.fraction_paired =
        roof_time(in.bytes_min, in.flops, paired_read_Bps, flops_peak).t / t_s;
  }
  return out;
}

double stage_roof_time(const StageRoofInput& s, double bw) {
  return roof_time(s.bytes, s.flops, bw, s.flop_roof).t;
}

RooflineResult compute_layer_roofline(std::span<const StageRoofInput> stages,
                                      const RooflineInput& in, const ComputeCeiling& gemm_ceiling,
                                      double t_s, const DeviceInfo& device,
                                      double paired_read_Bps) {
  if (!(t_s > 0)) throw std::invalid_argument("compute_layer_roofline: time must be > 0");
  if (in.batch <= 0) throw std::invalid_argument("compute_layer_roofline: batch must be > 0");
  // Sum of the stage roofs at one bandwidth, and how much of it the FLOP terms make.
  const auto sum_at = [&](double bw, double* compute_share) {
    if (!(bw > 0)) return kNotAvailable;
    double t = 0, t_compute = 0;
    for (const StageRoofInput& s : stages) {
      const Roof r = roof_time(s.bytes, s.flops, bw, s.flop_roof);
      t += r.t;
      if (r.bound == Bound::compute) t_compute += r.t;
    }
    if (compute_share) *compute_share = t > 0 ? t_compute / t : 0;
    return t;
  };
  RooflineResult out;
  out.bandwidth.achieved = in.bytes_min / t_s;
  out.bandwidth.logical = in.bytes_logical / t_s;
  if (in.num_layers > 0) out.tokens_per_s = in.batch / (t_s * in.num_layers);
  double share_measured = 0, share_datasheet = 0;
  const double t_measured = sum_at(measured_bandwidth_roof(device.measured), &share_measured);
  const double t_datasheet = sum_at(device.bandwidth_datasheet, &share_datasheet);
  out.roofline.compute_ceiling = gemm_ceiling;
  out.roofline.t_roof_s = t_measured;
  const double share = available(t_measured) ? share_measured : share_datasheet;
  out.roofline.bound = share > 0.5 ? Bound::compute : Bound::memory;
  out.roofline.fraction_measured = t_measured / t_s;
  out.roofline.fraction_datasheet = t_datasheet / t_s;
  if (paired_read_Bps > 0) {
    out.roofline.paired_read_Bps = paired_read_Bps;
    out.roofline.fraction_paired = sum_at(paired_read_Bps, nullptr) / t_s;
  }
  return out;
}

}  // namespace decodebench
