// The AVX-512 tile kernels: rows stay where they are and are converted in registers; the scores
// of a whole pass of heads per K row, the online softmax in intrinsics, V accumulated in slices
// of d.
#pragma once

#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_decode_avx512_loads.h"
#include "backends/cpu/cpu_decode_common.h"
#include "backends/cpu/cpu_decode_head_passes.h"
#include "backends/cpu/cpu_decode_kv_walk.h"
#include "backends/cpu/cpu_decode_scalar.h"
#include "device/softmax_state.h"
#include "kernels.h"

#if DECODEBENCH_CPU_AVX512
namespace decodebench::cpu::detail {

// Sixteen horizontal sums at once: lane i of the result is the sum of the 16 lanes of v[i].
// A transpose-and-add tree of 15 adds and 30 in-lane/cross-lane shuffles, ~3 operations per
// sum instead of the ~10 of one _mm512_reduce_add_ps per dot product.
inline __m512 sum16_transposed(const __m512* v) {
  __m512 t[8];  // per 128-bit lane: [v2i even, v2i+1 even, v2i odd, v2i+1 odd] partial sums
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  __m512 u[4];  // per 128-bit lane: that lane's sums of v4i .. v4i+3
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
    u[i] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0xee));
  // Fold the four 128-bit lanes: [u0 L0+L1, u0 L2+L3, u1 L0+L1, u1 L2+L3], then the totals.
  const __m512 w0 =
      _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xdd));
  const __m512 w1 =
      _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xdd));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w0, w1, 0x88), _mm512_shuffle_f32x4(w0, w1, 0xdd));
}

// `Self`: a tile built on this one (the quantized tile), whose loops the passes run.
template <DType kKv, int kHeadDim, class Self = void>
struct Avx512Tile
    : HeadPasses<MostDerived<Self, Avx512Tile<kKv, kHeadDim>>, kAvx512TileTokens<kHeadDim>> {
  static constexpr int kTile = kAvx512TileTokens<kHeadDim>;
  static constexpr int kChunks = kHeadDim / 16;  // zmm registers per row
  static constexpr float kLoadScale = kAvx512LoadScale<kKv>;
  static constexpr bool kArithmetic = true;
  static_assert(kChunks % 2 == 0, "scores use two accumulator chains per head");

  static constexpr int kRowBytes = kHeadDim * static_cast<int>(dtype_size(kKv));
  static constexpr int kLinesPerRow = kRowBytes / 64;

  using Passes = HeadPasses<MostDerived<Self, Avx512Tile<kKv, kHeadDim>>, kTile>;
  using Passes::next;
  using Passes::unit;

  // softmax_update in intrinsics: the tile's <= kTile scores in kTile / 16 registers, 2^x by
  // vrndscaleps + fast_exp2's polynomial + vscalefps (no integer detour), masks for a short tile.
  static void softmax(float* __restrict s, int n, SoftmaxState<float>& state,
                      float* __restrict acc) {
    constexpr int kVecs = kTile / 16;
    __m512 x[kVecs];
    __mmask16 mask[kVecs];
    __m512 vmax = _mm512_set1_ps(-INFINITY);
#pragma GCC unroll 8
    for (int i = 0; i < kVecs; ++i) {
      const int left = n - 16 * i;
      mask[i] = left >= 16  ? __mmask16(0xffff)
                : left <= 0 ? __mmask16(0)
                            : __mmask16((1u << left) - 1);
      x[i] = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), mask[i], s + 16 * i);
      vmax = _mm512_max_ps(vmax, x[i]);
    }
    const float tile_max = _mm512_reduce_max_ps(vmax);
    if (tile_max > state.max) {
      const __m512 factor = _mm512_set1_ps(state.raise_max(tile_max));
#pragma GCC unroll 16
      for (int c = 0; c < kHeadDim; c += 16)
        _mm512_storeu_ps(acc + c, _mm512_mul_ps(_mm512_loadu_ps(acc + c), factor));
    }
    const __m512 max = _mm512_set1_ps(state.max);
    __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int i = 0; i < kVecs; ++i) {
      // fast_exp2(x - max): clamp at -125, r = round(x), 2^f on [-0.5, 0.5], times 2^r.
      const __m512 t = _mm512_max_ps(_mm512_sub_ps(x[i], max), _mm512_set1_ps(-125.0f));
      const __m512 r = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m512 f = _mm512_sub_ps(t, r);
      __m512 poly = _mm512_set1_ps(kExp2Poly[0]);
#pragma GCC unroll 6
      for (int k = 1; k < 7; ++k) poly = _mm512_fmadd_ps(poly, f, _mm512_set1_ps(kExp2Poly[k]));
      const __m512 p = _mm512_maskz_mov_ps(mask[i], _mm512_scalef_ps(poly, r));
      _mm512_mask_storeu_ps(s + 16 * i, mask[i], p);
      sum = _mm512_add_ps(sum, p);
    }
    state.sum += _mm512_reduce_add_ps(sum);
  }

  // Each K row is converted once into kChunks registers and reused by all kNH heads; every head
  // runs two accumulator chains, so kNH * 2 chains (plus the next tokens, out of order) hide the
  // FMA latency.
  // Tokens go in groups of 16: the 16 x kNH partial-sum vectors are reduced 16 at a time by
  // sum16_transposed, which writes 16 consecutive scores of one head with one store.
  template <int kNH>
  void scores_n(const float* __restrict q /*[kNH][d]*/, int n, float* __restrict s) {
    static_assert(kTile % 16 == 0, "score groups of 16 tokens");
    const int n_prefetch = this->take_k_prefetch();
    __m512 part[kNH * 16];  // [kNH][16 tokens] partial dot products
    for (int j0 = 0; j0 < n; j0 += 16) {
      const int m = std::min(16, n - j0);
      for (int jj = 0; jj < m; ++jj) {
        const int j = j0 + jj;
        if (j < n_prefetch) prefetch_row<kRowBytes>(next.k(j));
        const std::byte* row = unit.k(j);
        __m512 k[kChunks];
        load_chunks<kKv, kChunks>(row, 0, k);
#pragma GCC unroll 8
        for (int h = 0; h < kNH; ++h) {
          const float* qh = q + h * kHeadDim;
          __m512 a0 = _mm512_mul_ps(_mm512_loadu_ps(qh), k[0]);
          __m512 a1 = _mm512_mul_ps(_mm512_loadu_ps(qh + 16), k[1]);
#pragma GCC unroll 16
          for (int c = 2; c < kChunks; c += 2) {
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * c), k[c], a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * c + 16), k[c + 1], a1);
          }
          part[h * 16 + jj] = _mm512_add_ps(a0, a1);
        }
      }
      for (int h = 0; h < kNH; ++h) {
        for (int jj = m; jj < 16; ++jj)
          part[h * 16 + jj] = _mm512_setzero_ps();  // tail: unused lanes
        _mm512_storeu_ps(s + h * kTile + j0, sum16_transposed(part + h * 16));
      }
    }
  }

  // Slices of kGroup chunks of d: the kNH x kGroup accumulators of a slice live in registers
  // (<= 16 zmm, all independent FMA chains) across the whole tile, and each token's kNH
  // probabilities are broadcast once per slice, not once per chunk: per row that is
  // kChunks / kGroup broadcasts per head instead of kChunks, which relieves the load ports
  // (~17 % faster on cache-resident data than one chunk at a time over the tile).
  template <int kNH>
  void accumulate_n(const float* __restrict p /*[kNH][kTile]*/, int n, float* __restrict acc) {
    constexpr int kGroup = kChunks < 16 / kNH ? kChunks : 16 / kNH;
    static_assert(kChunks % kGroup == 0, "slices cover d");
    const int n_prefetch = this->take_v_prefetch();
    for (int c0 = 0; c0 < kChunks; c0 += kGroup) {
      __m512 a[kNH][kGroup];
#pragma GCC unroll 8
      for (int h = 0; h < kNH; ++h)
#pragma GCC unroll 16
        for (int c = 0; c < kGroup; ++c)
          a[h][c] = _mm512_loadu_ps(acc + h * kHeadDim + 16 * (c0 + c));
      for (int j = 0; j < n; ++j) {
        __m512 pj[kNH];
#pragma GCC unroll 8
        for (int h = 0; h < kNH; ++h) pj[h] = _mm512_set1_ps(p[h * kTile + j]);
        if (j < n_prefetch) {  // this slice's share of the next unit's V row j
          for (int line = c0 * kLinesPerRow / kChunks;
               line < (c0 + kGroup) * kLinesPerRow / kChunks; ++line)
            prefetch_line(next.v(j) + 64 * line);
        }
        __m512 v[kGroup];
        load_chunks<kKv, kGroup>(unit.v(j), c0, v);
#pragma GCC unroll 16
        for (int c = 0; c < kGroup; ++c)
#pragma GCC unroll 8
          for (int h = 0; h < kNH; ++h) a[h][c] = _mm512_fmadd_ps(pj[h], v[c], a[h][c]);
      }
#pragma GCC unroll 8
      for (int h = 0; h < kNH; ++h)
#pragma GCC unroll 16
        for (int c = 0; c < kGroup; ++c)
          _mm512_storeu_ps(acc + h * kHeadDim + 16 * (c0 + c), a[h][c]);
    }
  }
};

}  // namespace decodebench::cpu::detail
#endif  // DECODEBENCH_CPU_AVX512
