// Bit-exact scalar conversions between float and the narrow formats, usable on host and device
// (DECODEBENCH_HD). Written once: the workload encoder, the reference, the CPU backend and the
// emulated kernels all use these; under nvcc the kernels may use hardware conversions, which
// must agree with these (round to nearest even; fp8 saturates to the largest finite value, as
// cvt.rn.satfinite does; NaN stays NaN).
//
// Formats (sign bit, exponent bits, mantissa bits, bias):
//   f16       1/5/10 bias 15    max 65504, overflow rounds to inf (IEEE binary16)
//   bf16      1/8/7  bias 127   the top half of a float; overflow rounds to inf
//   fp8_e4m3  1/4/3  bias 7     no inf; S.1111.111 is NaN; max 448 (S.1111.110)
//   fp8_e5m2  1/5/2  bias 15    IEEE-like (has inf), but we convert with satfinite: max 57344
//
// Only integer operations and exact float multiplies by powers of two are used, so the results
// do not depend on the compiler, the FMA contraction setting or the target.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define DECODEBENCH_HD __host__ __device__ __forceinline__
#else
#define DECODEBENCH_HD inline
#endif

namespace decodebench::floatfmt {

// Bit casts without memcpy (device code) and without union punning (undefined in C++).
DECODEBENCH_HD std::uint32_t float_as_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return __builtin_bit_cast(std::uint32_t, x);
#endif
}
DECODEBENCH_HD float bits_as_float(std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  return __builtin_bit_cast(float, b);
#endif
}

namespace detail {

// Rounds a finite, non-negative float (given as its bits) to a format with kMant mantissa bits
// and exponent bias kBias, round to nearest even. Returns the magnitude code
// (biased_exponent << kMant | mantissa), which may exceed the format's largest finite code; the
// caller decides between inf and saturation. Subnormal results are produced exactly.
template <int kMant, int kBias>
DECODEBENCH_HD std::uint32_t round_magnitude(std::uint32_t abs_bits) {
  const int exp = static_cast<int>(abs_bits >> 23);  // float biased exponent
  std::uint32_t mant = abs_bits & 0x7fffffu;
  const int target_exp = exp - 127 + kBias;
  int shift;                // how many low bits of the 24-bit significand are dropped
  std::uint32_t code_base;  // what the kept bits are added to
  if (target_exp >= 1) {    // normal in the target format
    shift = 23 - kMant;
    code_base = static_cast<std::uint32_t>(target_exp) << kMant;
  } else {  // subnormal (or zero) in the target: units of 2^(1 - bias - mant)
    if (exp != 0) mant |= 0x800000u;  // implicit leading bit; float subnormals have exponent 1
    shift = (23 - kMant) + (1 - target_exp) - (exp == 0 ? 1 : 0);
    code_base = 0;
    if (shift > 24) return 0;  // below half the smallest subnormal: rounds to zero
  }
  const std::uint32_t kept = mant >> shift;
  const std::uint32_t rest = mant & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  std::uint32_t code = code_base + kept;  // a mantissa carry correctly bumps the exponent
  if (rest > half || (rest == half && (code & 1u))) ++code;
  return code;
}

// Decodes a magnitude code of an IEEE-style format (no special values handled here).
template <int kMant, int kBias>
DECODEBENCH_HD float decode_magnitude(std::uint32_t code) {
  const std::uint32_t exp = code >> kMant;
  const std::uint32_t mant = code & ((1u << kMant) - 1u);
  if (exp == 0) {
    // Subnormal: mant * 2^(1 - bias - kMant). Both factors are exact floats, so is the product.
    const float unit = bits_as_float(static_cast<std::uint32_t>(127 + 1 - kBias - kMant) << 23);
    return static_cast<float>(mant) * unit;
  }
  return bits_as_float(((exp - kBias + 127) << 23) | (mant << (23 - kMant)));
}

DECODEBENCH_HD float apply_sign(float v, std::uint32_t sign) { return sign ? -v : v; }

}  // namespace detail

// ---- f16 ----------------------------------------------------------------------------------
DECODEBENCH_HD float f16_to_float(std::uint16_t bits) {
  const std::uint32_t sign = bits >> 15;
  const std::uint32_t code = bits & 0x7fffu;
  if ((code >> 10) == 0x1f) {  // inf or NaN: keep the payload's top bits
    return bits_as_float((sign << 31) | 0x7f800000u | ((code & 0x3ffu) << 13));
  }
  return detail::apply_sign(detail::decode_magnitude<10, 15>(code), sign);
}

DECODEBENCH_HD std::uint16_t float_to_f16(float x) {
  const std::uint32_t b = float_as_bits(x);
  const std::uint32_t sign = (b >> 16) & 0x8000u;
  const std::uint32_t abs = b & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN: quiet, payload's top bits kept
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  if (abs >= 0x47800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 2^16 or inf
  std::uint32_t code = detail::round_magnitude<10, 15>(abs);
  if (code > 0x7c00u) code = 0x7c00u;              // (cannot happen below 2^16, kept for clarity)
  return static_cast<std::uint16_t>(sign | code);  // 65520 and above round to 0x7c00 = inf
}

// ---- bf16 ---------------------------------------------------------------------------------
DECODEBENCH_HD float bf16_to_float(std::uint16_t bits) {
  return bits_as_float(static_cast<std::uint32_t>(bits) << 16);
}

DECODEBENCH_HD std::uint16_t float_to_bf16(float x) {
  const std::uint32_t b = float_as_bits(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) {  // NaN: force a quiet bit so truncation stays NaN
    return static_cast<std::uint16_t>((b >> 16) | 0x0040u);
  }
  // Round to nearest even on the dropped 16 bits; a carry out of the mantissa bumps the
  // exponent, and the largest finite floats round to inf, as IEEE requires.
  const std::uint32_t rounding = 0x7fffu + ((b >> 16) & 1u);
  return static_cast<std::uint16_t>((b + rounding) >> 16);
}

// ---- fp8 e4m3 (OCP / NVIDIA __nv_fp8_e4m3) ------------------------------------------------
inline constexpr float kE4m3Max = 448.f;
inline constexpr float kE5m2Max = 57344.f;

DECODEBENCH_HD float e4m3_to_float(std::uint8_t bits) {
  const std::uint32_t sign = bits >> 7;
  const std::uint32_t code = bits & 0x7fu;
  if (code == 0x7fu) return bits_as_float((sign << 31) | 0x7fc00000u);  // the only NaN
  return detail::apply_sign(detail::decode_magnitude<3, 7>(code), sign);
}

DECODEBENCH_HD std::uint8_t float_to_e4m3(float x) {
  const std::uint32_t b = float_as_bits(x);
  const std::uint32_t sign = (b >> 24) & 0x80u;
  const std::uint32_t abs = b & 0x7fffffffu;
  if (abs > 0x7f800000u) return 0x7fu;  // NaN -> the canonical NaN (sign dropped, as cvt does)
  // satfinite: anything beyond 448 (inf included) becomes +-448 = code 0x7e.
  if (abs >= 0x43e00000u) return static_cast<std::uint8_t>(sign | 0x7eu);  // |x| >= 448
  std::uint32_t code = detail::round_magnitude<3, 7>(abs);
  if (code > 0x7eu)
    code = 0x7eu;  // 448 < |x| rounding up past 448 already handled; belt and braces
  return static_cast<std::uint8_t>(sign | code);
}

// ---- fp8 e5m2 (OCP / NVIDIA __nv_fp8_e5m2) ------------------------------------------------
DECODEBENCH_HD float e5m2_to_float(std::uint8_t bits) {
  const std::uint32_t sign = bits >> 7;
  const std::uint32_t code = bits & 0x7fu;
  if ((code >> 2) == 0x1fu) {  // inf (mantissa 0) or NaN
    return bits_as_float((sign << 31) | 0x7f800000u | ((code & 0x3u) << 21));
  }
  return detail::apply_sign(detail::decode_magnitude<2, 15>(code), sign);
}

DECODEBENCH_HD std::uint8_t float_to_e5m2(float x) {
  const std::uint32_t b = float_as_bits(x);
  const std::uint32_t sign = (b >> 24) & 0x80u;
  const std::uint32_t abs = b & 0x7fffffffu;
  if (abs > 0x7f800000u) return 0x7fu;  // NaN -> canonical NaN
  // satfinite: beyond 57344 (inf included) becomes +-57344 = code 0x7b. Values in
  // (57344, 61440) would round to 57344 anyway; 61440 and above would round to inf.
  if (abs >= 0x47600000u) return static_cast<std::uint8_t>(sign | 0x7bu);  // |x| >= 57344
  std::uint32_t code = detail::round_magnitude<2, 15>(abs);
  if (code > 0x7bu) code = 0x7bu;
  return static_cast<std::uint8_t>(sign | code);
}

}  // namespace decodebench::floatfmt
