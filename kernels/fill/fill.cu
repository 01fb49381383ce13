// PLACEHOLDER (CUDA-backend work replaces it)
#include "kernels.h"
namespace decodebench::kernels::DECODEBENCH_TARGET_NS {
LaunchResult launch_fill(const FillParams&, void*) {
  return {LaunchStatus::unsupported, "fill kernel not implemented yet"};
}
}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS
