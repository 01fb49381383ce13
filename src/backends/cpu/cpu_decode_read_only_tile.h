// The memory walk alone (paged_kv_read in cpu_decode.h): the driver (cpu_decode_driver.h) with
// this tile reads the KV in the decode's work items, tiles and unit order, with its block-start
// and next-unit prefetches, but per row loads only one 32-bit word per 64-byte line, adding it to
// a checksum. It reads each unit's K and V rows interleaved (row j of K, then of V) where the
// decode reads K in the score pass and V in the accumulate pass: without arithmetic between them
// that split order is itself slow (~6 ms against ~4.6 ms at the target point on the Zen 5 VM,
// fast memory), because the next unit's prefetches then have no time to land. With the
// prefetches into L1 it does not bound the decode: with fast memory it is mostly slower than the
// decode (results/cpu-amd-epyc-zen5-2vcpu/layout-read.txt; the history of the walk: see
// results/cpu-amd-epyc-zen5-2vcpu/cpu-decode-tuning.md).
#pragma once

#include <cstdint>
#include <cstring>

#include "backends/cpu/cpu_decode_kv_walk.h"
#include "kernels.h"

namespace decodebench::cpu::detail {

template <DType kKv, int kHeadDim, int kTileTokens>
struct ReadOnlyTile {
  static constexpr int kTile = kTileTokens;
  static constexpr float kLoadScale = 1.0f;
  static constexpr bool kArithmetic = false;
  static constexpr int kRowBytes = static_cast<int>(kv_row_bytes(kKv, kHeadDim));
  // Lines a row touches (an int4 row at d = 64 is half a line: one word of each row is read).
  static constexpr int kLines = (kRowBytes + 63) / 64;
  static_assert(kRowBytes % 64 == 0 || 64 % kRowBytes == 0, "rows tile 64-byte lines");

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

}  // namespace decodebench::cpu::detail
