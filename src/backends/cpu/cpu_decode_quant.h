// What the CPU decode's tile kernels for the integer KV formats (int8, int4, int4_token; defined
// in src/quant/kv_quant.h) share: where a row's scales and zeros are, the per-unit tables of them
// in fp32, the prefetches of the next unit's scale lines, and the portable tile.
//
// The codes sit in the float formats' paged layout, [num_blocks][Hkv][P][row bytes], so the
// driver walks them unchanged; a row's (block, head, token) index is its byte offset over the row
// size, and every scale array is laid out by that index (or by its block-head, for int4 keys).
// How the arithmetic is arranged (each choice measured: results/cpu-xeon-spr-2vcpu/quant/; the
// GQA limits and a V-scale fold tried and reverted: results/cpu-amd-epyc-zen4-2vcpu/quant-gqa/):
//   int8 K      s per (token, head): a score is s_K(t) * (q . codes), 16 scores at a time.
//               Codes are sign-extended and converted.
//   int4 K      s, z per (block, head, channel): q . k = (q * s) . codes + q . z, so per block
//               the pass's q rows are multiplied by s once (q') and q . z is one bias per head.
//   int4_token  s, z per (token, head, 32 channels): K rows are dequantized in registers
//   K           (fma(code, s, z), shared by the pass's heads) before the dot products.
//   V           every row dequantized in registers (code x s, or fma(code, s, z) per 32
//               channels) once, shared by the pass's heads; one multiply per 16 codes beats
//               folding s into each head's probability per token at any GQA group, and folding
//               it per tile (p x s by vector multiplies, the zeros as one sum per head and
//               group) was faster warm but slower cold at GQA 4 on a Zen 4 VM.
// Two int4 codes share a byte (even channel low), so a register of 16 (or 8) bytes unpacks to the
// even channels and the odd ones: q' and the V accumulators are kept in that order within each
// 32 (or 16) channels and permuted back at the tile's edges.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "backends/cpu/cpu_decode_common.h"
#include "backends/cpu/cpu_decode_kv_walk.h"
#include "backends/cpu/cpu_decode_portable_tile.h"
#include "device/float_formats.h"
#include "kernels.h"

namespace decodebench::cpu::detail {

// The integer formats the AVX2 and AVX-512 tiles (cpu_decode_avx*_quant_tile.h) are written for;
// the driver runs any other integer format of kernels/kv_formats.h through PortableQuantTile on
// every path, so a new format needs only dequantize_row below to be read.
template <DType kKv>
inline constexpr bool kSimdQuantTile =
    kKv == DType::int8 || kKv == DType::int4 || kKv == DType::int4_token;

// Where the scales and zeros of a row are, for one KV format and head_dim (the layouts of the
// table, kernels/kv_formats.h).
template <DType kKv, int kHeadDim>
struct QuantLayout {
  static_assert(is_int_kv(kKv));
  static constexpr int kRowBytes = static_cast<int>(kv_row_bytes(kKv, kHeadDim));
  static constexpr int kGroups = kHeadDim / kInt4GroupChannels;  // int4 scale groups per row
  static constexpr bool kKeyPerChannel =                         // K scales per block-head
      kv_format(kKv).k.axis == KvScaleAxis::block_head_channel;
  static constexpr bool kZeros = kv_format(kKv).k.zeros || kv_format(kKv).v.zeros;

  const std::byte* k_base = nullptr;
  const std::byte* v_base = nullptr;
  const std::uint16_t* k_scales = nullptr;
  const std::uint16_t* k_zeros = nullptr;
  const std::uint16_t* v_scales = nullptr;
  const std::uint16_t* v_zeros = nullptr;
  int block_size = 1;
  int log2_block = 0;

  void bind(const PagedDecodeParams& p) {
    k_base = static_cast<const std::byte*>(p.k_cache);
    v_base = static_cast<const std::byte*>(p.v_cache);
    k_scales = p.k_scales;
    k_zeros = p.k_zeros;
    v_scales = p.v_scales;
    v_zeros = p.v_zeros;
    block_size = p.block_size;
    log2_block = 0;
    while ((1 << log2_block) < p.block_size) ++log2_block;
  }
  // The (block, head, token) index of a K or V row.
  std::size_t k_index(const std::byte* row) const {
    return static_cast<std::size_t>(row - k_base) / kRowBytes;
  }
  std::size_t v_index(const std::byte* row) const {
    return static_cast<std::size_t>(row - v_base) / kRowBytes;
  }
  std::size_t block_head(std::size_t index) const { return index >> log2_block; }

  // Rows from row j of `unit` on that are consecutive tokens of one block (and so consecutive
  // (block, head, token) indices): the rest of j's block, within the unit's n rows.
  template <int kTile>
  int run_at(const TileUnit<kTile>& unit, int j) const {
    const int slot = static_cast<int>(k_index(unit.k(j)) & (block_size - 1));
    return std::min(unit.n() - j, block_size - slot);
  }

  // Requests the lines of the scales (and zeros) of every block-head the unit's rows lie in.
  template <int kTile>
  void prefetch_scales(const TileUnit<kTile>& unit) const {
    for (int j = 0; j < unit.n(); j += run_at(unit, j)) {
      const std::size_t bh = block_head(k_index(unit.k(j)));
      const std::size_t k_per_block = kKeyPerChannel ? kHeadDim : per_token() * block_size;
      const std::size_t v_per_block = per_token() * block_size;
      prefetch_range(k_scales + bh * k_per_block, k_per_block);
      prefetch_range(v_scales + bh * v_per_block, v_per_block);
      if constexpr (kZeros) {
        prefetch_range(k_zeros + bh * k_per_block, k_per_block);
        prefetch_range(v_zeros + bh * v_per_block, v_per_block);
      }
    }
  }
  // Scale entries per (token, head) of the per-token layouts: 1 (int8) or one per 32 channels.
  static constexpr std::size_t per_token() {
    return kv_format(kKv).v.axis == KvScaleAxis::token_head ? 1 : kGroups;
  }

 private:
  static void prefetch_range(const std::uint16_t* first, std::size_t count) {
    const auto* bytes = reinterpret_cast<const std::byte*>(first);
    for (std::size_t offset = 0; offset < 2 * count; offset += 64) prefetch_line(bytes + offset);
  }
};

inline float f16_value(std::uint16_t bits) { return floatfmt::f16_to_float(bits); }

#if DECODEBENCH_CPU_AVX2
// `count` f16 values at src -> floats at dst (F16C, 8 at a time).
inline void halves_to_floats(const std::uint16_t* src, int count, float* dst) {
  int i = 0;
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < count; ++i) dst[i] = _cvtsh_ss(src[i]);
}

// One unit's per-token scales and zeros in fp32, [token][group] as stored: what load() computes
// for the unit it is handed. Rows of one block are consecutive (block, head, token) indices, so
// each run of them is one contiguous stretch of every per-token array, converted 8 at a time.
template <DType kKv, int kHeadDim, int kTile>
struct UnitScales {
  using Layout = QuantLayout<kKv, kHeadDim>;
  static constexpr int kPer = static_cast<int>(Layout::per_token());  // [token][group]
  alignas(64) float k_scale[kTile * kPer];                            // int8, int4_token
  alignas(64) float k_zero[kTile * kPer];                             // int4_token
  alignas(64) float v_scale[kTile * kPer];
  alignas(64) float v_zero[kTile * kPer];  // int4 formats

  void fill(const Layout& layout, const TileUnit<kTile>& unit) {
    const int n = unit.n();
    for (int j = 0; j < n;) {
      const int run = layout.run_at(unit, j);  // K and V rows share offsets: one run serves both
      const std::size_t first = layout.k_index(unit.k(j)) * kPer;
      const int count = run * kPer;
      halves_to_floats(layout.v_scales + first, count, v_scale + j * kPer);
      if constexpr (kKv != DType::int8)
        halves_to_floats(layout.v_zeros + first, count, v_zero + j * kPer);
      if constexpr (kKv != DType::int4)
        halves_to_floats(layout.k_scales + first, count, k_scale + j * kPer);
      if constexpr (kKv == DType::int4_token)
        halves_to_floats(layout.k_zeros + first, count, k_zero + j * kPer);
      j += run;
    }
  }
};
#endif  // DECODEBENCH_CPU_AVX2

// One row of codes dequantized to fp32, exactly as quant::dequantize: code * s, or fma(code, s, z)
// (for the portable path and tests). `index` is the row's (block, head, token) index.
template <DType kKv, int kHeadDim>
inline void dequantize_row(const QuantLayout<kKv, kHeadDim>& layout, const std::byte* row,
                           std::size_t index, bool is_key, float* out) {
  using Layout = QuantLayout<kKv, kHeadDim>;
  const std::uint16_t* scales = is_key ? layout.k_scales : layout.v_scales;
  const std::uint16_t* zeros = is_key ? layout.k_zeros : layout.v_zeros;
  if constexpr (kKv == DType::int8) {
    const float s = f16_value(scales[index]);
    for (int c = 0; c < kHeadDim; ++c)
      out[c] = static_cast<float>(static_cast<std::int8_t>(row[c])) * s;
  } else {
    const bool per_channel = is_key && Layout::kKeyPerChannel;
    const std::size_t base =
        per_channel ? layout.block_head(index) * kHeadDim : index * Layout::kGroups;
    for (int c = 0; c < kHeadDim; ++c) {
      const auto byte = static_cast<std::uint8_t>(row[c / 2]);
      const float code = static_cast<float>(c % 2 == 0 ? byte & 0xf : byte >> 4);
      const std::size_t g = per_channel ? base + c : base + c / kInt4GroupChannels;
      out[c] = std::fma(code, f16_value(scales[g]), f16_value(zeros[g]));
    }
  }
}

// The portable tile for the integer formats: the unit's rows dequantized to fp32 (dequantize_row)
// and the float tile's plain loops over them.
template <DType kKv, int kHeadDim>
struct PortableQuantTile : PortableTile<DType::f32, kHeadDim> {
  using Base = PortableTile<DType::f32, kHeadDim>;
  using Layout = QuantLayout<kKv, kHeadDim>;
  Layout layout;

  void bind(const PagedDecodeParams& p) { layout.bind(p); }

  void load(const TileUnit<Base::kTile>& unit, const TileUnit<Base::kTile>& next) {
    const int n_next = next.n();
    if (n_next > 0) layout.prefetch_scales(next);
    for (int j = 0; j < unit.n(); ++j) {
      if (j < n_next) {
        prefetch_row<Layout::kRowBytes>(next.k(j));
        prefetch_row<Layout::kRowBytes>(next.v(j));
      }
      dequantize_row(layout, unit.k(j), layout.k_index(unit.k(j)), true, this->k + j * kHeadDim);
      dequantize_row(layout, unit.v(j), layout.v_index(unit.v(j)), false, this->v + j * kHeadDim);
    }
  }
};

}  // namespace decodebench::cpu::detail
