// The bandwidth-ceiling kernels (read, copy, triad) through the SIMT emulator: exact results on
// sizes chosen against the kernels' unroll (kernels/bandwidth/bandwidth.cu: kUnroll = 4 vectors
// of 16 bytes per thread per iteration), so every tail runs: with T threads and a pass of 4T
// vectors, each thread left 0, 1, 2 or 3 tail vectors, some threads with one more full pass
// than others, fewer vectors than threads, and exact multiples of the pass (no tail). Values are
// small integers, so every fp32 sum and b + s * c is exact in any order. The same checks run on
// a copy of the kernels with the tails dropped (bandwidth_skip_tail.cpp) and must catch it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels.h"

namespace decodebench::kernels::emu_skip_tail {
LaunchResult launch_bandwidth(BandwidthKernel which, const BandwidthParams& p, void* stream);
}

namespace decodebench {
namespace {

namespace k = kernels;
using Launcher = k::LaunchResult (*)(k::BandwidthKernel, const k::BandwidthParams&, void*);

constexpr int kUnroll = 4;  // as in bandwidth.cu: the sizes below are chosen against it

struct Case {
  std::size_t vectors;  // 16-byte vectors (4 floats)
  int grid;             // 0 = the launcher's choice
  int block;            // 0 = the launcher's choice
  bool has_tail() const {
    if (grid == 0) return true;  // not known here; not used for the planted fault
    const std::size_t pass = static_cast<std::size_t>(kUnroll) * grid * block;
    return vectors % pass != 0;
  }
};

// Per launch shape of T threads: every tail case of the unrolled grid-stride loop.
std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& [grid, block] : {std::pair{1, 32}, std::pair{3, 64}, std::pair{5, 96}}) {
    const std::size_t t = static_cast<std::size_t>(grid) * block;
    const std::size_t pass = kUnroll * t;
    for (std::size_t v : {
             std::size_t{1},       // one thread busy, in its tail
             t - 3,                // fewer vectors than threads: some threads idle
             t + 5,                // no full pass; tails of 2 and 1
             2 * t + 7,            // tails of 3 and 2
             3 * t + 1,            // one thread does a full pass, the rest a tail of 3
             pass,                 // exactly one pass: no tail
             pass + t / 2,         // tails of 1 and 0
             pass + 2 * t + 1,     // tails of 3 and 2
             2 * pass - 1,         // a second full pass for all but one thread, whose tail is 3
             3 * pass,             // three passes: no tail
             3 * pass + 3 * t + 3  // a fourth pass for 3 threads, tails of 3 for the rest
         }) {
      out.push_back({v, grid, block});
    }
  }
  out.push_back({2052 / 4, 0, 0});  // the launcher's own grid and block
  out.push_back({1, 0, 0});
  return out;
}

std::string label(const Case& c) {
  return std::to_string(c.vectors) + " vectors, grid " + std::to_string(c.grid) + " x block " +
         std::to_string(c.block);
}

// Each check runs one kernel on one case and returns empty when the result is exact, else the
// launch failure or the first mismatch.

std::string read_mismatch(Launcher launch, const Case& c) {
  const std::size_t floats = 4 * c.vectors;
  std::vector<float> src(floats);
  double expect = 0;
  for (std::size_t i = 0; i < floats; ++i) {
    src[i] = static_cast<float>(i % 13 + 1);  // never 0: a skipped element changes the sum
    expect += src[i];
  }
  std::vector<float> sink(c.grid > 0 ? static_cast<std::size_t>(c.grid) : 64, 0.f);
  k::BandwidthParams p;
  p.src = src.data();
  p.sink = sink.data();
  p.bytes = floats * sizeof(float);
  p.grid = c.grid;
  p.block = c.block;
  const k::LaunchResult r = launch(k::BandwidthKernel::read, p, nullptr);
  if (!r.ok()) return "launch failed: " + r.message;
  double got = 0;
  for (float v : sink) got += v;
  if (got == expect) return {};
  return "sum " + std::to_string(got) + ", expected " + std::to_string(expect);
}

std::string copy_mismatch(Launcher launch, const Case& c) {
  const std::size_t floats = 4 * c.vectors;
  std::vector<float> src(floats), dst(floats);
  for (std::size_t i = 0; i < floats; ++i) src[i] = static_cast<float>(i) * 0.25f - 7.f;
  std::memset(dst.data(), 0xFF, dst.size() * sizeof(float));  // NaN: an unwritten element fails
  k::BandwidthParams p;
  p.src = src.data();
  p.dst = dst.data();
  p.bytes = floats * sizeof(float);
  p.grid = c.grid;
  p.block = c.block;
  const k::LaunchResult r = launch(k::BandwidthKernel::copy, p, nullptr);
  if (!r.ok()) return "launch failed: " + r.message;
  for (std::size_t i = 0; i < floats; ++i) {
    if (std::memcmp(&src[i], &dst[i], sizeof(float)) != 0) {
      return "dst[" + std::to_string(i) + "] = " + std::to_string(dst[i]) + ", src " +
             std::to_string(src[i]);
    }
  }
  return {};
}

std::string triad_mismatch(Launcher launch, const Case& c) {
  const std::size_t floats = 4 * c.vectors;
  std::vector<float> a(floats), b(floats), cc(floats);
  for (std::size_t i = 0; i < floats; ++i) {
    b[i] = static_cast<float>(i % 7);
    cc[i] = static_cast<float>(i % 5) - 2.f;
  }
  std::memset(a.data(), 0xFF, a.size() * sizeof(float));
  k::BandwidthParams p;
  p.a = a.data();
  p.b = b.data();
  p.c = cc.data();
  p.scalar = 3.f;
  p.bytes = floats * sizeof(float);
  p.grid = c.grid;
  p.block = c.block;
  const k::LaunchResult r = launch(k::BandwidthKernel::triad, p, nullptr);
  if (!r.ok()) return "launch failed: " + r.message;
  for (std::size_t i = 0; i < floats; ++i) {
    if (!(a[i] == b[i] + 3.f * cc[i])) {
      return "a[" + std::to_string(i) + "] = " + std::to_string(a[i]) + ", expected " +
             std::to_string(b[i] + 3.f * cc[i]);
    }
  }
  return {};
}

using Check = std::string (*)(Launcher, const Case&);
struct Named {
  const char* name;
  Check check;
};
const Named kChecks[] = {
    {"read", read_mismatch}, {"copy", copy_mismatch}, {"triad", triad_mismatch}};

TEST(BandwidthEmu, EveryTailIsExact) {
  for (const Named& chk : kChecks) {
    for (const Case& c : cases()) {
      EXPECT_EQ(chk.check(k::emu::launch_bandwidth, c), "") << chk.name << ", " << label(c);
    }
  }
}

// The planted fault: kernels that skip their tails. Every size with a tail must fail every
// check, and exact multiples of the pass must still pass (the fault is in the tail only).
TEST(BandwidthEmu, ASkippedTailIsCaught) {
  for (const Named& chk : kChecks) {
    int caught = 0;
    for (const Case& c : cases()) {
      if (c.grid == 0) continue;  // the launcher's shape: which sizes have a tail is its choice
      const std::string result = chk.check(k::emu_skip_tail::launch_bandwidth, c);
      if (c.has_tail()) {
        EXPECT_NE(result, "") << chk.name << ": a skipped tail passed at " << label(c);
        caught += result.empty() ? 0 : 1;
      } else {
        EXPECT_EQ(result, "") << chk.name << ", " << label(c);
      }
    }
    EXPECT_GT(caught, 0) << chk.name;
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
