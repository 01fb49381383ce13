// Reports built by hand for the report tests.
#pragma once

#include "harness/sweep_config.h"
#include "results/report.h"

namespace decodebench::test {

inline PointResult ok_point(int index, int batch, double median_s, double achieved) {
  PointResult p;
  p.index = index;
  p.kernel = "gqa";
  p.kernel_requested = "auto";
  p.backend = "cuda";
  p.model = "llama-3.1-8b";
  p.num_q_heads = 32;
  p.num_kv_heads = 8;
  p.head_dim = 128;
  p.num_layers = 32;
  p.kv_dtype = DType::f16;
  p.q_dtype = DType::f16;
  p.block_size = 16;
  p.batch = batch;
  p.context = ContextSpec::fixed(8192);
  p.hit_rate = 0.5;
  p.hit_rate_actual = 0.498046875;
  p.prefix_groups = 1;
  p.seed = 18446744073709551615ull;  // max uint64 survives the round trip
  p.status = PointStatus::ok;
  p.samples = {median_s * 0.99, median_s, median_s * 1.01};
  p.timing = TimingRecord{TimingMethod::events_per_step, 1, /*warm_l2=*/false};
  p.time_s = {median_s,         median_s * 0.99, median_s * 1.01,       median_s * 0.992,
              median_s * 1.008, median_s,        0.0012345678901234567, 3};
  p.bytes = {1.0e9 * batch, 0.6e9 * batch, 0.6e9 * batch + 123456};
  p.flops = 4.0 * 32 * 8192 * 128 * batch;
  p.arithmetic_intensity = p.flops / p.bytes.min;
  p.bandwidth = {achieved, achieved * 1.6};
  p.roofline = {Bound::memory, median_s * 0.8, 0.8, 0.7};
  p.roofline.compute_ceiling = ComputeCeiling{ComputeUnit::fma, "fp32 FMA (datasheet)", 67e12};
  p.tokens_per_s = batch / (median_s * 32);
  p.error = {1.0 / 3.0, 0.01, kNotAvailable, batch, ""};
  return p;
}

inline PointResult wrong_point(int index) {
  PointResult p = ok_point(index, 7, 1, 1);
  p.status = PointStatus::wrong;
  p.reason = "1 of 28672 checked elements outside |out - ref| <= 0.001 + 0.01*|ref|";
  p.error.first_mismatch = "[6][3][64] out=1.5 ref=1.25";
  p.kv_dtype = DType::fp8_e5m2;
  p.error.quant_rel = 0.03;
  p.time_s = {};
  p.samples.clear();
  p.timing.reset();
  p.bandwidth = {};
  p.roofline = {Bound::memory, kNotAvailable, kNotAvailable, kNotAvailable};
  p.tokens_per_s = kNotAvailable;
  return p;
}

inline Report sample_report() {
  Report r = new_report();
  DeviceRecord d;
  d.backend = "cuda";
  d.name = "NVIDIA H200";
  d.sm_count = 132;
  d.l2_bytes = 50331648;
  d.mem_bytes = 150045704192;
  d.bandwidth_datasheet = 4.8e12;
  d.bandwidth_theoretical = 4.9152e12;
  d.flops_peak = 67e12;
  d.flops_peak_tensor_f16 = 989.4e12;
  d.flops_peak_tensor_fp8 = 1978.9e12;
  d.measured.read = 4.1e12;
  d.measured.copy = 3.9e12;
  d.measured.triad = 4.0e12;
  d.measured.buffer_bytes = 402653184;
  d.measured.note = "buffers 8x L2";
  d.measured.shapes = "read 256x4, copy 512x4, triad 1024x2 of 256x2 256x4 256x8 512x4 1024x2";
  r.devices = {d};
  SweepConfig c;
  c.batches = {1, 8, 64, 7};
  c.kernels = {"auto"};
  // The stopping rule the points' 3 samples satisfy, so no point reads as stopped at the timeout.
  c.measure.min_samples = 3;
  c.measure.min_time_s = 0;
  r.config = to_json(c);
  r.results = {ok_point(0, 1, 1e-4, 1.0e12), ok_point(1, 8, 2e-4, 3.0e12),
               ok_point(2, 64, 9e-4, 4.0e12), wrong_point(3)};
  PointResult skipped = ok_point(4, 512, 1, 1);
  skipped.status = PointStatus::skipped;
  skipped.reason = "needs 90.1 GB, the device has 80 GB free";
  skipped.context = ContextSpec::ragged(1000, 9000);
  skipped.time_s = {};
  skipped.samples.clear();
  skipped.bandwidth = {};
  skipped.tokens_per_s = kNotAvailable;
  r.results.push_back(skipped);
  r.completion.points_planned = 5;
  return r;
}

}  // namespace decodebench::test
