// PLACEHOLDER: replaced by the real kernel.
#pragma once
#include "paged_decode/launchers.h"
namespace decodebench::kernels::DECODEBENCH_TARGET_NS {
template <DType kKvDtype, int kHeadDim>
LaunchResult launch_split_kv(const PagedDecodeParams&, void*) {
  return {LaunchStatus::unsupported, "split_kv not implemented yet"};
}
}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS
