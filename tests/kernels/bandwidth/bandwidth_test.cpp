// The bandwidth-ceiling kernels (read, copy, triad) through the SIMT emulator: exact results on
// buffers whose size is not a multiple of grid x block x 16 bytes, so the grid-stride tails run.
// Values are small integers, so every fp32 sum and b + s * c is exact in any order.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels.h"

namespace decodebench {
namespace {

namespace k = kernels;

struct Shape {
  std::size_t floats;  // multiple of 4 (16 bytes)
  int grid;            // 0 = the launcher's choice
  int block;           // 0 = the launcher's choice
};
const Shape kShapes[] = {{4, 1, 32}, {1000, 3, 64}, {4 * 1024 + 4, 5, 96}, {2052, 0, 0}};

TEST(BandwidthEmu, ReadSumsEveryElementOnce) {
  for (const Shape& s : kShapes) {
    std::vector<float> src(s.floats);
    double expect = 0;
    for (std::size_t i = 0; i < s.floats; ++i) {
      src[i] = static_cast<float>(i % 13);
      expect += src[i];
    }
    const int grid = s.grid > 0 ? s.grid : 1;
    std::vector<float> sink(s.grid > 0 ? static_cast<std::size_t>(grid) : 64, 0.f);
    k::BandwidthParams p;
    p.src = src.data();
    p.sink = sink.data();
    p.bytes = s.floats * sizeof(float);
    p.grid = s.grid;
    p.block = s.block;
    const k::LaunchResult r = k::emu::launch_bandwidth(k::BandwidthKernel::read, p, nullptr);
    ASSERT_TRUE(r.ok()) << r.message;
    double got = 0;
    for (float v : sink) got += v;
    EXPECT_EQ(got, expect) << "floats " << s.floats << " grid " << s.grid;
  }
}

TEST(BandwidthEmu, CopyIsBitExact) {
  for (const Shape& s : kShapes) {
    std::vector<float> src(s.floats), dst(s.floats);
    for (std::size_t i = 0; i < s.floats; ++i) src[i] = static_cast<float>(i) * 0.25f - 7.f;
    std::memset(dst.data(), 0xFF, dst.size() * sizeof(float));  // NaN: an unwritten element fails
    k::BandwidthParams p;
    p.src = src.data();
    p.dst = dst.data();
    p.bytes = s.floats * sizeof(float);
    p.grid = s.grid;
    p.block = s.block;
    const k::LaunchResult r = k::emu::launch_bandwidth(k::BandwidthKernel::copy, p, nullptr);
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(std::memcmp(src.data(), dst.data(), src.size() * sizeof(float)), 0) << s.floats;
  }
}

TEST(BandwidthEmu, TriadComputesBPlusScalarTimesC) {
  for (const Shape& s : kShapes) {
    std::vector<float> a(s.floats), b(s.floats), c(s.floats);
    for (std::size_t i = 0; i < s.floats; ++i) {
      b[i] = static_cast<float>(i % 7);
      c[i] = static_cast<float>(i % 5) - 2.f;
    }
    std::memset(a.data(), 0xFF, a.size() * sizeof(float));
    k::BandwidthParams p;
    p.a = a.data();
    p.b = b.data();
    p.c = c.data();
    p.scalar = 3.f;
    p.bytes = s.floats * sizeof(float);
    p.grid = s.grid;
    p.block = s.block;
    const k::LaunchResult r = k::emu::launch_bandwidth(k::BandwidthKernel::triad, p, nullptr);
    ASSERT_TRUE(r.ok()) << r.message;
    for (std::size_t i = 0; i < s.floats; ++i) {
      ASSERT_EQ(a[i], b[i] + 3.f * c[i]) << "element " << i << " of " << s.floats;
    }
  }
}

TEST(BandwidthEmu, BadParamsAreRefusedWithAReason) {
  std::vector<float> buf(64);
  k::BandwidthParams p;
  p.src = buf.data();
  p.dst = buf.data();
  p.bytes = 20;  // not a multiple of 16
  auto r = k::emu::launch_bandwidth(k::BandwidthKernel::copy, p, nullptr);
  EXPECT_EQ(r.status, k::LaunchStatus::unsupported);
  EXPECT_NE(r.message.find("multiple of 16"), std::string::npos) << r.message;
  p.bytes = 64;
  p.block = 48;
  r = k::emu::launch_bandwidth(k::BandwidthKernel::copy, p, nullptr);
  EXPECT_EQ(r.status, k::LaunchStatus::unsupported);
  p.block = 32;
  p.sink = nullptr;
  r = k::emu::launch_bandwidth(k::BandwidthKernel::read, p, nullptr);
  EXPECT_EQ(r.status, k::LaunchStatus::unsupported);
  EXPECT_NE(r.message.find("sink"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace decodebench
