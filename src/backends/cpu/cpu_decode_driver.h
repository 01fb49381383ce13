// The CPU decode's driver, behind cpu_decode.h: work items, OpenMP, tiles, passes, splits and the
// merge, the same for every tile kernel. Instantiated once per KV dtype in a generated translation
// unit (src/backends/cpu/CMakeLists.txt), each for head_dim 64/128/256 and every tile-kernel path
// compiled in (avx512, avx2, portable).
//
// Napkin math for the target point (llama-3.1-8b: Hq 32, Hkv 8, d 128, fp16 KV, g = 4):
// one (token, KV head) row brings 256 bytes of K and 256 of V and costs 4 * 128 * 2 = 1024 FMAs
// = 64 zmm FMAs, 16 vcvtph2ps and 4 score reductions: >= 32 cycles per 512 bytes on two FMA
// pipes, i.e. at most ~65 GB/s per core at 4.2 GHz against DRAM that gives the 2-vCPU VMs
// 10-45 GB/s per core. Compute has little headroom over memory, so: every K/V element is
// converted once and serves all g heads (one pass per row), score reductions go 16 at a time
// through a transpose tree instead of one horizontal sum each, accumulator chains are long
// enough (g x unroll >= 8) to hide FMA latency, block-table lookups happen once per block, and
// memory is walked in the order it lies in (see decode_step) with software prefetches spread
// over the arithmetic.
//
// What was measured on the way here, and the variants rejected:
// results/cpu-amd-epyc-zen5-2vcpu/cpu-decode-tuning.md. Results: README, "Measured numbers".
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_decode.h"  // DecodePath
#include "backends/cpu/cpu_decode_avx2_quant_tile.h"
#include "backends/cpu/cpu_decode_avx2_tile.h"
#include "backends/cpu/cpu_decode_avx512_quant_tile.h"
#include "backends/cpu/cpu_decode_avx512_tile.h"
#include "backends/cpu/cpu_decode_common.h"
#include "backends/cpu/cpu_decode_kv_walk.h"
#include "backends/cpu/cpu_decode_portable_tile.h"
#include "backends/cpu/cpu_decode_quant.h"
#include "backends/cpu/cpu_decode_read_only_tile.h"
#include "device/float_formats.h"
#include "device/paged_kv.h"
#include "device/softmax_state.h"
#include "kernels.h"

namespace decodebench::cpu::detail {

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

// The tile kernels of each path for a KV dtype: the integer formats have their own
// (cpu_decode_quant.h; a format the SIMD tiles are not written for, kSimdQuantTile, runs the
// portable one on every path), the float formats share one per path.
template <DType kKv, int kHeadDim>
using PortableTileFor = std::conditional_t<is_int_kv(kKv), PortableQuantTile<kKv, kHeadDim>,
                                           PortableTile<kKv, kHeadDim>>;
#if DECODEBENCH_CPU_AVX512
template <DType kKv, int kHeadDim>
using Avx512TileFor =
    std::conditional_t<is_int_kv(kKv),
                       std::conditional_t<kSimdQuantTile<kKv>, Avx512QuantTile<kKv, kHeadDim>,
                                          PortableQuantTile<kKv, kHeadDim>>,
                       Avx512Tile<kKv, kHeadDim>>;
#endif
#if DECODEBENCH_CPU_AVX2
template <DType kKv, int kHeadDim>
using Avx2TileFor =
    std::conditional_t<is_int_kv(kKv),
                       std::conditional_t<kSimdQuantTile<kKv>, Avx2QuantTile<kKv, kHeadDim>,
                                          PortableQuantTile<kKv, kHeadDim>>,
                       Avx2Tile<kKv, kHeadDim>>;
#endif

// A tile kernel that reads more of p than the rows (the integer formats' scales) takes it here.
template <class Tile>
inline void bind_tile(Tile& tile, const PagedDecodeParams& p) {
  if constexpr (requires { tile.bind(p); }) tile.bind(p);
}

// KV head 0's row pointers of the tile of sequence b starting at token t0, clipped to t_end
// (n = 0 past it). One block-table lookup (and one integer division) per block, not per token:
// rows of a block are consecutive. The first lines of each block's K and V stretch at
// `start_offset` bytes (0: every KV head of the block lies behind them) are requested a whole
// tile before the per-unit prefetches reach the block: see kBlockStartLines.
template <int kTile, std::size_t kRowBytes>
inline void find_tile_rows(const PagedDecodeParams& p, int b, int t0, int t_end,
                           std::size_t start_offset, TileRows<kTile>& r) {
  const auto* k_base = static_cast<const std::byte*>(p.k_cache);
  const auto* v_base = static_cast<const std::byte*>(p.v_cache);
  r.n = std::max(0, std::min(kTile, t_end - t0));
  for (int j = 0; j < r.n;) {
    const int token = t0 + j;
    const std::int32_t block =
        physical_block(p.block_tables, p.max_blocks_per_seq, b, token, p.block_size);
    const int slot = token % p.block_size;
    // Row indices (head_dim 1 in the element offset): bytes are row index x kRowBytes.
    const std::size_t first = kv_row_offset(block, 0, slot, p.num_kv_heads, p.block_size, 1);
    const std::size_t start =
        kv_row_offset(block, 0, 0, p.num_kv_heads, p.block_size, 1) * kRowBytes + start_offset;
    for (int line = 0; line < kBlockStartLines; ++line) {
      prefetch_line(k_base + start + 64 * line);
      prefetch_line(v_base + start + 64 * line);
    }
    const int run = std::min(r.n - j, p.block_size - slot);
    for (int i = 0; i < run; ++i, ++j) {
      r.k[j] = k_base + (first + static_cast<std::size_t>(i)) * kRowBytes;
      r.v[j] = v_base + (first + static_cast<std::size_t>(i)) * kRowBytes;
    }
  }
}

// Where a work item of a context of `len` starts its walk: 0, or with a window, the block (or,
// for blocks larger than a tile, the tile-sized piece of it) holding the window's first token.
// So the first tile always holds a token of the window, and no earlier block is read.
template <int kTile>
inline int walk_first_token(const PagedDecodeParams& p, int len) {
  const int unit = std::min(p.block_size, kTile);
  return window_first_token(len, p.window) / unit * unit;
}

// The scores of one pass (s [nh][kTile], n tokens from t0, log2 domain) made what the model's
// softmax sees: soft-capped, and the tokens before the window's first token `first` masked.
inline void finish_scores(const PagedDecodeParams& p, int kTile, int nh, int n, int t0, int first,
                          float* s) {
  if (p.softcap > 0) {
    // s = x log2(e) for a score x, and c tanh(x / c) in that domain is c2 tanh(s / c2).
    const float c2 = p.softcap * kLog2e;
    const float inv_c2 = 1.0f / c2;
    for (int h = 0; h < nh; ++h)
      for (int j = 0; j < n; ++j) s[h * kTile + j] = c2 * std::tanh(s[h * kTile + j] * inv_c2);
  }
  if (t0 < first) {
    const int masked = std::min(n, first - t0);
    for (int h = 0; h < nh; ++h)
      for (int j = 0; j < masked; ++j) s[h * kTile + j] = -INFINITY;
  }
}

// A head's sink logit merged into its softmax state: the sink joins the max and adds
// exp2(sink - max) to the sum. Returns the factor the head's accumulator must be scaled by.
inline float merge_sink(const PagedDecodeParams& p, int head, SoftmaxState<float>& state) {
  if (!p.has_sinks) return 1.0f;
  const SoftmaxState<float> sink{p.sinks[head] * kLog2e, 1.0f};
  float self_factor, sink_factor;
  state.merge(sink, self_factor, sink_factor);
  return self_factor;
}

// The body of one (sequence, split) work item: walks sequence b's tokens [t_begin, t_end) tile
// by tile, every KV head of a tile before the next, and folds them into every query head's
// acc [Hq][d] and state [Hq] (q_seq [Hq][d] pre-scaled; s one pass's scores). Tokens before
// `first` (the window's first token) are masked. An empty range leaves acc and state as they
// are.
template <class Tile, DType kKv, int kHeadDim>
inline void walk_sequence(const PagedDecodeParams& p, int b, int t_begin, int t_end, int first,
                          const float* q_seq, Tile& tile, TileRows<Tile::kTile> (&rows)[2],
                          float* s, float* acc, SoftmaxState<float>* state) {
  constexpr int kTile = Tile::kTile;
  constexpr std::size_t kRowBytes = kv_row_bytes(kKv, kHeadDim);
  const int num_kv_heads = p.num_kv_heads;
  const int group = p.num_q_heads / num_kv_heads;
  const std::size_t head_stride = static_cast<std::size_t>(p.block_size) * kRowBytes;
  int cur = 0;
  find_tile_rows<kTile, kRowBytes>(p, b, t_begin, t_end, 0, rows[cur]);
  for (int t0 = t_begin; t0 < t_end; t0 += kTile) {
    const int n = rows[cur].n;
    find_tile_rows<kTile, kRowBytes>(p, b, t0 + kTile, t_end, 0, rows[1 - cur]);
    for (int kv_head = 0; kv_head < num_kv_heads; ++kv_head) {
      const TileUnit<kTile> unit{&rows[cur], kv_head * head_stride};
      const TileUnit<kTile> next = kv_head + 1 < num_kv_heads
                                       ? TileUnit<kTile>{&rows[cur], (kv_head + 1) * head_stride}
                                       : TileUnit<kTile>{&rows[1 - cur], 0};
      tile.load(unit, next);
      const int hq0 = kv_head * group;  // first query head of this KV head's group
      for (int h0 = 0; h0 < group;) {
        const int nh = Tile::pass_width(group - h0);
        const std::size_t first_head = static_cast<std::size_t>(hq0 + h0);
        tile.scores(q_seq + first_head * kHeadDim, nh, n, s);
        if constexpr (Tile::kArithmetic) {
          if (p.softcap > 0 || t0 < first) finish_scores(p, kTile, nh, n, t0, first, s);
          for (int h = 0; h < nh; ++h)
            Tile::softmax(s + h * kTile, n, state[first_head + h],
                          acc + (first_head + h) * kHeadDim);
        }
        tile.accumulate(s, nh, n, acc + first_head * kHeadDim);
        h0 += nh;
      }
    }
    cur = 1 - cur;
  }
}

// Returns the sum of the tiles' checksums: 0 for the decode, the walk's sum for ReadOnlyTile.
template <class Tile, DType kKv, int kHeadDim>
std::uint64_t decode_step(const PagedDecodeParams& p, int num_threads, int num_splits) {
  constexpr int kTile = Tile::kTile;
  const int batch = p.batch, num_q_heads = p.num_q_heads;
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

  // Work items are (sequence, context split), and each walks its tiles in memory order: every
  // KV head of a tile before the next tile. The heads of a block are adjacent in
  // [num_blocks][Hkv][P][d], so an item streams one contiguous Hkv x P x d stretch of K and one
  // of V per block (32 KiB each at the target point) instead of Hkv separate 4 KiB pieces: the
  // memory sees long runs, and the prefetches of the next unit land next to the current one.
  // ~37 -> ~24 ns per row and thread against (sequence, KV head) items on the Zen 5 VM; see
  // results/cpu-amd-epyc-zen5-2vcpu/cpu-decode-tuning.md.
  const int num_items = batch * splits;
  std::uint64_t checksum = 0;

#pragma omp parallel num_threads(num_threads)
  {
    auto tile = std::make_unique<Tile>();
    bind_tile(*tile, p);
    std::vector<float> acc(static_cast<std::size_t>(num_q_heads) * kHeadDim);  // [Hq][d]
    std::vector<SoftmaxState<float>> state(num_q_heads);                       // [Hq]
    alignas(64) float s[kMaxPassHeads * kTile];  // [pass heads][kTile]
    TileRows<kTile> rows[2];                     // current, next tile

#pragma omp for schedule(static)
    for (std::size_t i = 0; i < q_elems; ++i) q32[i] = load_q(p.q_dtype, p.q, i) * q_scale;
      // (the loop's implicit barrier publishes q32 to every thread)

#pragma omp for schedule(dynamic, 1)
    for (int item = 0; item < num_items; ++item) {
      const int b = item / splits;
      const int split = item % splits;
      const int len = p.context_lens[b];
      // Splits cover whole tiles of [walk_first, len): [walk_first + split * chunk, ... + chunk)
      // clipped to the context.
      const int walk_first = walk_first_token<kTile>(p, len);
      const int chunk = ((len - walk_first + splits - 1) / splits + kTile - 1) / kTile * kTile;
      const int t_begin = std::min(len, walk_first + split * chunk);
      const int t_end = std::min(len, t_begin + chunk);
      const float* q_seq = q32.data() + static_cast<std::size_t>(b) * num_q_heads * kHeadDim;

      std::fill(acc.begin(), acc.end(), 0.0f);
      std::fill(state.begin(), state.end(), SoftmaxState<float>{});
      walk_sequence<Tile, kKv, kHeadDim>(p, b, t_begin, t_end, window_first_token(len, p.window),
                                         q_seq, *tile, rows, s, acc.data(), state.data());

      if constexpr (!Tile::kArithmetic) continue;  // the memory walk writes no output
      for (int h = 0; h < num_q_heads; ++h) {
        const std::size_t qh = static_cast<std::size_t>(b) * num_q_heads + h;
        const float* acc_h = acc.data() + static_cast<std::size_t>(h) * kHeadDim;
        if (splits == 1) {
          // len >= 1, so sum >= 1 (the max's own term is exactly 1).
          const float scale = out_scale * merge_sink(p, h, state[h]) / state[h].sum;
          for (int c = 0; c < kHeadDim; ++c)
            store_out(p.q_dtype, p.out, qh * kHeadDim + c, acc_h[c] * scale);
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
        const float scale = out_scale * merge_sink(p, qh % num_q_heads, merged) / merged.sum;
        for (int c = 0; c < kHeadDim; ++c)
          store_out(p.q_dtype, p.out, static_cast<std::size_t>(qh) * kHeadDim + c, out[c] * scale);
      }
    }
  }
  return checksum;
}

// Entry for one KV dtype: picks the head_dim instance and the path (`path` is resolved: never
// automatic, and compiled in; checked by cpu_decode.cpp). Defined here, instantiated in the
// generated per-dtype translation units.
template <DType kKv>
void decode_for_dtype(const PagedDecodeParams& p, int num_threads, int num_splits,
                      DecodePath path) {
  auto run = [&]<int kHeadDim>() {
#if DECODEBENCH_CPU_AVX512
    if (path == DecodePath::avx512) {
      decode_step<Avx512TileFor<kKv, kHeadDim>, kKv, kHeadDim>(p, num_threads, num_splits);
      return;
    }
#endif
#if DECODEBENCH_CPU_AVX2
    if (path == DecodePath::avx2) {
      decode_step<Avx2TileFor<kKv, kHeadDim>, kKv, kHeadDim>(p, num_threads, num_splits);
      return;
    }
#endif
    (void)path;
    decode_step<PortableTileFor<kKv, kHeadDim>, kKv, kHeadDim>(p, num_threads, num_splits);
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
std::uint64_t read_walk_for_dtype(const PagedDecodeParams& p, int num_threads, int num_splits,
                                  DecodePath path) {
  auto run = [&]<int kHeadDim>() -> std::uint64_t {
#if DECODEBENCH_CPU_AVX512
    if (path == DecodePath::avx512)
      return decode_step<ReadOnlyTile<kKv, kHeadDim, kAvx512TileTokens<kHeadDim>>, kKv, kHeadDim>(
          p, num_threads, num_splits);
#endif
#if DECODEBENCH_CPU_AVX2
    if (path == DecodePath::avx2)
      return decode_step<ReadOnlyTile<kKv, kHeadDim, kAvx2TileTokens<kHeadDim>>, kKv, kHeadDim>(
          p, num_threads, num_splits);
#endif
    (void)path;
    return decode_step<ReadOnlyTile<kKv, kHeadDim, kPortableTileTokens<kHeadDim>>, kKv, kHeadDim>(
        p, num_threads, num_splits);
  };
  switch (p.head_dim) {
    case 64: return run.template operator()<64>();
    case 128: return run.template operator()<128>();
    case 256: return run.template operator()<256>();
    default: return 0;  // rejected by unsupported_reason() before we get here
  }
}

}  // namespace decodebench::cpu::detail
