// Rung `pipelined`: `gqa` plus K/V tiles staged in shared memory by a multi-stage cp.async ring,
// so each block keeps several tiles of loads in flight while it computes.
//
// What it adds over `gqa`: a gqa block has nothing in flight while it computes a tile; here
// tiles i+1 .. i+S-1 are on their way (cp.async.cg, 16-byte, L1 bypassed) while tile i is
// computed from shared memory. The ring is sized so that (S - 1) tiles = 32 KiB are in flight
// per block: S = 3 tiles of 16 KiB for f16/bf16, S = 5 tiles of 8 KiB for fp8.
//
// Shape: grid (Hkv, batch), 128 threads. Per tile:
//   wait for tile i (cp.async.wait_group S-2), barrier      (tile i visible; stage i-1 free)
//   issue tile i+S-1 into the freed stage, commit; load the block ids of tile i+S
//   partial q.k from smem -> partials, barrier, reduce -> scores, barrier, rescale + p.v from smem
// Copy mapping: thread t copies 16-byte granules t + 128k of the K tile and of the V tile
// (k < 4 for f16/bf16, k < 2 for fp8), granule g = (token g / (row/16), byte 16 (g % (row/16)));
// a warp's copies cover whole rows: coalesced. The K/V rows of a tile sit contiguously in the
// stage ([T][d]), and a warp's compute reads are 32 consecutive chunks: conflict-free.
//
// Napkin math (H200: 4.8 TB/s / 132 SMs / ~1.8 GHz ~ 20 B/clk/SM, ~1 us loaded latency, so
// Little's law wants ~20-40 KiB in flight per SM at all times):
//   in flight per block: 32 KiB, during compute too (2 stages of 16 KiB at f16, 4 of 8 KiB at fp8)
//   shared memory (head_dim 128): ring 48 KiB (f16) / 40 KiB (fp8) + partials, scores and stats
//     2760 B x cap: f16 cap 2 / 4 / 8 = 53.4 / 58.8 / 69.6 KiB; fp8 cap 4 / 8 = 50.8 / 61.6 KiB
//   registers (ptxas, head_dim 128): cap 2 / 4 / 8 = 71 / 122 / 196 (f16), 71 / 120 / 196 (fp8)
//     (K/V chunks are read from the ring one at a time, so fewer than gqa's)
//   blocks per SM (min of 64 K registers, 228 KiB smem): f16 cap 4 -> 3, fp8 cap 4 -> 4, cap 8
//     -> 2; in flight per SM 64-128 KiB, above what Little's law asks.
//   waves: llama-3.1-8b batch 64 = 512 blocks on 132 x 3 slots = 1.3 waves at f16; the tail wave
//     (116 blocks x 32 KiB = 3.7 MB in flight vs ~4.8 MB needed) runs at ~75 % of peak, so ~93 %
//     overall (why the split planner does not split there). kBytesInFlight is the knob.
//   barriers: 3 per tile, 3 at the end; no warp shuffles.
#pragma once

#include "paged_decode/decode_common.cuh"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode {

namespace pipelined_detail {

inline constexpr int kBytesInFlight = 32 * 1024;  // per block, (S - 1) tiles of K+V

template <DType kKv, int kHeadDim, int kGroupCap>
struct Smem {
  using Tl = decode::Tiling<kKv, kHeadDim>;
  using C = decode::ComputeSmem<kKv, kHeadDim, kGroupCap>;
  static constexpr int kStageBytes = 2 * Tl::kTileBytes;  // K tile then V tile, each [T][d]
  static constexpr int kStages = 1 + kBytesInFlight / kStageBytes;
  static constexpr int kRingBytes = kStages * kStageBytes;
  // The final merge buffer aliases the ring (empty by then).
  static constexpr int kRegionBytes = kRingBytes > static_cast<int>(C::kMergeFloats * sizeof(float))
                                          ? kRingBytes
                                          : static_cast<int>(C::kMergeFloats * sizeof(float));
  static constexpr std::size_t kBytes =
      kRegionBytes + (C::kPartialFloats + C::kScoreFloats + C::kStatFloats) * sizeof(float);
  static_assert(kStages >= 2, "a ring needs at least two stages");
  static_assert(kRegionBytes % 16 == 0, "16-byte aligned pieces");
};

// The pipelined main loop over tokens [t_begin, t_end) of one (sequence, KV head): shared by
// `pipelined` (the whole context) and `split_kv` (one split of it). `smem` is the block's
// dynamic shared memory laid out as Smem. Leaves no cp.async in flight.
template <DType kKv, int kHeadDim, int kGroupCap>
__device__ __forceinline__ void mainloop(decode::BlockDecoder<kKv, kHeadDim, kGroupCap>& dec,
                                         const PagedDecodeParams& p, int seq, int kv_head,
                                         int t_begin, int t_end, unsigned char* smem) {
  using Tl = decode::Tiling<kKv, kHeadDim>;
  using S = Smem<kKv, kHeadDim, kGroupCap>;
  constexpr int kPasses = decode::kPasses;
  constexpr int kStages = S::kStages;
  constexpr int kGranulesPerRow = Tl::kRowBytes / 16;
  constexpr int kCopies = Tl::kTileBytes / 16 / decode::kThreads;  // per thread, per K (or V)
  constexpr int kCopyRowStride = decode::kThreads / kGranulesPerRow;
  static_assert(Tl::kTileBytes % (16 * decode::kThreads) == 0, "whole granules per thread");
  static_assert(decode::kThreads % kGranulesPerRow == 0, "a thread copies one column of granules");

  unsigned char* ring = smem;                                          // [S][2][T][d]
  float* partials = reinterpret_cast<float*>(smem + S::kRegionBytes);  // [cap][T][C+4]
  float* scores = partials + S::C::kPartialFloats;                     // [cap][T]

  const int tid = static_cast<int>(threadIdx.x);
  const int copy_row = tid / kGranulesPerRow;          // first tile token this thread copies
  const int copy_byte = (tid % kGranulesPerRow) * 16;  // its byte offset within the row
  const int block_shift = decode::log2_pow2(p.block_size);
  const int slot_mask = p.block_size - 1;
  const float scale = decode::score_scale_log2(p);
  const auto* k_base = static_cast<const unsigned char*>(p.k_cache);
  const auto* v_base = static_cast<const unsigned char*>(p.v_cache);
  const int num_tiles =
      t_end > t_begin ? (t_end - t_begin + Tl::kTileTokens - 1) / Tl::kTileTokens : 0;

  // Physical blocks of the tokens this thread copies in the next tile to issue (one ahead).
  int block[kCopies];
  auto fetch_blocks = [&](int tile_index) {
#pragma unroll
    for (int k = 0; k < kCopies; ++k) {
      const int t = t_begin + tile_index * Tl::kTileTokens + copy_row + k * kCopyRowStride;
      block[k] = t < t_end ? decode::block_of(p, seq, t, block_shift) : 0;
    }
  };
  auto issue = [&](int tile_index) {
    unsigned char* k_dst = ring + (tile_index % kStages) * S::kStageBytes;
    unsigned char* v_dst = k_dst + Tl::kTileBytes;
#pragma unroll
    for (int k = 0; k < kCopies; ++k) {
      const int row = copy_row + k * kCopyRowStride;
      const int t = t_begin + tile_index * Tl::kTileTokens + row;
      const bool valid = t < t_end;  // past the end: zero-filled, nothing read
      const std::size_t off = valid ? kv_row_offset(block[k], kv_head, t & slot_mask,
                                                    p.num_kv_heads, p.block_size, kHeadDim) *
                                              Tl::kElemBytes +
                                          copy_byte
                                    : 0;
      const int dst = row * Tl::kRowBytes + copy_byte;
      dev::cp_async<16>(k_dst + dst, k_base + off, valid ? 16 : 0);
      dev::cp_async<16>(v_dst + dst, v_base + off, valid ? 16 : 0);
    }
  };

  // Prologue: tiles 0 .. S-2 in flight (one commit group per tile, empty groups past the end so
  // the wait count below stays uniform).
#pragma unroll 1
  for (int s = 0; s < kStages - 1; ++s) {
    fetch_blocks(s);
    if (s < num_tiles) issue(s);
    dev::cp_async_commit();
  }
  fetch_blocks(kStages - 1);

#pragma unroll 1
  for (int i = 0; i < num_tiles; ++i) {
    dev::cp_async_wait<kStages - 2>();  // this thread's copies of tile i have landed
    __syncthreads();                    // ... everyone's; and everyone is done with tile i-1
    const int next = i + kStages - 1;   // refill the stage tile i-1 used
    if (next < num_tiles) issue(next);
    dev::cp_async_commit();
    fetch_blocks(next + 1);

    const unsigned char* k_tile = ring + (i % kStages) * S::kStageBytes;  // [T][d]
    const unsigned char* v_tile = k_tile + Tl::kTileBytes;                // [T][d]
    const int chunk = dec.row * Tl::kRowBytes + dec.lane * Tl::kChunkBytes;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      dec.partial_scores(
          pass, decode::load_chunk_shared<kKv>(k_tile + pass * Tl::kRows * Tl::kRowBytes + chunk),
          partials);
    }
    __syncthreads();
    dec.reduce_scores(t_end - (t_begin + i * Tl::kTileTokens), scale, partials, scores);
    __syncthreads();
    dec.rescale(scores);
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      dec.accumulate(
          pass, decode::load_chunk_shared<kKv>(v_tile + pass * Tl::kRows * Tl::kRowBytes + chunk),
          scores);
    }
  }
  dev::cp_async_wait_all();  // only empty groups can be left; keeps the ring reusable
}

template <DType kKv, int kHeadDim, int kGroupCap>
__global__ void __launch_bounds__(decode::kThreads)
    pipelined_kernel(const __grid_constant__ PagedDecodeParams p) {
  using S = Smem<kKv, kHeadDim, kGroupCap>;
  DECODEBENCH_DYNAMIC_SHARED(unsigned char, smem);
  const int kv_head = static_cast<int>(blockIdx.x);
  const int seq = static_cast<int>(blockIdx.y);
  decode::BlockDecoder<kKv, kHeadDim, kGroupCap> dec;
  dec.init(p, seq, kv_head);
  mainloop(dec, p, seq, kv_head, /*t_begin=*/0, /*t_end=*/p.context_lens[seq], smem);
  float* merge = reinterpret_cast<float*>(smem);  // aliases the ring
  float* stats =
      reinterpret_cast<float*>(smem + S::kRegionBytes) + S::C::kPartialFloats + S::C::kScoreFloats;
  dec.finish(p, seq, kv_head, decode::OutputTarget{}, stats, merge);
}

}  // namespace pipelined_detail

// Same tensors and limits as launch_gqa.
template <DType kKvDtype, int kHeadDim>
LaunchResult launch_pipelined(const PagedDecodeParams& p, void* stream) {
  const dim3 grid(static_cast<unsigned>(p.num_kv_heads), static_cast<unsigned>(p.batch));
  return decode::dispatch_group_cap(p.num_q_heads / p.num_kv_heads, [&](auto cap) {
    constexpr int kCap = decltype(cap)::value;
    constexpr std::size_t kSmemBytes = pipelined_detail::Smem<kKvDtype, kHeadDim, kCap>::kBytes;
    return DECODEBENCH_LAUNCH((pipelined_detail::pipelined_kernel<kKvDtype, kHeadDim, kCap>), grid,
                              dim3(decode::kThreads), kSmemBytes, stream, p);
  });
}

// What launch_pipelined launches for `p` (kernels::launch_shape).
template <DType kKvDtype, int kHeadDim>
LaunchShape shape_pipelined(const PagedDecodeParams& p) {
  const dim3 grid(static_cast<unsigned>(p.num_kv_heads), static_cast<unsigned>(p.batch));
  return decode::dispatch_group_cap(p.num_q_heads / p.num_kv_heads, [&](auto cap) {
    constexpr int kCap = decltype(cap)::value;
    return dev::launch_shape_of((pipelined_detail::pipelined_kernel<kKvDtype, kHeadDim, kCap>),
                                "pipelined_kernel", kCap, grid, dim3(decode::kThreads),
                                pipelined_detail::Smem<kKvDtype, kHeadDim, kCap>::kBytes);
  });
}

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode
