// launch_paged_decode: the one entry point the harness calls for the paged-decode ladder.
// Looks the kernel up in the registry, checks what the registry and the params can check
// without touching memory, then dispatches to the compiled (kernel, KV dtype, head_dim) instance.
#include <cstdint>
#include <string>
#include <utility>

#include "kernels.h"
#include "paged_decode/launchers.h"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS {
namespace {

LaunchResult unsupported(std::string why) { return {LaunchStatus::unsupported, std::move(why)}; }

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// Shape and pointer checks every rung relies on. Empty when fine.
std::string params_problem(const KernelInfo& k, const PagedDecodeParams& p) {
  if (p.q == nullptr || p.out == nullptr || p.k_cache == nullptr || p.v_cache == nullptr ||
      p.block_tables == nullptr || p.context_lens == nullptr) {
    return "a q/out/k_cache/v_cache/block_tables/context_lens pointer is null";
  }
  if (p.batch < 1) return "batch must be >= 1, got " + std::to_string(p.batch);
  if (p.num_q_heads < 1) return "num_q_heads must be >= 1, got " + std::to_string(p.num_q_heads);
  if (p.max_blocks_per_seq < 1 || p.num_blocks < 1) {
    return "max_blocks_per_seq and num_blocks must be >= 1, got " +
           std::to_string(p.max_blocks_per_seq) + " and " + std::to_string(p.num_blocks);
  }
  if (!aligned16(p.k_cache) || !aligned16(p.v_cache)) {
    return "k_cache and v_cache must be 16-byte aligned (the kernels use 16-byte loads)";
  }
  if (!(p.softmax_scale > 0.f) || !(p.k_scale > 0.f) || !(p.v_scale > 0.f)) {
    return "softmax_scale, k_scale and v_scale must be positive";
  }
  if (k.uses_workspace) {
    if (p.num_splits < 1) return "kernel '" + k.name + "' needs num_splits >= 1";
    if (p.partial_out == nullptr || p.partial_lse == nullptr) {
      return "kernel '" + k.name + "' needs partial_out and partial_lse (split_kv_workspace_bytes)";
    }
  }
  return {};
}

}  // namespace

LaunchResult launch_paged_decode(std::string_view kernel, const PagedDecodeParams& p, void* stream) {
  const KernelInfo* info = find_kernel(kernel);
  if (info == nullptr) {
    return unsupported("unknown kernel '" + std::string(kernel) + "'; this build has: " +
                       ladder_names());
  }
  if (std::string why = unsupported_reason(*info, p); !why.empty()) return unsupported(why);
  if (std::string why = params_problem(*info, p); !why.empty()) {
    return unsupported("kernel '" + info->name + "': " + why);
  }
  return dispatch_compiled(kernel, p, stream);
}

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS
