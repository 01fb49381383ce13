// Counter-based normal generator, host and device:
//
//   float counter_normal(seed, tensor, index)   N(0,1), |x| <= kGeneratorBound
//
// a pure function of its arguments, so any element of any tensor can be produced on its own, in
// any order, by a CPU thread or a GPU thread, and a subset of a workload can be rebuilt exactly.
//
// Bit-exact on every target. Box-Muller needs log, sqrt and cos; libm's logf/cosf and CUDA's
// differ in the last bit, and an FMA contraction the compiler is free to choose would differ
// too. So the transcendental parts are short polynomials written with explicit fmaf (exactly
// rounded everywhere), the remaining operations are single IEEE operations that no compiler may
// contract (a product never feeds a plain addition), and the device side spells them with the
// _rn intrinsics so --use_fast_math cannot change them either. Accuracy is ~1e-7 relative, far
// beyond what a benchmark's random data needs; exactness is what matters.
//
//   index / 2 -> splitmix64 mixing of (seed, tensor, index / 2) -> 64 bits
//   high 32 bits k1: u1 = (k1 + 1/2) / 2^32 in (0, 1)    radius  r = sqrt(-2 ln u1)
//   low  32 bits k2: top 24 bits are the angle 2*pi*u2   even index r cos(2 pi u2), odd r sin
#pragma once

#include <cstdint>

#include "device/float_formats.h"  // DECODEBENCH_HD

#include <cmath>  // std::fma, std::sqrt on the host

// Host: always inline, so a caller compiled for a wider ISA (the FMA clone of the workload
// fill) gets fmaf as one instruction rather than a call to libm's. Device: DECODEBENCH_HD.
#if defined(__CUDACC__)
#define DECODEBENCH_RNG_FN DECODEBENCH_HD
#else
#define DECODEBENCH_RNG_FN inline __attribute__((always_inline))
#endif

namespace decodebench {

namespace rng_detail {

DECODEBENCH_RNG_FN float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
DECODEBENCH_RNG_FN float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
DECODEBENCH_RNG_FN float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
DECODEBENCH_RNG_FN float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
DECODEBENCH_RNG_FN float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

// splitmix64's finalizer (Steele, Lea, Flood 2014): a bijection with good avalanche.
DECODEBENCH_RNG_FN std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Position of the highest set bit of v (v != 0).
DECODEBENCH_RNG_FN int highest_bit(std::uint64_t v) {
#if defined(__CUDA_ARCH__)
  return 63 - __clzll(static_cast<long long>(v));
#else
  return 63 - __builtin_clzll(v);
#endif
}

// ln((k + 1/2) / 2^32) = ln(2k + 1) - 33 ln 2. With 2k + 1 = m * 2^n, m in [sqrt(1/2), sqrt(2)):
// ln = (n - 33) ln 2 + ln m, and ln m = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), s = (m-1)/(m+1),
// |s| <= 0.172 so terms up to s^13 leave an error below 1e-9.
DECODEBENCH_RNG_FN float log_uniform(std::uint32_t k) {
  const std::uint64_t v = 2ull * k + 1ull;  // 33 bits at most, odd
  int n = highest_bit(v);
  // m's 24 leading bits (truncated: deterministic) placed under a float exponent of 0.
  const std::uint32_t top = n > 23 ? static_cast<std::uint32_t>(v >> (n - 23))
                                   : static_cast<std::uint32_t>(v << (23 - n));
  float m = floatfmt::bits_as_float((127u << 23) | (top & 0x7fffffu));
  if (m > 1.41421356f) {
    m = mul_rn(m, 0.5f);  // exact
    n += 1;
  }
  const float s = div_rn(add_rn(m, -1.f), add_rn(m, 1.f));  // m - 1 is exact (Sterbenz)
  const float s2 = mul_rn(s, s);
  float p = 1.f / 13.f;
  p = fma_rn(p, s2, 1.f / 11.f);
  p = fma_rn(p, s2, 1.f / 9.f);
  p = fma_rn(p, s2, 1.f / 7.f);
  p = fma_rn(p, s2, 1.f / 5.f);
  p = fma_rn(p, s2, 1.f / 3.f);
  p = fma_rn(p, s2, 1.f);
  const float ln_m = mul_rn(mul_rn(2.f, s), p);
  return fma_rn(static_cast<float>(n - 33), 0.693147180559945f, ln_m);
}

// sin and cos of x in [0, pi/4]: Taylor series, the first omitted term is below 4e-10.
DECODEBENCH_RNG_FN float sin_small(float x) {
  const float x2 = mul_rn(x, x);
  float p = -1.f / 39916800.f;        // -1/11!
  p = fma_rn(p, x2, 1.f / 362880.f);  //  1/9!
  p = fma_rn(p, x2, -1.f / 5040.f);   // -1/7!
  p = fma_rn(p, x2, 1.f / 120.f);     //  1/5!
  p = fma_rn(p, x2, -1.f / 6.f);      // -1/3!
  p = fma_rn(p, x2, 1.f);
  return mul_rn(x, p);
}
DECODEBENCH_RNG_FN float cos_small(float x) {
  const float x2 = mul_rn(x, x);
  float p = 1.f / 479001600.f;          //  1/12!
  p = fma_rn(p, x2, -1.f / 3628800.f);  // -1/10!
  p = fma_rn(p, x2, 1.f / 40320.f);     //  1/8!
  p = fma_rn(p, x2, -1.f / 720.f);      // -1/6!
  p = fma_rn(p, x2, 1.f / 24.f);        //  1/4!
  p = fma_rn(p, x2, -0.5f);
  return fma_rn(p, x2, 1.f);  // <= 1 for x in [0, pi/4]
}

// cos and sin of 2 pi a / 2^24 for a 24-bit angle a. The quadrant comes from the top two bits
// and the reduction to [0, pi/4] is done on integers, so it is exact. Both polynomials are
// evaluated and the results selected without branches (the quadrant is random: a branch on it
// would mispredict half the time).
struct CosSin {
  float cos, sin;
};
DECODEBENCH_RNG_FN CosSin cos_sin_turns(std::uint32_t a) {
  constexpr std::uint32_t kQuarter = 1u << 22;              // a quarter turn in angle units
  constexpr float kUnit = 1.5707963267948966f / 4194304.f;  // (pi/2) / 2^22 radians per unit
  const std::uint32_t quadrant = a >> 22;
  const std::uint32_t r = a & (kQuarter - 1u);  // angle within the quadrant
  // Angle q pi/2 + x with x in [0, pi/4], or (q+1) pi/2 - x with x in (0, pi/4).
  const bool upper = r > kQuarter / 2;
  const float x = mul_rn(static_cast<float>(upper ? kQuarter - r : r), kUnit);
  const float c = cos_small(x);
  const float s = sin_small(x);
  // cos(q pi/2 + x) = cos x, -sin x, -cos x, sin x for q = 0..3; cos((q+1) pi/2 - x) = sin x,
  // -cos x, -sin x, cos x. sin(.) is cos(.) a quarter turn earlier.
  const bool odd = quadrant & 1u;
  const float cos_mag = (odd != upper) ? s : c;
  const float sin_mag = (odd != upper) ? c : s;
  return {(quadrant == 1u || quadrant == 2u) ? -cos_mag : cos_mag,
          quadrant >= 2u ? -sin_mag : sin_mag};
}

DECODEBENCH_RNG_FN float cos_turns(std::uint32_t a) { return cos_sin_turns(a).cos; }

}  // namespace rng_detail

// Box-Muller: two independent normals from two 32-bit uniforms, r cos(theta) and r sin(theta).
// Exposed so tests can check the extremes.
struct NormalPair {
  float first, second;
};
DECODEBENCH_RNG_FN NormalPair normal_pair_from_bits(std::uint32_t k1, std::uint32_t k2) {
  const float r = rng_detail::sqrt_rn(rng_detail::mul_rn(-2.f, rng_detail::log_uniform(k1)));
  const rng_detail::CosSin cs = rng_detail::cos_sin_turns(k2 >> 8);
  return {rng_detail::mul_rn(r, cs.cos), rng_detail::mul_rn(r, cs.sin)};
}
DECODEBENCH_RNG_FN float normal_from_bits(std::uint32_t k1, std::uint32_t k2) {
  return normal_pair_from_bits(k1, k2).first;
}

// The largest |counter_normal| can return: k1 = 0 gives u1 = 2^-33, the smallest uniform,
// r = sqrt(66 ln 2) = 6.763706, and |cos|, |sin| <= 1 (cos_small(0) is exactly 1). This is the
// float normal_from_bits(0, 0) returns (checked by tests/kernels/device). fp8 scales map it to the
// format's largest finite value, so encoded K/V never saturate.
inline constexpr float kGeneratorBound = 0x1.b0e08ep+2f;  // 6.76370573f

// Elements 2p and 2p+1 of a tensor are the Box-Muller pair of hash p, so a fill that writes
// both pays for one hash, one log and one sqrt per two values.
DECODEBENCH_RNG_FN NormalPair counter_normal_pair(std::uint64_t seed, std::uint32_t tensor,
                                                  std::uint64_t pair_index) {
  // A per-(seed, tensor) stream key, then splitmix64's counter step for the pair.
  const std::uint64_t key =
      rng_detail::mix64(seed ^ (0x9e3779b97f4a7c15ull * (static_cast<std::uint64_t>(tensor) + 1)));
  const std::uint64_t z = rng_detail::mix64(key + 0x9e3779b97f4a7c15ull * (pair_index + 1));
  return normal_pair_from_bits(static_cast<std::uint32_t>(z >> 32), static_cast<std::uint32_t>(z));
}

DECODEBENCH_RNG_FN float counter_normal(std::uint64_t seed, std::uint32_t tensor,
                                        std::uint64_t index) {
  const NormalPair p = counter_normal_pair(seed, tensor, index >> 1);
  return (index & 1u) ? p.second : p.first;
}

}  // namespace decodebench
