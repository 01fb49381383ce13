// The AVX2 tile kernels for the integer KV formats: the AVX-512 quant tile's arithmetic
// (cpu_decode_quant.h) in 8-lane registers, int4 even/odd order within each 16 channels (the 8
// bytes one register widens), and the AVX2 float tile's walk, softmax and passes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backends/cpu/cpu_decode_avx2_tile.h"
#include "backends/cpu/cpu_decode_quant.h"
#include "kernels.h"

#if DECODEBENCH_CPU_AVX2
namespace decodebench::cpu::detail {

namespace avx2q {

// 8 int8 codes -> 8 floats.
inline __m256 int8x8(const std::byte* src) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src))));
}
// 8 bytes of int4 codes (16 channels) -> the 8 even channels and the 8 odd ones.
inline void int4x16(const std::byte* src, __m256& even, __m256& odd) {
  const __m256i w = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)));
  even = _mm256_cvtepi32_ps(_mm256_and_si256(w, _mm256_set1_epi32(0xf)));
  odd = _mm256_cvtepi32_ps(_mm256_srli_epi32(w, 4));
}
// Channels 0..7 and 8..15 -> their even channels and odd ones, and back.
inline void deinterleave(__m256 lo, __m256 hi, __m256& even, __m256& odd) {
  const __m256i split = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256 a = _mm256_permutevar8x32_ps(lo, split);
  const __m256 b = _mm256_permutevar8x32_ps(hi, split);
  even = _mm256_permute2f128_ps(a, b, 0x20);
  odd = _mm256_permute2f128_ps(a, b, 0x31);
}
inline void interleave(__m256 even, __m256 odd, __m256& lo, __m256& hi) {
  const __m256i merge = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  lo = _mm256_permutevar8x32_ps(_mm256_permute2f128_ps(even, odd, 0x20), merge);
  hi = _mm256_permutevar8x32_ps(_mm256_permute2f128_ps(even, odd, 0x31), merge);
}

}  // namespace avx2q

template <DType kKv, int kHeadDim>
struct Avx2QuantTile : Avx2Tile<DType::f16, kHeadDim, Avx2QuantTile<kKv, kHeadDim>> {
  using Base = Avx2Tile<DType::f16, kHeadDim, Avx2QuantTile<kKv, kHeadDim>>;
  using Layout = QuantLayout<kKv, kHeadDim>;
  static constexpr int kTile = Base::kTile;
  static constexpr int kChunks = kHeadDim / 8;  // ymm registers per row of floats
  static constexpr int kUnits = kHeadDim / 16;  // int4: 16-channel pieces (8 bytes each)
  static constexpr int kGroups = Layout::kGroups;
  static constexpr int kRowBytes = Layout::kRowBytes;
  static constexpr float kLoadScale = 1.0f;

  Layout layout;
  UnitScales<kKv, kHeadDim, kTile> unit_scales;

  void bind(const PagedDecodeParams& p) { layout.bind(p); }

  void load(const TileUnit<kTile>& current, const TileUnit<kTile>& upcoming) {
    Base::load(current, upcoming);
    if (upcoming.n() > 0) layout.prefetch_scales(upcoming);
    unit_scales.fill(layout, current);
  }

  // int4 keys: q times the block-head's channel scales in even/odd order per 16 channels (qs),
  // and q . z per head (bias).
  template <int kNH>
  static void channel_query(const float* q, const std::uint16_t* scales, const std::uint16_t* zeros,
                            float* qs, float* bias) {
    __m256 b[kNH];
    for (int h = 0; h < kNH; ++h) b[h] = _mm256_setzero_ps();
    for (int u = 0; u < kUnits; ++u) {
      const auto half = [&](const std::uint16_t* a, int at) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + at)));
      };
      const __m256 s0 = half(scales, 16 * u), s1 = half(scales, 16 * u + 8);
      const __m256 z0 = half(zeros, 16 * u), z1 = half(zeros, 16 * u + 8);
      for (int h = 0; h < kNH; ++h) {
        const __m256 q0 = _mm256_loadu_ps(q + h * kHeadDim + 16 * u);
        const __m256 q1 = _mm256_loadu_ps(q + h * kHeadDim + 16 * u + 8);
        __m256 even, odd;
        avx2q::deinterleave(_mm256_mul_ps(q0, s0), _mm256_mul_ps(q1, s1), even, odd);
        _mm256_store_ps(qs + h * kHeadDim + 16 * u, even);
        _mm256_store_ps(qs + h * kHeadDim + 16 * u + 8, odd);
        b[h] = _mm256_fmadd_ps(q0, z0, _mm256_fmadd_ps(q1, z1, b[h]));
      }
    }
    for (int h = 0; h < kNH; ++h) bias[h] = avx2::reduce_add(b[h]);
  }

  // Scores in groups of 8 tokens (sum8_transposed), then the per-token K scale (int8) or block
  // term (int4) applied to the 8. One accumulator chain per head at 4 or more heads (16 ymm).
  template <int kNH>
  void scores_n(const float* __restrict q /*[kNH][d]*/, int n, float* __restrict s) {
    constexpr int kChains = kNH >= 4 ? 1 : 2;
    const int n_prefetch = this->take_k_prefetch();
    [[maybe_unused]] alignas(32) float qs[kNH * kHeadDim];
    [[maybe_unused]] alignas(32) float bias[kNH * 8];
    [[maybe_unused]] float block_bias[kNH];
    [[maybe_unused]] std::size_t current_block = ~std::size_t{0};
    if constexpr (kKv == DType::int4_token) {
      for (int h = 0; h < kNH; ++h)
        for (int u = 0; u < kUnits; ++u) {
          __m256 even, odd;
          avx2q::deinterleave(_mm256_loadu_ps(q + h * kHeadDim + 16 * u),
                              _mm256_loadu_ps(q + h * kHeadDim + 16 * u + 8), even, odd);
          _mm256_store_ps(qs + h * kHeadDim + 16 * u, even);
          _mm256_store_ps(qs + h * kHeadDim + 16 * u + 8, odd);
        }
    }
    __m256 part[kNH * 8];
    for (int j = 0; j < n; ++j) {
      const int jj = j % 8;
      if (j < n_prefetch) prefetch_row<kRowBytes>(this->next.k(j));
      const std::byte* row = this->unit.k(j);
      __m256 a[kNH][kChains];
      for (int h = 0; h < kNH; ++h)
        for (int i = 0; i < kChains; ++i) a[h][i] = _mm256_setzero_ps();
      if constexpr (kKv == DType::int8) {
#pragma GCC unroll 32
        for (int c = 0; c < kChunks; c += 2) {
          const __m256 k0 = avx2q::int8x8(row + 8 * c);
          const __m256 k1 = avx2q::int8x8(row + 8 * c + 8);
#pragma GCC unroll 8
          for (int h = 0; h < kNH; ++h) {
            a[h][0] = _mm256_fmadd_ps(_mm256_loadu_ps(q + h * kHeadDim + 8 * c), k0, a[h][0]);
            a[h][kChains - 1] = _mm256_fmadd_ps(_mm256_loadu_ps(q + h * kHeadDim + 8 * c + 8), k1,
                                                a[h][kChains - 1]);
          }
        }
      } else {
        if constexpr (kKv == DType::int4) {
          const std::size_t block = layout.block_head(layout.k_index(row));
          if (block != current_block) {
            current_block = block;
            channel_query<kNH>(q, layout.k_scales + block * kHeadDim,
                               layout.k_zeros + block * kHeadDim, qs, block_bias);
          }
          for (int h = 0; h < kNH; ++h) bias[h * 8 + jj] = block_bias[h];
        }
#pragma GCC unroll 16
        for (int u = 0; u < kUnits; ++u) {
          __m256 even, odd;
          avx2q::int4x16(row + 8 * u, even, odd);
          if constexpr (kKv == DType::int4_token) {
            const int g = u / 2;
            const __m256 scale = _mm256_broadcast_ss(unit_scales.k_scale + j * kGroups + g);
            const __m256 zero = _mm256_broadcast_ss(unit_scales.k_zero + j * kGroups + g);
            even = _mm256_fmadd_ps(even, scale, zero);
            odd = _mm256_fmadd_ps(odd, scale, zero);
          }
#pragma GCC unroll 8
          for (int h = 0; h < kNH; ++h) {
            a[h][0] = _mm256_fmadd_ps(_mm256_load_ps(qs + h * kHeadDim + 16 * u), even, a[h][0]);
            a[h][kChains - 1] = _mm256_fmadd_ps(_mm256_load_ps(qs + h * kHeadDim + 16 * u + 8), odd,
                                                a[h][kChains - 1]);
          }
        }
      }
      for (int h = 0; h < kNH; ++h)
        part[h * 8 + jj] = kChains == 2 ? _mm256_add_ps(a[h][0], a[h][kChains - 1]) : a[h][0];
      if (jj == 7 || j == n - 1) {
        const int j0 = j - jj;
        for (int h = 0; h < kNH; ++h) {
          for (int t = jj + 1; t < 8; ++t) part[h * 8 + t] = _mm256_setzero_ps();
          __m256 sums = avx2::sum8_transposed(part + h * 8);
          if constexpr (kKv == DType::int8)
            sums = _mm256_mul_ps(sums, _mm256_load_ps(unit_scales.k_scale + j0));
          else if constexpr (kKv == DType::int4)
            sums = _mm256_add_ps(sums, _mm256_load_ps(bias + h * 8));
          _mm256_storeu_ps(s + h * kTile + j0, sums);
        }
      }
    }
  }

  // V in slices, as the AVX-512 quant tile: each row dequantized once in registers and shared by
  // the pass's heads (int4: even/odd order within each 16 channels).
  template <int kNH>
  void accumulate_n(const float* __restrict p /*[kNH][kTile]*/, int n, float* __restrict acc) {
    constexpr int kGroup = kNH >= 4 ? 2 : 8 / kNH;  // int4 slices hold whole 16-channel pieces
    static_assert(kChunks % kGroup == 0, "slices cover d");
    constexpr int kPer = decltype(unit_scales)::kPer;  // scales per (token, head)
    const int n_prefetch = this->take_v_prefetch();
    constexpr int kVLines = (kRowBytes + 63) / 64;  // lines of a code row
    for (int c0 = 0; c0 < kChunks; c0 += kGroup) {
      __m256 a[kNH][kGroup];
      for (int h = 0; h < kNH; ++h)
        for (int c = 0; c < kGroup; c += 2) {
          const __m256 lo = _mm256_loadu_ps(acc + h * kHeadDim + 8 * (c0 + c));
          const __m256 hi = _mm256_loadu_ps(acc + h * kHeadDim + 8 * (c0 + c) + 8);
          if constexpr (kKv == DType::int8) {
            a[h][c] = lo;
            a[h][c + 1] = hi;
          } else {
            avx2q::deinterleave(lo, hi, a[h][c], a[h][c + 1]);
          }
        }
      for (int j = 0; j < n; ++j) {
        if (j < n_prefetch) {
          for (int line = c0 * kVLines / kChunks; line < (c0 + kGroup) * kVLines / kChunks; ++line)
            prefetch_line(this->next.v(j) + 64 * line);
        }
        const std::byte* row = this->unit.v(j);
#pragma GCC unroll 8
        for (int c = 0; c < kGroup; c += 2) {
          __m256 v0, v1;
          if constexpr (kKv == DType::int8) {
            const __m256 scale = _mm256_broadcast_ss(unit_scales.v_scale + j);
            v0 = _mm256_mul_ps(avx2q::int8x8(row + 8 * (c0 + c)), scale);
            v1 = _mm256_mul_ps(avx2q::int8x8(row + 8 * (c0 + c) + 8), scale);
          } else {
            const int g = (c0 + c) / 4;  // 32 channels = 4 chunks
            const __m256 scale = _mm256_broadcast_ss(unit_scales.v_scale + j * kPer + g);
            const __m256 zero = _mm256_broadcast_ss(unit_scales.v_zero + j * kPer + g);
            avx2q::int4x16(row + 4 * (c0 + c), v0, v1);  // 16 channels = 8 bytes
            v0 = _mm256_fmadd_ps(v0, scale, zero);
            v1 = _mm256_fmadd_ps(v1, scale, zero);
          }
#pragma GCC unroll 8
          for (int h = 0; h < kNH; ++h) {
            const __m256 pj = _mm256_broadcast_ss(p + h * kTile + j);
            a[h][c] = _mm256_fmadd_ps(pj, v0, a[h][c]);
            a[h][c + 1] = _mm256_fmadd_ps(pj, v1, a[h][c + 1]);
          }
        }
      }
      for (int h = 0; h < kNH; ++h)
        for (int c = 0; c < kGroup; c += 2) {
          float* out = acc + h * kHeadDim + 8 * (c0 + c);
          if constexpr (kKv == DType::int8) {
            _mm256_storeu_ps(out, a[h][c]);
            _mm256_storeu_ps(out + 8, a[h][c + 1]);
          } else {
            __m256 lo, hi;
            avx2q::interleave(a[h][c], a[h][c + 1], lo, hi);
            _mm256_storeu_ps(out, lo);
            _mm256_storeu_ps(out + 8, hi);
          }
        }
    }
  }
};

}  // namespace decodebench::cpu::detail
#endif  // DECODEBENCH_CPU_AVX2
