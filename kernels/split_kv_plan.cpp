// The split_kv planner: how many pieces to cut each sequence's context into. Plain C++, host only.
//
// Inputs: the point's shape and `gpu`, what the device holds at once of the split kernel
// instance that would run it (sm_count x ctas_per_sm = slots, one wave; on a GPU from the
// runtime's occupancy of that very instance).
//   blocks = batch x Hkv                 thread blocks without splitting
//   tiles  = ceil(longest / T)           KV tiles of the longest context, T = kv_tile_tokens(d)
//                                        (of its window with one: what a split kernel walks)
//   time(s) = ceil(blocks x s / slots) x ceil(tiles / s)
//                                        waves x tiles per block: the modelled step time
//   splits = the s in 1..limit with the smallest time(s), the fewest splits among equals, where
//   limit  = min(floor(slots / blocks), tiles, floor(longest / kMinTokensPerSplit), kMaxSplits),
//            at least 1.
// The kernel gives split i tiles [i x tiles / s, ...) in whole tiles, the larger shares first
// (split_kv.cuh), so with s <= tiles no split of the longest sequence is empty; a shorter
// sequence of a ragged batch may still leave its last splits empty (correct, just idle).
//
// Why each bound:
//   one wave (floor(slots / blocks)): splitting exists to fill the wave that batch x Hkv leaves
//     empty. Past one wave the model keeps finding gains in the tail wave's quantization (batch
//     16 x 32k would take 114 splits in 37 waves to win 3 %), but a tail wave of this
//     memory-bound kernel still streams at most of peak (each block keeps 32 KiB in flight,
//     pipelined.cuh), and every split adds a prologue that fills the cp.async ring, a partial
//     in the workspace and a term of the merge, none of which the model counts. So once
//     batch x Hkv >= slots the plan is 1.
//   fewest among equals: same modelled time, fewer blocks, less workspace and merge work.
//   256 tokens: a shorter split spends more on the prologue, the cross-row merge and the
//     workspace round trip than it gains (8 tiles at d = 128; the ring alone holds 3-5).
//   tiles: a split with no tile of the longest context would be pure overhead.
//
// Worked examples, llama-3.1-8b (Hkv 8, group 4, d 128, T = 32) on 132 SMs (H100 SXM, H200),
// residency from the toolkit's occupancy calculator on the built instances' resources
// (tests/backends/cuda/cuda_plan_test.cpp):
//   f16, cap 4 (123 registers, 58.8 KiB dynamic shared memory): 3 blocks per SM, 396 slots
//     batch 1, 32k: limit min(49, 1024, 128) = 49, ceil(1024 / 49) = 21 tiles per block and 49
//       is the fewest splits giving 21: 49 splits, 392 blocks (99 % of the wave). The old rule
//       (2 blocks per SM assumed, chunks rounded up to tiles) gave 33 splits of which the last
//       was empty: 32 x 32 tiles already covered the context.
//     batch 1, 8k: the 256-token floor binds: 32 splits of 8 tiles, 256 blocks (65 %).
//     batch 8, 32k: limit 6: 6 splits of 170-171 tiles, 384 blocks (97 %).
//     batch 16: 3 splits (97 %); batch 48 (384 blocks): 1; batch 64 (512 >= 396 blocks): 1.
//   fp8_e4m3, cap 4 (123 registers, 50.8 KiB): 4 per SM, 528 slots
//     batch 1, 32k: limit 66 gives ceil(1024 / 66) = 16 tiles, which 64 splits give too: 64
//       splits of exactly 16 tiles, 512 blocks (97 %).
//   fp8_e4m3, cap 8 (197 registers: 2 warps per sub-partition): 2 per SM, 264 slots
//     batch 1, 32k: limit 33 gives 32 tiles, as do 32 splits: 32 splits, 256 blocks (97 %);
//     batch 32 (256 blocks): 1.
#include <algorithm>

#include "device/paged_kv.h"
#include "kernels.h"

namespace decodebench::kernels {

int plan_pieces(long long blocks, long long longest, int head_dim, const ResidentCtas& gpu) {
  return plan_pieces_in_units(blocks, longest, kv_tile_tokens(head_dim), gpu);
}

int plan_pieces_in_units(long long blocks, long long longest, int unit_tokens,
                         const ResidentCtas& gpu) {
  blocks = std::max(blocks, 1LL);
  const long long slots = gpu.slots();
  const long long tile = std::max(unit_tokens, 1);
  const long long tiles = std::max(1LL, (longest + tile - 1) / tile);
  const long long limit =
      std::max(1LL, std::min({slots / blocks, tiles, longest / kMinTokensPerSplit,
                              static_cast<long long>(kMaxSplits)}));
  long long best = 1;
  long long best_time = -1;
  for (long long s = 1; s <= limit; ++s) {
    const long long time = (blocks * s + slots - 1) / slots * ((tiles + s - 1) / s);
    if (best_time < 0 || time < best_time) {  // strictly better: ties keep the fewer splits
      best = s;
      best_time = time;
    }
  }
  return static_cast<int>(best);
}

int plan_num_splits(const PagedDecodeParams& p, const ResidentCtas& gpu) {
  const bool mla = is_mla(p);
  const long long blocks = static_cast<long long>(std::max(p.batch, 1)) *
                           (mla ? mla_head_blocks(p) : std::max(p.num_kv_heads, 1));
  long long longest = 0;
  if (p.context_lens != nullptr) {
    // What a split kernel walks of each context: from the block holding its window's first token.
    for (int b = 0; b < p.batch; ++b) {
      const int len = p.context_lens[b];
      const int walked = p.block_size > 0
                             ? len - window_first_block(len, p.window, p.block_size) * p.block_size
                             : len;
      longest = std::max<long long>(longest, walked);
    }
  } else {
    longest = static_cast<long long>(std::max(p.max_blocks_per_seq, 0)) * std::max(p.block_size, 0);
  }
  return mla ? plan_pieces_in_units(blocks, longest, kMlaTileTokens, gpu)
             : plan_pieces(blocks, longest, p.head_dim, gpu);
}

int mla_head_tiles(const PagedDecodeParams& p) {
  // q enters the MMA in the KV's MMA type (bf16 for bf16 KV, f16 for f16 and fp8); another q
  // dtype is split into hi + lo, twice the q tile: half the heads fit.
  const DType mma = p.kv_dtype == DType::bf16 ? DType::bf16 : DType::f16;
  const int cap = p.q_dtype == mma ? kMlaMaxHeadTiles : kMlaMaxHeadTiles / 2;
  const int tiles = (std::max(p.num_q_heads, 1) + kMlaHeadTile - 1) / kMlaHeadTile;
  return std::min(tiles, cap);
}

int mla_head_blocks(const PagedDecodeParams& p) {
  const int heads_per_block = kMlaHeadTile * mla_head_tiles(p);
  return (std::max(p.num_q_heads, 1) + heads_per_block - 1) / heads_per_block;
}

SplitKvWorkspace split_kv_workspace(const PagedDecodeParams& p, int num_splits,
                                    int num_prefix_chunks) {
  constexpr std::size_t kAlign = 16;  // every buffer a kernel gets starts 16-byte aligned
  num_prefix_chunks = std::max(num_prefix_chunks, 0);
  const std::size_t rows = static_cast<std::size_t>(std::max(p.batch, 0)) *
                           static_cast<std::size_t>(std::max(p.num_q_heads, 0)) *
                           static_cast<std::size_t>(std::max(num_splits, 0) + num_prefix_chunks);
  SplitKvWorkspace w;
  w.num_splits = num_splits;
  w.num_prefix_chunks = num_prefix_chunks;
  w.num_prefix_tiles = num_prefix_chunks > 0 ? prefix_tiles(p) : 0;
  // [batch][Hq][slots][d] fp32, then [batch][Hq][slots] fp32.
  w.partial_out_offset = 0;
  const int dv = p.v_head_dim > 0 ? p.v_head_dim : p.head_dim;  // MLA: the values' width
  w.partial_out_bytes = rows * static_cast<std::size_t>(std::max(dv, 0)) * sizeof(float);
  w.partial_lse_offset = (w.partial_out_bytes + kAlign - 1) / kAlign * kAlign;
  w.partial_lse_bytes = rows * sizeof(float);
  w.total_bytes = w.partial_lse_offset + w.partial_lse_bytes;
  return w;
}

}  // namespace decodebench::kernels
