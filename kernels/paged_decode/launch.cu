// PLACEHOLDER (emulator work replaces it): validates against the registry, then dispatches.
#include "paged_decode/launchers.h"
namespace decodebench::kernels::DECODEBENCH_TARGET_NS {
LaunchResult launch_paged_decode(std::string_view kernel, const PagedDecodeParams& p, void* stream) {
  return dispatch_compiled(kernel, p, stream);
}
}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS
