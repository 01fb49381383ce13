// PLACEHOLDER: replaced by the real kernel.
#pragma once
#include "paged_decode/launchers.h"
namespace decodebench::kernels::DECODEBENCH_TARGET_NS {
template <DType kKvDtype, int kHeadDim>
LaunchResult launch_pipelined(const PagedDecodeParams&, void*) {
  return {LaunchStatus::unsupported, "pipelined not implemented yet"};
}
}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS
