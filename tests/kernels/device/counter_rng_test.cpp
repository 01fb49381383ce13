// The counter-based normal generator: pure, platform-independent, N(0,1)-like, bounded.
#include "device/counter_rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

namespace decodebench {
namespace {

// Golden values: the generator is specified bit for bit (integer hashing, exactly rounded
// float operations), so these hold on every compiler and target. A change here changes every
// workload, dump and committed result: update them only on purpose.
TEST(CounterRng, GoldenValues) {
  EXPECT_EQ(counter_normal(0, 0, 0), -0x1.2b0a52p-2f);
  EXPECT_EQ(counter_normal(0, 1, 0), 0x1.7e42a4p+0f);
  EXPECT_EQ(counter_normal(1, 2, 3), -0x1.1d4e7cp+0f);
  EXPECT_EQ(counter_normal(42, 0, 123456789), 0x1.229398p-5f);
  EXPECT_EQ(counter_normal(~0ull, 2, ~0ull), -0x1.6869aep+0f);
}

TEST(CounterRng, PureAndKeyed) {
  EXPECT_EQ(counter_normal(7, 1, 99), counter_normal(7, 1, 99));
  // Neighbouring seeds, tensors and indices give unrelated values.
  int same = 0;
  for (std::uint64_t i = 0; i < 1000; ++i) {
    same += counter_normal(7, 1, i) == counter_normal(8, 1, i);
    same += counter_normal(7, 1, i) == counter_normal(7, 2, i);
    same += counter_normal(7, 1, i) == counter_normal(7, 1, i + 1);
  }
  EXPECT_EQ(same, 0);
}

TEST(CounterRng, ElementsPairUp) {
  for (std::uint64_t p = 0; p < 100; ++p) {
    const NormalPair pair = counter_normal_pair(3, 1, p);
    EXPECT_EQ(counter_normal(3, 1, 2 * p), pair.first);
    EXPECT_EQ(counter_normal(3, 1, 2 * p + 1), pair.second);
  }
}

TEST(CounterRng, MomentsOfANormal) {
  constexpr int kN = 400000;
  double sum = 0, sum2 = 0, sum4 = 0;
  int beyond2 = 0;
  for (int i = 0; i < kN; ++i) {
    const double x = counter_normal(2024, 1, static_cast<std::uint64_t>(i));
    sum += x;
    sum2 += x * x;
    sum4 += x * x * x * x;
    beyond2 += std::fabs(x) > 2.0;
  }
  const double mean = sum / kN;
  const double var = sum2 / kN - mean * mean;
  // Standard errors: mean 1/sqrt(N) = 0.0016, variance sqrt(2/N) = 0.0022; allow ~5 sigma.
  EXPECT_NEAR(mean, 0.0, 0.008);
  EXPECT_NEAR(var, 1.0, 0.011);
  EXPECT_NEAR(sum4 / kN, 3.0, 0.06);                              // kurtosis of a normal
  EXPECT_NEAR(static_cast<double>(beyond2) / kN, 0.0455, 0.002);  // P(|x| > 2)

  // The two halves of a pair (and neighbouring pairs) are independent: E[xy] = 0, E[x^2 y^2] = 1.
  double xy = 0, x2y2 = 0, next = 0;
  for (int p = 0; p < kN / 2; ++p) {
    const double x = counter_normal(2024, 2, 2 * p), y = counter_normal(2024, 2, 2 * p + 1);
    xy += x * y;
    x2y2 += x * x * y * y;
    next += y * counter_normal(2024, 2, 2 * p + 2);
  }
  EXPECT_NEAR(xy / (kN / 2), 0.0, 0.01);
  EXPECT_NEAR(x2y2 / (kN / 2), 1.0, 0.03);
  EXPECT_NEAR(next / (kN / 2), 0.0, 0.01);
}

TEST(CounterRng, BoundIsTightAndRespected) {
  // k1 = 0 is the smallest uniform; angle 0 has cos exactly 1: the largest magnitude.
  EXPECT_EQ(normal_from_bits(0, 0), kGeneratorBound);
  EXPECT_NEAR(kGeneratorBound, std::sqrt(66.0 * std::log(2.0)), 1e-5);
  // The smallest uniform with every angle, and random inputs: never beyond the bound.
  for (std::uint32_t a = 0; a < (1u << 24); a += 4093) {
    ASSERT_LE(std::fabs(normal_from_bits(0, a << 8)), kGeneratorBound) << a;
  }
  std::mt19937 gen(5);
  for (int i = 0; i < 200000; ++i) {
    const float x = normal_from_bits(gen() % 16, gen());
    ASSERT_LE(std::fabs(x), kGeneratorBound);
    ASSERT_TRUE(std::isfinite(x));
  }
  // The sine half of the pair peaks a quarter turn later, with the same bound.
  EXPECT_EQ(normal_pair_from_bits(0, 1u << 30).second, kGeneratorBound);
  EXPECT_EQ(normal_pair_from_bits(0, 0).second, 0.0f);
  // Quadrant symmetry of the angle: a half turn flips the sign exactly.
  for (std::uint32_t k = 1; k < 100; ++k) {
    const std::uint32_t a = k * 40503u;
    EXPECT_EQ(normal_from_bits(k, a << 8), -normal_from_bits(k, (a + (1u << 23)) << 8));
  }
}

TEST(CounterRng, TranscendentalsAreAccurate) {
  for (std::uint32_t k = 0; k < 0xffffff00u; k += 65521u) {
    const double exact = std::log((k + 0.5) / 4294967296.0);
    ASSERT_NEAR(rng_detail::log_uniform(k), exact, 4e-6 * std::max(1.0, std::fabs(exact))) << k;
  }
  for (std::uint32_t a = 0; a < (1u << 24); a += 997) {
    const rng_detail::CosSin cs = rng_detail::cos_sin_turns(a);
    ASSERT_NEAR(cs.cos, std::cos(2 * M_PI * a / 16777216.0), 3e-7) << a;
    ASSERT_NEAR(cs.sin, std::sin(2 * M_PI * a / 16777216.0), 3e-7) << a;
  }
}

}  // namespace
}  // namespace decodebench
