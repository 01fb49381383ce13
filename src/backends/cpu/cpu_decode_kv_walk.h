// How the CPU decode walks the paged KV cache: the row pointers of one tile, the unit of work (one
// KV head's rows of a tile), and the software prefetches that run one unit ahead of the
// arithmetic. The driver (cpu_decode_driver.h) fills the rows; the tile kernels issue the
// prefetches.
#pragma once

#include <cstddef>

namespace decodebench::cpu::detail {

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

// The cache level the software prefetches fill, chosen once per process from the CPU
// (cpu_decode.cpp; prefetch_level_name() in cpu_decode.h names it): L1 (prefetcht0) on AMD Zen 5
// and later, L2 (prefetcht1) elsewhere. AMD documents that from Zen 4 on prefetcht1/t2 fill L2
// only, and a published Zen 4 measurement (Wang et al., arXiv 2411.02814) finds them sometimes
// dropped.
// - Zen 5: prefetcht0 5-7 % less step time than prefetcht1 with fast memory, 1-2 % with slow
//   (results/cpu-amd-epyc-zen5-2vcpu/cpu-decode-tuning.md, "Cache level").
// - Zen 4: prefetcht1 34-51 % less f16 step time than prefetcht0 at llama-2-7b B1 x 4096 and
//   llama-3.1-8b B1 and B8 x 8192 (two binaries interleaved), where prefetcht0 saved only 1-7 %
//   against no software prefetch at all (results/cpu-amd-epyc-zen4-2vcpu/ggml-peer/README.md).
//   The likely reason (the VM has no counters to check it): a line prefetched into L1 holds one
//   of the core's few L1 miss buffers until it arrives, into L2 one of L2's many, so more lines
//   are in flight per core.
// - Sapphire Rapids: prefetcht1 ~5 % faster with the first kernel (cpu-decode-tuning.md above).
extern const bool kPrefetchIntoL1;

inline void prefetch_line(const std::byte* line) {
  if (kPrefetchIntoL1)
    __builtin_prefetch(line, /*rw=*/0, /*locality=*/3);
  else
    __builtin_prefetch(line, /*rw=*/0, /*locality=*/2);
}

// Physical blocks are scattered (a shuffled pool): every block is a fresh stretch on which the
// hardware prefetcher would have to ramp up again. The tile kernels therefore ask for the next
// unit's rows (the next KV head of this tile, or head 0 of the next tile) one row at a time,
// spread over the current unit's work: K rows during the first score pass, each slice of the
// first accumulate pass its share of the V rows' lines, so the requests trickle out instead of
// queueing up in a burst (bursts fill the core's miss buffers and stall the arithmetic behind
// them). Without software prefetch the target point takes ~40 % longer on Sapphire Rapids and
// about twice as long on Zen 5; the orders and distances measured:
// results/cpu-amd-epyc-zen5-2vcpu/cpu-decode-tuning.md, "Prefetch".
//
// Every prefetch here goes through prefetch_line (the level above).
template <int kRowBytes>
inline void prefetch_row(const std::byte* row) {
  for (int offset = 0; offset < kRowBytes; offset += 64) prefetch_line(row + offset);
}

// Lines requested at the start of each physical block's K and V stretch when the driver looks
// the block up, one tile before its rows are computed (the per-unit prefetches above reach a
// block only one unit ahead). Blocks are shuffled, so every block is a fresh region of memory;
// asking for its first lines early makes the later per-row prefetches into it cheaper (why is
// not measured: no hardware counters on the VM).
// 2 lines one tile ahead: without them the step takes 1.8 % longer on Zen 5 with fast memory,
// 2.3 % with slow; the variants: results/cpu-amd-epyc-zen5-2vcpu/cpu-decode-tuning.md.
inline constexpr int kBlockStartLines = 2;

}  // namespace decodebench::cpu::detail
