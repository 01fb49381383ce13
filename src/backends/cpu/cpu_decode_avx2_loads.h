// The AVX2 loaders: 8 (or, for e4m3, 16) stored KV elements converted to fp32 in ymm registers,
// for the AVX2 tile kernels and convert_kv_to_float. fp8 goes through bit tricks into f16 and
// vcvtph2ps: AVX2 has no byte permute across 64 entries, and vpgatherdd from a float table is
// several times slower on Zen than the few integer operations below.
#pragma once

#include <cstddef>

#include "backends/cpu/cpu_decode_common.h"
#include "kernels.h"

#if DECODEBENCH_CPU_AVX2
namespace decodebench::cpu::detail {

// The AVX2 loaders return stored values divided by this (see avx2::e4m3_to_f16); the scale is
// folded into the softmax and output scales.
template <DType kKv>
inline constexpr float kAvx2LoadScale = kKv == DType::fp8_e4m3 ? 256.0f : 1.0f;

// Their own namespace: the AVX-512 loaders beside them have the same names for zmm registers.
namespace avx2 {

// e4m3 codes, one per 16-bit lane -> f16 bits with the same bits moved: sign to bit 15,
// exponent+mantissa (7 bits) to bits 13..7. The f16 then reads value * 2^-8 (exponent bias 15
// vs 7), subnormals included (e4m3's smallest, 2^-9, becomes 2^-17, still an f16 subnormal), so
// kAvx2LoadScale = 256. 0x7f is e4m3's NaN: OR-ing in 0x7e00 gives exponent 31 with a non-zero
// mantissa, an f16 NaN.
inline __m256i e4m3_to_f16(__m256i w) {
  const __m256i mag = _mm256_and_si256(w, _mm256_set1_epi16(0x7f));
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8);
  const __m256i nan =
      _mm256_and_si256(_mm256_cmpeq_epi16(mag, _mm256_set1_epi16(0x7f)), _mm256_set1_epi16(0x7e00));
  return _mm256_or_si256(_mm256_or_si256(_mm256_slli_epi16(mag, 7), sign), nan);
}
inline __m128i e4m3_to_f16(__m128i w) {
  const __m128i mag = _mm_and_si128(w, _mm_set1_epi16(0x7f));
  const __m128i sign = _mm_slli_epi16(_mm_and_si128(w, _mm_set1_epi16(0x80)), 8);
  const __m128i nan =
      _mm_and_si128(_mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7f)), _mm_set1_epi16(0x7e00));
  return _mm_or_si128(_mm_or_si128(_mm_slli_epi16(mag, 7), sign), nan);
}

// 8 stored elements starting at element `i` of `row` -> 8 floats (times 1/kAvx2LoadScale).
template <DType kKv>
inline __m256 load8(const std::byte* row, std::size_t i) {
  if constexpr (kKv == DType::f32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row + 4 * i));
  } else if constexpr (kKv == DType::f16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  } else if constexpr (kKv == DType::bf16) {  // bf16 is the top half of a float
    const __m256i w =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  } else if constexpr (kKv == DType::fp8_e5m2) {  // e5m2 is the top byte of an f16, exactly
    const __m128i codes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + i));
    return _mm256_cvtph_ps(_mm_unpacklo_epi8(_mm_setzero_si128(), codes));
  } else {
    const __m128i codes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + i));
    return _mm256_cvtph_ps(e4m3_to_f16(_mm_cvtepu8_epi16(codes)));
  }
}

// 16 stored elements starting at element `i` -> out[0..1], as load8. For fp8 the integer work
// runs on all 16 codes at once (one ymm, or two unpacks of one xmm), half the operations of two
// load8 calls.
template <DType kKv>
inline void load16(const std::byte* row, std::size_t i, __m256* out) {
  if constexpr (kKv == DType::fp8_e5m2) {
    const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i));
    out[0] = _mm256_cvtph_ps(_mm_unpacklo_epi8(_mm_setzero_si128(), codes));
    out[1] = _mm256_cvtph_ps(_mm_unpackhi_epi8(_mm_setzero_si128(), codes));
  } else if constexpr (kKv == DType::fp8_e4m3) {
    const __m256i h = e4m3_to_f16(
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i))));
    out[0] = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    out[1] = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
  } else {
    out[0] = load8<kKv>(row, i);
    out[1] = load8<kKv>(row, i + 8);
  }
}

// kCount chunks of 8 elements starting at chunk c0 of `row` -> out[0..kCount), as load8.
template <DType kKv, int kCount>
inline void load_chunks(const std::byte* row, int c0, __m256* out) {
  if constexpr (kCount % 2 == 0) {
#pragma GCC unroll 16
    for (int c = 0; c < kCount; c += 2) load16<kKv>(row, 8 * (c0 + c), out + c);
  } else {
#pragma GCC unroll 16
    for (int c = 0; c < kCount; ++c) out[c] = load8<kKv>(row, 8 * (c0 + c));
  }
}

}  // namespace avx2
}  // namespace decodebench::cpu::detail
#endif  // DECODEBENCH_CPU_AVX2
