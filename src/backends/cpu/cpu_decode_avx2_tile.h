// The AVX2 tile kernels (AVX2 + F16C + FMA, 16 ymm registers): rows stay where they are and are
// converted in registers, as on the AVX-512 path; the scores of a whole pass of heads per K row,
// the online softmax in intrinsics, V accumulated in slices of d.
//
// Napkin math, llama-3.1-8b (g = 4, d = 128, fp16): a (token, KV head) row brings 256 bytes of K
// and 256 of V and costs 4 x 2 x 16 = 128 ymm FMAs and 32 vcvtph2ps: >= 64 cycles on two FMA
// pipes. The Zen 3 VM's vCPU measured ~2 G ymm FMAs per CPU-second, so ~8 GB/s per vCPU: GQA 4 is
// compute-bound below its ~11 GB/s share of the read. MHA (g = 1) needs 32 FMAs per row, and the
// 32 conversions (~1 per cycle, on the FP pipes the FMAs use) are its bound, ~16 GB/s per vCPU:
// memory-bound with headroom. So the register budget goes to enough independent FMA chains
// (8 per pass) with each K/V element converted once, and the memory walk is the avx512 path's.
// Measured: results/cpu-amd-epyc-zen3-2vcpu/README.md, "The AVX2 path".
#pragma once

#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_decode_avx2_loads.h"
#include "backends/cpu/cpu_decode_common.h"
#include "backends/cpu/cpu_decode_head_passes.h"
#include "backends/cpu/cpu_decode_kv_walk.h"
#include "backends/cpu/cpu_decode_scalar.h"
#include "device/softmax_state.h"
#include "kernels.h"

#if DECODEBENCH_CPU_AVX2
namespace decodebench::cpu::detail {
namespace avx2 {

// Eight horizontal sums at once: lane i of the result is the sum of the 8 lanes of v[i]. A
// transpose-and-add tree of 7 adds and 14 shuffles, ~2.6 operations per sum instead of ~6 for a
// horizontal sum per dot product.
inline __m256 sum8_transposed(const __m256* v) {
  __m256 t[4];  // per 128-bit lane: [v2i 0+2, v2i+1 0+2, v2i 1+3, v2i+1 1+3]
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
    t[i] = _mm256_add_ps(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  __m256 u[2];  // per 128-bit lane: that lane's sums of v4i .. v4i+3
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i)
    u[i] = _mm256_add_ps(_mm256_shuffle_ps(t[2 * i], t[2 * i + 1], 0x44),
                         _mm256_shuffle_ps(t[2 * i], t[2 * i + 1], 0xee));
  // Fold the two 128-bit lanes: [v0..v3 totals, v4..v7 totals].
  return _mm256_add_ps(_mm256_permute2f128_ps(u[0], u[1], 0x20),
                       _mm256_permute2f128_ps(u[0], u[1], 0x31));
}

inline float reduce_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
inline float reduce_add(__m256 v) {
  __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_add_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}

// Lanes [8 i, 8 i + 8) of a tile that are < n: all ones, else zero.
inline __m256 lanes_below(int n, int i) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8 * i), iota));
}

}  // namespace avx2

// `Self`: a tile built on this one (the quantized tile), whose loops the passes run.
template <DType kKv, int kHeadDim, class Self = void>
struct Avx2Tile
    : HeadPasses<MostDerived<Self, Avx2Tile<kKv, kHeadDim>>, kAvx2TileTokens<kHeadDim>> {
  static constexpr int kTile = kAvx2TileTokens<kHeadDim>;
  static constexpr int kChunks = kHeadDim / 8;  // ymm registers per row
  static constexpr float kLoadScale = kAvx2LoadScale<kKv>;
  static constexpr bool kArithmetic = true;
  static_assert(kTile % 8 == 0, "score groups of 8 tokens");
  static_assert(kChunks % 4 == 0, "rows split into up to 4 accumulator chains");

  static constexpr int kRowBytes = kHeadDim * static_cast<int>(dtype_size(kKv));
  static constexpr int kLinesPerRow = kRowBytes / 64;

  using Passes = HeadPasses<MostDerived<Self, Avx2Tile<kKv, kHeadDim>>, kTile>;
  using Passes::next;
  using Passes::unit;

  // softmax_update in intrinsics: two passes over the tile's <= kTile scores in s (re-read from
  // L1: kTile / 8 vectors would not stay in 16 registers), 2^x by vroundps + fast_exp2's
  // polynomial + the integer part added to the exponent, lane masks for a short tile.
  static void softmax(float* __restrict s, int n, SoftmaxState<float>& state,
                      float* __restrict acc) {
    constexpr int kVecs = kTile / 8;
    const __m256 minus_inf = _mm256_set1_ps(-INFINITY);
    __m256 vmax = minus_inf;
#pragma GCC unroll 16
    for (int i = 0; i < kVecs; ++i)
      vmax = _mm256_max_ps(
          vmax, _mm256_blendv_ps(minus_inf, _mm256_loadu_ps(s + 8 * i), avx2::lanes_below(n, i)));
    const float tile_max = avx2::reduce_max(vmax);
    if (tile_max > state.max) {
      const __m256 factor = _mm256_set1_ps(state.raise_max(tile_max));
#pragma GCC unroll 32
      for (int c = 0; c < kHeadDim; c += 8)
        _mm256_storeu_ps(acc + c, _mm256_mul_ps(_mm256_loadu_ps(acc + c), factor));
    }
    const __m256 max = _mm256_set1_ps(state.max);
    __m256 sum = _mm256_setzero_ps();
#pragma GCC unroll 16
    for (int i = 0; i < kVecs; ++i) {
      // fast_exp2(x - max): clamp at -125, r = round(x), 2^f on [-0.5, 0.5], times 2^r. Lanes
      // past n (stale scores) become 0.
      const __m256 t =
          _mm256_max_ps(_mm256_sub_ps(_mm256_loadu_ps(s + 8 * i), max), _mm256_set1_ps(-125.0f));
      const __m256 r = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m256 f = _mm256_sub_ps(t, r);
      __m256 poly = _mm256_set1_ps(kExp2Poly[0]);
#pragma GCC unroll 6
      for (int k = 1; k < 7; ++k) poly = _mm256_fmadd_ps(poly, f, _mm256_set1_ps(kExp2Poly[k]));
      const __m256 scale = _mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(r), _mm256_set1_epi32(127)), 23));
      const __m256 p = _mm256_and_ps(_mm256_mul_ps(poly, scale), avx2::lanes_below(n, i));
      _mm256_storeu_ps(s + 8 * i, p);
      sum = _mm256_add_ps(sum, p);
    }
    state.sum += avx2::reduce_add(sum);
  }

  // Each K row is converted once, two chunks at a time, and each chunk serves all kNH heads, q
  // coming from L1 as the FMA's memory operand (a whole row would take every register). Every
  // head runs kChains accumulator chains over alternating chunks, kNH * kChains = 8 chains for
  // two or more heads (4 for one; the next tokens overlap out of order), enough for two FMA
  // pipes of latency 4. Tokens go in groups of 8: the 8 x kNH partial-sum vectors are reduced
  // 8 at a time by sum8_transposed, which writes 8 consecutive scores of one head with one
  // store.
  template <int kNH>
  void scores_n(const float* __restrict q /*[kNH][d]*/, int n, float* __restrict s) {
    constexpr int kChains = kNH >= 8 ? 1 : kNH >= 4 ? 2 : 4;
    constexpr int kStep = kChains < 2 ? 2 : kChains;
    const int n_prefetch = this->take_k_prefetch();
    __m256 part[kNH * 8];  // [kNH][8 tokens] partial dot products
    // One loop over the tokens (not groups of 8 and tokens within), so the compiler keeps q's
    // loads in place instead of copying q to the stack once per group.
    for (int j = 0; j < n; ++j) {
      const int jj = j % 8;
      if (j < n_prefetch) prefetch_row<kRowBytes>(next.k(j));
      const std::byte* row = unit.k(j);
      __m256 a[kNH][kChains];
#pragma GCC unroll 8
      for (int h = 0; h < kNH; ++h)
#pragma GCC unroll 4
        for (int i = 0; i < kChains; ++i) a[h][i] = _mm256_setzero_ps();
      // Steps of one chunk per chain (at least the two a load brings): the chain of a chunk is
      // known at compile time without unrolling all of d (compile time, code size).
      for (int c0 = 0; c0 < kChunks; c0 += kStep) {
#pragma GCC unroll 4
        for (int c = 0; c < kStep; c += 2) {
          __m256 k[2];
          avx2::load_chunks<kKv, 2>(row, c0 + c, k);
#pragma GCC unroll 2
          for (int cc = 0; cc < 2; ++cc)
#pragma GCC unroll 8
            for (int h = 0; h < kNH; ++h) {
              __m256& chain = a[h][(c + cc) % kChains];
              chain = _mm256_fmadd_ps(_mm256_loadu_ps(q + h * kHeadDim + 8 * (c0 + c + cc)), k[cc],
                                      chain);
            }
        }
      }
#pragma GCC unroll 8
      for (int h = 0; h < kNH; ++h) {
        __m256 dot = a[h][0];
#pragma GCC unroll 4
        for (int i = 1; i < kChains; ++i) dot = _mm256_add_ps(dot, a[h][i]);
        part[h * 8 + jj] = dot;
      }
      if (jj == 7 || j == n - 1) {  // a group of 8 scores per head is complete
        const int j0 = j - jj;
        for (int h = 0; h < kNH; ++h) {
          for (int t = jj + 1; t < 8; ++t) part[h * 8 + t] = _mm256_setzero_ps();  // tail lanes
          _mm256_storeu_ps(s + h * kTile + j0, avx2::sum8_transposed(part + h * 8));
        }
      }
    }
  }

  // Slices of kGroup chunks of d: the kNH x kGroup = 8 accumulators of a slice live in registers
  // (all independent FMA chains) across the whole tile, beside the slice's kGroup V chunks and
  // one broadcast probability; each token's probability is broadcast once per slice and head.
  // The tile's V rows are re-read from L1 once per slice.
  template <int kNH>
  void accumulate_n(const float* __restrict p /*[kNH][kTile]*/, int n, float* __restrict acc) {
    constexpr int kGroup = kNH >= 8 ? 1 : 8 / kNH;
    static_assert(kChunks % kGroup == 0, "slices cover d");
    const int n_prefetch = this->take_v_prefetch();
    for (int c0 = 0; c0 < kChunks; c0 += kGroup) {
      __m256 a[kNH][kGroup];
#pragma GCC unroll 8
      for (int h = 0; h < kNH; ++h)
#pragma GCC unroll 8
        for (int c = 0; c < kGroup; ++c)
          a[h][c] = _mm256_loadu_ps(acc + h * kHeadDim + 8 * (c0 + c));
      for (int j = 0; j < n; ++j) {
        if (j < n_prefetch) {  // this slice's share of the next unit's V row j
          for (int line = c0 * kLinesPerRow / kChunks;
               line < (c0 + kGroup) * kLinesPerRow / kChunks; ++line)
            prefetch_line(next.v(j) + 64 * line);
        }
        __m256 v[kGroup];
        avx2::load_chunks<kKv, kGroup>(unit.v(j), c0, v);
#pragma GCC unroll 8
        for (int h = 0; h < kNH; ++h) {
          const __m256 pj = _mm256_broadcast_ss(p + h * kTile + j);
#pragma GCC unroll 8
          for (int c = 0; c < kGroup; ++c) a[h][c] = _mm256_fmadd_ps(pj, v[c], a[h][c]);
        }
      }
#pragma GCC unroll 8
      for (int h = 0; h < kNH; ++h)
#pragma GCC unroll 8
        for (int c = 0; c < kGroup; ++c)
          _mm256_storeu_ps(acc + h * kHeadDim + 8 * (c0 + c), a[h][c]);
    }
  }
};

}  // namespace decodebench::cpu::detail
#endif  // DECODEBENCH_CPU_AVX2
