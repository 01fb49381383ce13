// Rung `gqa`: one thread block per (sequence, KV head) serving the whole query group.
//
// What it adds over `naive` (one block per query head): each K/V row is read from HBM once for
// all `group` query heads instead of once per head, so at GQA 8 it streams 1/8 of the bytes.
// Also: 16-byte (16-bit KV) / 8-byte (fp8) coalesced read-only loads, online softmax in base 2,
// and the block-table entries of the next tile loaded while the current tile computes.
//
// Shape: grid (Hkv, batch), 128 threads; thread layout and per-tile steps in decode_common.cuh.
// Per tile (T tokens, 4 passes) each thread issues its 4 K and 4 V chunk loads up front (both in
// flight together), then: partial q.k -> smem, barrier, reduce to scores, barrier, rescale +
// accumulate V. Loads go straight from HBM into registers: no shared-memory staging (that is the
// next rung), so while a block computes it has nothing in flight; latency is hidden only by the
// other blocks on the SM.
//
// Napkin math (H200: 4.8 TB/s / 132 SMs / ~1.8 GHz ~ 20 B/clk/SM; H100 SXM ~14 B/clk/SM):
//   bytes in flight per block while loading: one tile of K+V = 16 KiB (f16/bf16), 8 KiB (fp8)
//   registers (ptxas, head_dim 128): cap 2 / 4 / 8 = 94 / 128 / 206 (f16), 80 / 124 / 198 (fp8)
//     -> 5 / 4 / 2 blocks per SM (64 K registers); cap 4 (llama-3.1-8b, group 4) at f16 keeps up
//     to 64 KiB in flight per SM, but only while no block is computing, so this rung's bandwidth
//     rests on occupancy (the pipelined rung keeps loads in flight during compute).
//   shared memory: max(partials + scores, final merge buffer) + row stats = 4168 B x cap at
//     head_dim 128 (16.3 KiB at cap 4): never the occupancy limit.
//   work per token and KV head at group g, head_dim 128: 2 x 128 x g FMA (q.k and p.v) + 256
//     conversions; g = 4: 1024 FMA = 8 clk/SM at 128 FMA/clk, against 512 B / 20 B/clk = 25 clk
//     of HBM time at f16 and 12.5 clk at fp8: memory-bound, with ~2x headroom at fp8.
//   barriers: 2 per tile (32 tokens at head_dim 128), 3 at the end; no warp shuffles.
#pragma once

#include "paged_decode/decode_common.cuh"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode {

namespace gqa_detail {

// Shared memory of one gqa block, in floats: [partials | scores] (aliased by the final merge
// buffer) then [row stats | block stats].
template <DType kKv, int kHeadDim, int kGroupCap>
struct Smem {
  using C = decode::ComputeSmem<kKv, kHeadDim, kGroupCap>;
  static constexpr int kMainFloats = C::kPartialFloats + C::kScoreFloats;
  static constexpr int kRegionFloats =
      kMainFloats > C::kMergeFloats ? kMainFloats : C::kMergeFloats;
  static constexpr std::size_t kBytes = (kRegionFloats + C::kStatFloats) * sizeof(float);
};

template <DType kKv, int kHeadDim, int kGroupCap>
__global__ void __launch_bounds__(decode::kThreads)
    gqa_kernel(const __grid_constant__ PagedDecodeParams p) {
  using Tl = decode::Tiling<kKv, kHeadDim>;
  using S = Smem<kKv, kHeadDim, kGroupCap>;
  using Chunk = decode::RawChunk<kKv>;
  constexpr int kPasses = decode::kPasses;

  DECODEBENCH_DYNAMIC_SHARED(float, smem);
  float* partials = smem;                       // [cap][T][C + 4]
  float* scores = smem + S::C::kPartialFloats;  // [cap][T]
  float* merge = smem;                          // [cap][R][d], after the loop
  float* stats = smem + S::kRegionFloats;       // [R + 1][cap][2]

  const int kv_head = static_cast<int>(blockIdx.x);
  const int seq = static_cast<int>(blockIdx.y);
  decode::BlockDecoder<kKv, kHeadDim, kGroupCap> dec;
  dec.init(p, seq, kv_head);

  const int context = p.context_lens[seq];
  const int block_shift = decode::log2_pow2(p.block_size);
  const int slot_mask = p.block_size - 1;
  const float scale = decode::score_scale_log2(p);
  const auto* k_base = static_cast<const unsigned char*>(p.k_cache);
  const auto* v_base = static_cast<const unsigned char*>(p.v_cache);

  // Physical block of this thread's token in each pass of a tile, fetched one tile ahead.
  int block[kPasses];
  auto fetch_blocks = [&](int tile) {
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int t = tile + pass * Tl::kRows + dec.row;
      block[pass] = t < context ? decode::block_of(p, seq, t, block_shift) : 0;
    }
  };
  fetch_blocks(0);

  for (int tile = 0; tile < context; tile += Tl::kTileTokens) {
    // Issue all of this tile's K and V loads before using any of them.
    Chunk k_raw[kPasses];
    Chunk v_raw[kPasses];
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int t = tile + pass * Tl::kRows + dec.row;
      if (t < context) {
        const std::size_t off = decode::chunk_byte_offset<kKv, kHeadDim>(p, block[pass], kv_head,
                                                                         t & slot_mask, dec.lane);
        k_raw[pass] = decode::load_chunk_global<kKv>(k_base + off);
        v_raw[pass] = decode::load_chunk_global<kKv>(v_base + off);
      } else {
        k_raw[pass] = decode::zero_chunk<kKv>();  // masked: must be finite (0 * v must be 0)
        v_raw[pass] = decode::zero_chunk<kKv>();
      }
    }
    fetch_blocks(tile + Tl::kTileTokens);

#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) dec.partial_scores(pass, k_raw[pass], partials);
    __syncthreads();
    dec.reduce_scores(context - tile, scale, partials, scores);
    __syncthreads();
    dec.rescale(scores);
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) dec.accumulate(pass, v_raw[pass], scores);
  }

  dec.finish(p, seq, kv_head, decode::OutputTarget{}, stats, merge);
}

}  // namespace gqa_detail

// q/out [batch][Hq][d] (q_dtype), K/V caches [num_blocks][Hkv][P][d] (kKvDtype), block tables
// [batch][max_blocks_per_seq], context_lens [batch]. Group 1..8; any power-of-two P >= 8.
// Preconditions: unsupported_reason(kernel, p, CheckScope::launch) is empty (launch_paged_decode
// checks it once; the instance matches p's KV dtype and head_dim by dispatch).
template <DType kKvDtype, int kHeadDim>
LaunchResult launch_gqa(const PagedDecodeParams& p, void* stream) {
  const dim3 grid(static_cast<unsigned>(p.num_kv_heads), static_cast<unsigned>(p.batch));
  return decode::dispatch_group_cap(p.num_q_heads / p.num_kv_heads, [&](auto cap) {
    constexpr int kCap = decltype(cap)::value;
    constexpr std::size_t kSmemBytes = gqa_detail::Smem<kKvDtype, kHeadDim, kCap>::kBytes;
    return DECODEBENCH_LAUNCH((gqa_detail::gqa_kernel<kKvDtype, kHeadDim, kCap>), grid,
                              dim3(decode::kThreads), kSmemBytes, stream, p);
  });
}

// What launch_gqa launches for `p` (kernels::launch_shape).
template <DType kKvDtype, int kHeadDim>
LaunchShape shape_gqa(const PagedDecodeParams& p) {
  const dim3 grid(static_cast<unsigned>(p.num_kv_heads), static_cast<unsigned>(p.batch));
  return decode::dispatch_group_cap(p.num_q_heads / p.num_kv_heads, [&](auto cap) {
    constexpr int kCap = decltype(cap)::value;
    return dev::launch_shape_of((gqa_detail::gqa_kernel<kKvDtype, kHeadDim, kCap>), "gqa_kernel",
                                kCap, grid, dim3(decode::kThreads),
                                gqa_detail::Smem<kKvDtype, kHeadDim, kCap>::kBytes);
  });
}

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode
