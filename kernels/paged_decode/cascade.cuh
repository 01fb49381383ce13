// Rung `cascade`: prefix-aware tensor-core decode. `tc` with the batch's shared prefixes read
// once per group instead of once per sequence.
//
// Why: with prefix sharing (a system prompt, few-shot examples, a tree of samples) the members
// of a prefix group read the same physical KV blocks, and every rung below reads them once per
// member. Decode is memory-bound, so the step time follows the bytes: a group of n members with
// a prefix of L tokens costs n x L token reads where L would do. The tensor core makes serving
// several sequences from one read nearly free: tc pads its query group to the MMA's 16 rows and
// wastes the other half (group 4: 12 of 16 rows are zeros), so packing the query groups of
// several members into those rows adds MMA rows, not MMA instructions.
//
// Plan (host, kernels::plan_prefixes, bound by PrefixPlan::bind; checked by prefix_plan_error at
// launch): G groups, each with its members (ascending) and its shared tokens, a whole number of
// blocks; seq_prefix_tokens[b] is b's group's prefix, 0 outside every group. Three launches:
//   prefix pass: grid (Hkv, tiles, chunks). Group g's members are packed into M tiles of 16
//     MMA rows, floor(16 / group) members each (prefix_members_per_tile: 16 at MHA, 4 at group
//     4, 2 at group 8); row r of a tile is head r % group of member r / group. The block reads
//     the prefix through its first member's table (every member's table holds the same blocks
//     there) with tc's cp.async ring and 4-warp tile loop (tc_detail::attend, here with all 16
//     C rows live), and writes each row's normalized partial + LSE into the workspace slot of
//     its chunk. Each prefix byte is read once per (KV head, tile) instead of once per member.
//     chunks: the prefix cut along its tokens in kv_tile_tokens(d) units (as split_kv cuts a
//     context), planned by plan_prefix_chunks so that few groups still fill the GPU.
//   suffix pass: tc's split kernel over [seq_prefix_tokens[b], context_lens[b]) of every
//     sequence (the whole context outside a group; empty when the context is exactly the
//     prefix: its splits then hold LSE -inf), always into the workspace.
//   merge: split_kv's merge_kernel (kPrefix), per (sequence, query head): the num_splits suffix
//     splits and, for a member, its group's num_prefix_chunks prefix partials.
// Workspace rows: [batch][Hq][num_splits + num_prefix_chunks][d] + LSE (split_kv_workspace).
// Without a plan (no group: hit rate 0, or no two sequences share a first block) cascade is tc:
// the same launch, bit for bit.
//
// Napkin math (llama-3.1-8b: Hkv 8, group 4, d 128, f16 KV = 4 KiB per token over the 8 KV
// heads; batch 32 in one group, 4096-token contexts of which 3686 shared, H200 4.8 TB/s):
//   tc:      32 x 4096 x 4 KiB = 537 MB, 112 us
//   cascade: prefix 8 tiles (4 members each) x 3686 x 4 KiB = 121 MB, suffixes 32 x 410 x 4 KiB
//            = 54 MB: 175 MB, 36 us, plus the workspace (32 x 32 x (splits + chunks) x 129 x 4 B,
//            < 1 MB) and one more launch. At MHA (16 members per tile) the prefix term drops 16x.
//   instructions: a prefix warp's 16 tokens take the same d/8 + d/4 MMAs and ldmatrix as tc's
//   (all 16 rows live instead of 8), plus a second row's softmax (~40 instructions), so its
//   instructions per KV byte stay near tc's while each byte serves up to 16 query rows.
//   registers: O is d/2 floats per lane in the prefix pass (all four C registers of d/8 tiles)
//   against tc's d/4. ptxas sm_90a (nvcc 13.0), no spills, no local memory: prefix pass d 64 /
//   128 / 256 = 95 / 127 / 254 (f16), 79 / 127 / 254 (fp8_e4m3); suffix pass 82 / 120 / 224
//   (f16), 70 / 114 / 180 (fp8_e4m3). At d 256 the prefix pass is at the 255 limit: one block
//   per SM (f16, shared memory binds there anyway) or two (fp8). Integer KV: tc_int.cuh (both
//   passes; the prefix pass is its two n8 tiles of query rows), registers in
//   build/kernel-resources.md.
//   static model (SASS main loop, d 128, H200, the soft-cap's block included): prefix pass .083
//   / .161 instructions per KV byte (f16 / fp8_e4m3), an issue bound of 12.7 / 6.5 TB/s; suffix
//   pass .090 / .176, 11.7 / 5.9 TB/s (tc: .088 / .177). Both above HBM's 4.8 TB/s; the prefix
//   pass's bytes serve up to 16 query rows each. Integer KV, prefix / suffix pass, their scales
//   and zeros counted at P = 16 (docs/design.md "Static model"): int8 .194 / .150 (5.4 / 7.0
//   TB/s), int4 .357 / .259 (2.9 / 4.0; at P = 8 .442 / .301), int4_token .363 / .245 (2.9 /
//   4.3).
// Variants: both passes soft-cap their scores and the merge adds a sink (tc's soft_cap and
// merge); windows are refused (ladder.json), since a prefix tile's rows would each need their
// member's own window start.
// `--kernel auto` does not pick cascade (not measured on a GPU yet; kernels::choose_kernel takes
// the first splitting rung, split_kv): name it, `--kernel cascade`.
#pragma once

#include "paged_decode/tc.cuh"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode {

namespace cascade_detail {

using tc_detail::kThreads;

// One (KV head, M tile, chunk) of the prefix pass. The tiles are numbered group by group.
template <DType kKv, int kHeadDim, bool kHalfBlocks = false>
__global__ void __launch_bounds__(kThreads)
    prefix_kernel(const __grid_constant__ PagedDecodeParams p) {
  DECODEBENCH_DYNAMIC_SHARED(unsigned char, smem);
  const int kv_head = static_cast<int>(blockIdx.x);
  const int tile = static_cast<int>(blockIdx.y);
  const int chunk = static_cast<int>(blockIdx.z);
  const int group = p.num_q_heads / p.num_kv_heads;
  const int per_tile = kPrefixTileRows / group;  // prefix_members_per_tile
  int g = 0;
  int first = 0;  // the tile's first member, an index into prefix_group_seqs
  for (int tiles_before = 0; g < p.num_prefix_groups; ++g) {
    const int begin = p.prefix_group_start[g];
    const int tiles = (p.prefix_group_start[g + 1] - begin + per_tile - 1) / per_tile;
    if (tile < tiles_before + tiles) {
      first = begin + (tile - tiles_before) * per_tile;
      break;
    }
    tiles_before += tiles;
  }
  if (g == p.num_prefix_groups) return;  // block-uniform; not for a plan prefix_tiles() counted
  const int members_left = p.prefix_group_start[g + 1] - first;
  const int members = members_left < per_tile ? members_left : per_tile;
  const std::int32_t* seqs = p.prefix_group_seqs + first;
  int t_begin = 0;
  int t_end = 0;
  tc_detail::split_range(0, p.prefix_group_tokens[g], kv_tile_tokens(kHeadDim), p.num_prefix_chunks,
                         chunk, t_begin, t_end);
  const int slots = p.num_splits + p.num_prefix_chunks;  // per workspace row
  const int slot = p.num_splits + chunk;
  // MMA row r: head r % group of member r / group.
  const auto q_row_of = [&](int r) {
    return seqs[r / group] * p.num_q_heads + kv_head * group + r % group;
  };
  tc_detail::attend<kKv, kHeadDim, kPrefixTileRows, kHalfBlocks>(
      p, smem, kv_head, /*table_seq=*/seqs[0], t_begin, t_begin, t_end, members * group, q_row_of,
      [&](int r, int d, float value, const SoftmaxState<float>& state) {
        // [batch][Hq][slots][d], [batch][Hq][slots]
        const std::size_t at = static_cast<std::size_t>(q_row_of(r)) * slots + slot;
        p.partial_out[at * kHeadDim + d] = value;
        if (d == 0) p.partial_lse[at] = state.sum > 0.f ? state.log2_sum_exp2() : -INFINITY;
      });
}

// tc's split kernel over a sequence's suffix [seq_prefix_tokens[b], context_lens[b]), into
// workspace rows of num_splits + num_prefix_chunks slots.
template <DType kKv, int kHeadDim, bool kHalfBlocks = false>
__global__ void __launch_bounds__(kThreads)
    suffix_kernel(const __grid_constant__ PagedDecodeParams p) {
  DECODEBENCH_DYNAMIC_SHARED(unsigned char, smem);
  const int kv_head = static_cast<int>(blockIdx.x);
  const int seq = static_cast<int>(blockIdx.y);
  const int split = static_cast<int>(blockIdx.z);
  const int group = p.num_q_heads / p.num_kv_heads;
  int t_begin = 0;
  int t_end = 0;
  tc_detail::split_range(p.seq_prefix_tokens[seq], p.context_lens[seq], kv_tile_tokens(kHeadDim),
                         p.num_splits, split, t_begin, t_end);
  const int head0 = seq * p.num_q_heads + kv_head * group;  // first q row of the group
  const int slots = p.num_splits + p.num_prefix_chunks;
  tc_detail::attend<kKv, kHeadDim, tc_detail::kRows, kHalfBlocks>(
      p, smem, kv_head, seq, t_begin, t_begin, t_end, group, [&](int r) { return head0 + r; },
      [&](int h, int d, float value, const SoftmaxState<float>& state) {
        const std::size_t at = static_cast<std::size_t>(head0 + h) * slots + split;
        p.partial_out[at * kHeadDim + d] = value;
        if (d == 0) p.partial_lse[at] = state.sum > 0.f ? state.log2_sum_exp2() : -INFINITY;
      });
}

inline dim3 prefix_grid(const PagedDecodeParams& p) {
  return dim3(static_cast<unsigned>(p.num_kv_heads), static_cast<unsigned>(p.num_prefix_tiles),
              static_cast<unsigned>(p.num_prefix_chunks));
}

// The prefix pass, the suffix pass and the merge of one step (launch_cascade).
template <DType kKv, int kHeadDim, bool kHalfBlocks>
LaunchResult launch_passes(const PagedDecodeParams& params, void* stream) {
  const PagedDecodeParams p = tc_detail::with_score_cap(params);
  LaunchResult prefix = DECODEBENCH_LAUNCH(
      (prefix_kernel<kKv, kHeadDim, kHalfBlocks>), prefix_grid(p), dim3(kThreads),
      (tc_detail::smem_bytes<kKv, kHeadDim, kPrefixTileRows, kHalfBlocks>()), stream, p);
  if (!prefix.ok()) return prefix;
  LaunchResult suffix = DECODEBENCH_LAUNCH(
      (suffix_kernel<kKv, kHeadDim, kHalfBlocks>), split_kv_detail::split_grid(p), dim3(kThreads),
      (tc_detail::smem_bytes<kKv, kHeadDim, tc_detail::kRows, kHalfBlocks>()), stream, p);
  if (!suffix.ok()) return suffix;
  const dim3 merge_grid(static_cast<unsigned>(p.num_q_heads), static_cast<unsigned>(p.batch));
  return DECODEBENCH_LAUNCH((split_kv_detail::merge_kernel<kHeadDim, /*kPrefix=*/true>), merge_grid,
                            dim3(split_kv_detail::kMergeThreads), 0, stream, p);
}

}  // namespace cascade_detail

// What launch_cascade launches for `p` (kernels::launch_shape): without a plan tc's kernel;
// with one the suffix pass (tc's resources: the instance the split planner's residency is for).
template <DType kKvDtype, int kHeadDim>
LaunchShape shape_cascade(const PagedDecodeParams& p) {
  if (p.num_prefix_groups == 0) return shape_tc<kKvDtype, kHeadDim>(p);
  if constexpr (kKvDtype == DType::int4) {
    if (tc_detail::half_blocks<kKvDtype>(p.block_size)) {
      return dev::launch_shape_of(
          (cascade_detail::suffix_kernel<kKvDtype, kHeadDim, true>), "suffix_kernel",
          /*group_cap=*/0, split_kv_detail::split_grid(p), dim3(tc_detail::kThreads),
          tc_detail::smem_bytes<kKvDtype, kHeadDim, tc_detail::kRows, true>());
    }
  }
  return dev::launch_shape_of((cascade_detail::suffix_kernel<kKvDtype, kHeadDim>), "suffix_kernel",
                              /*group_cap=*/0, split_kv_detail::split_grid(p),
                              dim3(tc_detail::kThreads),
                              tc_detail::smem_bytes<kKvDtype, kHeadDim>());
}

// tc's tensors, limits and workspace, plus the prefix plan and its counts (num_prefix_chunks,
// num_prefix_tiles, bound with the workspace by split_kv_workspace), all checked once by
// unsupported_reason. No group: launch_tc. Otherwise the prefix pass, the suffix pass and the
// merge (header comment).
template <DType kKvDtype, int kHeadDim>
LaunchResult launch_cascade(const PagedDecodeParams& p, void* stream) {
  if (p.num_prefix_groups == 0) return launch_tc<kKvDtype, kHeadDim>(p, stream);
  if constexpr (kKvDtype == DType::int4) {
    if (tc_detail::half_blocks<kKvDtype>(p.block_size)) {
      return cascade_detail::launch_passes<kKvDtype, kHeadDim, true>(p, stream);
    }
  }
  return cascade_detail::launch_passes<kKvDtype, kHeadDim, false>(p, stream);
}

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS::paged_decode
