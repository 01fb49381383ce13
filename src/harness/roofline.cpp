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

double flop_roof(const DeviceInfo& d) {
  if (d.measured.fma_flops > 0) return d.measured.fma_flops;
  return d.flops_peak > 0 ? d.flops_peak : 0;
}

namespace {

struct Roof {
  double t = kNotAvailable;
  Bound bound = Bound::memory;
};

// Roofline time against one bandwidth ceiling; NaN when that ceiling is unknown.
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
  const double flops_peak = flop_roof(device);
  const Roof measured =
      roof_time(in.bytes_min, in.flops, measured_bandwidth_roof(device.measured), flops_peak);
  const Roof datasheet = roof_time(in.bytes_min, in.flops, device.bandwidth_datasheet, flops_peak);
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
