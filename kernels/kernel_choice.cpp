// `--kernel auto`: which rung of the ladder runs a point. Plain C++, host only; the cuda and emu
// backends both call it, so the emulator picks what the GPU would for the same device shape.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels.h"

namespace decodebench::kernels {

std::string choose_kernel(const std::vector<KernelInfo>& ladder, const PagedDecodeParams& p,
                          const ResidencyOf& resident) {
  if (ladder.empty()) return {};
  // A prefix-aware rung (cascade) is named, never chosen: it has not been measured on a GPU.
  const auto runs = [&](const KernelInfo& info) {
    return !info.prefix_aware && unsupported_reason(info, p).empty();
  };

  // The longest context: from the host-side lengths when the caller has them, else the table's
  // capacity (what the split planner plans for too).
  int longest = 0;
  if (p.context_lens != nullptr) {
    for (int b = 0; b < p.batch; ++b) longest = std::max(longest, p.context_lens[b]);
  } else {
    longest = p.max_blocks_per_seq * p.block_size;
  }
  // One thread block per (sequence, KV head) leaves most of a wave empty when there are too few
  // of them: the planner then cuts the context into more than one split. Short contexts do not
  // repay the merge launch.
  if (longest >= kSplitKvMinContext) {
    for (const KernelInfo& info : ladder) {
      if (info.uses_workspace && runs(info) && plan_num_splits(p, resident(info)) > 1) {
        return info.name;
      }
    }
  }
  for (auto it = ladder.rbegin(); it != ladder.rend(); ++it) {
    if (!it->uses_workspace && runs(*it)) return it->name;
  }
  // Only a splitting rung runs it (a build narrowed to split_kv, say).
  for (auto it = ladder.rbegin(); it != ladder.rend(); ++it) {
    if (runs(*it)) return it->name;
  }
  return ladder.front().name;
}

std::string choose_kernel(const std::vector<KernelInfo>& ladder, const PagedDecodeParams& p,
                          const ResidentCtas& resident) {
  return choose_kernel(ladder, p, [&](const KernelInfo&) { return resident; });
}

}  // namespace decodebench::kernels
