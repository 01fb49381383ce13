// Rung `split_kv`: `pipelined` with the context split across thread blocks, for the points where
// batch x Hkv blocks cannot fill the GPU (batch 1 at 32k context has 8 blocks for 132 SMs).
//
// What it adds over `pipelined`: grid (Hkv, batch, num_splits). A sequence of length L has
// n = ceil(L / T) tiles of T tokens; with S splits, split s gets n / S whole tiles, one more if
// s < n % S, in order from the front (the larger shares first, the last tile cut at L). So every
// split has a tile when S <= n, the most any split gets is ceil(n / S) (what the planner's model
// counts), and only S > n leaves splits empty, the last ones. Each split runs the pipelined
// main loop over its range and writes a *normalized* partial output (v_scale applied) and its
// log2-sum-exp2 into the workspace:
//   partial_out [batch][Hq][num_splits][d]  fp32
//   partial_lse [batch][Hq][num_splits]     fp32, -inf for an empty split
// A second kernel merges the splits of each (sequence, query head) by log-sum-exp
// (SoftmaxState::merge) and writes the output. num_splits comes from plan_num_splits()
// (kernels/split_kv_plan.cpp); any value >= 1 is correct, including 1. The workspace layout is
// split_kv_workspace() (same file).
//
// Napkin math (llama-3.1-8b, batch 1, 32k context, H200): 134 MB of f16 KV = 28 us at 4.8 TB/s.
// Unsplit that is 8 blocks on 132 SMs; the planner's 49 splits (f16, 3 resident per SM) give 392
// blocks, ~96 KiB in flight per SM, all in one wave. The workspace round trip is batch x Hq x
// splits x (d + 1) x 4 B = 0.81 MB written and read once (< 1 % of the KV bytes). The merge kernel
// (one block of 64 threads per (sequence, query head), coalesced over d, no barriers) costs one
// more launch, ~2-3 us: at this size it, not bandwidth, is what separates the rung from the
// roofline (fusing the merge into the last split block via an atomic counter would remove it; not
// done).
#pragma once

#include "device/softmax_state.h"
#include "paged_decode/pipelined.cuh"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode {

namespace split_kv_detail {

inline constexpr int kMergeThreads = 64;

template <DType kKv, int kHeadDim, int kGroupCap>
__global__ void __launch_bounds__(decode::kThreads)
    split_kernel(const __grid_constant__ PagedDecodeParams p) {
  using Tl = decode::Tiling<kKv, kHeadDim>;
  using S = pipelined_detail::Smem<kKv, kHeadDim, kGroupCap>;
  DECODEBENCH_DYNAMIC_SHARED(unsigned char, smem);
  const int kv_head = static_cast<int>(blockIdx.x);
  const int seq = static_cast<int>(blockIdx.y);
  const int split = static_cast<int>(blockIdx.z);
  const int context = p.context_lens[seq];
  // Whole tiles, the n % S larger shares first: [first, first + count) of n tiles.
  const int tiles = (context + Tl::kTileTokens - 1) / Tl::kTileTokens;
  const int base = tiles / p.num_splits;
  const int extra = tiles % p.num_splits;
  const int first = split * base + (split < extra ? split : extra);
  const int count = base + (split < extra ? 1 : 0);  // 0 only when num_splits > tiles
  const int t_begin = first * Tl::kTileTokens < context ? first * Tl::kTileTokens : context;
  const int t_end =
      (first + count) * Tl::kTileTokens < context ? (first + count) * Tl::kTileTokens : context;

  decode::BlockDecoder<kKv, kHeadDim, kGroupCap> dec;
  dec.init(p, seq, kv_head);
  pipelined_detail::mainloop(dec, p, seq, kv_head, t_begin, t_end, smem);
  float* merge = reinterpret_cast<float*>(smem);
  float* stats =
      reinterpret_cast<float*>(smem + S::kRegionBytes) + S::C::kPartialFloats + S::C::kScoreFloats;
  decode::OutputTarget target;
  target.to_workspace = true;
  target.split = split;
  dec.finish(p, seq, kv_head, target, stats, merge);
}

// One block per (query head, sequence): out = Σ_s 2^(lse_s - M) o_s / Σ_s 2^(lse_s - M), built
// by merging the splits' softmax states one at a time (a split is the state {max = lse, sum = 1}
// with normalized accumulator o_s; an empty split has sum 0 and drops out). The one LSE merge of
// the ladder: kPrefix (cascade) adds, for a sequence in a prefix group (seq_prefix_tokens > 0),
// the num_prefix_chunks partials of its group's prefix pass, stored after its num_splits suffix
// splits in each row of num_splits + num_prefix_chunks slots (split_kv_workspace).
template <int kHeadDim, bool kPrefix = false>
__global__ void __launch_bounds__(kMergeThreads)
    merge_kernel(const __grid_constant__ PagedDecodeParams p) {
  constexpr int kDimsPerThread = kHeadDim / kMergeThreads;
  static_assert(kHeadDim % kMergeThreads == 0, "whole dims per thread");
  const int slots = kPrefix ? p.num_splits + p.num_prefix_chunks : p.num_splits;
  int used = p.num_splits;  // slots of this row that hold a partial
  if constexpr (kPrefix) {
    if (p.seq_prefix_tokens[blockIdx.y] > 0) used = slots;
  }
  const std::size_t q_row = static_cast<std::size_t>(blockIdx.y) * p.num_q_heads + blockIdx.x;
  const float* lse = p.partial_lse + q_row * slots;              // [slots]
  const float* part = p.partial_out + q_row * slots * kHeadDim;  // [slots][d]
  const int tid = static_cast<int>(threadIdx.x);

  SoftmaxState<float> state;
  float acc[kDimsPerThread];
#pragma unroll
  for (int j = 0; j < kDimsPerThread; ++j) acc[j] = 0.f;
  for (int s = 0; s < used; ++s) {
    SoftmaxState<float> split_state;
    split_state.max = lse[s];
    split_state.sum = lse[s] == -INFINITY ? 0.f : 1.f;
    float self_factor = 0.f;
    float split_factor = 0.f;
    state.merge(split_state, self_factor, split_factor);
#pragma unroll
    for (int j = 0; j < kDimsPerThread; ++j) {
      acc[j] = acc[j] * self_factor + part[s * kHeadDim + j * kMergeThreads + tid] * split_factor;
    }
  }
  if (p.has_sinks && state.sum > 0.f) {
    // The head's sink joins the softmax once, here, over all the slots: its max and its sum,
    // no value (tc and cascade; the split_kv rung refuses sinks).
    SoftmaxState<float> sink;
    sink.max = p.sinks[blockIdx.x] * kLog2e;
    sink.sum = 1.f;
    float self_factor = 0.f;
    float sink_factor = 0.f;
    state.merge(sink, self_factor, sink_factor);
#pragma unroll
    for (int j = 0; j < kDimsPerThread; ++j) acc[j] *= self_factor;
  }
  const float inv_sum = state.sum > 0.f ? 1.f / state.sum : 0.f;
#pragma unroll
  for (int j = 0; j < kDimsPerThread; ++j) {
    dev::store_out(p.out, p.q_dtype, static_cast<int>(q_row * kHeadDim + j * kMergeThreads + tid),
                   acc[j] * inv_sum);
  }
}

// The split kernel's grid: (Hkv, batch, num_splits).
inline dim3 split_grid(const PagedDecodeParams& p) {
  return dim3(static_cast<unsigned>(p.num_kv_heads), static_cast<unsigned>(p.batch),
              static_cast<unsigned>(p.num_splits));
}

}  // namespace split_kv_detail

// The split kernel's launch for `p` (kernels::launch_shape): what launch_split_kv launches.
template <DType kKvDtype, int kHeadDim>
LaunchShape shape_split_kv(const PagedDecodeParams& p) {
  static_assert(decode::Tiling<kKvDtype, kHeadDim>::kTileTokens == kv_tile_tokens(kHeadDim),
                "the planner counts work in kv_tile_tokens (kernels.h)");
  return decode::dispatch_group_cap(p.num_q_heads / p.num_kv_heads, [&](auto cap) {
    constexpr int kCap = decltype(cap)::value;
    return dev::launch_shape_of((split_kv_detail::split_kernel<kKvDtype, kHeadDim, kCap>),
                                "split_kernel", kCap, split_kv_detail::split_grid(p),
                                dim3(decode::kThreads),
                                pipelined_detail::Smem<kKvDtype, kHeadDim, kCap>::kBytes);
  });
}

// Same tensors and limits as launch_gqa, plus p.num_splits in 1..65535 and the workspace
// (partial_out / partial_lse, laid out by split_kv_workspace(p, num_splits)); all checked once by
// unsupported_reason(kernel, p, CheckScope::launch).
template <DType kKvDtype, int kHeadDim>
LaunchResult launch_split_kv(const PagedDecodeParams& p, void* stream) {
  const dim3 grid = split_kv_detail::split_grid(p);
  LaunchResult split = decode::dispatch_group_cap(p.num_q_heads / p.num_kv_heads, [&](auto cap) {
    constexpr int kCap = decltype(cap)::value;
    constexpr std::size_t kSmemBytes = pipelined_detail::Smem<kKvDtype, kHeadDim, kCap>::kBytes;
    return DECODEBENCH_LAUNCH((split_kv_detail::split_kernel<kKvDtype, kHeadDim, kCap>), grid,
                              dim3(decode::kThreads), kSmemBytes, stream, p);
  });
  if (!split.ok()) return split;
  const dim3 merge_grid(static_cast<unsigned>(p.num_q_heads), static_cast<unsigned>(p.batch));
  return DECODEBENCH_LAUNCH((split_kv_detail::merge_kernel<kHeadDim>), merge_grid,
                            dim3(split_kv_detail::kMergeThreads), 0, stream, p);
}

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode
