// The integer KV formats' per-format reads for the tensor-core rungs (tc_int.cuh), kept apart from
// the attention loop: how a lane's ldmatrix word of codes becomes exact f16 MMA operands, which
// channel each MMA position then holds, where a format's scales and zeros are staged, and the
// f16x2 arithmetic the scale folds use. The formats themselves are defined in
// src/quant/kv_quant.h (docs/design.md "KV formats").
//
// Codes become f16 through the 1024 magic number: a byte or nibble placed in the mantissa of
// 0x6400 (1024, whose f16 ulp is 1) is 1024 + code exactly, so one f16x2 subtraction gives two
// codes. Per pair of codes:
//   int8   PRMT (the byte and 0x64 into each half) + HSUB2 of 1152 (1024 + int8's bias of 128,
//          added to a whole word of 4 codes by one XOR): 2.25 instructions per 2 codes
//   int4   LOP3 ((word & 0x000F000F) | 0x64006400: nibble j of both 16-bit halves) + HSUB2, or,
//          for the odd nibbles, LOP3 with 0x00F000F0 (16 x code) + HFMA2 by (1/16, -64), so no
//          shift; one SHF per word for nibbles 2 and 3: 9 instructions per 8 codes
// ldmatrix moves 16-bit elements, so on byte rows the channels a lane gets are fixed by the
// layout; the kernels permute q (K's channels) and the output (V's) instead of the codes.
#pragma once

#include <cstdint>
#include <cstring>

#include "device/mma.h"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode::kv_convert {

// __byte_perm: byte i of the result is byte sel[4i..4i+2] of the 8 bytes {b, a}.
__device__ __forceinline__ std::uint32_t byte_perm(std::uint32_t a, std::uint32_t b,
                                                   std::uint32_t sel) {
#if defined(__CUDACC__)
  return __byte_perm(a, b, sel);
#else
  const std::uint64_t both = a | (static_cast<std::uint64_t>(b) << 32);
  std::uint32_t out = 0;
  for (int i = 0; i < 4; ++i) {
    out |= static_cast<std::uint32_t>((both >> (8 * ((sel >> (4 * i)) & 7))) & 0xffu) << (8 * i);
  }
  return out;
#endif
}

// ---- f16x2 arithmetic, each rounded once (sub/mul/fma.rn.f16x2); the host side computes in
// double, exact for these operands (f16 products are exact in float) before the one rounding.
#if !defined(__CUDACC__)
namespace detail {
inline float f16_lo(std::uint32_t x) {
  return floatfmt::f16_to_float(static_cast<std::uint16_t>(x & 0xffffu));
}
inline float f16_hi(std::uint32_t x) {
  return floatfmt::f16_to_float(static_cast<std::uint16_t>(x >> 16));
}
inline std::uint32_t f16x2_of(double lo, double hi) {
  // double -> f16 through float: the operands below never make the float step round.
  return floatfmt::float_to_f16(static_cast<float>(lo)) |
         (static_cast<std::uint32_t>(floatfmt::float_to_f16(static_cast<float>(hi))) << 16);
}
}  // namespace detail
#endif

__device__ __forceinline__ std::uint32_t f16x2_sub(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDACC__)
  std::uint32_t d;
  asm("sub.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  using namespace detail;
  return f16x2_of(static_cast<double>(f16_lo(a)) - f16_lo(b),
                  static_cast<double>(f16_hi(a)) - f16_hi(b));
#endif
}

__device__ __forceinline__ std::uint32_t f16x2_mul(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDACC__)
  std::uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  using namespace detail;
  return f16x2_of(static_cast<double>(f16_lo(a)) * f16_lo(b),
                  static_cast<double>(f16_hi(a)) * f16_hi(b));
#endif
}

__device__ __forceinline__ std::uint32_t f16x2_fma(std::uint32_t a, std::uint32_t b,
                                                   std::uint32_t c) {
#if defined(__CUDACC__)
  std::uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#else
  using namespace detail;
  return f16x2_of(static_cast<double>(f16_lo(a)) * f16_lo(b) + f16_lo(c),
                  static_cast<double>(f16_hi(a)) * f16_hi(b) + f16_hi(c));
#endif
}

// (a & b) | c in one LOP3: as C++ the two constants of (w & mask) | magic would be two
// immediates, which LOP3 cannot take, and ptxas splits it in two.
__device__ __forceinline__ std::uint32_t and_or(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
#if defined(__CUDACC__)
  std::uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#else
  return (a & b) | c;
#endif
}

// a * b - c, rounded once (the negation is an operand modifier of HFMA2, not an instruction).
__device__ __forceinline__ std::uint32_t f16x2_fms(std::uint32_t a, std::uint32_t b,
                                                   std::uint32_t c) {
#if defined(__CUDACC__)
  std::uint32_t d;
  asm("{\n.reg .b32 nc;\nneg.f16x2 nc, %3;\nfma.rn.f16x2 %0, %1, %2, nc;\n}\n"
      : "=r"(d)
      : "r"(a), "r"(b), "r"(c));
  return d;
#else
  return f16x2_fma(a, b, c ^ 0x80008000u);
#endif
}

// a * b as hi + lo, both f16x2: hi = a * b rounded, lo = the exact residual (2 instructions; lo
// is exact unless it falls below f16's normal range, where its absolute error is < 2^-25).
// With a = a_hi + a_lo already split, lo also takes a_lo * b (one more rounding of a term
// 2^-11 below hi).
__device__ __forceinline__ void f16x2_two_product(std::uint32_t a, std::uint32_t b,
                                                  std::uint32_t& hi, std::uint32_t& lo) {
  hi = f16x2_mul(a, b);
  lo = f16x2_fms(a, b, hi);  // a * b - hi, exact
}

inline constexpr std::uint32_t kF16Magic = 0x64006400u;      // (1024, 1024)
inline constexpr std::uint32_t kF16Magic1152 = 0x64806480u;  // (1152, 1152): int8 + 128
inline constexpr std::uint32_t kF16Sixteenth = 0x2C002C00u;  // (1/16, 1/16)
inline constexpr std::uint32_t kF16Minus64 = 0xD400D400u;    // (-64, -64)

// Two int8 codes of `biased` (a word of 4 codes, each + 128: the word ^ 0x80808080) chosen by
// `sel` (byte_perm selector for result bytes 0 and 2; bytes 1 and 3 take 0x64) -> exact f16x2.
__device__ __forceinline__ std::uint32_t int8_pair(std::uint32_t biased, std::uint32_t sel) {
  return f16x2_sub(byte_perm(biased, 0x64646464u, sel), kF16Magic1152);
}
inline constexpr std::uint32_t kInt8Bytes01 = 0x4140u;  // bytes 0, 1 -> (lo, hi)
inline constexpr std::uint32_t kInt8Bytes23 = 0x4342u;  // bytes 2, 3
inline constexpr std::uint32_t kInt8Bytes02 = 0x4240u;  // bytes 0, 2
inline constexpr std::uint32_t kInt8Bytes13 = 0x4341u;  // bytes 1, 3

// A word of 8 int4 codes -> x[j] = (nibble j of the low 16 bits, nibble j of the high 16 bits)
// as exact f16x2, j = 0..3.
__device__ __forceinline__ void int4_pairs(std::uint32_t w, std::uint32_t (&x)[4]) {
  const std::uint32_t w8 = w >> 8;
  x[0] = f16x2_sub(and_or(w, 0x000F000Fu, kF16Magic), kF16Magic);
  x[1] = f16x2_fma(and_or(w, 0x00F000F0u, kF16Magic), kF16Sixteenth, kF16Minus64);
  x[2] = f16x2_sub(and_or(w8, 0x000F000Fu, kF16Magic), kF16Magic);
  x[3] = f16x2_fma(and_or(w8, 0x00F000F0u, kF16Magic), kF16Sixteenth, kF16Minus64);
}

// Four words of 8 consecutive f16 (channels c0 + [0, 8)) -> the pairs (c0 + j, c0 + j + 4),
// j = 0..3: the order int4_pairs gives a K row's channels (k_channel).
__device__ __forceinline__ void f16_pairs_4_apart(const std::uint32_t (&w)[4],
                                                  std::uint32_t (&pair)[4]) {
  pair[0] = byte_perm(w[0], w[2], 0x5410u);
  pair[1] = byte_perm(w[0], w[2], 0x7632u);
  pair[2] = byte_perm(w[1], w[3], 0x5410u);
  pair[3] = byte_perm(w[1], w[3], 0x7632u);
}

// ---- Channel orders of the tokens-on-M layout (tc_int.cuh) ----------------------------------
// K: the MMA's A is a K tile [16 tokens][16 positions of a k-step]; ldmatrix gives lane l the
// 4 bytes 4 (l % 4) + [0, 4) of a 16-byte chunk of its token's row, and the A registers hold
// positions 2 (l % 4) + {0, 1} (a0, a1) and + 8 (a2, a3). The channel at position `pos`:
//   int8: chunk = k-step ks (16 channels); a0 = bytes 0, 1, a2 = bytes 2, 3:
//         16 ks + 4 (l % 4) + 2 (pos % 16 / 8) + pos % 2
//   int4: chunk = ks / 2 (32 channels, 8 a lane); int4_pairs' x[j] = channels (8 (l % 4) + j,
//         + 4); k-step 2c + s takes a0 = x[2s], a2 = x[2s + 1]:
//         32 (ks / 2) + 8 (l % 4) + 2 (ks % 2) + (pos % 16 / 8) + 4 (pos % 2)
// q, the B operand [positions][query rows], is staged in this order so the sum over k matches.
template <DType kKv>
__device__ __forceinline__ int k_channel(int pos) {
  const int ks = pos / 16;
  const int kk = pos % 16;
  const int m = (kk % 8) / 2;  // the lane's l % 4
  const int r = kk / 8;
  const int e = kk % 2;
  if constexpr (kKv == DType::int8) {
    return 16 * ks + 4 * m + 2 * r + e;
  } else {
    return 32 * (ks / 2) + 8 * m + 2 * (ks % 2) + r + 4 * e;
  }
}

// V: the MMA's A is V^T [16 channels][16 tokens], from ldmatrix.trans on byte rows: lane l gets
// bytes 2 (l / 4), +1 of two token rows, so its A row l / 4 (+ 8) is a channel of those bytes.
// The channel of O^T's m16 tile `tile`, row `row` (0..15):
//   int8: tile = a 16-channel chunk; rows 0..7 its even channels, 8..15 the odd ones
//   int4: tile 2c + p of chunk c (32 channels, one scale group); int4_pairs' x[j] is channel
//         4 (l / 4) + j, rows 0..7 take j = 2p, rows 8..15 j = 2p + 1
template <DType kKv>
__device__ __forceinline__ int o_channel(int tile, int row) {
  const int half = row / 8;
  const int r = row % 8;
  if constexpr (kKv == DType::int8) {
    return 16 * tile + 2 * r + half;
  } else {
    return 32 * (tile / 2) + 4 * r + 2 * (tile % 2) + half;
  }
}

// ---- Where a format's scales and zeros are staged (one cp.async stage of 64 tokens) ----------
// Per-token arrays (int8's K and V scales, int4's V scales and zeros, int4_token's four) are
// copied as stored, [64 tokens][bytes per token], 16-byte granules of whole tokens (never across
// a block: a granule is at most 8 tokens and P >= 8). int4's per-(block, channel) key scales and
// zeros are staged per 16-token slot of a warp (two 8-token slots at P = 8: kHalfBlocks), [s: d
// f16][z: d f16], so a warp reads its own block's row whatever P is.
template <DType kKv, int kHeadDim, bool kHalfBlocks>
struct SideLayout {
  static_assert(is_int_kv(kKv), "the side arrays are the integer formats'");
  static constexpr int kGroups = kHeadDim / kInt4GroupChannels;
  static constexpr int kTileTokens = 64;
  // Bytes per token of one per-token array, and how many such arrays K and V have.
  static constexpr int kTokenBytes = kKv == DType::int8 ? 2 : 2 * kGroups;
  static constexpr int kKTokenArrays = kKv == DType::int8 ? 1 : kKv == DType::int4_token ? 2 : 0;
  static constexpr int kVTokenArrays = kKv == DType::int8 ? 1 : 2;
  static constexpr int kTokensPerGranule = 16 / kTokenBytes;
  static constexpr int kTokenGranules = kTileTokens / kTokensPerGranule;  // per array
  static constexpr int kArrayBytes = kTileTokens * kTokenBytes;
  // int4 keys: slots of [2][d] f16.
  static constexpr int kSlotsPerWarp = kHalfBlocks ? 2 : 1;
  static constexpr int kSlots = kKv == DType::int4 ? 4 * kSlotsPerWarp : 0;
  static constexpr int kSlotBytes = 2 * kHeadDim * 2;
  static constexpr int kSlotGranules = kSlotBytes / 2 / 16;  // per array (s or z) of a slot
  // Offsets in the stage's side area: K arrays, V arrays, then the slots.
  static constexpr int kKScales = 0;
  static constexpr int kKZeros = kKScales + (kKTokenArrays > 1 ? kArrayBytes : 0);
  static constexpr int kVScales = kKScales + kKTokenArrays * kArrayBytes;
  static constexpr int kVZeros = kVScales + kArrayBytes;
  static constexpr int kSlotBase = kVScales + kVTokenArrays * kArrayBytes;
  static constexpr int kBytes = kSlotBase + kSlots * kSlotBytes;
  static_assert(kTokenBytes <= 16 && 16 % kTokenBytes == 0, "whole tokens per granule");
  static_assert(kTokensPerGranule <= 8, "a granule stays within one block (P >= 8)");
  static_assert(kBytes % 16 == 0, "cp.async needs 16-byte aligned granules");
  static_assert(!kHalfBlocks || kKv == DType::int4, "only int4's keys have per-block scales");
};

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode::kv_convert
