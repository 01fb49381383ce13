// Roofline math of docs/design.md "Byte and FLOP model" for one timed point.
//   t_roof = max(bytes_min / BW, flops / FLOP_peak)       roofline_fraction = t_roof / t
//   achieved_bandwidth = bytes_min / t                    logical = bytes_logical / t
//   tokens_per_s = batch / (t * num_layers)               attention-only
// The measured bandwidth roof is the read-only ceiling (a decode step is a read stream); where
// a backend did not measure it, copy, then triad. The FLOP roof is the measured FMA peak, else
// the device's flops_peak; with neither, only the memory roof applies. A roof that is not known
// (0) makes its fraction NaN (null in the JSON), never 0 or infinity.
#pragma once

#include "backends/backend.h"
#include "report/point_result.h"

namespace decodebench {

// The model's numbers for one point (src/workload/byte_model.h computes them).
struct RooflineInput {
  double bytes_min = 0;      // kv_unique + q + out + tables + lens
  double bytes_logical = 0;  // bytes_min with kv_logical in place of kv_unique
  double flops = 0;
  int batch = 0;
  int num_layers = 0;
};

double measured_bandwidth_roof(const Ceilings& c);  // read, else copy, else triad, else 0
double flop_roof(const DeviceInfo& d);              // measured fma_flops, else flops_peak

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

}  // namespace decodebench
