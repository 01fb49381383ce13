// The cascade rung's host-side schedule: how its prefix pass tiles the members of each prefix
// group into MMA rows, how many chunks each group's prefix is cut into, how many splits the
// suffix pass takes, and the workspace of both. Plain C++, host only.
//
// Tiles: one M tile is 16 MMA rows; a member brings its query group (Hq / Hkv rows), so a tile
// packs floor(16 / group) members (16 at MHA, 8 at group 2, 5 at 3, 4 at 4, 3 at 5, 2 at 6..8)
// and group g takes ceil(members_g / that) tiles. The prefix pass is one thread block per (KV
// head, tile, chunk): every block reads its group's prefix blocks once for all its members.
//
// Chunks: the prefix pass and the suffix pass are separate launches, each planned to fill its
// own wave with the split planner's rule (plan_pieces, split_kv_plan.cpp): the prefix pass has
// Hkv x tiles blocks over the longest group prefix, the suffix pass batch x Hkv blocks over the
// longest suffix (a member's context minus its prefix). A few large groups are what the chunks
// are for: 1 group of 64 MHA members at Hkv 32 is 128 blocks; a 4k-token prefix then takes 3
// chunks on 132 SMs x 3 blocks. Shorter groups' prefixes leave their last chunks empty
// (partials with LSE -inf, which the merge drops), as split_kv's splits do.
//
// Why the residency of the suffix (tc) instance for both passes: the backends ask the runtime
// for one instance per point (launch_shape's main kernel); the prefix kernel keeps twice the
// accumulator rows (more registers, a larger merge buffer), so it may hold fewer blocks per SM
// than counted, which only makes its wave estimate optimistic (fewer chunks than ideal).
#include <algorithm>
#include <vector>

#include "kernels.h"

namespace decodebench::kernels {

int prefix_tiles(const PagedDecodeParams& p) {
  if (p.num_prefix_groups <= 0 || p.prefix_group_start == nullptr || p.num_kv_heads <= 0) return 0;
  const int per_tile = prefix_members_per_tile(p.num_q_heads / p.num_kv_heads);
  if (per_tile <= 0) return 0;
  int tiles = 0;
  for (int g = 0; g < p.num_prefix_groups; ++g) {
    const int members = p.prefix_group_start[g + 1] - p.prefix_group_start[g];
    tiles += (std::max(members, 0) + per_tile - 1) / per_tile;
  }
  return tiles;
}

int plan_prefix_chunks(const PagedDecodeParams& p, const ResidentCtas& gpu) {
  const int tiles = prefix_tiles(p);
  if (tiles == 0 || p.prefix_group_tokens == nullptr) return 0;
  long long longest = 0;
  for (int g = 0; g < p.num_prefix_groups; ++g)
    longest = std::max<long long>(longest, p.prefix_group_tokens[g]);
  return plan_pieces(static_cast<long long>(tiles) * std::max(p.num_kv_heads, 1), longest,
                     p.head_dim, gpu);
}

int plan_suffix_splits(const PagedDecodeParams& p, const ResidentCtas& gpu) {
  if (p.num_prefix_groups <= 0 || p.seq_prefix_tokens == nullptr || p.context_lens == nullptr)
    return plan_num_splits(p, gpu);
  std::vector<std::int32_t> suffix(static_cast<std::size_t>(std::max(p.batch, 0)));
  for (int b = 0; b < p.batch; ++b) suffix[b] = p.context_lens[b] - p.seq_prefix_tokens[b];
  PagedDecodeParams q = p;
  q.context_lens = suffix.data();
  return plan_num_splits(q, gpu);
}

SplitKvWorkspace plan_workspace(const KernelInfo& kernel, const PagedDecodeParams& p,
                                const ResidentCtas& gpu) {
  if (!kernel.uses_workspace) {
    SplitKvWorkspace none;
    return none;
  }
  if (!kernel.prefix_aware || p.num_prefix_groups <= 0)
    return split_kv_workspace(p, plan_num_splits(p, gpu));
  return split_kv_workspace(p, plan_suffix_splits(p, gpu), plan_prefix_chunks(p, gpu));
}

}  // namespace decodebench::kernels
