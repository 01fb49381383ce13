// The AVX-512 tile kernels for the integer KV formats (how each format's arithmetic is arranged:
// cpu_decode_quant.h). The float tile's walk, softmax, passes and slices; codes are widened to
// fp32 in registers (vpmovsxbd / vpmovzxbd, two nibbles by and + shift, vcvtdq2ps).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backends/cpu/cpu_decode_avx512_tile.h"
#include "backends/cpu/cpu_decode_quant.h"
#include "kernels.h"

#if DECODEBENCH_CPU_AVX512
namespace decodebench::cpu::detail {

namespace avx512q {

// 16 int8 codes -> 16 floats.
inline __m512 int8x16(const std::byte* src) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src))));
}
// 16 bytes of int4 codes (32 channels) -> the 16 even channels and the 16 odd ones. vpermps
// reads only the low 4 bits of each index, so a 16-entry table of the floats 0..15 turns a
// nibble into its float in one shuffle (port 5), with no mask and no vcvtdq2ps (port 0, where
// the shift and half the FMAs go): 4 operations per 32 codes instead of 5.
inline void int4x32(const std::byte* src, __m512& even, __m512& odd) {
  const __m512 table = _mm512_setr_ps(0.f, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f, 10.f, 11.f,
                                      12.f, 13.f, 14.f, 15.f);
  const __m512i w = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  even = _mm512_permutexvar_ps(w, table);
  odd = _mm512_permutexvar_ps(_mm512_srli_epi32(w, 4), table);
}
// Channels 0..15 and 16..31 of a group -> its even channels and odd ones, and back.
inline void deinterleave(__m512 lo, __m512 hi, __m512& even, __m512& odd) {
  const __m512i even_idx =
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  even = _mm512_permutex2var_ps(lo, even_idx, hi);
  odd = _mm512_permutex2var_ps(lo, _mm512_add_epi32(even_idx, _mm512_set1_epi32(1)), hi);
}
inline void interleave(__m512 even, __m512 odd, __m512& lo, __m512& hi) {
  const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  lo = _mm512_permutex2var_ps(even, lo_idx, odd);
  hi = _mm512_permutex2var_ps(even, _mm512_add_epi32(lo_idx, _mm512_set1_epi32(8)), odd);
}
inline __mmask16 lanes_below(int n, int j0) {
  const int left = n - j0;
  return left >= 16 ? __mmask16(0xffff) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
}

}  // namespace avx512q

template <DType kKv, int kHeadDim>
struct Avx512QuantTile : Avx512Tile<DType::f16, kHeadDim, Avx512QuantTile<kKv, kHeadDim>> {
  using Base = Avx512Tile<DType::f16, kHeadDim, Avx512QuantTile<kKv, kHeadDim>>;
  using Layout = QuantLayout<kKv, kHeadDim>;
  static constexpr int kTile = Base::kTile;
  static constexpr int kChunks = kHeadDim / 16;
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

  // int4 keys: the pass's q rows times the block-head's channel scales, each group of 32
  // channels in even/odd order (qs), and q . z per head (bias).
  template <int kNH>
  static void channel_query(const float* q, const std::uint16_t* scales, const std::uint16_t* zeros,
                            float* qs, float* bias) {
    __m512 b[kNH];
    for (int h = 0; h < kNH; ++h) b[h] = _mm512_setzero_ps();
    for (int g = 0; g < kGroups; ++g) {
      const auto half = [&](const std::uint16_t* a, int at) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + at)));
      };
      const __m512 s0 = half(scales, 32 * g), s1 = half(scales, 32 * g + 16);
      const __m512 z0 = half(zeros, 32 * g), z1 = half(zeros, 32 * g + 16);
      for (int h = 0; h < kNH; ++h) {
        const __m512 q0 = _mm512_loadu_ps(q + h * kHeadDim + 32 * g);
        const __m512 q1 = _mm512_loadu_ps(q + h * kHeadDim + 32 * g + 16);
        __m512 even, odd;
        avx512q::deinterleave(_mm512_mul_ps(q0, s0), _mm512_mul_ps(q1, s1), even, odd);
        _mm512_store_ps(qs + h * kHeadDim + 32 * g, even);
        _mm512_store_ps(qs + h * kHeadDim + 32 * g + 16, odd);
        b[h] = _mm512_fmadd_ps(q0, z0, _mm512_fmadd_ps(q1, z1, b[h]));
      }
    }
    for (int h = 0; h < kNH; ++h) bias[h] = _mm512_reduce_add_ps(b[h]);
  }

  // Scores in groups of 16 tokens as the float tile's (sum16_transposed), then the per-token
  // factor (int8: the K scale) or term (int4: q . z of the token's block) applied to the 16.
  template <int kNH>
  void scores_n(const float* __restrict q /*[kNH][d]*/, int n, float* __restrict s) {
    const int n_prefetch = this->take_k_prefetch();
    // int4: q' of the current block; int4_token: q permuted.
    [[maybe_unused]] alignas(64) float qs[kNH * kHeadDim];
    [[maybe_unused]] alignas(64) float bias[kNH * 16];  // int4: q . z of each token's block
    [[maybe_unused]] float block_bias[kNH];
    [[maybe_unused]] std::size_t current_block = ~std::size_t{0};
    if constexpr (kKv == DType::int4_token) {
      for (int h = 0; h < kNH; ++h)
        for (int g = 0; g < kGroups; ++g) {
          __m512 even, odd;
          avx512q::deinterleave(_mm512_loadu_ps(q + h * kHeadDim + 32 * g),
                                _mm512_loadu_ps(q + h * kHeadDim + 32 * g + 16), even, odd);
          _mm512_store_ps(qs + h * kHeadDim + 32 * g, even);
          _mm512_store_ps(qs + h * kHeadDim + 32 * g + 16, odd);
        }
    }
    __m512 part[kNH * 16];
    for (int j0 = 0; j0 < n; j0 += 16) {
      const int m = std::min(16, n - j0);
      for (int jj = 0; jj < m; ++jj) {
        const int j = j0 + jj;
        if (j < n_prefetch) prefetch_row<kRowBytes>(this->next.k(j));
        const std::byte* row = this->unit.k(j);
        __m512 a0[kNH], a1[kNH];
        for (int h = 0; h < kNH; ++h) a0[h] = a1[h] = _mm512_setzero_ps();
        if constexpr (kKv == DType::int8) {
#pragma GCC unroll 16
          for (int c = 0; c < kChunks; c += 2) {
            const __m512 k0 = avx512q::int8x16(row + 16 * c);
            const __m512 k1 = avx512q::int8x16(row + 16 * c + 16);
#pragma GCC unroll 8
            for (int h = 0; h < kNH; ++h) {
              a0[h] = _mm512_fmadd_ps(_mm512_loadu_ps(q + h * kHeadDim + 16 * c), k0, a0[h]);
              a1[h] = _mm512_fmadd_ps(_mm512_loadu_ps(q + h * kHeadDim + 16 * c + 16), k1, a1[h]);
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
            for (int h = 0; h < kNH; ++h) bias[h * 16 + jj] = block_bias[h];
          }
#pragma GCC unroll 8
          for (int g = 0; g < kGroups; ++g) {
            __m512 even, odd;
            avx512q::int4x32(row + 16 * g, even, odd);
            if constexpr (kKv == DType::int4_token) {
              const __m512 scale = _mm512_set1_ps(unit_scales.k_scale[j * kGroups + g]);
              const __m512 zero = _mm512_set1_ps(unit_scales.k_zero[j * kGroups + g]);
              even = _mm512_fmadd_ps(even, scale, zero);
              odd = _mm512_fmadd_ps(odd, scale, zero);
            }
#pragma GCC unroll 8
            for (int h = 0; h < kNH; ++h) {
              a0[h] = _mm512_fmadd_ps(_mm512_load_ps(qs + h * kHeadDim + 32 * g), even, a0[h]);
              a1[h] = _mm512_fmadd_ps(_mm512_load_ps(qs + h * kHeadDim + 32 * g + 16), odd, a1[h]);
            }
          }
        }
        for (int h = 0; h < kNH; ++h) part[h * 16 + jj] = _mm512_add_ps(a0[h], a1[h]);
      }
      for (int h = 0; h < kNH; ++h) {
        for (int jj = m; jj < 16; ++jj) part[h * 16 + jj] = _mm512_setzero_ps();
        __m512 sums = sum16_transposed(part + h * 16);
        if constexpr (kKv == DType::int8)
          sums = _mm512_mul_ps(sums, _mm512_load_ps(unit_scales.k_scale + j0));
        else if constexpr (kKv == DType::int4)
          sums = _mm512_add_ps(sums, _mm512_load_ps(bias + h * 16));
        _mm512_storeu_ps(s + h * kTile + j0, sums);
      }
    }
  }

  // V in slices of the float tile's width, each row dequantized in registers once and shared by
  // the pass's heads: int8 code x s_V(t), int4 fma(code, s, z) per (token, 32 channels), in
  // even/odd order within each group (the accumulators are permuted to match at the slice's
  // edges). Cheaper than folding s into each head's probability: one multiply per 16 codes
  // instead of one per head and token.
  template <int kNH>
  void accumulate_n(const float* __restrict p /*[kNH][kTile]*/, int n, float* __restrict acc) {
    constexpr int kGroup = kChunks < 16 / kNH ? kChunks : 16 / kNH;
    static_assert(kChunks % kGroup == 0 && kGroup % 2 == 0, "slices cover whole 32-channel groups");
    constexpr int kPer = decltype(unit_scales)::kPer;  // scales per (token, head)
    const int n_prefetch = this->take_v_prefetch();
    constexpr int kVLines = (kRowBytes + 63) / 64;  // lines of a code row
    for (int c0 = 0; c0 < kChunks; c0 += kGroup) {
      __m512 a[kNH][kGroup];
      for (int h = 0; h < kNH; ++h)
        for (int c = 0; c < kGroup; c += 2) {
          const __m512 lo = _mm512_loadu_ps(acc + h * kHeadDim + 16 * (c0 + c));
          const __m512 hi = _mm512_loadu_ps(acc + h * kHeadDim + 16 * (c0 + c) + 16);
          if constexpr (kKv == DType::int8) {
            a[h][c] = lo;
            a[h][c + 1] = hi;
          } else {
            avx512q::deinterleave(lo, hi, a[h][c], a[h][c + 1]);
          }
        }
      for (int j = 0; j < n; ++j) {
        if (j < n_prefetch) {
          for (int line = c0 * kVLines / kChunks; line < (c0 + kGroup) * kVLines / kChunks; ++line)
            prefetch_line(this->next.v(j) + 64 * line);
        }
        const std::byte* row = this->unit.v(j);
        __m512 v[kGroup];
        if constexpr (kKv == DType::int8) {
          const __m512 scale = _mm512_set1_ps(unit_scales.v_scale[j]);
#pragma GCC unroll 16
          for (int c = 0; c < kGroup; ++c)
            v[c] = _mm512_mul_ps(avx512q::int8x16(row + 16 * (c0 + c)), scale);
        } else {
#pragma GCC unroll 8
          for (int c = 0; c < kGroup; c += 2) {
            const int g = (c0 + c) / 2;
            const __m512 scale = _mm512_set1_ps(unit_scales.v_scale[j * kPer + g]);
            const __m512 zero = _mm512_set1_ps(unit_scales.v_zero[j * kPer + g]);
            avx512q::int4x32(row + 16 * g, v[c], v[c + 1]);
            v[c] = _mm512_fmadd_ps(v[c], scale, zero);
            v[c + 1] = _mm512_fmadd_ps(v[c + 1], scale, zero);
          }
        }
#pragma GCC unroll 8
        for (int h = 0; h < kNH; ++h) {
          const __m512 pj = _mm512_set1_ps(p[h * kTile + j]);
#pragma GCC unroll 16
          for (int c = 0; c < kGroup; ++c) a[h][c] = _mm512_fmadd_ps(pj, v[c], a[h][c]);
        }
      }
      for (int h = 0; h < kNH; ++h)
        for (int c = 0; c < kGroup; c += 2) {
          float* out = acc + h * kHeadDim + 16 * (c0 + c);
          if constexpr (kKv == DType::int8) {
            _mm512_storeu_ps(out, a[h][c]);
            _mm512_storeu_ps(out + 16, a[h][c + 1]);
          } else {
            __m512 lo, hi;
            avx512q::interleave(a[h][c], a[h][c + 1], lo, hi);
            _mm512_storeu_ps(out, lo);
            _mm512_storeu_ps(out + 16, hi);
          }
        }
    }
  }
};

}  // namespace decodebench::cpu::detail
#endif  // DECODEBENCH_CPU_AVX512
