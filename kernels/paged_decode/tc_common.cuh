// What the tensor-core rungs' two attend paths share (tc.cuh: the float KV formats, heads on the
// MMA's M; tc_int.cuh: the integer ones, tokens on M): the block shape, the cp.async ring's
// geometry, the MMA-type packing of fp32 values (hi + lo splits), the float formats' fragment
// loads and the split of a context range. tc.cuh's header has the design and the napkin math.
#pragma once

#include <cstdint>
#include <cstring>

#include "device/mma.h"
#include "device/softmax_state.h"
#include "paged_decode/split_kv.cuh"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode {

namespace tc_detail {

inline constexpr int kThreads = 128;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kWarpTokens = 16;                    // the k of P V: one A fragment of P
inline constexpr int kTileTokens = kWarps * kWarpTokens;  // 64
inline constexpr int kRows = 8;                           // live MMA rows: group <= 8
inline constexpr int kPadBytes = 16;                      // per shared row, against bank conflicts
inline constexpr int kBytesInFlight = 32 * 1024;          // per block, as pipelined

template <DType kKv>
inline constexpr DType kMmaType = is_fp8(kKv) || is_int_kv(kKv) ? DType::f16 : kKv;

// kMRows: the MMA rows of q a block serves (8 for tc, 16 for cascade's prefix pass); only the q
// tile and the end-of-block merge buffers depend on it.
template <DType kKv, int kHeadDim, int kMRows = kRows>
struct Geometry {
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256,
                "tc is instantiated for head_dim 64, 128 and 256");
  static_assert(kKv == DType::f16 || kKv == DType::bf16 || is_fp8(kKv),
                "the float formats' geometry; the integer ones: IntGeometry (tc_int.cuh)");
  static constexpr int kRowBytes = static_cast<int>(kv_row_bytes(kKv, kHeadDim));
  static constexpr int kSmemRowBytes = kRowBytes + kPadBytes;
  static constexpr int kTileBytes = kTileTokens * kSmemRowBytes;  // K (or V): [64][d + pad]
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kStagesWanted = 1 + (kBytesInFlight + kStageBytes - 1) / kStageBytes;
  static constexpr int kStages = kStagesWanted < 2 ? 2 : kStagesWanted;
  static constexpr int kRingBytes = kStages * kStageBytes;
  // The end-of-block merge: [warp][row][d] O and [warp][row][2] (max, sum), fp32; aliases the
  // ring (empty by then).
  static constexpr int kMergeBytes = kWarps * kMRows * (kHeadDim + 2) * 4;
  static constexpr int kRegionBytes = kRingBytes > kMergeBytes ? kRingBytes : kMergeBytes;
  // q in the MMA type, hi and lo: [2][kMRows][d + pad]
  static constexpr int kQRowBytes = kHeadDim * 2 + kPadBytes;
  static constexpr int kQBytes = 2 * kMRows * kQRowBytes;
  static constexpr std::size_t kBytes = kRegionBytes + kQBytes;
  // cp.async mapping as pipelined: thread t copies granule column t % G of rows t / G + k R.
  static constexpr int kGranulesPerRow = kRowBytes / 16;
  static constexpr int kCopyRowStride = kThreads / kGranulesPerRow;
  static constexpr int kCopies = kTileTokens / kCopyRowStride;  // per thread, per K (or V)
  static constexpr int kKSteps = kHeadDim / 16;                 // of S = Q K^T
  static constexpr int kNTiles = kHeadDim / 8;                  // n8 tiles of O
  static_assert(kThreads % kGranulesPerRow == 0, "a thread copies one column of granules");
  static_assert(kTileTokens % kCopyRowStride == 0, "whole rows per copy pass");
  static_assert(kSmemRowBytes % 16 == 0 && kQRowBytes % 16 == 0 && kRegionBytes % 16 == 0,
                "ldmatrix and cp.async need 16-byte aligned rows");
};

// Two floats -> the MMA type's x2 register (round to nearest even; `lo` in bits 0..15).
template <DType kMma>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
#if defined(__CUDACC__)
  std::uint32_t bits;
  if constexpr (kMma == DType::f16) {
    const __half2 h = __floats2half2_rn(lo, hi);
    std::memcpy(&bits, &h, 4);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    std::memcpy(&bits, &h, 4);
  }
  return bits;
#else
  const auto enc = [](float x) -> std::uint32_t {
    return kMma == DType::f16 ? floatfmt::float_to_f16(x) : floatfmt::float_to_bf16(x);
  };
  return enc(lo) | (enc(hi) << 16);
#endif
}

template <DType kMma>
__device__ __forceinline__ float2 unpack2(std::uint32_t bits) {
#if defined(__CUDACC__)
  if constexpr (kMma == DType::f16) {
    __half2 h;
    std::memcpy(&h, &bits, 4);
    return __half22float2(h);
  } else {
    __nv_bfloat162 h;
    std::memcpy(&h, &bits, 4);
    return __bfloat1622float2(h);
  }
#else
  const auto dec = [](std::uint32_t b) {
    return kMma == DType::f16 ? floatfmt::f16_to_float(static_cast<std::uint16_t>(b))
                              : floatfmt::bf16_to_float(static_cast<std::uint16_t>(b));
  };
  return make_float2(dec(bits & 0xffffu), dec(bits >> 16));
#endif
}

// (a, b) = hi + lo, both in the MMA type: the residual lo keeps the bits hi rounds away.
template <DType kMma>
__device__ __forceinline__ void split2(float a, float b, std::uint32_t& hi, std::uint32_t& lo) {
  hi = pack2<kMma>(a, b);
  const float2 r = unpack2<kMma>(hi);
  lo = pack2<kMma>(a - r.x, b - r.y);
}

// Two fp8 codes at p and p + stride (lower first) -> f16x2.
template <DType kKv>
__device__ __forceinline__ std::uint32_t fp8_pair(const unsigned char* p, int stride) {
  return dev::fp8x2_to_f16x2<kKv>(static_cast<std::uint32_t>(p[0]) |
                                  (static_cast<std::uint32_t>(p[stride]) << 8));
}

// B fragments of K^T for the 8-token halves j = 0, 1 of a warp's 16 tokens, k-step `ks`.
// `k_rows` is the warp's first K row [16][d + pad].
template <DType kKv, int kHeadDim>
__device__ __forceinline__ void load_k_fragments(const unsigned char* k_rows, int ks, int lane,
                                                 dev::FragB (&b)[2]) {
  using G = Geometry<kKv, kHeadDim>;
  if constexpr (is_fp8(kKv)) {
    // b_row (d) = 2 (lane % 4) + {0, 1} (+ 8), b_col (token) = lane / 4: two adjacent bytes.
    const int d0 = ks * 16 + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const unsigned char* row = k_rows + (j * 8 + lane / 4) * G::kSmemRowBytes;
      b[j].reg[0] = fp8_pair<kKv>(row + d0, 1);
      b[j].reg[1] = fp8_pair<kKv>(row + d0 + 8, 1);
    }
  } else {
    // Matrix m = lane / 8: tokens 8 (m / 2) + [0, 8), dims 16 ks + 8 (m % 2) + [0, 8).
    const int m = lane / 8;
    const unsigned char* addr =
        k_rows + ((m >> 1) * 8 + lane % 8) * G::kSmemRowBytes + (ks * 16 + (m & 1) * 8) * 2;
    std::uint32_t r[4];
    dev::ldmatrix<4>(r, addr);
    b[0].reg[0] = r[0];
    b[0].reg[1] = r[1];
    b[1].reg[0] = r[2];
    b[1].reg[1] = r[3];
  }
}

// B fragments of V for the n8 tiles n0 and n0 + 1 (dims 8 n0 + [0, 16)), k = the warp's 16
// tokens. `v_rows` is the warp's first V row [16][d + pad].
template <DType kKv, int kHeadDim>
__device__ __forceinline__ void load_v_fragments(const unsigned char* v_rows, int n0, int lane,
                                                 dev::FragB (&b)[2]) {
  using G = Geometry<kKv, kHeadDim>;
  if constexpr (is_fp8(kKv)) {
    // b_row (token) = 2 (lane % 4) + {0, 1} (+ 8), b_col (dim) = lane / 4: bytes a row apart.
    const int t0 = 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const unsigned char* col = v_rows + (n0 + j) * 8 + lane / 4;
      b[j].reg[0] = fp8_pair<kKv>(col + t0 * G::kSmemRowBytes, G::kSmemRowBytes);
      b[j].reg[1] = fp8_pair<kKv>(col + (t0 + 8) * G::kSmemRowBytes, G::kSmemRowBytes);
    }
  } else {
    // Matrix m = lane / 8: tokens 8 (m % 2) + [0, 8), dims 8 (n0 + m / 2) + [0, 8), transposed.
    const int m = lane / 8;
    const unsigned char* addr =
        v_rows + ((m & 1) * 8 + lane % 8) * G::kSmemRowBytes + ((n0 + (m >> 1)) * 8) * 2;
    std::uint32_t r[4];
    dev::ldmatrix<4, /*kTranspose=*/true>(r, addr);
    b[0].reg[0] = r[0];
    b[0].reg[1] = r[1];
    b[1].reg[0] = r[2];
    b[1].reg[1] = r[3];
  }
}

// A fragment of q for k-step `ks` from a q tile [8][d + pad] (rows 8..15 of the MMA are zero).
template <int kHeadDim>
__device__ __forceinline__ dev::FragA load_q_fragment(const unsigned char* q_tile, int ks,
                                                      int lane) {
  constexpr int kQRowBytes = kHeadDim * 2 + kPadBytes;
  // Matrix m = (lane / 8) % 2: rows [0, 8), dims 16 ks + 8 m + [0, 8); lanes 16.. are not read.
  const unsigned char* addr =
      q_tile + (lane % 8) * kQRowBytes + (ks * 16 + ((lane / 8) & 1) * 8) * 2;
  std::uint32_t r[2];
  dev::ldmatrix<2>(r, addr);
  dev::FragA a;
  a.reg[0] = r[0];
  a.reg[1] = 0u;
  a.reg[2] = r[1];
  a.reg[3] = 0u;
  return a;
}

// A fragment of q for k-step `ks` from a q tile [16][d + pad] of 16 live rows (cascade's prefix
// pass packs the rows of several sequences into one MMA).
template <int kHeadDim>
__device__ __forceinline__ dev::FragA load_q_fragment16(const unsigned char* q_tile, int ks,
                                                        int lane) {
  constexpr int kQRowBytes = kHeadDim * 2 + kPadBytes;
  // Matrix m = lane / 8 (A register m): rows 8 (m % 2) + [0, 8), dims 16 ks + 8 (m / 2) + [0, 8).
  const unsigned char* addr =
      q_tile + ((lane % 8) + ((lane / 8) & 1) * 8) * kQRowBytes + (ks * 16 + (lane / 16) * 8) * 2;
  std::uint32_t r[4];
  dev::ldmatrix<4>(r, addr);
  dev::FragA a;
  a.reg[0] = r[0];
  a.reg[1] = r[1];
  a.reg[2] = r[2];
  a.reg[3] = r[3];
  return a;
}

// acc += a b for the live rows 0..7 of C (registers 0, 1): rows 8.. are zero padding in and out,
// so registers 2, 3 are dead after the MMA and ptxas can reuse them (64 registers at d = 256).
template <DType kMma>
__device__ __forceinline__ void mma_live_rows(const dev::FragA& a, const dev::FragB& b,
                                              float (&acc)[2]) {
  dev::FragC c;
  c.reg[0] = acc[0];
  c.reg[1] = acc[1];
  c.reg[2] = 0.f;
  c.reg[3] = 0.f;
  c = dev::mma_m16n8k16<kMma>(a, b, c);
  acc[0] = c.reg[0];
  acc[1] = c.reg[1];
}

// The same with all 16 rows live (C registers 0..3).
template <DType kMma>
__device__ __forceinline__ void mma_live_rows(const dev::FragA& a, const dev::FragB& b,
                                              float (&acc)[4]) {
  dev::FragC c;
#pragma unroll
  for (int i = 0; i < 4; ++i) c.reg[i] = acc[i];
  c = dev::mma_m16n8k16<kMma>(a, b, c);
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] = c.reg[i];
}

// [lo, hi) cut in whole units of `unit` tokens into n pieces, the larger shares first (split_kv's
// rule, so the planner's unit of work is the same): piece s is [begin, end), empty when s is past
// the units.
__device__ __forceinline__ void split_range(int lo, int hi, int unit, int n, int s, int& begin,
                                            int& end) {
  const int units = (hi - lo + unit - 1) / unit;
  const int base = units / n;
  const int extra = units % n;
  const int first = s * base + (s < extra ? s : extra);
  const int count = base + (s < extra ? 1 : 0);
  begin = lo + first * unit < hi ? lo + first * unit : hi;
  end = lo + (first + count) * unit < hi ? lo + (first + count) * unit : hi;
}

// Soft-capping (PagedDecodeParams::softcap = c) of a warp's raw scores in place, before they are
// scaled: s = q . k becomes (c / t) tanh(t s / c), t = softmax_scale k_scale, so that the usual
// scaling gives c tanh(scaled score / c). One block-uniform branch a tile, off the hot path of
// every model without a cap; the constants (with_score_cap) are read from the kernel parameters,
// not held in registers across the loop (that tipped cascade's prefix pass into a spill).
// tanh(x) = 1 - 2 / (2^(2x log2 e) + 1): one ex2 and one reciprocal, no branch (tanhf's branches
// made the prefix pass spill); its absolute error (~1e-7) is what counts, as the softmax sees a
// capped score's absolute error, c times it.
template <int kN, int kM>
__device__ __forceinline__ void soft_cap(const PagedDecodeParams& p, float (&s)[kN][kM]) {
  if (!(p.score_cap_out > 0.f)) return;
#pragma unroll
  for (int i = 0; i < kN; ++i) {
#pragma unroll
    for (int j = 0; j < kM; ++j) {
      const float r = dev::fast_rcp(dev::fast_exp2(s[i][j] * p.score_cap_in) + 1.f);  // inf: 0
      s[i][j] = p.score_cap_out * fmaf(-2.f, r, 1.f);
    }
  }
}

// `p` with the soft-cap's constants derived (soft_cap): what the tensor-core launchers launch.
inline PagedDecodeParams with_score_cap(const PagedDecodeParams& p) {
  PagedDecodeParams q = p;
  const float t = p.softmax_scale * p.k_scale;
  q.score_cap_in = p.softcap > 0.f ? 2.f * kLog2e * t / p.softcap : 0.f;
  q.score_cap_out = p.softcap > 0.f ? p.softcap / t : 0.f;
  return q;
}

// The normalized output `value` of query head `q_head` over all its keys (softmax state
// `state`) with the head's sink joined to the softmax (PagedDecodeParams::sinks: a logit in
// the scaled scores' units that adds to the denominator and no value).
__device__ __forceinline__ float with_sink(const PagedDecodeParams& p, int q_head, float value,
                                           const SoftmaxState<float>& state) {
  if (!p.has_sinks || !(state.sum > 0.f)) return value;
  SoftmaxState<float> joined = state;
  SoftmaxState<float> sink;
  sink.max = p.sinks[q_head] * kLog2e;
  sink.sum = 1.f;
  float self_factor = 0.f;
  float sink_factor = 0.f;
  joined.merge(sink, self_factor, sink_factor);
  return value * (state.sum * self_factor / joined.sum);
}

// The end of a block's attend: merge_o [warp][row][d] and merge_stats [warp][row][2] (max, sum),
// written by every warp at the start of `smem` and made visible, are combined per (row, dim) and
// handed to store(row, dim, value, state) with v_scale applied, 0 for an empty range.
template <int kHeadDim, int kMRows, typename Store>
__device__ __forceinline__ void store_merged(const PagedDecodeParams& p, unsigned char* smem,
                                             int live_rows, Store store) {
  const float* merge_o = reinterpret_cast<const float*>(smem);
  const float* merge_stats = merge_o + kWarps * kMRows * kHeadDim;
  for (int idx = static_cast<int>(threadIdx.x); idx < live_rows * kHeadDim; idx += kThreads) {
    const int h = idx / kHeadDim;
    const int d = idx % kHeadDim;
    SoftmaxState<float> state;
    float acc = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      SoftmaxState<float> warp_state;
      warp_state.max = merge_stats[(w * kMRows + h) * 2];
      warp_state.sum = merge_stats[(w * kMRows + h) * 2 + 1];
      float self_factor = 0.f;
      float warp_factor = 0.f;
      state.merge(warp_state, self_factor, warp_factor, dev::FastExp2{});
      acc = acc * self_factor + merge_o[(w * kMRows + h) * kHeadDim + d] * warp_factor;
    }
    const float value = state.sum > 0.f ? acc * p.v_scale / state.sum : 0.f;
    store(h, d, value, state);
  }
}

}  // namespace tc_detail

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode
