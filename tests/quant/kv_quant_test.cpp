// The KV formats against their definitions (src/quant/kv_quant.h) on values small enough to
// check by hand, and the property that motivates int4's per-channel keys: an outlier channel
// ruins per-token groups but not per-channel ones.
#include "quant/kv_quant.h"

#include <cmath>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "common/errors.h"
#include "device/float_formats.h"

namespace decodebench::quant {
namespace {

float f16(float x) { return floatfmt::f16_to_float(floatfmt::float_to_f16(x)); }

double rel_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
    den += static_cast<double>(a[i]) * a[i];
  }
  return std::sqrt(num / den);
}

std::vector<float> gaussian(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

TEST(KvQuant, Int8IsPerTokenSymmetricWithAnF16Scale) {
  const PoolShape shape{1, 1, 2, 4};
  const std::vector<float> x = {1.f, -2.f, 0.5f, 2.54f, 0.f, 0.f, 0.f, 0.f};
  const QuantizedPool q = quantize(KvFormat::int8, KvTensor::k, shape, x);
  ASSERT_EQ(q.scales.size(), 2u);  // one per (token, head)
  const float s = floatfmt::f16_to_float(q.scales[0]);
  EXPECT_EQ(s, f16(2.54f / 127));
  const std::vector<int> want = {50, -100, 25, 127};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(static_cast<std::int8_t>(q.codes[i]), want[i]) << i;
  EXPECT_EQ(floatfmt::f16_to_float(q.scales[1]), 0.f);  // an all-zero row: scale 0, codes 0
  const std::vector<float> back = dequantize(q);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back[i], want[i] * s) << i;
  for (int i = 4; i < 8; ++i) EXPECT_EQ(back[i], 0.f);
  EXPECT_EQ(q.scale_shape(), (std::vector<std::int64_t>{1, 1, 2}));
}

TEST(KvQuant, Int4ValuesArePerTokenGroupsOf32Packed) {
  const PoolShape shape{1, 1, 1, 64};
  std::vector<float> x(64);
  for (int c = 0; c < 64; ++c) x[c] = c < 32 ? static_cast<float>(c) : -1.f - 0.1f * (c - 32);
  const QuantizedPool q = quantize(KvFormat::int4, KvTensor::v, shape, x);
  ASSERT_EQ(q.codes.size(), 32u);
  ASSERT_EQ(q.scales.size(), 2u);  // two groups of 32 channels
  EXPECT_EQ(q.scale_shape(), (std::vector<std::int64_t>{1, 1, 1, 2}));
  for (int g = 0; g < 2; ++g) {
    float lo = x[g * 32], hi = x[g * 32];
    for (int c = g * 32; c < g * 32 + 32; ++c) lo = std::min(lo, x[c]), hi = std::max(hi, x[c]);
    const float s = floatfmt::f16_to_float(q.scales[g]), z = floatfmt::f16_to_float(q.zeros[g]);
    EXPECT_EQ(s, f16((hi - lo) / 15)) << g;
    EXPECT_EQ(z, f16(lo)) << g;
    for (int c = g * 32; c < g * 32 + 32; ++c) {
      const int code = c % 2 == 0 ? q.codes[c / 2] & 0xf : q.codes[c / 2] >> 4;
      EXPECT_EQ(code, static_cast<int>(std::clamp(std::nearbyint((x[c] - z) / s), 0.f, 15.f))) << c;
    }
  }
  // Channel 0 is the group minimum (code 0, low nibble), channel 31 its maximum (code 15, high).
  EXPECT_EQ(q.codes[0] & 0xf, 0);
  EXPECT_EQ(q.codes[15] >> 4, 15);
}

TEST(KvQuant, Int4KeysArePerBlockChannel) {
  const PoolShape shape{2, 1, 4, 32};  // two blocks of 4 tokens
  std::vector<float> x(shape.elements());
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 4; ++t)
      for (int c = 0; c < 32; ++c) x[(b * 4 + t) * 32 + c] = 10.f * c + 0.5f * t + 100.f * b;
  const QuantizedPool q = quantize(KvFormat::int4, KvTensor::k, shape, x);
  ASSERT_EQ(q.scales.size(), 64u);  // (block, head, channel)
  EXPECT_EQ(q.scale_shape(), (std::vector<std::int64_t>{2, 1, 32}));
  for (int b = 0; b < 2; ++b) {
    for (int c = 0; c < 32; ++c) {
      EXPECT_EQ(floatfmt::f16_to_float(q.scales[b * 32 + c]), f16(1.5f / 15)) << b << " " << c;
      EXPECT_EQ(floatfmt::f16_to_float(q.zeros[b * 32 + c]), f16(10.f * c + 100.f * b));
    }
  }
  // The per-token layout has one scale per 32 channels spanning 310: far coarser.
  const QuantizedPool naive = quantize(KvFormat::int4_token, KvTensor::k, shape, x);
  EXPECT_EQ(naive.scale_shape(), (std::vector<std::int64_t>{2, 1, 4, 1}));
  EXPECT_LT(rel_rms(x, dequantize(q)) * 20, rel_rms(x, dequantize(naive)));
}

TEST(KvQuant, OutlierKeyChannelsFavourPerChannelInt4) {
  // Real keys: a few channels (low-frequency RoPE dimensions) many times the others.
  const PoolShape shape{8, 2, 16, 64};
  std::vector<float> x = gaussian(shape.elements(), 1);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t c = i % 64;
    if (c == 3 || c == 35) x[i] = 20.f + x[i];  // an offset outlier channel per group
  }
  const double per_channel =
      rel_rms(x, dequantize(quantize(KvFormat::int4, KvTensor::k, shape, x)));
  const double per_token =
      rel_rms(x, dequantize(quantize(KvFormat::int4_token, KvTensor::k, shape, x)));
  EXPECT_LT(per_channel * 2, per_token) << per_channel << " vs " << per_token;
}

TEST(KvQuant, RoundTripErrorsOnGaussianValues) {
  const PoolShape shape{4, 2, 16, 128};
  const std::vector<float> x = gaussian(shape.elements(), 2);
  auto err = [&](KvFormat f) { return rel_rms(x, dequantize(quantize(f, KvTensor::v, shape, x))); };
  EXPECT_EQ(err(KvFormat::f32), 0.0);
  EXPECT_LT(err(KvFormat::f16), 1e-3);
  EXPECT_LT(err(KvFormat::int8), 0.02);  // ~ (s/sqrt(12)) / sigma with s = 3.5 sigma / 127
  EXPECT_GT(err(KvFormat::int8), err(KvFormat::f16));
  EXPECT_LT(err(KvFormat::fp8_e4m3), 0.05);
  EXPECT_LT(err(KvFormat::int4), 0.2);
  EXPECT_GT(err(KvFormat::int4), err(KvFormat::int8));
  // Every int8 element within half a step of its source.
  const QuantizedPool q = quantize(KvFormat::int8, KvTensor::v, shape, x);
  const std::vector<float> back = dequantize(q);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float s = floatfmt::f16_to_float(q.scales[i / 128]);
    ASSERT_LE(std::fabs(back[i] - x[i]), 0.5f * s * 1.0001f) << i;
  }
}

TEST(KvQuant, Fp8UsesOnePerTensorScale) {
  const PoolShape shape{1, 1, 1, 4};
  const std::vector<float> x = {896.f, -1.f, 0.f, 3.f};
  const QuantizedPool q = quantize(KvFormat::fp8_e4m3, KvTensor::k, shape, x);
  EXPECT_EQ(q.tensor_scale, 2.f);  // 896 / 448
  EXPECT_EQ(dequantize(q)[0], 896.f);
  EXPECT_EQ(q.stored_bytes(), 4 + 4);  // four codes and the f32 scale
}

TEST(KvQuant, StoredBytesMatchTheByteModel) {
  const PoolShape shape{3, 2, 16, 64};
  const std::vector<float> x = gaussian(shape.elements(), 3);
  for (KvFormat f : all_formats()) {
    for (KvTensor t : {KvTensor::k, KvTensor::v}) {
      const QuantizedPool q = quantize(f, t, shape, x);
      const std::int64_t fixed = scale_axis(f, t) == ScaleAxis::tensor ? 4 : 0;
      EXPECT_DOUBLE_EQ(
          static_cast<double>(q.stored_bytes() - fixed) / (shape.tokens() * shape.kv_heads),
          bytes_per_token_head(f, t, 64, 16))
          << format_name(f) << " " << tensor_name(t);
    }
  }
  EXPECT_EQ(bytes_per_token_head(KvFormat::f16, KvTensor::k, 128, 16), 256);
  EXPECT_EQ(bytes_per_token_head(KvFormat::int8, KvTensor::k, 128, 16), 130);
  EXPECT_EQ(bytes_per_token_head(KvFormat::int4, KvTensor::k, 64, 16), 32 + 16);
  EXPECT_EQ(bytes_per_token_head(KvFormat::int4, KvTensor::v, 64, 16), 32 + 8);
  EXPECT_EQ(bytes_per_token_head(KvFormat::int4_token, KvTensor::k, 64, 16), 32 + 8);
}

TEST(KvQuant, BadInputIsNamed) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::vector<float> x(48, 1.f);
  EXPECT_NE(message([&] {
              quantize(KvFormat::int4, KvTensor::v, {1, 1, 1, 48}, x);
            }).find("not a multiple of 32"),
            std::string::npos);
  EXPECT_NE(message([&] {
              quantize(KvFormat::int8, KvTensor::v, {1, 1, 2, 48}, x);
            }).find("holds 96 values, got 48"),
            std::string::npos);
  std::vector<float> bad = x;
  bad[5] = std::nanf("");
  EXPECT_NE(message([&] {
              quantize(KvFormat::int8, KvTensor::v, {1, 1, 1, 48}, bad);
            }).find("finite"),
            std::string::npos);
  const std::vector<float> huge(48, 1e7f);  // scale 78740 > 65504
  EXPECT_NE(message([&] {
              quantize(KvFormat::int8, KvTensor::v, {1, 1, 1, 48}, huge);
            }).find("does not fit f16"),
            std::string::npos);
  const std::string unknown = message([] { parse_format("int3"); });
  EXPECT_NE(unknown.find("unknown KV format 'int3'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("int4_token"), std::string::npos) << unknown;
  EXPECT_EQ(parse_format("e4m3"), KvFormat::fp8_e4m3);
  EXPECT_EQ(parse_format("int4_token"), KvFormat::int4_token);
  EXPECT_NE(message([] { parse_tensor("q"); }).find("valid: k, v"), std::string::npos);
}

}  // namespace
}  // namespace decodebench::quant
