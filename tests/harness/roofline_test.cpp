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
  EXPECT_EQ(flop_roof(d), 0);
  d.flops_peak = 7;
  EXPECT_EQ(flop_roof(d), 7);
  d.measured.fma_flops = 9;
  EXPECT_EQ(flop_roof(d), 9);
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
