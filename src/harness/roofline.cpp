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

}  // namespace decodebench
