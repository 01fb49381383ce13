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
struct Avx2QuantTile : Avx2Tile<DType::f16, kHeadDim> {
  using Base = Avx2Tile<DType::f16, kHeadDim>;
  using Layout = QuantLayout<kKv, kHeadDim>;
  static constexpr int kTile = Base::kTile;
  static constexpr int kChunks = kHeadDim / 8;  // ymm registers per row of floats
  static constexpr int kUnits = kHeadDim / 16;  // int4: 16-channel pieces (8 bytes each)
  static constexpr int kGroups = Layout::kGroups;
  static constexpr int kRowBytes = Layout::kRowBytes;
  static constexpr float kLoadScale = 1.0f;

  static constexpr int kPer = static_cast<int>(Layout::per_token());  // V scales per token

  Layout layout;
  UnitScales<kKv, kHeadDim, kTile> unit_scales;
  // As the AVX-512 quant tile: int4 keys' channel scales per block-head, converted once per
  // unit (even/odd order per 16 channels); V's scales folded into the probabilities (pv) and
  // the zeros summed per (head, 32-channel group) (zsum).
  ChannelScaleCache<kKv, kHeadDim, kTile> channel_scales;
  alignas(32) float pv[kMaxPassHeads * kTile * kPer];
  alignas(32) float zsum[kMaxPassHeads * kGroups];

  void bind(const PagedDecodeParams& p) { layout.bind(p); }

  void load(const TileUnit<kTile>& current, const TileUnit<kTile>& upcoming) {
    Base::load(current, upcoming);
    if (upcoming.n() > 0) layout.prefetch_scales(upcoming);
    unit_scales.fill(layout, current);
    channel_scales.reset();
  }

  void scores(const float* q, int nh, int n, float* s) {
    switch (nh) {
      case 8: scores_n<8>(q, n, s); break;
      case 4: scores_n<4>(q, n, s); break;
      case 2: scores_n<2>(q, n, s); break;
      default: scores_n<1>(q, n, s); break;
    }
  }
  void accumulate(const float* p, int nh, int n, float* acc) {
    switch (nh) {
      case 8: accumulate_n<8>(p, n, acc); break;
      case 4: accumulate_n<4>(p, n, acc); break;
      case 2: accumulate_n<2>(p, n, acc); break;
      default: accumulate_n<1>(p, n, acc); break;
    }
  }

  // int4 keys: a block-head's d channel scales and d zeros (f16) -> fp32 in even/odd order per
  // 16 channels, out[0, d) and out[d, 2d).
  static void convert_channel_scales(const std::uint16_t* scales, const std::uint16_t* zeros,
                                     float* out) {
    const auto half = [](const std::uint16_t* a) {
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
    };
    for (int u = 0; u < kUnits; ++u) {
      __m256 even, odd;
      avx2q::deinterleave(half(scales + 16 * u), half(scales + 16 * u + 8), even, odd);
      _mm256_store_ps(out + 16 * u, even);
      _mm256_store_ps(out + 16 * u + 8, odd);
      avx2q::deinterleave(half(zeros + 16 * u), half(zeros + 16 * u + 8), even, odd);
      _mm256_store_ps(out + kHeadDim + 16 * u, even);
      _mm256_store_ps(out + kHeadDim + 16 * u + 8, odd);
    }
  }

  // int4 keys: the pass's q rows (already in even/odd order, qd) times the block-head's channel
  // scales (ks, same order) into qs, and q . z per head (bias).
  template <int kNH>
  static void channel_query(const float* qd, const float* ks, const float* kz, float* qs,
                            float* bias) {
    __m256 b[kNH];
    for (int h = 0; h < kNH; ++h) b[h] = _mm256_setzero_ps();
    for (int c = 0; c < kChunks; ++c) {
      const __m256 sc = _mm256_load_ps(ks + 8 * c);
      const __m256 zc = _mm256_load_ps(kz + 8 * c);
      for (int h = 0; h < kNH; ++h) {
        const __m256 qc = _mm256_load_ps(qd + h * kHeadDim + 8 * c);
        _mm256_store_ps(qs + h * kHeadDim + 8 * c, _mm256_mul_ps(qc, sc));
        b[h] = _mm256_fmadd_ps(qc, zc, b[h]);
      }
    }
    for (int h = 0; h < kNH; ++h) bias[h] = avx2::reduce_add(b[h]);
  }

  // Scores in groups of 8 tokens (sum8_transposed), then the per-token K scale (int8) or block
  // term (int4) applied to the 8. One accumulator chain per head at 4 or more heads (16 ymm).
  template <int kNH>
  void scores_n(const float* __restrict q /*[kNH][d]*/, int n, float* __restrict s) {
    constexpr int kChains = kNH >= 4 ? 1 : 2;
    const int n_prefetch = this->k_prefetch_pending ? this->next.n() : 0;
    this->k_prefetch_pending = false;
    // q in even/odd order (qd: once per call); int4: q' of the current block (qs_block).
    [[maybe_unused]] alignas(32) float qd[kKv == DType::int8 ? 1 : kNH * kHeadDim];
    [[maybe_unused]] alignas(32) float qs_block[kKv == DType::int4 ? kNH * kHeadDim : 1];
    [[maybe_unused]] alignas(32) float bias[kNH * 8];
    [[maybe_unused]] float block_bias[kNH];
    [[maybe_unused]] std::size_t current_block = ~std::size_t{0};
    if constexpr (kKv != DType::int8) {
      for (int h = 0; h < kNH; ++h)
        for (int u = 0; u < kUnits; ++u) {
          __m256 even, odd;
          avx2q::deinterleave(_mm256_loadu_ps(q + h * kHeadDim + 16 * u),
                              _mm256_loadu_ps(q + h * kHeadDim + 16 * u + 8), even, odd);
          _mm256_store_ps(qd + h * kHeadDim + 16 * u, even);
          _mm256_store_ps(qd + h * kHeadDim + 16 * u + 8, odd);
        }
    }
    [[maybe_unused]] const float* qs = kKv == DType::int4 ? qs_block : qd;
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
            const float* ks = channel_scales.of(layout, block, convert_channel_scales);
            channel_query<kNH>(qd, ks, ks + kHeadDim, qs_block, block_bias);
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

  // V's scales folded into the probabilities once per tile and head, as the AVX-512 quant tile:
  // pv = p x s per (head, token, scale), zsum = sum of p z per (head, 32-channel group).
  template <int kNH>
  void fold_value_scales(const float* __restrict p /*[kNH][kTile]*/, int n) {
    if constexpr (kKv == DType::int8) {
      for (int h = 0; h < kNH; ++h)
        for (int j0 = 0; j0 < n; j0 += 8)
          _mm256_store_ps(pv + h * kTile + j0,
                          _mm256_and_ps(_mm256_mul_ps(_mm256_loadu_ps(p + h * kTile + j0),
                                                      _mm256_load_ps(unit_scales.v_scale + j0)),
                                        avx2::lanes_below(n - j0, 0)));
    } else {
      // [token][group] arrays: one vector holds 8 / kGroups tokens' groups (d = 256: one token).
      constexpr int kTok = kGroups >= 8 ? 1 : 8 / kGroups;
      constexpr int kVecs = kGroups >= 8 ? kGroups / 8 : 1;  // vectors per token
      constexpr int kShift = kGroups == 2 ? 1 : kGroups == 4 ? 2 : 3;
      for (int h = 0; h < kNH; ++h) {
        __m256 z[kVecs];
        for (int v = 0; v < kVecs; ++v) z[v] = _mm256_setzero_ps();
        float* pv_h = pv + h * kTile * kGroups;
        for (int j0 = 0; j0 < n; j0 += 8) {
          const __m256 ph =
              _mm256_and_ps(_mm256_loadu_ps(p + h * kTile + j0), avx2::lanes_below(n - j0, 0));
          for (int k = 0; k < 8 / kTok && j0 + k * kTok < n; ++k) {
            const __m256i idx = _mm256_add_epi32(
                _mm256_srli_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), kShift),
                _mm256_set1_epi32(k * kTok));
            const __m256 pe = _mm256_permutevar8x32_ps(ph, idx);
            for (int v = 0; v < kVecs; ++v) {
              const int at = (j0 + k * kTok) * kGroups + 8 * v;
              _mm256_store_ps(pv_h + at,
                              _mm256_mul_ps(pe, _mm256_load_ps(unit_scales.v_scale + at)));
              z[v] = _mm256_fmadd_ps(pe, _mm256_load_ps(unit_scales.v_zero + at), z[v]);
            }
          }
        }
        // Lane l of vector v holds group (8 v + l) % kGroups.
        alignas(32) float lanes[8 * kVecs];
        for (int v = 0; v < kVecs; ++v) _mm256_store_ps(lanes + 8 * v, z[v]);
        for (int g = 0; g < kGroups; ++g) {
          float sum = 0.0f;
          for (int l = g; l < 8 * kVecs; l += kGroups) sum += lanes[l];
          zsum[h * kGroups + g] = sum;
        }
      }
    }
  }

  // V in slices, as the AVX-512 quant tile: each row's codes widened once and shared by the
  // pass's heads, each head's folded weight (pv) broadcast per token (int8) or per token and
  // 32-channel group (int4 formats: even/odd order within each 16 channels); the zeros' sums
  // added at the slice's end.
  template <int kNH>
  void accumulate_n(const float* __restrict p /*[kNH][kTile]*/, int n, float* __restrict acc) {
    constexpr int kGroup = kNH >= 4 ? 2 : 8 / kNH;  // int4 slices hold whole 16-channel pieces
    static_assert(kChunks % kGroup == 0, "slices cover d");
    const int n_prefetch = this->v_prefetch_pending ? this->next.n() : 0;
    this->v_prefetch_pending = false;
    constexpr int kVLines = (kRowBytes + 63) / 64;  // lines of a code row
    fold_value_scales<kNH>(p, n);
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
            __builtin_prefetch(this->next.v(j) + 64 * line, /*rw=*/0, kPrefetchLocality);
        }
        const std::byte* row = this->unit.v(j);
#pragma GCC unroll 8
        for (int c = 0; c < kGroup; c += 2) {
          __m256 v0, v1;
          const float* w_at;
          if constexpr (kKv == DType::int8) {
            v0 = avx2q::int8x8(row + 8 * (c0 + c));
            v1 = avx2q::int8x8(row + 8 * (c0 + c) + 8);
            w_at = pv + j;
          } else {
            const int g = (c0 + c) / 4;                  // 32 channels = 4 chunks
            avx2q::int4x16(row + 4 * (c0 + c), v0, v1);  // 16 channels = 8 bytes
            w_at = pv + j * kGroups + g;
          }
#pragma GCC unroll 8
          for (int h = 0; h < kNH; ++h) {
            const __m256 w = _mm256_broadcast_ss(w_at + h * kTile * kPer);
            a[h][c] = _mm256_fmadd_ps(w, v0, a[h][c]);
            a[h][c + 1] = _mm256_fmadd_ps(w, v1, a[h][c + 1]);
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
            const __m256 zero = _mm256_set1_ps(zsum[h * kGroups + (c0 + c) / 4]);
            __m256 lo, hi;
            avx2q::interleave(_mm256_add_ps(a[h][c], zero), _mm256_add_ps(a[h][c + 1], zero), lo,
                              hi);
            _mm256_storeu_ps(out, lo);
            _mm256_storeu_ps(out + 8, hi);
          }
        }
    }
  }
};

}  // namespace decodebench::cpu::detail
#endif  // DECODEBENCH_CPU_AVX2
