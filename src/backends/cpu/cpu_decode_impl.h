// Templates behind cpu_decode.h. Instantiated once per KV dtype in a generated translation unit
// (src/backends/cpu/CMakeLists.txt), each for head_dim 64/128/256 and both tile-kernel paths.
//
// Napkin math for the target point (llama-3.1-8b: Hq 32, Hkv 8, d 128, fp16 KV, g = 4):
// one (token, KV head) row brings 256 bytes of K and 256 of V and costs 4 * 128 * 2 = 1024 FMAs
// = 64 zmm FMAs, 16 vcvtph2ps and 4 score reductions: >= 32 cycles per 512 bytes on two FMA
// pipes, i.e. at most ~65 GB/s per core at 4.2 GHz against DRAM that gives the 2-vCPU VMs
// 10-45 GB/s per core. Compute has little headroom over memory, so: every K/V element is
// converted once and serves all g heads (one pass per row), score reductions go 16 at a time
// through a transpose tree instead of one horizontal sum each, accumulator chains are long
// enough (g x unroll >= 8) to hide FMA latency, block-table lookups happen once per block, and
// memory is walked in the order it lies in (see the driver) with software prefetches spread
// over the arithmetic.
//
// What was tried at the target point (llama-3.1-8b, fp16, batch 8, context 8192), each as an
// A/B in one process on a shared, noisy machine (rough numbers):
//   2-vCPU Sapphire Rapids VM, (sequence, KV head) work items:
//     kept:     software prefetch of the next tile (+30 %); prefetch into L2 rather than L1
//               (+5 %); 64-token tiles instead of 32 (+15 %); huge pages for K/V (~+25 %,
//               noisy); score reductions 16 at a time (+20 % in cache); V accumulated in slices
//               of d (+3 %).
//     rejected: fewer prefetched lines or rows, one accumulator chain, pairing tokens to share
//               q loads, 128-token tiles.
//   2-vCPU AMD EPYC Zen 5 VM (read ceiling flips between ~50 and ~88 GB/s within seconds; the
//   in-cache arithmetic alone costs ~14 ns per row and thread):
//     kept:     (sequence, split) items walking every KV head of a block in turn (37 -> 29 ns
//               per row and thread); V prefetches spread over the accumulate slices instead of
//               issued with K (-> 24-27 ns); 32-token tiles instead of 64 (~5 % faster when
//               memory is fast, equal when slow), then 48 (~3 %); fp8 through byte tables
//               (-20 % step time); the online softmax in intrinsics (vscalefps; ~2 % in cache,
//               ~1-3 % from DRAM with 48-token tiles); the first 2 lines of each block's K and
//               V requested a tile ahead (kBlockStartLines; 3-16 % when memory is fast,
//               not reproduced by a later rotated-order A/B: see there); later (2026-11-30,
//               fourth session, rotated order): every prefetch into L1 (prefetcht0) instead
//               of L2 (prefetcht1), 5-7 % faster when memory is fast, 1-2 % when slow
//               (kPrefetchLocality), and then 64-token tiles again (1.7-4 % when fast, see
//               kAvx512TileTokens).
//     rejected: prefetching 2 or 4 units ahead, locality hints 0/1/3 (with the earlier, fixed-
//               order harness; prefetcht0 later won the rotated A/B above), an exactly even line
//               cursor for the prefetches (its bookkeeping cost more than it saved), pairing
//               tokens, q held in registers for two heads at a time, scores reduced in a running
//               tree instead of from a stored 16-vector block, one accumulator chain, 16-token
//               tiles, scores / softmax / accumulate in 16-token sub-steps of a unit so K and V
//               reads interleave (+14 % in cache, nothing from DRAM); later (2026-11-30):
//               one dot-product chain per head, token pairs sharing q loads, the score pass
//               out of line (all within +-1 cycle of ~25 per row in cache, the noise), 4 or 8
//               block-start lines or two tiles ahead (no better than 2 lines one tile ahead),
//               K and V of the next unit each spread over both passes (up to 50 % slower),
//               the next unit's K requested during the accumulate and V during the scores
//               (3-6 % slower), a second, near prefetch into L1 8-24 rows ahead (2-7 % faster
//               with slow memory, none with fast, ~3 % slower in cache), every sequence's
//               blocks walked in address order (no difference), a pool-order walk (each thread
//               a contiguous half of the block pool in address order, one block per tile,
//               per-sequence states merged across threads as the splits are: 20.2-21.3 ns per
//               row and thread against 19.3-19.9 for this kernel with fast memory; one-block
//               tiles in the usual order 20.4-22.5); later still (2026-11-30, third session):
//               fp16 -> fp32 by integer unpack, shift and ternlog with 2^112 folded into q
//               instead of vcvtph2ps (34 vs 34-35 cycles per row in a score-pass microbench:
//               the conversion is not the cost), q held in registers for half of d at a time,
//               two passes over each 16-token group (5.3-5.7 vs 5.2 ns per row in cache: the
//               load ports are not the limit either); in A/B rounds that always ran this
//               kernel first (which turned out to put the first-run variant 2-5 % behind, so
//               these were if anything flattered): both threads on every item, each taking
//               half of the KV heads so they read the same blocks at the same time (decode 2 %
//               faster and walk 6 % slower with slow memory, both slower in 6 fast-memory
//               rounds), the next tile's blocks requested a whole tile ahead in block order, K
//               and V lines alternating (the order of the bench's layout_read/whole_blocks,
//               the fastest pure read of these blocks: decode 58 vs 70 % of the read ceiling
//               in 5 fast rounds); with the variants' order rotated every round: one-block
//               (16-token) tiles (walk 8-10 % faster, decode equal with slow memory and 7-12 %
//               slower with fast; from L3 the tile size costs only ~1.5 %), and the first 2
//               lines of every (block, KV head) piece requested 1-4 tiles ahead instead of
//               kBlockStartLines (within 1 % of it and of no block-start lines at all, 250
//               rounds; in fixed-order rounds it had looked 3-5 % faster). Fourth session
//               (2026-11-30, rotated order): with the prefetches into L1, the next unit's rows
//               requested 2 units ahead (1.5 % slower when fast) and no block-start lines (2 %
//               faster when fast in 147 fast rounds with 48-token tiles, but 1.8 % slower in
//               357 later ones with 64, and 1.6-2.3 % slower when slow: kept); 16-token tiles
//               (5-12 % slower when fast, with prefetcht1 at distances of 1-8 units and with
//               prefetcht0 at 1);
//               with prefetcht1, a 48-token tile whose K rows are all scored and then its V rows
//               all accumulated in memory order (block by block, every KV head), each phase
//               prefetching the other's rows: the same arithmetic in cache (+4-7 %), but 10 %
//               slower from DRAM when memory is slow and 25 % when fast. With prefetcht0 and
//               64-token tiles: each unit's V rows requested during its own score pass and the
//               next unit's K during the accumulate (half the distance, half the L1 footprint:
//               10-19 % slower when fast); only every other line prefetched, leaving the rest to
//               the hardware prefetchers (1.6x the step time when slow, 2.4x when fast); a
//               second prefetch of every line into L2 (prefetcht1) 2 or 3 units ahead on top of
//               the prefetcht0 one unit ahead (4 % faster when slow, 0.3-1 % slower when fast,
//               342 and 358 rounds: not taken, the fast regime is the one short of the target).
//               Fifth session (2026-11-30; the clock measures 3.9-4.1 GHz under zmm FMA load on
//               both cores, not 4.2): a score pass that loads each q chunk once per 16 / kNH
//               tokens (kNH x 16 / kNH accumulators, one transpose tree per token group: ~16
//               loads per row instead of ~44) took 22 cycles per row on L1-resident rows, like
//               this one, and made the warm decode (rows in L2 or L3) 11-25 % slower (its masked
//               score stores defeat store forwarding into the softmax); the softmax of a pass's
//               heads issued side by side instead of head after head (bit-identical output; 2 %
//               slower cold with fast memory, 34 rotated rounds); two heads per vector (q of
//               heads h and h+1 in the two halves, each 8 K elements converted into both, a
//               3-level tree for 32 scores: half the shuffles per score, twice the vcvtph2ps):
//               25 cycles per row on L1-resident rows against 20-21 for the same microbench of
//               this kernel's scheme; the next tile's blocks requested into L2 (prefetcht1) in
//               block order, K and V lines alternating (the whole_blocks order), 8 lines per row
//               a tile ahead: instead of the per-unit prefetches 1.56x the step time with fast
//               memory and 1.22x with slow, on top of them 1.23x and 1.05x (40 rotated rounds);
//               pieces software-pipelined as softmax(w), scores(w + 1), accumulate(w), so that
//               the softmax's dependent chain overlaps the next piece's score FMAs (bit-identical
//               output): in a scratch copy 0-2.3 % faster than its baseline compiled in the same
//               translation unit (9 fast-memory batches of 4-38 rounds), written into this file
//               and compiled in its own translation unit as the library is 1.3-3.2 % slower than
//               this kernel compiled the same way (4 batches of 12-21 rounds). The same code
//               compiled in another translation unit moves the step by 1-3 %, so neither is a
//               gain: not taken. Bounds from knocking parts out (wrong output, cold, fast memory,
//               38-60 rounds): without the softmax the step takes 4-7 % less, without the score
//               tree 0-2.5 % less, without both 4-5 % less.
//   Where the score pass's ~22 cycles per row go (fifth session; one thread, L1-resident rows,
//   fixed row pointers, cycles at 4.0 GHz): its FMAs with their conversions and q loads alone
//   16.2-17, i.e. FMA-bound (loads issue at 2 per cycle, 256- or 512-bit, and are not the limit);
//   the first level of the transpose tree adds 1.6 and the whole tree ~4, also when its levels
//   are interleaved by hand with the next group's FMAs, or when levels 1 and 2 are built from
//   two blends and one in-lane permute per output instead of two shuffles. With K already in
//   fp32 (plain loads, no conversion) the same tree adds only 0.2-0.8: the tree competes with
//   the fp16 -> fp32 conversions, not with the FMAs. vcvtph2ps zmm issues ~1.25 per cycle and
//   shares its pipes with vaddps; converting by sign-extend, shift and mask instead is no
//   better (17.3-18 without the tree, 21.7-22.3 with it). In L2 (one thread, slope between
//   contexts of 64 and 192 tokens, knocking each part out): scores ~25, accumulate ~18, softmax
//   ~3-5 and the prefetch instructions ~8 cycles per row.
//   Where a step goes on the Zen 5 VM when memory is fast (~72-78 GB/s sequential read), ns per
//   row and thread: the arithmetic alone ~14 in cache (~55-58 cycles at 4.0-4.2 GHz; out of the
//   driver, on L2-resident rows, the score pass takes ~25 cycles per row and the accumulate
//   ~18, against 16 each for their FMAs at 2 per cycle); the same memory walk with no
//   arithmetic (one load per line, the same prefetches; now ReadOnlyTile below) ~17-18, i.e.
//   the paged layout itself reads at ~76-82 % of a sequential read, ~83-90 % with the blocks in
//   order; the whole step ~20.5-21. The bench's paged_read (README) measured the same split.
//   With prefetcht0 and 64-token tiles (fourth session), fast memory at 70-84 GB/s: the step
//   ~18-20.5 (4.73-5.43 ms), the arithmetic from L3 ~14.5-16 (the slope between warm contexts
//   of 48 and 2016 tokens), a sequential read of the step's bytes ~13 at 80 GB/s, the blocks
//   read whole at ~0.87 of it: the arithmetic alone now takes longer than the bytes, and the
//   bare walk (ReadOnlyTile) no longer bounds the step (README).
// Results: README, "Measured numbers".
#pragma once

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "common/float_formats.h"
#include "common/paged_kv.h"
#include "common/softmax_state.h"
#include "kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define DECODEBENCH_CPU_AVX512 1
#else
#define DECODEBENCH_CPU_AVX512 0
#endif

namespace decodebench::cpu::detail {

using kernels::PagedDecodeParams;

using ::decodebench::kLog2e;  // common/math.h, through common/softmax_state.h
inline constexpr int kMaxPassHeads = 8;  // query heads served together by one tile pass

// Tokens per tile. Per-tile costs (one scalar exp2 per head for the running-max rescale, a
// block-table lookup per block) are amortized over the tile, and one tile of one KV head (a
// unit) is the prefetch distance (the next unit's rows are requested while this one is computed).
//   portable: 4096 / d tokens, so the tile's K and V rows converted to fp32 (2 x 16 KiB) stay
//             in L1;
//   avx512:   8192 / d tokens, rounded up to a multiple of 16 (score groups): 64 at d = 128, a
//             unit's fp16 K and V 32 KiB. With the prefetches into L2 (prefetcht1), 32 tokens
//             were ~5 % faster than 64 on the Zen 5 VM when memory was fast (equal when slow),
//             and 48 another ~3 % faster than 32 in both regimes: a unit and the next one,
//             prefetched meanwhile, about filled its 48 KiB L1. Since the prefetches go to L1
//             (kPrefetchLocality), 64 has been 1.7-4 % faster than 48 with fast memory in three
//             rotated-order A/B runs (112-147 fast rounds each; 1 % slower in a fourth with 9)
//             and ~0.5 % slower with slow memory; 80 and 96 no better. On Sapphire Rapids, with one
//             KV head per item, 64 had been ~15 % faster than 32.
template <int kHeadDim>
inline constexpr int kPortableTileTokens = 4096 / kHeadDim;
template <int kHeadDim>
inline constexpr int kAvx512TileTokens = (8192 / kHeadDim + 15) / 16 * 16;

// The K and V rows of one tile's tokens for KV head 0, found through the block table. The rows
// of KV head h are `h * head_stride` bytes further on: [num_blocks][Hkv][P][d] keeps the heads
// of one block next to each other.
template <int kTile>
struct TileRows {
  const std::byte* k[kTile];
  const std::byte* v[kTile];
  int n = 0;  // tokens in the tile (<= kTile); 0 = no tile
};

// One unit of work: the rows of one KV head in one tile.
template <int kTile>
struct TileUnit {
  const TileRows<kTile>* rows = nullptr;
  std::size_t offset = 0;  // bytes from the head-0 rows to this head's rows
  int n() const { return rows ? rows->n : 0; }
  const std::byte* k(int j) const { return rows->k[j] + offset; }
  const std::byte* v(int j) const { return rows->v[j] + offset; }
};

// The cache level the software prefetches fill: 3 = prefetcht0, into L1. AMD documents that
// from Zen 4 on prefetcht1/t2 fill L2 only, and a published Zen 4 measurement (Wang et al.,
// arXiv 2411.02814) finds them sometimes dropped. On the Zen 5 VM, A/B in one process with the
// variants' order rotated every round (2026-11-30, fourth session): with fast memory the step
// took 5.05 against 5.34 ms with prefetcht1 (60 rounds; 5.01 against 5.38 in another 112), and
// the bare walk (ReadOnlyTile) 4.54 against 5.18 ms; with slow memory 1-2 % less. Earlier, on
// the Sapphire Rapids VM and with the first kernel's (sequence, KV head) work items, prefetcht1
// had been ~5 % better than prefetcht0; not measured there since.
inline constexpr int kPrefetchLocality = 3;

// Physical blocks are scattered (a shuffled pool): every block is a fresh stretch on which the
// hardware prefetcher would have to ramp up again. The tile kernels therefore ask for the next
// unit's rows (the next KV head of this tile, or head 0 of the next tile) one row at a time,
// spread over the current unit's work: K rows during the first score pass, each slice of the
// first accumulate pass its share of the V rows' lines, so the requests trickle out instead of
// queueing up in a burst (bursts fill the core's miss buffers and stall the arithmetic behind
// them). On the Zen 5 VM, ns per row and thread, each an A/B in one process: K and V both in
// the score pass 29.4, V in the first accumulate slice 24.4; later, V in the first slice 29.3,
// V spread over both slices 26.5. An exactly even issue rate (a line cursor advanced every
// step) measured no better: its bookkeeping cost more than it saved. Without software
// prefetch the target point takes ~40 % longer on Sapphire Rapids and about twice as long on Zen 5.
//
// Every prefetch here is prefetcht0 (locality 3: into L1 and below), see kPrefetchLocality.
template <int kRowBytes>
inline void prefetch_row(const std::byte* row) {
  for (int offset = 0; offset < kRowBytes; offset += 64)
    __builtin_prefetch(row + offset, /*rw=*/0, /*locality=*/kPrefetchLocality);
}

// Lines requested at the start of each physical block's K and V stretch when the driver looks
// the block up, one tile before its rows are computed (the per-unit prefetches above reach a
// block only one unit ahead). Blocks are shuffled, so every block is a fresh region of memory;
// asking for its first lines early makes the later per-row prefetches into it cheaper. On the
// Zen 5 VM, A/B in one process, fast-memory regime: 3-16 % less step time in 14 of 15 runs
// (~23-25 -> ~20.5-21.5 ns per row and thread), 12 % more in one; no difference when memory
// is slow. 1 or 4 lines, one line per KV head, and two tiles ahead measured no better. Why it
// helps is not measured (no hardware counters on the VM): warming the TLB or the DRAM pages
// of the block before its burst of prefetches, or training the hardware prefetcher, are the
// candidates. A later A/B with the variants' order rotated every round (2026-11-30, 250 rounds,
// 111 of them with fast memory) found these lines, none at all, and the first 2 lines of every
// KV head's piece two tiles ahead within 1 % of each other: the gain above may have come from
// the order of its runs (on this VM a fixed order put 2-5 % on whichever variant ran first).
// With the prefetches into L1 (kPrefetchLocality) and 64-token tiles they count again: without
// them the step took 1.8 % longer with fast memory (357 rotated rounds) and 2.3 % with slow (543).
inline constexpr int kBlockStartLines = 2;

// ---------------------------------------------------------------------------------------------
// Scalar helpers shared by both paths
// ---------------------------------------------------------------------------------------------

// 2^x for x <= 0, written so the compiler vectorizes a loop of it: round-to-nearest by the
// 1.5 * 2^23 trick, a degree-6 polynomial for 2^f on [-0.5, 0.5] (Cephes exp2f coefficients,
// relative error ~2e-7), and the integer part added to the exponent field. Inputs below -125
// return 2^-125 instead of ~0; next to the running max's own term (exactly 1) that is noise.
// Highest degree first; shared with the AVX-512 softmax.
inline constexpr float kExp2Poly[7] = {1.535336188319500e-4f, 1.339887440266574e-3f,
                                       9.618437357674640e-3f, 5.550332471162809e-2f,
                                       2.402264791363012e-1f, 6.931472028550421e-1f, 1.0f};

inline float fast_exp2(float x) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  x = x < -125.0f ? -125.0f : x;
  const float r = x + kRound;            // the integer nearest x sits in r's low mantissa bits
  const float n = r - kRound;
  const float f = x - n;                 // [-0.5, 0.5]
  float poly = kExp2Poly[0];
  for (int i = 1; i < 7; ++i) poly = poly * f + kExp2Poly[i];
  const std::int32_t ni = static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(r) -
                                                    std::bit_cast<std::uint32_t>(kRound));
  const float scale = std::bit_cast<float>(static_cast<std::uint32_t>(ni + 127) << 23);
  return poly * scale;
}

// Folds one tile of scores of one head into its running state: raises the max (rescaling the
// accumulator when it moves), turns scores into probabilities in place, adds them to the sum.
template <int kHeadDim>
inline void softmax_update(float* __restrict s /*[n]*/, int n, SoftmaxState<float>& state,
                           float* __restrict acc /*[kHeadDim]*/) {
  float tile_max = -INFINITY;
#pragma omp simd reduction(max : tile_max)
  for (int j = 0; j < n; ++j) tile_max = s[j] > tile_max ? s[j] : tile_max;
  if (tile_max > state.max) {
    const float factor = state.raise_max(tile_max);
#pragma omp simd
    for (int c = 0; c < kHeadDim; ++c) acc[c] *= factor;
  }
  const float max = state.max;
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j < n; ++j) {
    s[j] = fast_exp2(s[j] - max);
    sum += s[j];
  }
  state.sum += sum;
}

// One stored KV element -> float, bit-exact (portable path, and tails).
template <DType kKv>
inline float decode_element(const std::byte* row, std::size_t i) {
  if constexpr (kKv == DType::f32) {
    float v;
    std::memcpy(&v, row + 4 * i, 4);
    return v;
  } else if constexpr (kKv == DType::f16 || kKv == DType::bf16) {
    std::uint16_t bits;
    std::memcpy(&bits, row + 2 * i, 2);
    return kKv == DType::f16 ? floatfmt::f16_to_float(bits) : floatfmt::bf16_to_float(bits);
  } else if constexpr (kKv == DType::fp8_e4m3) {
    return floatfmt::e4m3_to_float(static_cast<std::uint8_t>(row[i]));
  } else {
    return floatfmt::e5m2_to_float(static_cast<std::uint8_t>(row[i]));
  }
}

// ---------------------------------------------------------------------------------------------
// Portable tile kernels: convert the tile's rows to fp32 once, then plain loops.
// ---------------------------------------------------------------------------------------------
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

#if DECODEBENCH_CPU_AVX512
// ---------------------------------------------------------------------------------------------
// AVX-512 tile kernels: rows stay where they are and are converted in registers.
// ---------------------------------------------------------------------------------------------

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
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  } else if constexpr (kKv == DType::fp8_e5m2) {  // e5m2 is the top byte of an f16, exactly
    const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i)));
    return _mm512_cvtph_ps(_mm256_slli_epi16(w, 8));
  } else {
    // e4m3 -> f16 with the same bits moved: sign to bit 15, exponent+mantissa (7 bits) to bits
    // 13..7. The f16 then reads value * 2^-8 (exponent bias 15 vs 7), subnormals included, so
    // kLoadScale = 256 is folded into the softmax and output scales. 0x7f is e4m3's NaN.
    const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i)));
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
  alignas(64) std::uint8_t place[4][64];  // float 16 q + i <- bytes (lo, hi)[16 q + i] in bits 16..31
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
    const float value = kKv == DType::fp8_e4m3 ? floatfmt::e4m3_to_float(code) : floatfmt::e5m2_to_float(code);
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
  hi = _mm512_ternarylogic_epi32(hi, codes, _mm512_set1_epi8(static_cast<char>(0x80)), 0xf8);  // hi | (codes & 0x80)
  constexpr __mmask64 kTopHalves = 0xccccccccccccccccull;  // bytes 2 and 3 of every 32-bit lane
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q)
    out[q] = _mm512_castsi512_ps(_mm512_maskz_permutex2var_epi8(kTopHalves, lo, table(tables.place[q]), hi));
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

// Sixteen horizontal sums at once: lane i of the result is the sum of the 16 lanes of v[i].
// A transpose-and-add tree of 15 adds and 30 in-lane/cross-lane shuffles, ~3 operations per
// sum instead of the ~10 of one _mm512_reduce_add_ps per dot product.
inline __m512 sum16_transposed(const __m512* v) {
  __m512 t[8];  // per 128-bit lane: [v2i even, v2i+1 even, v2i odd, v2i+1 odd] partial sums
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  __m512 u[4];  // per 128-bit lane: that lane's sums of v4i .. v4i+3
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
    u[i] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0xee));
  // Fold the four 128-bit lanes: [u0 L0+L1, u0 L2+L3, u1 L0+L1, u1 L2+L3], then the totals.
  const __m512 w0 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xdd));
  const __m512 w1 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xdd));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w0, w1, 0x88), _mm512_shuffle_f32x4(w0, w1, 0xdd));
}

template <DType kKv, int kHeadDim>
struct Avx512Tile {
  static constexpr int kTile = kAvx512TileTokens<kHeadDim>;
  static constexpr int kChunks = kHeadDim / 16;  // zmm registers per row
  static constexpr float kLoadScale = kAvx512LoadScale<kKv>;
  static constexpr bool kArithmetic = true;
  static_assert(kChunks % 2 == 0, "scores use two accumulator chains per head");

  static constexpr int kRowBytes = kHeadDim * static_cast<int>(dtype_size(kKv));
  static constexpr int kLinesPerRow = kRowBytes / 64;

  TileUnit<kTile> unit;           // the rows being computed
  TileUnit<kTile> next;           // the rows requested meanwhile
  bool k_prefetch_pending = false;  // next's K rows: during the first scores pass
  bool v_prefetch_pending = false;  // next's V rows: spread over the accumulate slices

  // softmax_update in intrinsics: the tile's <= kTile scores in kTile / 16 registers, 2^x by
  // vrndscaleps + fast_exp2's polynomial + vscalefps (no integer detour), masks for a short tile.
  static void softmax(float* __restrict s, int n, SoftmaxState<float>& state, float* __restrict acc) {
    constexpr int kVecs = kTile / 16;
    __m512 x[kVecs];
    __mmask16 mask[kVecs];
    __m512 vmax = _mm512_set1_ps(-INFINITY);
#pragma GCC unroll 8
    for (int i = 0; i < kVecs; ++i) {
      const int left = n - 16 * i;
      mask[i] = left >= 16 ? __mmask16(0xffff) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
      x[i] = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), mask[i], s + 16 * i);
      vmax = _mm512_max_ps(vmax, x[i]);
    }
    const float tile_max = _mm512_reduce_max_ps(vmax);
    if (tile_max > state.max) {
      const __m512 factor = _mm512_set1_ps(state.raise_max(tile_max));
#pragma GCC unroll 16
      for (int c = 0; c < kHeadDim; c += 16) _mm512_storeu_ps(acc + c, _mm512_mul_ps(_mm512_loadu_ps(acc + c), factor));
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

  // Passes of 8, 4, 2, 1 heads: fixed trip counts keep every accumulator in a register.
  static int pass_width(int remaining) {
    return remaining >= 8 ? 8 : remaining >= 4 ? 4 : remaining >= 2 ? 2 : 1;
  }

  void load(const TileUnit<kTile>& current, const TileUnit<kTile>& upcoming) {
    unit = current;
    next = upcoming;
    k_prefetch_pending = v_prefetch_pending = true;
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

  // Each K row is converted once into kChunks registers and reused by all kNH heads; every head
  // runs two accumulator chains, so kNH * 2 chains (plus the next tokens, out of order) hide the
  // FMA latency.
  // Tokens go in groups of 16: the 16 x kNH partial-sum vectors are reduced 16 at a time by
  // sum16_transposed, which writes 16 consecutive scores of one head with one store.
  template <int kNH>
  void scores_n(const float* __restrict q /*[kNH][d]*/, int n, float* __restrict s) {
    static_assert(kTile % 16 == 0, "score groups of 16 tokens");
    const int n_prefetch = k_prefetch_pending ? next.n() : 0;
    k_prefetch_pending = false;
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
        for (int jj = m; jj < 16; ++jj) part[h * 16 + jj] = _mm512_setzero_ps();  // tail: unused lanes
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
    const int n_prefetch = v_prefetch_pending ? next.n() : 0;
    v_prefetch_pending = false;
    for (int c0 = 0; c0 < kChunks; c0 += kGroup) {
      __m512 a[kNH][kGroup];
#pragma GCC unroll 8
      for (int h = 0; h < kNH; ++h)
#pragma GCC unroll 16
        for (int c = 0; c < kGroup; ++c) a[h][c] = _mm512_loadu_ps(acc + h * kHeadDim + 16 * (c0 + c));
      for (int j = 0; j < n; ++j) {
        __m512 pj[kNH];
#pragma GCC unroll 8
        for (int h = 0; h < kNH; ++h) pj[h] = _mm512_set1_ps(p[h * kTile + j]);
        if (j < n_prefetch) {  // this slice's share of the next unit's V row j
          for (int line = c0 * kLinesPerRow / kChunks; line < (c0 + kGroup) * kLinesPerRow / kChunks; ++line)
            __builtin_prefetch(next.v(j) + 64 * line, /*rw=*/0, kPrefetchLocality);
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
        for (int c = 0; c < kGroup; ++c) _mm512_storeu_ps(acc + h * kHeadDim + 16 * (c0 + c), a[h][c]);
    }
  }
};
#endif  // DECODEBENCH_CPU_AVX512

// ---------------------------------------------------------------------------------------------
// The memory walk alone (paged_kv_read in cpu_decode.h): the driver below with this tile reads
// the KV in the decode's work items, tiles and unit order, with its block-start and next-unit
// prefetches, but per row loads only one 32-bit word per 64-byte line, adding it to a checksum.
// It reads each unit's K and V rows interleaved (row j of K, then of V) where the decode reads
// K in the score pass and V in the accumulate pass: without arithmetic between them that split
// order is itself slow (~6 ms against ~4.6 ms at the target point on the Zen 5 VM, fast
// memory), and slower than the decode, because the next unit's prefetches then have no time
// to land. Interleaved, with the prefetches into L2 (prefetcht1), it was the fastest walk of the
// layout measured there (no prefetch: about the same), and bounded the decode. With the
// prefetches into L1 (kPrefetchLocality) and 64-token tiles it no longer does: with fast memory
// it is mostly slower than the decode (results/cpu-amd-epyc-zen5-2vcpu/layout-read.txt).
// ---------------------------------------------------------------------------------------------
template <DType kKv, int kHeadDim, int kTileTokens>
struct ReadOnlyTile {
  static constexpr int kTile = kTileTokens;
  static constexpr float kLoadScale = 1.0f;
  static constexpr bool kArithmetic = false;
  static constexpr int kRowBytes = kHeadDim * static_cast<int>(dtype_size(kKv));
  static constexpr int kLines = kRowBytes / 64;
  static_assert(kRowBytes % 64 == 0, "rows are whole 64-byte lines");

  TileUnit<kTile> unit, next;
  std::uint64_t checksum = 0;

  // One pass per unit (every head of the group at once), so each row is read once.
  static int pass_width(int remaining) { return remaining; }

  void load(const TileUnit<kTile>& current, const TileUnit<kTile>& upcoming) {
    unit = current;
    next = upcoming;
  }

  // Every K and V row of the unit, each after the next unit's matching rows are requested.
  void scores(const float*, int, int n, float*) {
    const int n_next = next.n();
    std::uint64_t sums[2 * kLines] = {};  // independent chains: one per line of a K and a V row
    for (int j = 0; j < n; ++j) {
      if (j < n_next) {
        prefetch_row<kRowBytes>(next.k(j));
        prefetch_row<kRowBytes>(next.v(j));
      }
      for (int line = 0; line < kLines; ++line) {
        std::uint32_t k, v;
        std::memcpy(&k, unit.k(j) + 64 * line, sizeof k);
        std::memcpy(&v, unit.v(j) + 64 * line, sizeof v);
        sums[line] += k;
        sums[kLines + line] += v;
      }
    }
    for (std::uint64_t x : sums) checksum += x;
  }
  void accumulate(const float*, int, int, float*) {}  // V was read with K
};

// ---------------------------------------------------------------------------------------------
// The driver: work items, tiles, passes, splits and the merge. Same for both paths.
// ---------------------------------------------------------------------------------------------

inline void store_out(DType q_dtype, void* out, std::size_t index, float value) {
  const std::uint16_t bits =
      q_dtype == DType::bf16 ? floatfmt::float_to_bf16(value) : floatfmt::float_to_f16(value);
  std::memcpy(static_cast<std::byte*>(out) + 2 * index, &bits, 2);
}

inline float load_q(DType q_dtype, const void* q, std::size_t index) {
  std::uint16_t bits;
  std::memcpy(&bits, static_cast<const std::byte*>(q) + 2 * index, 2);
  return q_dtype == DType::bf16 ? floatfmt::bf16_to_float(bits) : floatfmt::f16_to_float(bits);
}

// Returns the sum of the tiles' checksums: 0 for the decode, the walk's sum for ReadOnlyTile.
template <class Tile, DType kKv, int kHeadDim>
std::uint64_t decode_step(const PagedDecodeParams& p, int num_threads, int num_splits) {
  constexpr int kTile = Tile::kTile;
  constexpr std::size_t kElem = dtype_size(kKv);
  const int batch = p.batch, num_q_heads = p.num_q_heads, num_kv_heads = p.num_kv_heads;
  const int group = num_q_heads / num_kv_heads;
  const int splits = num_splits;

  // Q in fp32, pre-multiplied by softmax_scale * k_scale * log2(e) (and the loader's scale), so
  // a score is one dot product already in the exp2 domain.   // [batch][Hq][d]
  const float q_scale = p.softmax_scale * p.k_scale * Tile::kLoadScale * kLog2e;
  const float out_scale = p.v_scale * Tile::kLoadScale;
  const std::size_t q_elems = static_cast<std::size_t>(batch) * num_q_heads * kHeadDim;
  std::vector<float> q32(q_elems);  // filled by the threads below

  // Split partials, only when the context is split: unnormalized accumulators and states.
  std::vector<float> part_acc;                  // [batch][Hq][splits][d]
  std::vector<SoftmaxState<float>> part_state;  // [batch][Hq][splits]
  if (Tile::kArithmetic && splits > 1) {
    part_acc.resize(static_cast<std::size_t>(batch) * num_q_heads * splits * kHeadDim);
    part_state.resize(static_cast<std::size_t>(batch) * num_q_heads * splits);
  }

  const auto* k_base = static_cast<const std::byte*>(p.k_cache);
  const auto* v_base = static_cast<const std::byte*>(p.v_cache);
  // Work items are (sequence, context split), and each walks its tiles in memory order: every
  // KV head of a tile before the next tile. The heads of a block are adjacent in
  // [num_blocks][Hkv][P][d], so an item streams one contiguous Hkv x P x d stretch of K and one
  // of V per block (32 KiB each at the target point) instead of Hkv separate 4 KiB pieces: the
  // memory sees long runs, and the prefetches of the next unit land next to the current one.
  // On the 2-vCPU Zen 5 VM this order took the target point from ~37 to ~24 ns per row and
  // thread, A/B in one process (the pure-read version of the same two patterns: 40 vs 50 GB/s).
  const int num_items = batch * splits;
  const std::size_t head_stride = static_cast<std::size_t>(p.block_size) * kHeadDim * kElem;
  std::uint64_t checksum = 0;

#pragma omp parallel num_threads(num_threads)
  {
    auto tile = std::make_unique<Tile>();
    std::vector<float> acc(static_cast<std::size_t>(num_q_heads) * kHeadDim);  // [Hq][d]
    std::vector<SoftmaxState<float>> state(num_q_heads);                      // [Hq]
    alignas(64) float s[kMaxPassHeads * kTile];                               // [pass heads][kTile]
    TileRows<kTile> rows[2];                                                  // current, next tile

#pragma omp for schedule(static)
    for (std::size_t i = 0; i < q_elems; ++i) q32[i] = load_q(p.q_dtype, p.q, i) * q_scale;
    // (the loop's implicit barrier publishes q32 to every thread)

#pragma omp for schedule(dynamic, 1)
    for (int item = 0; item < num_items; ++item) {
      const int b = item / splits;
      const int split = item % splits;
      const int len = p.context_lens[b];
      // Splits cover whole tiles: [split * chunk, (split + 1) * chunk) clipped to the context.
      const int chunk = ((len + splits - 1) / splits + kTile - 1) / kTile * kTile;
      const int t_begin = std::min(len, split * chunk);
      const int t_end = std::min(len, t_begin + chunk);
      const float* q_seq = q32.data() + static_cast<std::size_t>(b) * num_q_heads * kHeadDim;

      std::fill(acc.begin(), acc.end(), 0.0f);
      std::fill(state.begin(), state.end(), SoftmaxState<float>{});
      // KV head 0's row pointers of the tile starting at token t0 (n = 0 past the end). One
      // block-table lookup (and one integer division) per block, not per token: rows of a block
      // are consecutive.
      auto find_rows = [&](int t0, TileRows<kTile>& r) {
        r.n = std::max(0, std::min(kTile, t_end - t0));
        for (int j = 0; j < r.n;) {
          const int token = t0 + j;
          const std::int32_t block = physical_block(p.block_tables, p.max_blocks_per_seq, b, token, p.block_size);
          const int slot = token % p.block_size;
          const std::size_t first = kv_row_offset(block, 0, slot, num_kv_heads, p.block_size, kHeadDim);
          // The first lines of the block's K and V stretches (every KV head of the block lies
          // behind them), a whole tile before the per-unit prefetches reach the block: see
          // kBlockStartLines.
          const std::size_t start = kv_row_offset(block, 0, 0, num_kv_heads, p.block_size, kHeadDim) * kElem;
          for (int line = 0; line < kBlockStartLines; ++line) {
            __builtin_prefetch(k_base + start + 64 * line, /*rw=*/0, kPrefetchLocality);
            __builtin_prefetch(v_base + start + 64 * line, /*rw=*/0, kPrefetchLocality);
          }
          const int run = std::min(r.n - j, p.block_size - slot);
          for (int i = 0; i < run; ++i, ++j) {
            r.k[j] = k_base + (first + static_cast<std::size_t>(i) * kHeadDim) * kElem;
            r.v[j] = v_base + (first + static_cast<std::size_t>(i) * kHeadDim) * kElem;
          }
        }
      };
      int cur = 0;
      find_rows(t_begin, rows[cur]);
      for (int t0 = t_begin; t0 < t_end; t0 += kTile) {
        const int n = rows[cur].n;
        find_rows(t0 + kTile, rows[1 - cur]);
        for (int kv_head = 0; kv_head < num_kv_heads; ++kv_head) {
          const TileUnit<kTile> unit{&rows[cur], kv_head * head_stride};
          const TileUnit<kTile> next = kv_head + 1 < num_kv_heads
                                           ? TileUnit<kTile>{&rows[cur], (kv_head + 1) * head_stride}
                                           : TileUnit<kTile>{&rows[1 - cur], 0};
          tile->load(unit, next);
          const int hq0 = kv_head * group;  // first query head of this KV head's group
          for (int h0 = 0; h0 < group;) {
            const int nh = Tile::pass_width(group - h0);
            const std::size_t first_head = static_cast<std::size_t>(hq0 + h0);
            tile->scores(q_seq + first_head * kHeadDim, nh, n, s);
            if constexpr (Tile::kArithmetic)
              for (int h = 0; h < nh; ++h)
                Tile::softmax(s + h * kTile, n, state[first_head + h], acc.data() + (first_head + h) * kHeadDim);
            tile->accumulate(s, nh, n, acc.data() + first_head * kHeadDim);
            h0 += nh;
          }
        }
        cur = 1 - cur;
      }

      if constexpr (!Tile::kArithmetic) continue;  // the memory walk writes no output
      for (int h = 0; h < num_q_heads; ++h) {
        const std::size_t qh = static_cast<std::size_t>(b) * num_q_heads + h;
        const float* acc_h = acc.data() + static_cast<std::size_t>(h) * kHeadDim;
        if (splits == 1) {
          // len >= 1, so sum >= 1 (the max's own term is exactly 1).
          const float scale = out_scale / state[h].sum;
          for (int c = 0; c < kHeadDim; ++c) store_out(p.q_dtype, p.out, qh * kHeadDim + c, acc_h[c] * scale);
        } else {
          part_state[qh * splits + split] = state[h];
          std::copy(acc_h, acc_h + kHeadDim, part_acc.data() + (qh * splits + split) * kHeadDim);
        }
      }
    }

    if constexpr (!Tile::kArithmetic) {
#pragma omp atomic
      checksum += tile->checksum;
    }
    if (Tile::kArithmetic && splits > 1) {
      // The implicit barrier of the loop above has made every partial visible. Merge the
      // splits of each (sequence, query head) by their softmax states.
#pragma omp for schedule(static)
      for (int qh = 0; qh < batch * num_q_heads; ++qh) {
        SoftmaxState<float> merged;
        float out[kHeadDim] = {};
        for (int sp = 0; sp < splits; ++sp) {
          const std::size_t idx = static_cast<std::size_t>(qh) * splits + sp;
          float self_factor, other_factor;
          merged.merge(part_state[idx], self_factor, other_factor);
          const float* part = part_acc.data() + idx * kHeadDim;
          for (int c = 0; c < kHeadDim; ++c) out[c] = out[c] * self_factor + part[c] * other_factor;
        }
        const float scale = out_scale / merged.sum;
        for (int c = 0; c < kHeadDim; ++c)
          store_out(p.q_dtype, p.out, static_cast<std::size_t>(qh) * kHeadDim + c, out[c] * scale);
      }
    }
  }
  return checksum;
}

// Entry for one KV dtype: picks the head_dim instance and the path. Defined here, instantiated
// in the generated per-dtype translation units.
template <DType kKv>
void decode_for_dtype(const PagedDecodeParams& p, int num_threads, int num_splits, bool avx512) {
  auto run = [&]<int kHeadDim>() {
#if DECODEBENCH_CPU_AVX512
    if (avx512) {
      decode_step<Avx512Tile<kKv, kHeadDim>, kKv, kHeadDim>(p, num_threads, num_splits);
      return;
    }
#endif
    (void)avx512;
    decode_step<PortableTile<kKv, kHeadDim>, kKv, kHeadDim>(p, num_threads, num_splits);
  };
  switch (p.head_dim) {
    case 64: run.template operator()<64>(); break;
    case 128: run.template operator()<128>(); break;
    case 256: run.template operator()<256>(); break;
    default: break;  // rejected by unsupported_reason() before we get here
  }
}

// The memory walk of decode_for_dtype's path (paged_kv_read): the driver with ReadOnlyTile at
// that path's tile size, so tiles, order and prefetch distance are the decode's.
template <DType kKv>
std::uint64_t read_walk_for_dtype(const PagedDecodeParams& p, int num_threads, int num_splits, bool avx512) {
  auto run = [&]<int kHeadDim>() -> std::uint64_t {
#if DECODEBENCH_CPU_AVX512
    if (avx512)
      return decode_step<ReadOnlyTile<kKv, kHeadDim, kAvx512TileTokens<kHeadDim>>, kKv, kHeadDim>(p, num_threads,
                                                                                              num_splits);
#endif
    (void)avx512;
    return decode_step<ReadOnlyTile<kKv, kHeadDim, kPortableTileTokens<kHeadDim>>, kKv, kHeadDim>(p, num_threads,
                                                                                                num_splits);
  };
  switch (p.head_dim) {
    case 64: return run.template operator()<64>();
    case 128: return run.template operator()<128>();
    case 256: return run.template operator()<256>();
    default: return 0;  // rejected by unsupported_reason() before we get here
  }
}

}  // namespace decodebench::cpu::detail
