// Bit-exact conversions (kernels/device/float_formats.h) against tables of known bit patterns,
// an independent round-to-nearest-even model, and exhaustive round trips.
#include "device/float_formats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace decodebench::floatfmt {
namespace {

float f(std::uint32_t bits) { return bits_as_float(bits); }
const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(FloatFormats, F16KnownPatterns) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_f16(0.0f), 0x0000);
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_f16(0.1f), 0x2e66);
  EXPECT_EQ(float_to_f16(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);   // largest finite
  EXPECT_EQ(float_to_f16(65519.99f), 0x7bff);  // below the midpoint to 2^16
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);   // midpoint, ties to even = inf
  EXPECT_EQ(float_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(float_to_f16(-kInf), 0xfc00);
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: 0
  EXPECT_EQ(float_to_f16(std::ldexp(1.0001f, -25)), 0x0001);
  EXPECT_EQ(float_to_f16(std::ldexp(3.0f, -25)), 0x0002);      // tie between 1 and 2: even
  EXPECT_EQ(float_to_f16(std::ldexp(5.0f, -25)), 0x0002);      // tie between 2 and 3: even
  EXPECT_EQ(float_to_f16(f(0x3f801000)), 0x3c00);              // 1 + 2^-11: tie, stays even
  EXPECT_EQ(float_to_f16(f(0x3f803000)), 0x3c02);              // 1 + 3*2^-11: tie, up to even
  EXPECT_EQ(float_to_f16(f(0x3f801001)), 0x3c01);              // just above the tie
  EXPECT_EQ(float_to_f16(std::ldexp(0x7ffp0f, -25)), 0x0400);  // subnormal rounding up to normal
  const std::uint16_t nan = float_to_f16(kNaN);
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_NE(float_to_f16(f(0x7f800001)) & 0x03ff, 0);  // NaN with only low payload bits

  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_float(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_to_float(0x7c00), kInf);
  EXPECT_EQ(f16_to_float(0xfc00), -kInf);
  EXPECT_TRUE(std::isnan(f16_to_float(0x7e00)));
  EXPECT_TRUE(std::signbit(f16_to_float(0x8000)));
}

TEST(FloatFormats, Bf16KnownPatterns) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(-1.0f), 0xbf80);
  EXPECT_EQ(float_to_bf16(0.1f), 0x3dcd);
  EXPECT_EQ(float_to_bf16(f(0x3f808000)), 0x3f80);  // tie, stays even
  EXPECT_EQ(float_to_bf16(f(0x3f818000)), 0x3f82);  // tie, up to even
  EXPECT_EQ(float_to_bf16(f(0x3f808001)), 0x3f81);
  EXPECT_EQ(float_to_bf16(f(0x7f7fffff)), 0x7f80);  // largest float rounds to inf
  EXPECT_EQ(float_to_bf16(f(0x00010000)), 0x0001);  // subnormals pass through
  EXPECT_EQ(float_to_bf16(kInf), 0x7f80);
  EXPECT_EQ(float_to_bf16(f(0x7f800001)) & 0x7f, 0x40);  // NaN stays NaN after truncation
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(kNaN))));
  EXPECT_EQ(bf16_to_float(0x4049), 3.140625f);
}

TEST(FloatFormats, E4m3KnownPatterns) {
  EXPECT_EQ(float_to_e4m3(1.0f), 0x38);
  EXPECT_EQ(float_to_e4m3(-1.0f), 0xb8);
  EXPECT_EQ(float_to_e4m3(240.0f), 0x77);
  EXPECT_EQ(float_to_e4m3(448.0f), 0x7e);
  EXPECT_EQ(float_to_e4m3(464.0f), 0x7e);  // satfinite
  EXPECT_EQ(float_to_e4m3(1e6f), 0x7e);
  EXPECT_EQ(float_to_e4m3(kInf), 0x7e);
  EXPECT_EQ(float_to_e4m3(-kInf), 0xfe);
  EXPECT_EQ(float_to_e4m3(-500.0f), 0xfe);
  EXPECT_EQ(float_to_e4m3(kNaN), 0x7f);
  EXPECT_EQ(float_to_e4m3(432.0f), 0x7e);   // tie between 416 and 448: even mantissa 110
  EXPECT_EQ(float_to_e4m3(1.0625f), 0x38);  // tie between 1 and 1.125: even
  EXPECT_EQ(float_to_e4m3(1.1875f), 0x3a);  // tie between 1.125 and 1.25: even
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -6)), 0x08);   // smallest normal
  EXPECT_EQ(float_to_e4m3(std::ldexp(7.0f, -9)), 0x07);   // largest subnormal
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -9)), 0x01);   // smallest subnormal
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -10)), 0x00);  // tie to even: 0
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.5f, -10)), 0x01);
  EXPECT_EQ(float_to_e4m3(std::ldexp(3.0f, -10)), 0x02);  // tie between 1 and 2: even

  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0xfe), -448.0f);
  EXPECT_EQ(e4m3_to_float(0x78), 256.0f);  // exponent 1111 is finite in e4m3
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xff)));
  EXPECT_TRUE(std::signbit(e4m3_to_float(0x80)));
}

TEST(FloatFormats, E5m2KnownPatterns) {
  EXPECT_EQ(float_to_e5m2(1.0f), 0x3c);
  EXPECT_EQ(float_to_e5m2(-1.0f), 0xbc);
  EXPECT_EQ(float_to_e5m2(57344.0f), 0x7b);
  EXPECT_EQ(float_to_e5m2(60000.0f), 0x7b);  // satfinite
  EXPECT_EQ(float_to_e5m2(kInf), 0x7b);
  EXPECT_EQ(float_to_e5m2(-kInf), 0xfb);
  EXPECT_EQ(float_to_e5m2(kNaN), 0x7f);
  EXPECT_EQ(float_to_e5m2(1.125f), 0x3c);                 // tie between 1 and 1.25: even
  EXPECT_EQ(float_to_e5m2(1.375f), 0x3e);                 // tie between 1.25 and 1.5: even
  EXPECT_EQ(float_to_e5m2(std::ldexp(1.0f, -16)), 0x01);  // smallest subnormal
  EXPECT_EQ(float_to_e5m2(std::ldexp(1.0f, -17)), 0x00);  // tie to even: 0
  EXPECT_EQ(float_to_e5m2(std::ldexp(1.0f, -14)), 0x04);  // smallest normal

  EXPECT_EQ(e5m2_to_float(0x7b), 57344.0f);
  EXPECT_EQ(e5m2_to_float(0x7c), kInf);
  EXPECT_EQ(e5m2_to_float(0xfc), -kInf);
  EXPECT_TRUE(std::isnan(e5m2_to_float(0x7d)));
  EXPECT_TRUE(std::isnan(e5m2_to_float(0x7f)));
  EXPECT_EQ(e5m2_to_float(0x01), std::ldexp(1.0f, -16));
}

// Every code decodes and re-encodes to itself (NaNs stay NaN; e5m2's infinities saturate).
TEST(FloatFormats, ExhaustiveRoundTrips) {
  for (std::uint32_t c = 0; c < 0x10000; ++c) {
    const auto code = static_cast<std::uint16_t>(c);
    const float x = f16_to_float(code);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(x)))) << std::hex << c;
    } else {
      ASSERT_EQ(float_to_f16(x), code) << std::hex << c;
    }
    const float y = bf16_to_float(code);
    if (std::isnan(y)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(y)))) << std::hex << c;
    } else {
      ASSERT_EQ(float_to_bf16(y), code) << std::hex << c;
    }
  }
  for (std::uint32_t c = 0; c < 0x100; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    const float a = e4m3_to_float(code);
    if (std::isnan(a)) {
      EXPECT_EQ(float_to_e4m3(a), 0x7f);
    } else {
      EXPECT_EQ(float_to_e4m3(a), code) << std::hex << c;
    }
    const float b = e5m2_to_float(code);
    if (std::isnan(b)) {
      EXPECT_EQ(float_to_e5m2(b), 0x7f);
    } else if (std::isinf(b)) {
      EXPECT_EQ(float_to_e5m2(b), (c & 0x80) | 0x7b);
    } else {
      EXPECT_EQ(float_to_e5m2(b), code) << std::hex << c;
    }
  }
}

// An independent model of each conversion: round x to the format's grid with the FPU's own
// round-to-nearest-even (std::nearbyint in double), then apply the overflow rule.
struct Grid {
  int mant_bits;
  int min_exp;    // exponent of the smallest normal
  double max;     // largest finite
  bool saturate;  // satfinite (fp8) or overflow to inf (f16, bf16)
};

double model_round(double x, const Grid& g) {
  if (x == 0) return x;
  const double a = std::fabs(x);
  const int e = std::max(static_cast<int>(std::floor(std::log2(a))), g.min_exp);
  const double ulp = std::ldexp(1.0, e - g.mant_bits);
  double r = std::nearbyint(a / ulp) * ulp;  // a / ulp is exact: a has 24 significant bits
  // IEEE overflow: round as if the exponent range were unbounded, then inf past max + ulp/2.
  const double overflow_at =
      g.max + std::ldexp(1.0, static_cast<int>(std::floor(std::log2(g.max))) - g.mant_bits) / 2;
  if (g.saturate ? r > g.max : a >= overflow_at) r = g.saturate ? g.max : HUGE_VAL;
  return std::copysign(r, x);
}

TEST(FloatFormats, MatchesRoundingModelOnRandomFloats) {
  std::mt19937 gen(1234);
  const Grid f16{10, -14, 65504.0, false};
  const Grid bf16{7, -126, 3.3895313892515355e38, false};
  const Grid e4m3{3, -6, 448.0, true};
  const Grid e5m2{2, -14, 57344.0, true};
  for (int i = 0; i < 400000; ++i) {
    // Random bit patterns over the whole finite range, and ones concentrated near each format.
    std::uint32_t bits = gen();
    if (i % 2) bits = (bits & 0x80ffffffu) | ((96u + gen() % 56u) << 23);  // 2^-31 .. 2^24
    const float x = f(bits);
    if (!std::isfinite(x)) continue;
    ASSERT_EQ(static_cast<double>(f16_to_float(float_to_f16(x))), model_round(x, f16)) << x;
    ASSERT_EQ(static_cast<double>(bf16_to_float(float_to_bf16(x))), model_round(x, bf16)) << x;
    ASSERT_EQ(static_cast<double>(e4m3_to_float(float_to_e4m3(x))), model_round(x, e4m3)) << x;
    ASSERT_EQ(static_cast<double>(e5m2_to_float(float_to_e5m2(x))), model_round(x, e5m2)) << x;
  }
}

}  // namespace
}  // namespace decodebench::floatfmt
