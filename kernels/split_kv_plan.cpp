// The split_kv planner: how many pieces to cut each sequence's context into. Plain C++, host only.
//
// The rule:
//   blocks without splitting   = batch x Hkv (one per sequence and KV head)
//   target                     = kWaves x kBlocksPerSm x sm_count
//   splits                     = ceil(target / blocks), at least 1
//   ... capped so no split is shorter than kMinTokensPerSplit tokens of the longest possible
//   context (max_blocks_per_seq x block_size: context_lens lives on the device, so the planner
//   plans for the table's capacity), and at kMaxSplits.
// Why: a split_kv block (the pipelined kernel) keeps 32 KiB in flight, and 2 resident blocks
// per SM are what the memory system needs (see pipelined.cuh), so the grid should offer at least
// 2 blocks per SM, twice over (2 waves) so the tail of ragged splits evens out. Splits shorter
// than ~256 tokens spend more on the prologue (filling the ring), the cross-row merge and the
// workspace round trip than they gain; and when batch x Hkv alone covers the target, splitting
// only adds the merge, so the plan is 1.
//   llama-3.1-8b (Hkv 8) on 132 SMs: batch 1 ctx 32k -> 66 splits (~500 tokens each);
//   batch 8 -> 9; batch 64 -> 2 ... batch >= 66 -> 1.
#include <algorithm>

#include "kernels.h"

namespace decodebench::kernels {
namespace {

constexpr int kBlocksPerSm = 2;
constexpr int kWaves = 2;
constexpr int kMinTokensPerSplit = 256;
constexpr int kMaxSplits = 256;

}  // namespace

int plan_num_splits(const PagedDecodeParams& p, int sm_count) {
  const long long blocks = static_cast<long long>(std::max(p.batch, 1)) * std::max(p.num_kv_heads, 1);
  const long long target = static_cast<long long>(kWaves) * kBlocksPerSm * std::max(sm_count, 1);
  if (blocks >= target) return 1;
  long long splits = (target + blocks - 1) / blocks;
  const long long max_context = static_cast<long long>(std::max(p.max_blocks_per_seq, 1)) *
                                std::max(p.block_size, 1);
  const long long by_length = std::max(1LL, max_context / kMinTokensPerSplit);
  splits = std::min({splits, by_length, static_cast<long long>(kMaxSplits)});
  return static_cast<int>(std::max(1LL, splits));
}

std::size_t split_kv_workspace_bytes(const PagedDecodeParams& p, int num_splits) {
  const std::size_t rows = static_cast<std::size_t>(std::max(p.batch, 0)) *
                           static_cast<std::size_t>(std::max(p.num_q_heads, 0)) *
                           static_cast<std::size_t>(std::max(num_splits, 0));
  // partial_out [batch][Hq][num_splits][d] then partial_lse [batch][Hq][num_splits], fp32.
  return rows * (static_cast<std::size_t>(std::max(p.head_dim, 0)) + 1) * sizeof(float);
}

}  // namespace decodebench::kernels
