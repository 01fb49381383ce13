// Scalar helpers shared by both tile-kernel paths: the exp2 polynomial, the portable online-softmax
// update and the bit-exact decode of one stored KV element (the portable path, and tails).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "device/float_formats.h"
#include "device/softmax_state.h"
#include "kernels.h"

namespace decodebench::cpu::detail {

// 2^x for x <= 0, written so the compiler vectorizes a loop of it: round-to-nearest by the
// 1.5 * 2^23 trick, a degree-6 polynomial for 2^f on [-0.5, 0.5] (Cephes exp2f coefficients,
// relative error ~2e-7), and the integer part added to the exponent field. Inputs below -125
// return 2^-125 instead of ~0; next to the running max's own term (exactly 1) that is noise.
// Highest degree first; shared with the AVX-512 softmax.
inline constexpr float kExp2Poly[7] = {1.535336188319500e-4f,
                                       1.339887440266574e-3f,
                                       9.618437357674640e-3f,
                                       5.550332471162809e-2f,
                                       2.402264791363012e-1f,
                                       6.931472028550421e-1f,
                                       1.0f};

inline float fast_exp2(float x) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  x = x < -125.0f ? -125.0f : x;
  const float r = x + kRound;  // the integer nearest x sits in r's low mantissa bits
  const float n = r - kRound;
  const float f = x - n;  // [-0.5, 0.5]
  float poly = kExp2Poly[0];
  for (int i = 1; i < 7; ++i) poly = poly * f + kExp2Poly[i];
  const std::int32_t ni = static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(r) -
                                                    std::bit_cast<std::uint32_t>(kRound));
  const float scale = std::bit_cast<float>(static_cast<std::uint32_t>(ni + 127) << 23);
  return poly * scale;
}

// Folds one tile of scores of one head into its running state: raises the max (rescaling the
// accumulator when it moves), turns scores into probabilities in place, adds them to the sum.
template <int kHeadDim>
inline void softmax_update(float* __restrict s /*[n]*/, int n, SoftmaxState<float>& state,
                           float* __restrict acc /*[kHeadDim]*/) {
  float tile_max = -INFINITY;
#pragma omp simd reduction(max : tile_max)
  for (int j = 0; j < n; ++j) tile_max = s[j] > tile_max ? s[j] : tile_max;
  if (tile_max > state.max) {
    const float factor = state.raise_max(tile_max);
#pragma omp simd
    for (int c = 0; c < kHeadDim; ++c) acc[c] *= factor;
  }
  const float max = state.max;
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j < n; ++j) {
    s[j] = fast_exp2(s[j] - max);
    sum += s[j];
  }
  state.sum += sum;
}

// One stored KV element -> float, bit-exact (portable path, and tails).
template <DType kKv>
inline float decode_element(const std::byte* row, std::size_t i) {
  if constexpr (kKv == DType::f32) {
    float v;
    std::memcpy(&v, row + 4 * i, 4);
    return v;
  } else if constexpr (kKv == DType::f16 || kKv == DType::bf16) {
    std::uint16_t bits;
    std::memcpy(&bits, row + 2 * i, 2);
    return kKv == DType::f16 ? floatfmt::f16_to_float(bits) : floatfmt::bf16_to_float(bits);
  } else if constexpr (kKv == DType::fp8_e4m3) {
    return floatfmt::e4m3_to_float(static_cast<std::uint8_t>(row[i]));
  } else {
    return floatfmt::e5m2_to_float(static_cast<std::uint8_t>(row[i]));
  }
}

}  // namespace decodebench::cpu::detail
