// The portable tile kernels: convert the tile's rows to fp32 once, then plain loops (the compiler
// vectorizes what it can), scalar bit-exact conversions. Correct on any ISA.
#pragma once

#include <algorithm>

#include "backends/cpu/cpu_decode_common.h"
#include "backends/cpu/cpu_decode_kv_walk.h"
#include "backends/cpu/cpu_decode_scalar.h"
#include "device/softmax_state.h"
#include "kernels.h"

namespace decodebench::cpu::detail {

template <DType kKv, int kHeadDim>
struct PortableTile {
  static constexpr int kTile = kPortableTileTokens<kHeadDim>;
  static constexpr float kLoadScale = 1.0f;  // rows are decoded to their exact values
  static constexpr bool kArithmetic = true;

  alignas(64) float k[kTile * kHeadDim];  // [kTile][d]
  alignas(64) float v[kTile * kHeadDim];  // [kTile][d]

  static int pass_width(int remaining) { return std::min(remaining, kMaxPassHeads); }

  static void softmax(float* s, int n, SoftmaxState<float>& state, float* acc) {
    softmax_update<kHeadDim>(s, n, state, acc);
  }

  void load(const TileUnit<kTile>& unit, const TileUnit<kTile>& next) {
    constexpr int kRowBytes = kHeadDim * static_cast<int>(dtype_size(kKv));
    const int n_next = next.n();
    for (int j = 0; j < unit.n(); ++j) {
      if (j < n_next) {
        prefetch_row<kRowBytes>(next.k(j));
        prefetch_row<kRowBytes>(next.v(j));
      }
      for (int c = 0; c < kHeadDim; ++c) k[j * kHeadDim + c] = decode_element<kKv>(unit.k(j), c);
      for (int c = 0; c < kHeadDim; ++c) v[j * kHeadDim + c] = decode_element<kKv>(unit.v(j), c);
    }
  }

  // s[h][j] = q[h] . k[j] for nh heads (q pre-scaled): s is [kMaxPassHeads][kTile].
  void scores(const float* __restrict q /*[nh][d]*/, int nh, int n, float* __restrict s) const {
    for (int h = 0; h < nh; ++h) {
      for (int j = 0; j < n; ++j) {
        float dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int c = 0; c < kHeadDim; ++c) dot += q[h * kHeadDim + c] * k[j * kHeadDim + c];
        s[h * kTile + j] = dot;
      }
    }
  }

  // acc[h] += sum_j p[h][j] * v[j].
  void accumulate(const float* __restrict p, int nh, int n, float* __restrict acc) const {
    for (int h = 0; h < nh; ++h) {
      float* __restrict acc_h = acc + h * kHeadDim;
      for (int j = 0; j < n; ++j) {
        const float pj = p[h * kTile + j];
        const float* __restrict vj = v + j * kHeadDim;
#pragma omp simd
        for (int c = 0; c < kHeadDim; ++c) acc_h[c] += pj * vj[c];
      }
    }
  }
};

}  // namespace decodebench::cpu::detail
