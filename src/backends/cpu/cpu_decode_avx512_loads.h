// The AVX-512 loaders: 16 (or, for fp8 with AVX512-VBMI, 64) stored KV elements converted to
// fp32 in registers, for the AVX-512 tile kernels and convert_kv_to_float.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "backends/cpu/cpu_decode_common.h"
#include "device/float_formats.h"
#include "kernels.h"

#if DECODEBENCH_CPU_AVX512
namespace decodebench::cpu::detail {

// The AVX-512 loaders return stored values divided by this (see load16's e4m3 branch); the
// scale is folded into the softmax and output scales.
template <DType kKv>
inline constexpr float kAvx512LoadScale = kKv == DType::fp8_e4m3 ? 256.0f : 1.0f;

// 16 stored elements starting at element `i` of `row` -> 16 floats (times 1/kLoadScale).
template <DType kKv>
inline __m512 load16(const std::byte* row, std::size_t i) {
  if constexpr (kKv == DType::f32) {
    return _mm512_loadu_ps(row + 4 * i);
  } else if constexpr (kKv == DType::f16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  } else if constexpr (kKv == DType::bf16) {  // bf16 is the top half of a float
    const __m512i w =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  } else if constexpr (kKv == DType::fp8_e5m2) {  // e5m2 is the top byte of an f16, exactly
    const __m256i w =
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i)));
    return _mm512_cvtph_ps(_mm256_slli_epi16(w, 8));
  } else {
    // e4m3 -> f16 with the same bits moved: sign to bit 15, exponent+mantissa (7 bits) to bits
    // 13..7. The f16 then reads value * 2^-8 (exponent bias 15 vs 7), subnormals included, so
    // kLoadScale = 256 is folded into the softmax and output scales. 0x7f is e4m3's NaN.
    const __m256i w =
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i)));
    const __m256i mag = _mm256_and_si256(w, _mm256_set1_epi16(0x7f));
    __m256i h = _mm256_or_si256(_mm256_slli_epi16(mag, 7),
                                _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8));
    h = _mm256_mask_mov_epi16(h, _mm256_cmpeq_epi16_mask(mag, _mm256_set1_epi16(0x7f)),
                              _mm256_set1_epi16(0x7e00));
    return _mm512_cvtph_ps(h);
  }
}

#if defined(__AVX512VBMI__)
// fp8 through byte tables, 64 codes at a time (AVX512-VBMI vpermt2b). Every fp8 value is exact
// in bf16, and a bf16 is the top half of a float: two 128-entry tables, indexed by the code's
// low 7 bits, give the low and high byte of the bf16 of the code's magnitude (divided by the
// kLoadScale load16 works in: 2^8 for e4m3, 1 for e5m2; inf and NaN kept), the sign is OR-ed
// into the high byte, and four zero-masked byte permutes place the two bytes at the top of each
// 32-bit lane: 64 floats in natural order in 7 operations, instead of ~36 (e4m3) or ~12 (e5m2)
// for four load16 calls.
struct Fp8ByteTables {
  alignas(64) std::uint8_t lo[128];
  alignas(64) std::uint8_t hi[128];
  // float 16 q + i <- bytes (lo, hi)[16 q + i] in bits 16..31
  alignas(64) std::uint8_t place[4][64];
};

// Built once at start-up from the project's bit-exact scalar decoders (float_formats.h): the
// top half of the float of each magnitude code divided by kLoadScale (exact: a power of two,
// and every fp8 value / 256 is still a normal float).
template <DType kKv>
Fp8ByteTables make_fp8_tables() {
  static_assert(kKv == DType::fp8_e4m3 || kKv == DType::fp8_e5m2);
  Fp8ByteTables t{};
  for (int m = 0; m < 128; ++m) {
    const auto code = static_cast<std::uint8_t>(m);
    const float value =
        kKv == DType::fp8_e4m3 ? floatfmt::e4m3_to_float(code) : floatfmt::e5m2_to_float(code);
    const std::uint32_t bf16 = std::bit_cast<std::uint32_t>(value / kAvx512LoadScale<kKv>) >> 16;
    t.lo[m] = static_cast<std::uint8_t>(bf16 & 0xff);
    t.hi[m] = static_cast<std::uint8_t>(bf16 >> 8);
  }
  for (int q = 0; q < 4; ++q)
    for (int i = 0; i < 16; ++i) {
      t.place[q][4 * i + 2] = static_cast<std::uint8_t>(16 * q + i);       // low byte, from lo
      t.place[q][4 * i + 3] = static_cast<std::uint8_t>(64 + 16 * q + i);  // high byte, from hi
    }
  return t;
}
template <DType kKv>
inline const Fp8ByteTables kFp8Tables = make_fp8_tables<kKv>();

// 64 fp8 codes at `src` -> out[0..3], 16 floats each (x 1/kLoadScale, as load16).
template <DType kKv>
inline void fp8_load64(const std::byte* src, __m512* out) {
  const Fp8ByteTables& tables = kFp8Tables<kKv>;
  const __m512i codes = _mm512_loadu_si512(src);
  const auto table = [](const std::uint8_t* t) { return _mm512_load_si512(t); };
  const __m512i lo = _mm512_permutex2var_epi8(table(tables.lo), codes, table(tables.lo + 64));
  __m512i hi = _mm512_permutex2var_epi8(table(tables.hi), codes, table(tables.hi + 64));
  // hi | (codes & 0x80)
  hi = _mm512_ternarylogic_epi32(hi, codes, _mm512_set1_epi8(static_cast<char>(0x80)), 0xf8);
  constexpr __mmask64 kTopHalves = 0xccccccccccccccccull;  // bytes 2 and 3 of every 32-bit lane
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q)
    out[q] = _mm512_castsi512_ps(
        _mm512_maskz_permutex2var_epi8(kTopHalves, lo, table(tables.place[q]), hi));
}
#endif

// kCount chunks of 16 elements starting at chunk c0 of `row` -> out[0..kCount), as load16.
template <DType kKv, int kCount>
inline void load_chunks(const std::byte* row, int c0, __m512* out) {
#if defined(__AVX512VBMI__)
  if constexpr ((kKv == DType::fp8_e4m3 || kKv == DType::fp8_e5m2) && kCount % 4 == 0) {
#pragma GCC unroll 4
    for (int c = 0; c < kCount; c += 4) fp8_load64<kKv>(row + 16 * (c0 + c), out + c);
    return;
  }
#endif
#pragma GCC unroll 16
  for (int c = 0; c < kCount; ++c) out[c] = load16<kKv>(row, 16 * (c0 + c));
}

}  // namespace decodebench::cpu::detail
#endif  // DECODEBENCH_CPU_AVX512
