// Roofline math on hand-computed numbers.
#include <cmath>

#include <gtest/gtest.h>

#include "harness/roofline.h"

namespace decodebench {
namespace {

DeviceInfo device(double read, double copy, double datasheet, double flops) {
  DeviceInfo d;
  d.measured.read = read;
  d.measured.copy = copy;
  d.bandwidth_datasheet = datasheet;
  d.flops_peak = flops;
  return d;
}

TEST(Roofline, MemoryBoundPoint) {
  // llama-3.1-8b-like: 1 GB of bytes, 2 GFLOP, batch 8, 32 layers; t = 1 ms.
  RooflineInput in{
      .bytes_min = 1e9, .bytes_logical = 1.5e9, .flops = 2e9, .batch = 8, .num_layers = 32};
  const RooflineResult r = compute_roofline(in, 1e-3, device(2e12, 1.8e12, 3.35e12, 60e12));
  EXPECT_DOUBLE_EQ(r.bandwidth.achieved, 1e12);
  EXPECT_DOUBLE_EQ(r.bandwidth.logical, 1.5e12);
  EXPECT_EQ(r.roofline.bound, Bound::memory);
  EXPECT_DOUBLE_EQ(r.roofline.t_roof_s, 1e9 / 2e12);  // against read, 0.5 ms
  EXPECT_DOUBLE_EQ(r.roofline.fraction_measured, 0.5);
  EXPECT_DOUBLE_EQ(r.roofline.fraction_datasheet, (1e9 / 3.35e12) / 1e-3);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 8 / (1e-3 * 32));  // 250 tok/s, attention only
}

// The paired fraction uses the read bandwidth measured alongside the samples, not the ceiling.
TEST(Roofline, PairedReadBandwidth) {
  RooflineInput in{
      .bytes_min = 1e9, .bytes_logical = 1e9, .flops = 2e9, .batch = 8, .num_layers = 32};
  const DeviceInfo d = device(2e12, 0, 0, 60e12);
  const RooflineResult unpaired = compute_roofline(in, 1e-3, d);
  EXPECT_TRUE(std::isnan(unpaired.roofline.paired_read_Bps));
  EXPECT_TRUE(std::isnan(unpaired.roofline.fraction_paired));
  const RooflineResult r = compute_roofline(in, 1e-3, d, 1.25e12);
  EXPECT_DOUBLE_EQ(r.roofline.paired_read_Bps, 1.25e12);
  EXPECT_DOUBLE_EQ(r.roofline.fraction_paired, (1e9 / 1.25e12) / 1e-3);  // 0.8
  EXPECT_DOUBLE_EQ(r.roofline.fraction_measured, 0.5);                   // unchanged
}

TEST(Roofline, ComputeBoundWhenFlopsDominate) {
  RooflineInput in{
      .bytes_min = 1e6, .bytes_logical = 1e6, .flops = 1e12, .batch = 1, .num_layers = 1};
  DeviceInfo d = device(1e11, 0, 0, 1e12);
  d.measured.fma_flops = 5e11;  // measured peak wins over the datasheet one
  const RooflineResult r = compute_roofline(in, 4.0, d);
  EXPECT_EQ(r.roofline.bound, Bound::compute);
  EXPECT_DOUBLE_EQ(r.roofline.t_roof_s, 2.0);
  EXPECT_DOUBLE_EQ(r.roofline.fraction_measured, 0.5);
  EXPECT_TRUE(std::isnan(r.roofline.fraction_datasheet));  // no datasheet bandwidth
  ASSERT_TRUE(r.roofline.compute_ceiling.has_value());     // a CUDA-core / CPU kernel (default)
  EXPECT_EQ(r.roofline.compute_ceiling->name, "fp32 FMA (measured)");
  EXPECT_DOUBLE_EQ(r.roofline.compute_ceiling->flops, 5e11);
}

TEST(Roofline, CeilingFallbacks) {
  Ceilings c;
  EXPECT_EQ(measured_bandwidth_roof(c), 0);
  c.triad = 3;
  EXPECT_EQ(measured_bandwidth_roof(c), 3);
  c.copy = 2;
  EXPECT_EQ(measured_bandwidth_roof(c), 2);
  c.read = 1;
  EXPECT_EQ(measured_bandwidth_roof(c), 1);
  DeviceInfo d;
  EXPECT_TRUE(std::isnan(compute_ceiling(d, ComputeUnit::fma).flops));
  EXPECT_EQ(compute_ceiling(d, ComputeUnit::fma).name, "fp32 FMA (unknown)");
  d.flops_peak = 7;
  EXPECT_EQ(compute_ceiling(d, ComputeUnit::fma).flops, 7);
  EXPECT_EQ(compute_ceiling(d, ComputeUnit::fma).name, "fp32 FMA (datasheet)");
  d.measured.fma_flops = 9;
  EXPECT_EQ(compute_ceiling(d, ComputeUnit::fma).flops, 9);
  EXPECT_EQ(compute_ceiling(d, ComputeUnit::fma).name, "fp32 FMA (measured)");
  // The tensor-core roof never falls back to the FMA one: without its figure it is unknown.
  EXPECT_TRUE(std::isnan(compute_ceiling(d, ComputeUnit::tensor_core).flops));
  EXPECT_EQ(compute_ceiling(d, ComputeUnit::tensor_core).name, "tensor-core f16/bf16 (unknown)");
  d.flops_peak_tensor_f16 = 11;
  d.flops_peak_tensor_fp8 = 22;  // for the record: never a roof of ours
  EXPECT_EQ(compute_ceiling(d, ComputeUnit::tensor_core).flops, 11);
  EXPECT_EQ(compute_ceiling(d, ComputeUnit::tensor_core).unit, ComputeUnit::tensor_core);
  EXPECT_EQ(compute_ceiling(d, ComputeUnit::tensor_core).name, "tensor-core f16/bf16 (datasheet)");
}

// An H200-like GPU: fp32 66.9 TFLOP/s, tensor f16 989.4, read 4.3 TB/s. A point of 1 MB at
// 20 FLOP/B (fp8 KV, group 10) takes 0.30 us of fp32 FMAs but 0.23 us at the read ceiling: a
// CUDA-core kernel is compute-bound, the same point on tensor cores (0.02 us) memory-bound.
DeviceInfo h200_like() {
  DeviceInfo d = device(4.3e12, 0, 4.8e12, 66.9e12);
  d.flops_peak_tensor_f16 = 989.4e12;
  d.flops_peak_tensor_fp8 = 1978.9e12;
  return d;
}

TEST(Roofline, ComputeRoofOfTheKernelsUnits) {
  const RooflineInput fma{.bytes_min = 1e6,
                          .bytes_logical = 1e6,
                          .flops = 20e6,
                          .batch = 1,
                          .num_layers = 1,
                          .compute = ComputeUnit::fma};
  RooflineInput tc = fma;
  tc.compute = ComputeUnit::tensor_core;
  const DeviceInfo d = h200_like();
  const RooflineResult on_fma = compute_roofline(fma, 1e-5, d);
  const RooflineResult on_tc = compute_roofline(tc, 1e-5, d);

  EXPECT_EQ(on_fma.roofline.bound, Bound::compute);
  ASSERT_TRUE(on_fma.roofline.compute_ceiling.has_value());
  EXPECT_EQ(on_fma.roofline.compute_ceiling->unit, ComputeUnit::fma);
  EXPECT_EQ(on_fma.roofline.compute_ceiling->name, "fp32 FMA (datasheet)");
  EXPECT_DOUBLE_EQ(on_fma.roofline.compute_ceiling->flops, 66.9e12);
  EXPECT_DOUBLE_EQ(on_fma.roofline.t_roof_s, 20e6 / 66.9e12);
  EXPECT_DOUBLE_EQ(on_fma.roofline.fraction_datasheet, 20e6 / 66.9e12 / 1e-5);
  EXPECT_EQ(bound_label(on_fma.roofline), "fma");

  EXPECT_EQ(on_tc.roofline.bound, Bound::memory);
  ASSERT_TRUE(on_tc.roofline.compute_ceiling.has_value());
  EXPECT_EQ(on_tc.roofline.compute_ceiling->unit, ComputeUnit::tensor_core);
  EXPECT_DOUBLE_EQ(on_tc.roofline.compute_ceiling->flops, 989.4e12);  // f16, not fp8
  EXPECT_DOUBLE_EQ(on_tc.roofline.t_roof_s, 1e6 / 4.3e12);
  EXPECT_EQ(bound_label(on_tc.roofline), "mem");

  // Compute-bound on tensor cores too when the FLOPs are large enough: labelled tc.
  tc.flops = 1e10;
  const RooflineResult heavy = compute_roofline(tc, 1e-5, d);
  EXPECT_EQ(heavy.roofline.bound, Bound::compute);
  EXPECT_DOUBLE_EQ(heavy.roofline.t_roof_s, 1e10 / 989.4e12);
  EXPECT_EQ(bound_label(heavy.roofline), "tc");
}

// A GPU configs/devices.json does not list: no tensor figure, so a tensor-core kernel's point is
// judged against the memory roof alone and says its ceiling is unknown, never the FMA roof.
TEST(Roofline, TensorKernelOnADeviceWithoutTheFigure) {
  RooflineInput in{.bytes_min = 1e6,
                   .bytes_logical = 1e6,
                   .flops = 1e12,
                   .batch = 1,
                   .num_layers = 1,
                   .compute = ComputeUnit::tensor_core};
  const RooflineResult r = compute_roofline(in, 1.0, device(1e12, 0, 0, 66.9e12));
  EXPECT_EQ(r.roofline.bound, Bound::memory);
  EXPECT_DOUBLE_EQ(r.roofline.t_roof_s, 1e-6);
  ASSERT_TRUE(r.roofline.compute_ceiling.has_value());
  EXPECT_TRUE(std::isnan(r.roofline.compute_ceiling->flops));
  EXPECT_EQ(r.roofline.compute_ceiling->name, "tensor-core f16/bf16 (unknown)");
}

TEST(Roofline, UnknownCeilingsGiveNaNNotZero) {
  RooflineInput in{
      .bytes_min = 1e6, .bytes_logical = 1e6, .flops = 1e6, .batch = 2, .num_layers = 0};
  const RooflineResult r = compute_roofline(in, 1e-3, DeviceInfo{});
  EXPECT_DOUBLE_EQ(r.bandwidth.achieved, 1e9);
  EXPECT_TRUE(std::isnan(r.roofline.t_roof_s));
  EXPECT_TRUE(std::isnan(r.roofline.fraction_measured));
  EXPECT_TRUE(std::isnan(r.tokens_per_s));  // no layer count, no tokens/s
}

TEST(Roofline, RejectsNonPositiveTime) {
  RooflineInput in{.bytes_min = 1, .bytes_logical = 1, .flops = 1, .batch = 1, .num_layers = 1};
  EXPECT_THROW(compute_roofline(in, 0, DeviceInfo{}), std::invalid_argument);
  in.batch = 0;
  EXPECT_THROW(compute_roofline(in, 1, DeviceInfo{}), std::invalid_argument);
}

}  // namespace
}  // namespace decodebench
