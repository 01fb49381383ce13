// Rung `tc`: the query group on tensor cores. `split_kv`'s grid, splits and merge, with the two
// products of a tile, S = Q K^T and O += P V, on mma.m16n8k16 (fp32 accumulation) instead of
// per-thread FMAs.
//
// Why: the SIMT rungs spend 2 x group FMAs per KV element (q.k and p.v for every head of the
// group), plus the unpack, the partial-dot round trip through shared memory and the per-row
// softmax. At group 8 with f16 KV that is 8 FMA per KV byte per thread-lane; an H200 SM takes
// ~20 B/clk from HBM and issues 128 FP32 lanes/clk, so 20 B/clk x 8 = 160 FMA lanes/clk > 128:
// gqa/pipelined are issue-bound at groups 4-8 (what the static model shows), not memory-bound.
// A tensor-core MMA does 16 x 8 x 16 multiply-adds per warp instruction whatever the group (the
// group is padded to the MMA's 16 rows), so the work per KV byte stops growing with the group.
//
// Napkin math per warp and 16 tokens (head_dim d, 16-bit KV: 16 x d x 2 x 2 B = 64 d bytes):
//   S:   d/16 k-steps x 2 n8 halves = d/8 MMAs (+ d/8 when q has another dtype than the MMA,
//        see "exact operands"), d/16 ldmatrix.x4 for K, d/16 ldmatrix.x2 for q
//   P V: d/8 n8 tiles x 2 (P split in hi + lo) = d/4 MMAs, d/16 ldmatrix.x4.trans for V
//   softmax: ~40 instructions (mask, 2 quad shuffles for the max, 4 exp2, rescale of d/4 floats)
//   d = 128: 8 KiB of K+V for ~48 MMA + 24 ldmatrix + ~70 other warp instructions, the same
//   count at group 1 and at group 8. The MMAs are 8 KiB x 24 FLOP/B = 196 kFLOP, ~5x below the
//   SM's mma.sync rate at 20 B/clk. The static model (SASS of the main loop, README) reads
//   .08 / .16 instructions per KV byte (f16 / fp8; fp8 fragments are byte loads + cvt) against
//   .35 / .65 for pipelined at cap 8: an issue bound of 12.4 / 6.4 TB/s, above HBM's 4.8.
// Integer KV (int8, int4, int4_token; "Integer codes" below): the per-16-token work (MMAs,
//   softmax, q fragments) stays while the bytes shrink to 1 / 2 (int8) or 1 / 4 (int4) of
//   f16's, and every code takes ~2.5 instructions to become an f16 (int8: PRMT + sub.f16x2,
//   one xor per 4 codes; int4: PRMT/shift + LOP3 + fma/sub.f16x2), plus the scale folds. So
//   the instructions per KV byte rise: static model, d = 128, H200 (sm_90a SASS, nvcc 13.0):
//   int8 .191 (d 64 / 256: .232 / .165), an issue bound of 5.5 TB/s (4.5 / 6.3): above HBM's
//   4.8, below 1.3x it; int4 .834 (1.3 TB/s) and int4_token .542 (1.9 TB/s), issue-bound well
//   below HBM. int4's keys pay most: q * s is formed and split hi + lo per (k-step, half), and
//   every scale is a global load. Cutting that (q * s once per block in shared memory when the
//   block spans the tile, more tokens per softmax, the swapped M = tokens layout) is left.
//
// Shape: grid (Hkv, batch, num_splits), 128 threads = 4 warps. A tile is 64 tokens: warp w owns
// tokens [16w, 16w + 16) of it and keeps its own online softmax (per query row: max, sum, O);
// the 4 warps' states are merged at the end through shared memory (SoftmaxState::merge).
//   MMA M = query rows: head h of the group is row h (<= 8 live; rows 8..15 are zero padding,
//     so A registers 1 and 3 are 0 and C registers 2 and 3 stay 0: half the MMA is wasted; the
//     "swap A and B" layout, M = tokens, N = 8 heads, would not waste it but needs P transposed
//     between the two products)
//   S = Q K^T: A = q [16][d] (ldmatrix.x2 from a q tile in shared memory), B = K^T: K is
//     [token][d] in shared memory, i.e. B's columns, so ldmatrix without .trans
//   P: the S accumulator of two n8 halves is the A fragment of P (rows = heads, k = 16 tokens):
//     registers (0,1) of half 0 and of half 1 -> A registers 0 and 2, no data movement
//   O += P V: B = V [token][d] with k = token, so ldmatrix.trans
//   row max / sum: a C row lives in the 4 lanes of a quad -> two __shfl_xor_sync (1, 2); the sum
//     is kept per lane and reduced once at the end
// Staging: K/V tiles in a cp.async ring as in `pipelined` (S - 1 tiles in flight, at least one),
// rows padded by 16 bytes so the 8 rows of an ldmatrix hit 8 different 16-byte bank groups.
//   ring: 2 stages (34 KiB each, 16-bit KV, d = 128) or up to 5 (fp8, d = 64) and 7 (int4,
//     d = 64: 48-byte rows with the pad); d = 256 16-bit:
//     2 x 66 KiB, one block per SM with 66 KiB in flight, still above Little's law's ~21 KiB
//   registers (ptxas sm_90a): d 64 / 128 / 256 = 90 / 152 / 186 (16-bit), 70 / 112 / 180 (fp8),
//     86 / 118 / 210 (int8), 99 / 136 / 176 (int4), 86 / 138 / 216 (int4_token), no spills;
//     O is d/4 floats per lane (only the live C registers are kept), q and K/V fragments are
//     reloaded from shared memory per k-step
//
// Exact operands (the tests hold the kernels to the fp32 reference's tolerance, 1e-3 relative
// for f16 out):
//   - the MMA type is the KV dtype (f16 or bf16); fp8 KV uses the f16 MMA: every e4m3/e5m2 value
//     is an f16 value, so K and V enter the MMA exactly. ldmatrix moves 16-bit elements, so fp8
//     fragments are read from the fp8 tile directly (two bytes per register) and converted with
//     cvt.rn.f16x2.e4m3x2 / e5m2x2 (dev::fp8x2_to_f16x2)
//   - q of another dtype than the MMA (bf16 q with f16 or fp8 KV, f16 q with bf16 KV) is split
//     into hi + lo in the MMA type (q = hi + lo to ~2^-16 or better) and S takes two MMAs
//   - P (in [0, 1], fp32) is split the same way, so O += P V is two MMAs; rounding P to one
//     bf16 would cost 2^-9 relative per weight, far outside the bf16-out tolerance near zero
//   k_scale is folded into the score scale, v_scale into the final weights, as the other rungs.
//   - integer KV uses the f16 MMA. Its codes (int8 in [-127, 127], int4 in [0, 15]) are f16
//     integers, so they enter exactly, and every scale and zero is folded outside the MMA in
//     fp32, never rounded into an f16 value. fma(code, s, z) rounded to f16 per element would
//     cost 2^-11 relative per K or V element; the tests measured int4 keys dequantized that
//     way at up to 5e-4 absolute output error (atol 2e-5), so none of the formats does it:
//       int8 K    S column t times s_K(t) (per token and head) after the MMA
//       int8 V    P's weight for token t times s_V(t) before the hi + lo split
//       int4 K    per (block, channel): S = (q * s) . codes + q . z. q * s is formed in fp32 per
//                 8-token half (one block: P >= 8) and split hi + lo (exact to ~2^-22); q . z is
//                 one more MMA of q with B = z broadcast over the half's token columns
//       int4_token K  per (token, group of 32): each group's two k-steps go to their own
//                 accumulator, added to S as s(t, g) S_g + z(t, g) sum(q_g) (sums of q per group
//                 in shared memory)
//       int4 V    per (token, group): P's weights times s(t, g) per group (one hi + lo split per
//                 group), and the zeros as sum_t p_t z(t, g): one MMA pair per 16 tokens into an
//                 accumulator whose columns are the groups, rescaled with O and added to each
//                 group's channels at the end
//     Masked tokens take scale and zero 0 (a stale scale past the context could be inf or NaN).
//
// Integer codes: the tiles hold the codes as stored (row bytes d or d / 2, kv_row_bytes) and
// ldmatrix reads them as 16-bit elements: a lane gets 4 consecutive bytes of a K row (channels
// 16 ks + 4 (lane % 4) + [0, 4) for int8, 32 (ks / 2) + 8 (lane % 4) + [0, 8) for int4), or 2
// bytes of each of two V rows (.trans). q is staged in the matching channel order (k_channel),
// which the MMA's sum over k does not see, and O's columns are stored back to their channels
// (o_channel). Codes become f16 through the 1024 magic number: the byte or nibble is placed in
// the mantissa of 0x6400 (PRMT, LOP3) and 1024 (1152 with int8's bias of 128) subtracted in f16:
// exact. Scales and zeros (f16, kernels.h's layouts) are read from global memory: they are
// small (1/32 to 1/64 of the codes) and L2-resident.
//
// Shared with cascade (cascade.cuh): the block's whole tile loop and warp merge, attend(), for 8
// live rows (tc, cascade's suffix pass) or 16 (cascade's prefix pass, several sequences' query
// groups in one MMA), with the rows' q and the destination of each result as parameters.
//
// Splits: the context is cut in whole units of kv_tile_tokens(d) exactly as split_kv does (the
// planner counts work in that unit); a split's range is walked in 64-token tiles, the last one
// masked. One split writes the output directly (no merge launch); more write normalized
// partials + log2-sum-exp2 to the workspace and split_kv's merge kernel combines them.
// `--kernel auto` does not pick tc (kernels::choose_kernel takes the first splitting rung of the
// ladder, split_kv, and otherwise only rungs without a workspace): name it, `--kernel tc`.
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
  static_assert(kKv == DType::f16 || kKv == DType::bf16 || is_fp8(kKv) || is_int_kv(kKv),
                "KV cache dtype must be f16, bf16, fp8_e4m3, fp8_e5m2, int8, int4 or int4_token");
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
  // int4_token keys: per (row, group of 32 channels) sums of q, fp32 [kMRows][d / 32].
  static constexpr int kGroups = kHeadDim / kInt4GroupChannels;
  static constexpr int kQSumBytes = kKv == DType::int4_token ? kMRows * kGroups * 4 : 0;
  static constexpr std::size_t kBytes = kRegionBytes + kQBytes + kQSumBytes;
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
  // Integer codes: ldmatrix reads 16-byte chunks of a row, one k-step of int8 (16 channels) or
  // two of int4 (32: one scale group); loops take two chunks at a time (ldmatrix.x4).
  static constexpr int kChunks = kRowBytes / 16;
  static_assert(!is_int_kv(kKv) || kChunks % 2 == 0, "an even number of 16-byte chunks a row");
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

// ---- Integer codes (int8, int4, int4_token) -------------------------------------------------
// The codes enter the f16 MMA exactly (|code| <= 127 and 0..15 are f16 integers) through the
// magic-number trick: the byte (or nibble) is written into the mantissa of 1024 = 0x6400, whose
// f16 ulp is 1, and 1024 (+ 128 for int8's offset) is subtracted; no int -> float conversions.
// ldmatrix moves 16-bit elements: on byte rows a lane gets 4 consecutive bytes of one row
// (non-transposed: K), or 2 bytes of each of two rows (transposed: V), which fixes which
// channels land in which fragment register; q's channels are permuted to match K's, and the
// output channels of O are permuted back when stored (k_channel, o_channel).

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

// a - b and a * b + c on f16x2, rounded once (sub.rn / fma.rn.f16x2).
__device__ __forceinline__ std::uint32_t f16x2_sub(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDACC__)
  std::uint32_t d;
  asm("sub.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  const float2 x = unpack2<DType::f16>(a);
  const float2 y = unpack2<DType::f16>(b);
  return pack2<DType::f16>(x.x - y.x, x.y - y.y);  // exact here: integers below 2048
#endif
}
__device__ __forceinline__ std::uint32_t f16x2_fma(std::uint32_t a, std::uint32_t b,
                                                   std::uint32_t c) {
#if defined(__CUDACC__)
  std::uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#else
  const float2 x = unpack2<DType::f16>(a);
  const float2 y = unpack2<DType::f16>(b);
  const float2 z = unpack2<DType::f16>(c);
  // The f16 products are exact in double; one rounding to f16 as fma.rn (barring a double
  // rounding through float at an exact f16 tie, which the tests' tolerance does not see).
  const auto fma1 = [](float u, float v, float w) {
    return static_cast<float>(static_cast<double>(u) * v + w);
  };
  return pack2<DType::f16>(fma1(x.x, y.x, z.x), fma1(x.y, y.y, z.y));
#endif
}

inline constexpr std::uint32_t kF16Magic = 0x64006400u;      // (1024, 1024)
inline constexpr std::uint32_t kF16Magic1152 = 0x64806480u;  // (1152, 1152): int8 + 128

// Two int8 codes of `biased` (a word of 4 codes, each + 128: the word ^ 0x80808080) chosen by
// `sel` (byte_perm selector for output bytes 0 and 2; bytes 1, 3 take 0x64) -> exact f16x2.
__device__ __forceinline__ std::uint32_t int8_pair(std::uint32_t biased, std::uint32_t sel) {
  return f16x2_sub(byte_perm(biased, 0x64646464u, sel), kF16Magic1152);
}

// Byte k (0..3) of a word of 8 int4 codes (two a byte, low nibble first) -> f16x2 of its low and
// high nibble, exact: the high nibble enters as 16 x code and is scaled by 1/16.
__device__ __forceinline__ std::uint32_t int4_byte(std::uint32_t word, int k) {
  const std::uint32_t sel =
      0x4040u | static_cast<std::uint32_t>(k) | (static_cast<std::uint32_t>(k) << 8);
  const std::uint32_t y = (byte_perm(word, 0u, sel) & 0x00F0000Fu) | kF16Magic;
  // (1024 + c_lo, 1024 + 16 c_hi) * (1, 1/16) + (-1024, -64)
  return f16x2_fma(y, 0x2C003C00u, 0xD400E400u);
}

// Nibble i (0..3) of each 16-bit half of `word` -> f16x2 (low half first), exact.
__device__ __forceinline__ std::uint32_t int4_nibbles(std::uint32_t word, int i) {
  return f16x2_sub(((word >> (4 * i)) & 0x000F000Fu) | kF16Magic, kF16Magic);
}

// The channel of q (and K) at MMA k index `pos` (0..d-1): the float formats keep the order; the
// integer ones take the order in which ldmatrix hands a lane its K bytes. In k-step ks a lane's
// B registers hold k = 2 (lane % 4) + {0, 1} and + 8 (mma.h):
//   int8: the lane's word is channels 16 ks + 4 (lane % 4) + [0, 4), register r its bytes 2r, 2r+1
//   int4: the word is channels 32 (ks / 2) + 8 (lane % 4) + [0, 8) (one 16-byte chunk = two
//         k-steps), k-step parity s and register r its byte 2s + r (two channels)
template <DType kKv>
__device__ __forceinline__ int k_channel(int pos) {
  const int ks = pos / 16;
  const int kk = pos % 16;
  const int m = (kk % 8) / 2;
  const int r = kk / 8;
  const int e = kk % 2;
  if constexpr (kKv == DType::int8) {
    return 16 * ks + 4 * m + 2 * r + e;
  } else if constexpr (is_int4_kv(kKv)) {
    return 32 * (ks / 2) + 8 * m + 4 * (ks % 2) + 2 * r + e;
  } else {
    return pos;
  }
}

// The channel of O's n8 tile n, column c (0..7). The V fragment of the integer formats comes from
// ldmatrix.trans on byte rows: a lane (column l / 4) gets bytes 2c, 2c+1 of a 16-byte chunk of two
// token rows:
//   int8: chunk u (16 channels) feeds tiles 2u (even channels 16u + 2c) and 2u + 1 (odd)
//   int4: chunk u (32 channels, one scale group) feeds tiles 4u + i: channels 32u + 4c + i
template <DType kKv>
__device__ __forceinline__ int o_channel(int n, int c) {
  if constexpr (kKv == DType::int8) {
    return 16 * (n / 2) + 2 * c + n % 2;
  } else if constexpr (is_int4_kv(kKv)) {
    return 32 * (n / 4) + 4 * c + n % 4;
  } else {
    return 8 * n + c;
  }
}

// One f16 of a scale or zero array (global memory: small and L2-resident), as float; two
// adjacent ones (an even index) as a float2.
__device__ __forceinline__ float load_f16(const std::uint16_t* a, std::size_t i) {
  return unpack2<DType::f16>(a[i]).x;
}
__device__ __forceinline__ float2 load_f16x2(const std::uint16_t* a, std::size_t i) {
  return unpack2<DType::f16>(*reinterpret_cast<const std::uint32_t*>(a + i));
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

// One thread block's attention over tokens [t_begin, t_end) of KV head `kv_head`, read through
// sequence `table_seq`'s block table, for kMRows MMA rows of queries: 8 (tc: the query group,
// rows 8..15 padding) or 16 (cascade's prefix pass: the groups of several sequences). MMA row r
// < live_rows is q row q_row_of(r) ([batch x Hq] index); rows past live_rows are zero. Ends
// with the 4 warps merged and store(r, dim, value, state) called once per live (row, dim):
// value is the row's normalized output (v_scale applied, 0 for an empty range), state its
// softmax state (sum 0 when empty). `smem` holds Geometry<kKv, kHeadDim, kMRows>::kBytes.
template <DType kKv, int kHeadDim, int kMRows, typename QRowOf, typename Store>
__device__ __forceinline__ void attend(const PagedDecodeParams& p, unsigned char* smem, int kv_head,
                                       int table_seq, int t_begin, int t_end, int live_rows,
                                       QRowOf q_row_of, Store store) {
  static_assert(kMRows == 8 || kMRows == 16, "8 live rows (one C half) or all 16");
  using G = Geometry<kKv, kHeadDim, kMRows>;
  constexpr DType kMma = kMmaType<kKv>;
  constexpr int kStages = G::kStages;
  constexpr int kHalves = kMRows / 8;            // a lane holds C rows lane / 4 + 8 h, h < kHalves
  constexpr int kC = 2 * kHalves;                // live C registers per n8 tile
  unsigned char* ring = smem;                    // [S][2][64][d + pad]
  unsigned char* q_hi = smem + G::kRegionBytes;  // [kMRows][d + pad] kMma
  unsigned char* q_lo = q_hi + kMRows * G::kQRowBytes;  // [kMRows][d + pad] kMma
  // int4_token: [kMRows][d / 32] fp32 sums of q per scale group
  float* q_sums = reinterpret_cast<float*>(q_lo + kMRows * G::kQRowBytes);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;

  // q of the rows, [kMRows][d] in the MMA type as hi + lo, in K's channel order (k_channel);
  // rows past live_rows are zero. Ordered before the first ldmatrix by the main loop's first
  // barrier.
  const bool q_split = p.q_dtype != kMma;
  for (int i = tid; i < kMRows * kHeadDim / 2; i += kThreads) {
    const int r = i / (kHeadDim / 2);
    const int c = (i % (kHeadDim / 2)) * 2;
    float a = 0.f;
    float b = 0.f;
    if (r < live_rows) {
      const int at = static_cast<int>(q_row_of(r) * kHeadDim + k_channel<kKv>(c));  // c+1: +1
      a = dev::load_q<float>(p.q, p.q_dtype, at);
      b = dev::load_q<float>(p.q, p.q_dtype, at + 1);
    }
    std::uint32_t hi = 0u;
    std::uint32_t lo = 0u;
    split2<kMma>(a, b, hi, lo);
    *reinterpret_cast<std::uint32_t*>(q_hi + r * G::kQRowBytes + c * 2) = hi;
    *reinterpret_cast<std::uint32_t*>(q_lo + r * G::kQRowBytes + c * 2) = lo;
  }
  if constexpr (kKv == DType::int4_token) {
    for (int i = tid; i < kMRows * G::kGroups; i += kThreads) {
      const int r = i / G::kGroups;
      const int u = i % G::kGroups;
      float sum = 0.f;
      if (r < live_rows) {
        const int at = static_cast<int>(q_row_of(r) * kHeadDim) + u * kInt4GroupChannels;
        for (int c = 0; c < kInt4GroupChannels; ++c) {
          sum += dev::load_q<float>(p.q, p.q_dtype, at + c);
        }
      }
      q_sums[i] = sum;
    }
  }

  // cp.async ring over tiles of 64 tokens from t_begin.
  const int copy_row = tid / G::kGranulesPerRow;
  const int copy_byte = (tid % G::kGranulesPerRow) * 16;
  const int block_shift = decode::log2_pow2(p.block_size);
  const int slot_mask = p.block_size - 1;
  const auto* k_base = static_cast<const unsigned char*>(p.k_cache);
  const auto* v_base = static_cast<const unsigned char*>(p.v_cache);
  const int num_tiles = t_end > t_begin ? (t_end - t_begin + kTileTokens - 1) / kTileTokens : 0;
  const int span = t_end - t_begin;
  int block[G::kCopies];  // physical blocks of the rows this thread copies in the next tile
  auto fetch_blocks = [&](int tile_index) {
#pragma unroll
    for (int k = 0; k < G::kCopies; ++k) {
      const int row = tile_index * kTileTokens + copy_row + k * G::kCopyRowStride;
      // Integer formats: the row compared with the span, not the token with t_end; the same
      // test, but ptxas then keeps cascade's int8 suffix pass (d 64) free of a spill, while the
      // float formats' loop is 5 % shorter the other way.
      const bool valid = is_int_kv(kKv) ? row < span : t_begin + row < t_end;
      block[k] = valid ? decode::block_of(p, table_seq, t_begin + row, block_shift) : 0;
    }
  };
  auto issue = [&](int tile_index) {
    unsigned char* k_dst = ring + (tile_index % kStages) * G::kStageBytes;
    unsigned char* v_dst = k_dst + G::kTileBytes;
#pragma unroll
    for (int k = 0; k < G::kCopies; ++k) {
      const int row = copy_row + k * G::kCopyRowStride;
      const int t = t_begin + tile_index * kTileTokens + row;
      const bool valid = t < t_end;  // past the end: zero-filled, nothing read
      const std::size_t off =
          valid ? kv_row_offset(block[k], kv_head, t & slot_mask, p.num_kv_heads, p.block_size, 1) *
                          G::kRowBytes +
                      copy_byte
                : 0;
      const int dst = row * G::kSmemRowBytes + copy_byte;
      dev::cp_async<16>(k_dst + dst, k_base + off, valid ? 16 : 0);
      dev::cp_async<16>(v_dst + dst, v_base + off, valid ? 16 : 0);
    }
  };

  // This warp's state for query rows lane / 4 + 8 h: running max (log2 domain), this lane's
  // part of the sum, and O: n8 tile n holds dims 8n + 2 (lane % 4) + {0, 1} of row lane / 4 + 8 h
  // in o[n][2h + {0, 1}] (C registers 2h, 2h + 1; with 8 rows, registers 2, 3 are padding).
  float m_run[kHalves];
  float l_run[kHalves];
  float o[G::kNTiles][kC];
  // int4 values: the zero term sum_t p_t z(t, group) per (row, group): C of one n8 tile whose
  // columns are the scale groups (up to 8: d <= 256), rescaled with O and added to it at the end.
  constexpr bool kVZeros = is_int4_kv(kKv);
  float z_acc[kC];
#pragma unroll
  for (int i = 0; i < kC; ++i) z_acc[i] = 0.f;
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    m_run[h] = -INFINITY;
    l_run[h] = 0.f;
  }
#pragma unroll
  for (int n = 0; n < G::kNTiles; ++n) {
#pragma unroll
    for (int i = 0; i < kC; ++i) o[n][i] = 0.f;
  }
  const float scale = decode::score_scale_log2(p);

#pragma unroll 1
  for (int s = 0; s < kStages - 1; ++s) {
    fetch_blocks(s);
    if (s < num_tiles) issue(s);
    dev::cp_async_commit();
  }
  fetch_blocks(kStages - 1);

#pragma unroll 1
  for (int i = 0; i < num_tiles; ++i) {
    dev::cp_async_wait<kStages - 2>();
    __syncthreads();  // tile i visible to all; everyone is done with tile i - 1
    const int next = i + kStages - 1;
    if (next < num_tiles) issue(next);
    dev::cp_async_commit();
    fetch_blocks(next + 1);

    const int warp_first = t_begin + i * kTileTokens + warp * kWarpTokens;  // first token
    if (warp_first >= t_end) continue;  // warp-uniform: nothing of this warp's is valid
    const unsigned char* k_rows =
        ring + (i % kStages) * G::kStageBytes + warp * kWarpTokens * G::kSmemRowBytes;
    const unsigned char* v_rows = k_rows + G::kTileBytes;

    // S = Q K^T over 16 tokens: halves j = 0 (tokens 0..7) and 1 (8..15).
    float s[2][kC];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int c = 0; c < kC; ++c) s[j][c] = 0.f;
    }
    // acc += q K^T for k-step ks (q as hi, and lo when split).
    const auto mma_qk = [&](int ks, const dev::FragB(&kb)[2], float(&acc)[2][kC]) {
      dev::FragA qa;
      if constexpr (kHalves == 1) {
        qa = load_q_fragment<kHeadDim>(q_hi, ks, lane);
      } else {
        qa = load_q_fragment16<kHeadDim>(q_hi, ks, lane);
      }
      mma_live_rows<kMma>(qa, kb[0], acc[0]);
      mma_live_rows<kMma>(qa, kb[1], acc[1]);
      if (q_split) {  // block-uniform
        dev::FragA ql;
        if constexpr (kHalves == 1) {
          ql = load_q_fragment<kHeadDim>(q_lo, ks, lane);
        } else {
          ql = load_q_fragment16<kHeadDim>(q_lo, ks, lane);
        }
        mma_live_rows<kMma>(ql, kb[0], acc[0]);
        mma_live_rows<kMma>(ql, kb[1], acc[1]);
      }
    };
    if constexpr (!is_int_kv(kKv)) {
#pragma unroll
      for (int ks = 0; ks < G::kKSteps; ++ks) {
        dev::FragB kb[2];
        load_k_fragments<kKv, kHeadDim>(k_rows, ks, lane, kb);
        mma_qk(ks, kb, s);
      }
    }
    // The integer formats' scales: half j of the warp's tokens (8 tokens, 8-aligned) lies in one
    // block (P >= 8); rows (block, head, token) of this lane's C columns are row0[j] + e.
    int blk[2] = {0, 0};
    std::size_t row0[2] = {0, 0};
    if constexpr (is_int_kv(kKv)) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int t0 = warp_first + 8 * j;
        blk[j] = t0 < t_end ? decode::block_of(p, table_seq, t0, block_shift) : 0;  // in bounds
        row0[j] = (static_cast<std::size_t>(blk[j]) * p.num_kv_heads + kv_head) * p.block_size +
                  static_cast<unsigned>((t0 & slot_mask) + 2 * (lane % 4));
      }
    }
    // Is the token of C column (j, e) of this lane in range?
    const auto live = [&](int j, int e) { return warp_first + 8 * j + 2 * (lane % 4) + e < t_end; };
    if constexpr (is_int_kv(kKv)) {
      // K through ldmatrix: matrix m = lane / 8 is token half m % 2 of chunk u + m / 2, so a
      // lane's word w[2 cu + j] holds 4 bytes of token 8 j + lane / 4, chunk u + cu.
      const int m = lane / 8;
      const unsigned char* k_addr = k_rows + ((m & 1) * 8 + lane % 8) * G::kSmemRowBytes;
#pragma unroll
      for (int u = 0; u < G::kChunks; u += 2) {
        std::uint32_t w[4];
        dev::ldmatrix<4>(w, k_addr + (u + (m >> 1)) * 16);
#pragma unroll
        for (int cu = 0; cu < 2; ++cu) {
          const int chunk = u + cu;
          if constexpr (kKv == DType::int8) {
            dev::FragB kb[2];
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              const std::uint32_t biased = w[2 * cu + j] ^ 0x80808080u;
              kb[j].reg[0] = int8_pair(biased, 0x4140u);  // bytes 0, 1
              kb[j].reg[1] = int8_pair(biased, 0x4342u);  // bytes 2, 3
            }
            mma_qk(chunk, kb, s);
          } else if constexpr (kKv == DType::int4) {
            // Per (block, channel) s and z, the block being half j's: S = (q * s) . codes +
            // q . z. The lane's A (q) elements sit at the same k as its B (K) elements, so the
            // scale pairs it loads for its K bytes are those of its q elements: q * s is formed
            // in fp32 (exact) and split hi + lo, one A per half; q . z is one more MMA of q with
            // B = z broadcast over the half's 8 token columns (z is f16: exact). Byte k of the
            // word is channels 32 chunk + 8 (lane % 4) + 2k + {0, 1}.
            std::size_t at[2];  // this lane's first channel of the chunk in half j's block
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              at[j] = (static_cast<std::size_t>(blk[j]) * p.num_kv_heads + kv_head) * kHeadDim +
                      32 * chunk + 8 * (lane % 4);
            }
#pragma unroll
            for (int st = 0; st < 2; ++st) {
              const int ks = 2 * chunk + st;
              // q of this lane's A registers: reg r is row lane / 4 + 8 (r % 2), k group r / 2
              // (B register r / 2); rows 8.. only with 16 live rows.
              dev::FragA qa;
              dev::FragA ql;
              if constexpr (kHalves == 1) {
                qa = load_q_fragment<kHeadDim>(q_hi, ks, lane);
                ql = q_split ? load_q_fragment<kHeadDim>(q_lo, ks, lane) : dev::FragA{};
              } else {
                qa = load_q_fragment16<kHeadDim>(q_hi, ks, lane);
                ql = q_split ? load_q_fragment16<kHeadDim>(q_lo, ks, lane) : dev::FragA{};
              }
#pragma unroll
              for (int j = 0; j < 2; ++j) {
                const auto* s32 = reinterpret_cast<const std::uint32_t*>(p.k_scales + at[j]);
                const auto* z32 = reinterpret_cast<const std::uint32_t*>(p.k_zeros + at[j]);
                dev::FragB kb;
                kb.reg[0] = int4_byte(w[2 * cu + j], 2 * st);
                kb.reg[1] = int4_byte(w[2 * cu + j], 2 * st + 1);
                dev::FragB zb;  // s and z of byte 2 st + g: the channels of B register g
                zb.reg[0] = z32[2 * st];
                zb.reg[1] = z32[2 * st + 1];
                dev::FragA a_hi;
                dev::FragA a_lo;
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                  if (kHalves == 1 && r % 2 == 1) {
                    a_hi.reg[r] = a_lo.reg[r] = 0u;
                    continue;
                  }
                  float2 q = unpack2<kMma>(qa.reg[r]);
                  if (q_split) {
                    const float2 lo = unpack2<kMma>(ql.reg[r]);
                    q.x += lo.x;
                    q.y += lo.y;
                  }
                  const float2 sk = unpack2<DType::f16>(s32[2 * st + r / 2]);
                  split2<kMma>(q.x * sk.x, q.y * sk.y, a_hi.reg[r], a_lo.reg[r]);
                }
                mma_live_rows<kMma>(a_hi, kb, s[j]);
                mma_live_rows<kMma>(a_lo, kb, s[j]);
                mma_live_rows<kMma>(qa, zb, s[j]);
                if (q_split) mma_live_rows<kMma>(ql, zb, s[j]);
              }
            }
          } else {
            // int4_token: per (token, group) s and z, the group being this chunk. S gets
            // s(t, g) (q_g . codes) + z(t, g) sum(q_g), the codes exact in the MMA.
            float sg[2][kC];
#pragma unroll
            for (int j = 0; j < 2; ++j) {
#pragma unroll
              for (int c = 0; c < kC; ++c) sg[j][c] = 0.f;
            }
#pragma unroll
            for (int st = 0; st < 2; ++st) {
              dev::FragB kb[2];
#pragma unroll
              for (int j = 0; j < 2; ++j) {
                kb[j].reg[0] = int4_byte(w[2 * cu + j], 2 * st);
                kb[j].reg[1] = int4_byte(w[2 * cu + j], 2 * st + 1);
              }
              mma_qk(2 * chunk + st, kb, sg);
            }
#pragma unroll
            for (int j = 0; j < 2; ++j) {
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const std::size_t at = (row0[j] + e) * G::kGroups + chunk;
                const float ks = load_f16(p.k_scales, at);
                const float kz = load_f16(p.k_zeros, at);
#pragma unroll
                for (int h = 0; h < kHalves; ++h) {
                  const float qs = q_sums[(lane / 4 + 8 * h) * G::kGroups + chunk];
                  s[j][2 * h + e] += sg[j][2 * h + e] * ks + kz * qs;
                }
              }
            }
          }
        }
      }
      if constexpr (kKv == DType::int8) {
        // Per (token, head) scale: S column t times s_K(t).
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const float2 ks = load_f16x2(p.k_scales, row0[j]);
#pragma unroll
          for (int h = 0; h < kHalves; ++h) {
            s[j][2 * h] *= ks.x;
            s[j][2 * h + 1] *= ks.y;
          }
        }
      }
    }

    // Online softmax of rows lane / 4 + 8 h over their tokens j 8 + 2 (lane % 4) + e.
    float w[2][kC];
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      float sc[2][2];
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int t = warp_first + j * 8 + 2 * (lane % 4) + e;
          sc[j][e] = t < t_end ? s[j][2 * h + e] * scale : -INFINITY;
          tile_max = fmaxf(tile_max, sc[j][e]);
        }
      }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      // Token warp_first is valid, so tile_max is finite and so is m_new.
      const float m_new = fmaxf(m_run[h], tile_max);
      const float factor = dev::fast_exp2(m_run[h] - m_new);  // m_run = -inf -> 0
      m_run[h] = m_new;
      l_run[h] *= factor;
#pragma unroll
      for (int n = 0; n < G::kNTiles; ++n) {
        o[n][2 * h] *= factor;
        o[n][2 * h + 1] *= factor;
      }
      if constexpr (kVZeros) {
        z_acc[2 * h] *= factor;
        z_acc[2 * h + 1] *= factor;
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          w[j][2 * h + e] = dev::fast_exp2(sc[j][e] - m_new);  // masked: exp2(-inf) = 0
          l_run[h] += w[j][2 * h + e];
        }
      }
    }
    // P as the A fragment (rows = query rows, k = the 16 tokens), split into hi + lo: registers
    // 0 and 2 are rows 0..7 (tokens 0..7, 8..15), 1 and 3 rows 8..15.
    const auto split_p = [&](const float(&wt)[2][kC], dev::FragA& p_hi, dev::FragA& p_lo) {
      if constexpr (kHalves == 1) p_hi.reg[1] = p_hi.reg[3] = p_lo.reg[1] = p_lo.reg[3] = 0u;
      split2<kMma>(wt[0][0], wt[0][1], p_hi.reg[0], p_lo.reg[0]);
      split2<kMma>(wt[1][0], wt[1][1], p_hi.reg[2], p_lo.reg[2]);
      if constexpr (kHalves == 2) {
        split2<kMma>(wt[0][2], wt[0][3], p_hi.reg[1], p_lo.reg[1]);
        split2<kMma>(wt[1][2], wt[1][3], p_hi.reg[3], p_lo.reg[3]);
      }
    };
    if constexpr (!is_int_kv(kKv)) {
      dev::FragA p_hi;
      dev::FragA p_lo;
      split_p(w, p_hi, p_lo);
#pragma unroll
      for (int n = 0; n < G::kNTiles; n += 2) {
        dev::FragB vb[2];
        load_v_fragments<kKv, kHeadDim>(v_rows, n, lane, vb);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          mma_live_rows<kMma>(p_hi, vb[j], o[n + j]);
          mma_live_rows<kMma>(p_lo, vb[j], o[n + j]);
        }
      }
    } else {
      // V's scale is folded into P's weights (p_t s(t), or p_t s(t, g) per group g: fp32, then
      // hi + lo), so the codes enter the MMA exact; int4's zeros are sum_t p_t z(t, g), one more
      // pair of MMAs into z_acc. Masked tokens (p = 0) take s = z = 0.
      const int m = lane / 8;
      const unsigned char* v_addr = v_rows + ((m & 1) * 8 + lane % 8) * G::kSmemRowBytes;
      if constexpr (kKv == DType::int8) {
        float wt[2][kC];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const float2 vs = load_f16x2(p.v_scales, row0[j]);
#pragma unroll
          for (int h = 0; h < kHalves; ++h) {
            wt[j][2 * h] = live(j, 0) ? w[j][2 * h] * vs.x : 0.f;
            wt[j][2 * h + 1] = live(j, 1) ? w[j][2 * h + 1] * vs.y : 0.f;
          }
        }
        dev::FragA p_hi;
        dev::FragA p_lo;
        split_p(wt, p_hi, p_lo);
#pragma unroll
        for (int u = 0; u < G::kChunks; u += 2) {
          std::uint32_t x[4];  // x[2 cu + j]: chunk u + cu, token half j
          dev::ldmatrix<4, /*kTranspose=*/true>(x, v_addr + (u + (m >> 1)) * 16);
#pragma unroll
          for (int cu = 0; cu < 2; ++cu) {
#pragma unroll
            for (int par = 0; par < 2; ++par) {  // tile 2 (u + cu) + par: even or odd channels
              dev::FragB vb;
#pragma unroll
              for (int j = 0; j < 2; ++j) {
                vb.reg[j] = int8_pair(x[2 * cu + j] ^ 0x80808080u, par == 0 ? 0x4240u : 0x4341u);
              }
              mma_live_rows<kMma>(p_hi, vb, o[2 * (u + cu) + par]);
              mma_live_rows<kMma>(p_lo, vb, o[2 * (u + cu) + par]);
            }
          }
        }
      } else {
        {
          // B of the zero term: k = this lane's tokens, n = group lane / 4.
          const int g = lane / 4;
          dev::FragB zb;
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            float z[2] = {0.f, 0.f};
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              if (g < G::kGroups && live(j, e)) {
                z[e] = load_f16(p.v_zeros, (row0[j] + e) * G::kGroups + g);
              }
            }
            zb.reg[j] = pack2<DType::f16>(z[0], z[1]);  // f16 values: exact
          }
          dev::FragA p_hi;
          dev::FragA p_lo;
          split_p(w, p_hi, p_lo);
          mma_live_rows<kMma>(p_hi, zb, z_acc);
          mma_live_rows<kMma>(p_lo, zb, z_acc);
        }
#pragma unroll
        for (int u = 0; u < G::kChunks; u += 2) {
          std::uint32_t x[4];  // x[2 cu + j]: chunk (group) u + cu, token half j
          dev::ldmatrix<4, /*kTranspose=*/true>(x, v_addr + (u + (m >> 1)) * 16);
#pragma unroll
          for (int cu = 0; cu < 2; ++cu) {
            const int chunk = u + cu;
            float wt[2][kC];
#pragma unroll
            for (int j = 0; j < 2; ++j) {
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const float vs =
                    live(j, e) ? load_f16(p.v_scales, (row0[j] + e) * G::kGroups + chunk) : 0.f;
#pragma unroll
                for (int h = 0; h < kHalves; ++h) wt[j][2 * h + e] = w[j][2 * h + e] * vs;
              }
            }
            dev::FragA p_hi;
            dev::FragA p_lo;
            split_p(wt, p_hi, p_lo);
#pragma unroll
            for (int nib = 0; nib < 4; ++nib) {  // tile 4 chunk + nib: channels 32 chunk + 4c + nib
              dev::FragB vb;
              vb.reg[0] = int4_nibbles(x[2 * cu], nib);
              vb.reg[1] = int4_nibbles(x[2 * cu + 1], nib);
              mma_live_rows<kMma>(p_hi, vb, o[4 * chunk + nib]);
              mma_live_rows<kMma>(p_lo, vb, o[4 * chunk + nib]);
            }
          }
        }
      }
    }
  }
  dev::cp_async_wait_all();  // only empty groups can be left

  if constexpr (kVZeros) {
    // O[row][ch] += Z[row][group of ch]; Z[row][g] is C column g of z_acc, held by lane
    // 4 (lane / 4) + g / 2, register 2h + g % 2.
#pragma unroll
    for (int g = 0; g < G::kGroups; ++g) {
#pragma unroll
      for (int h = 0; h < kHalves; ++h) {
        const float z = __shfl_sync(0xffffffffu, z_acc[2 * h + g % 2], (lane & ~3) | (g / 2));
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          o[4 * g + i][2 * h] += z;
          o[4 * g + i][2 * h + 1] += z;
        }
      }
    }
  }

  // Merge the 4 warps' states of each row and hand every (row, dim) to `store`.
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 1);
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 2);
  }
  __syncthreads();  // every warp is done with the ring, which the merge buffers alias
  float* merge_o = reinterpret_cast<float*>(smem);            // [warp][row][d]
  float* merge_stats = merge_o + kWarps * kMRows * kHeadDim;  // [warp][row][2]
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    const int row = lane / 4 + 8 * h;
    if (lane % 4 == 0) {
      merge_stats[(warp * kMRows + row) * 2] = m_run[h];
      merge_stats[(warp * kMRows + row) * 2 + 1] = l_run[h];
    }
#pragma unroll
    for (int n = 0; n < G::kNTiles; ++n) {
      float* dst = merge_o + (warp * kMRows + row) * kHeadDim;
      dst[o_channel<kKv>(n, 2 * (lane % 4))] = o[n][2 * h];
      dst[o_channel<kKv>(n, 2 * (lane % 4) + 1)] = o[n][2 * h + 1];
    }
  }
  __syncthreads();
  for (int idx = tid; idx < live_rows * kHeadDim; idx += kThreads) {
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

template <DType kKv, int kHeadDim>
__global__ void __launch_bounds__(kThreads) tc_kernel(const __grid_constant__ PagedDecodeParams p) {
  DECODEBENCH_DYNAMIC_SHARED(unsigned char, smem);
  const int kv_head = static_cast<int>(blockIdx.x);
  const int seq = static_cast<int>(blockIdx.y);
  const int split = static_cast<int>(blockIdx.z);
  const int group = p.num_q_heads / p.num_kv_heads;
  // The split's range, in whole units of kv_tile_tokens(d) as split_kv cuts it.
  int t_begin = 0;
  int t_end = 0;
  split_range(0, p.context_lens[seq], kv_tile_tokens(kHeadDim), p.num_splits, split, t_begin,
              t_end);
  const std::size_t head0 = static_cast<std::size_t>(seq) * p.num_q_heads +
                            static_cast<std::size_t>(kv_head) * group;  // first q row
  const bool to_workspace = p.num_splits > 1;
  attend<kKv, kHeadDim, kRows>(
      p, smem, kv_head, seq, t_begin, t_end, group, [&](int r) { return head0 + r; },
      [&](int h, int d, float value, const SoftmaxState<float>& state) {
        if (to_workspace) {
          // [batch][Hq][num_splits][d], [batch][Hq][num_splits]
          p.partial_out[((head0 + h) * p.num_splits + split) * kHeadDim + d] = value;
          if (d == 0) {
            p.partial_lse[(head0 + h) * p.num_splits + split] =
                state.sum > 0.f ? state.log2_sum_exp2() : -INFINITY;
          }
        } else {
          dev::store_out(p.out, p.q_dtype, static_cast<int>((head0 + h) * kHeadDim + d), value);
        }
      });
}

}  // namespace tc_detail

// What launch_tc launches for `p` (kernels::launch_shape): the tensor-core kernel; it has no
// group cap (every group up to 8 is one padded MMA).
template <DType kKvDtype, int kHeadDim>
LaunchShape shape_tc(const PagedDecodeParams& p) {
  return dev::launch_shape_of((tc_detail::tc_kernel<kKvDtype, kHeadDim>), "tc_kernel",
                              /*group_cap=*/0, split_kv_detail::split_grid(p),
                              dim3(tc_detail::kThreads),
                              tc_detail::Geometry<kKvDtype, kHeadDim>::kBytes);
}

// Same tensors, limits and workspace as launch_split_kv (group <= 8, num_splits in 1..65535,
// checked once by unsupported_reason). One split writes `out` directly; more launch split_kv's
// merge kernel.
template <DType kKvDtype, int kHeadDim>
LaunchResult launch_tc(const PagedDecodeParams& p, void* stream) {
  LaunchResult main = DECODEBENCH_LAUNCH(
      (tc_detail::tc_kernel<kKvDtype, kHeadDim>), split_kv_detail::split_grid(p),
      dim3(tc_detail::kThreads), (tc_detail::Geometry<kKvDtype, kHeadDim>::kBytes), stream, p);
  if (!main.ok() || p.num_splits == 1) return main;
  const dim3 merge_grid(static_cast<unsigned>(p.num_q_heads), static_cast<unsigned>(p.batch));
  return DECODEBENCH_LAUNCH((split_kv_detail::merge_kernel<kHeadDim>), merge_grid,
                            dim3(split_kv_detail::kMergeThreads), 0, stream, p);
}

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode
