// launch_paged_decode: the one entry point the harness calls for the paged-decode ladder.
// Looks the kernel up in the registry, checks every run-time precondition once
// (unsupported_reason, launch scope: the launchers trust it), then dispatches to the compiled
// (kernel, KV dtype, head_dim) instance.
#include <string>
#include <utility>

#include "kernels.h"
#include "paged_decode/launchers.h"

namespace decodebench::kernels::DECODEBENCH_TARGET_NS {

LaunchResult launch_paged_decode(std::string_view kernel, const PagedDecodeParams& p,
                                 void* stream) {
  const KernelInfo* info = find_kernel(kernel);
  if (info == nullptr) {
    return {LaunchStatus::unsupported,
            "unknown kernel '" + std::string(kernel) + "' (valid: " + ladder_names() + ")"};
  }
  if (std::string why = unsupported_reason(*info, p, CheckScope::launch); !why.empty()) {
    return {LaunchStatus::unsupported, std::move(why)};
  }
  return dispatch_compiled(kernel, p, stream);
}

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS
