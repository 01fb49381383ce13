// The split_kv planner: how many pieces to cut each sequence's context into. Plain C++, host only.
//
// The rule:
//   blocks without splitting = batch x Hkv (one per sequence and KV head)
//   slots                    = kBlocksPerSm x sm_count (one wave of 2 resident blocks per SM)
//   splits                   = floor(slots / blocks), at least 1: the most splits whose grid
//                              still runs as a single wave
//   ... capped so no split is shorter than kMinTokensPerSplit tokens of the longest possible
//   context (max_blocks_per_seq x block_size: context_lens lives on the device, so the planner
//   plans for the table's capacity), and at kMaxSplits.
// Why: a split_kv block (the pipelined kernel) keeps 32 KiB in flight; 2 resident blocks per SM
// give 64 KiB, above the ~20-40 KiB that HBM latency x bandwidth asks per SM (pipelined.cuh).
// Every instance fits at least 2 blocks per SM, so the whole grid is resident at once and equal
// splits finish together: no tail wave (rounding the split count up would add one). Splits
// shorter than ~256 tokens spend more on the prologue (filling the ring), the cross-row merge
// and the workspace round trip than they gain; and when batch x Hkv already fills the slots,
// splitting only adds the merge, so the plan is 1.
//   llama-3.1-8b (Hkv 8) on 132 SMs (264 slots): batch 1, 32k context -> 33 splits (~1k tokens
//   each); batch 8 -> 4; batch >= 17 -> 1.
#include <algorithm>

#include "kernels.h"

namespace decodebench::kernels {
namespace {

constexpr int kBlocksPerSm = 2;
constexpr int kMinTokensPerSplit = 256;
constexpr int kMaxSplits = 256;

}  // namespace

int plan_num_splits(const PagedDecodeParams& p, int sm_count) {
  const long long blocks =
      static_cast<long long>(std::max(p.batch, 1)) * std::max(p.num_kv_heads, 1);
  const long long slots = static_cast<long long>(kBlocksPerSm) * std::max(sm_count, 1);
  long long splits = slots / blocks;  // rounds down: the grid stays one wave
  const long long max_context =
      static_cast<long long>(std::max(p.max_blocks_per_seq, 1)) * std::max(p.block_size, 1);
  const long long by_length = std::max(1LL, max_context / kMinTokensPerSplit);
  splits = std::min({splits, by_length, static_cast<long long>(kMaxSplits)});
  return static_cast<int>(std::max(1LL, splits));
}

SplitKvWorkspace split_kv_workspace(const PagedDecodeParams& p, int num_splits) {
  constexpr std::size_t kAlign = 16;  // every buffer a kernel gets starts 16-byte aligned
  const std::size_t rows = static_cast<std::size_t>(std::max(p.batch, 0)) *
                           static_cast<std::size_t>(std::max(p.num_q_heads, 0)) *
                           static_cast<std::size_t>(std::max(num_splits, 0));
  SplitKvWorkspace w;
  w.num_splits = num_splits;
  // [batch][Hq][num_splits][d] fp32, then [batch][Hq][num_splits] fp32.
  w.partial_out_offset = 0;
  w.partial_out_bytes = rows * static_cast<std::size_t>(std::max(p.head_dim, 0)) * sizeof(float);
  w.partial_lse_offset = (w.partial_out_bytes + kAlign - 1) / kAlign * kAlign;
  w.partial_lse_bytes = rows * sizeof(float);
  w.total_bytes = w.partial_lse_offset + w.partial_lse_bytes;
  return w;
}

}  // namespace decodebench::kernels
