// launch_paged_decode: the one entry point the harness calls for the paged-decode ladder.
// Looks the kernel up in the registry, checks every run-time precondition once
// (unsupported_reason, launch scope: the launchers trust it), then dispatches to the compiled
// (kernel, KV dtype, head_dim) instance. launch_shape and (CUDA) resident_ctas_per_sm go the
// same way to what that instance would launch.
#include <string>
#include <utility>

#include "kernels.h"
#include "paged_decode/launchers.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace decodebench::kernels::DECODEBENCH_TARGET_NS {
namespace {

// The emulator's pointers are host pointers, so the prefix plan can be checked in full; on the
// GPU they are device pointers (the backend checked its host copy of the plan).
#if defined(__CUDACC__)
constexpr CheckScope kLaunchScope = CheckScope::launch_device;
#else
constexpr CheckScope kLaunchScope = CheckScope::launch;
#endif

// Empty when `kernel` names a rung that takes `p` at `scope`; else the refusal.
LaunchResult check(std::string_view kernel, const PagedDecodeParams& p, CheckScope scope) {
  const KernelInfo* info = find_kernel(kernel);
  if (info == nullptr) {
    return {LaunchStatus::unsupported,
            "unknown kernel '" + std::string(kernel) + "' (valid: " + ladder_names() + ")"};
  }
  if (std::string why = unsupported_reason(*info, p, scope); !why.empty()) {
    return {LaunchStatus::unsupported, std::move(why)};
  }
  return {};
}

}  // namespace

LaunchResult launch_paged_decode(std::string_view kernel, const PagedDecodeParams& p,
                                 void* stream) {
  if (LaunchResult r = check(kernel, p, kLaunchScope); !r.ok()) return r;
  return dispatch_compiled(kernel, p, stream);
}

LaunchShape launch_shape(std::string_view kernel, const PagedDecodeParams& p) {
  if (LaunchResult r = check(kernel, p, CheckScope::shape); !r.ok()) {
    LaunchShape refused;
    refused.status = std::move(r);
    return refused;
  }
  return shape_compiled(kernel, p);
}

#if defined(__CUDACC__)
Residency resident_ctas_per_sm(std::string_view kernel, const PagedDecodeParams& p) {
  const LaunchShape shape = launch_shape(kernel, p);
  Residency r;
  if (!shape.status.ok()) {
    r.status = shape.status;
    return r;
  }
  const auto failed = [&](const char* call, cudaError_t err) {
    return LaunchResult{LaunchStatus::failed,
                        std::string(call) + " on " + std::string(shape.function) + ": " +
                            cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")"};
  };
  // The launch opts into its dynamic shared memory first (DECODEBENCH_LAUNCH); without it the
  // runtime would answer for a 48 KiB limit, 0 blocks.
  constexpr std::size_t kDefaultDynamicSmemLimit = 48 * 1024;
  if (shape.dynamic_smem > kDefaultDynamicSmemLimit) {
    const cudaError_t err =
        cudaFuncSetAttribute(shape.device_function, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(shape.dynamic_smem));
    if (err != cudaSuccess) {
      r.status = failed("cudaFuncSetAttribute", err);
      return r;
    }
  }
  int ctas = 0;
  const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &ctas, shape.device_function, shape.threads, shape.dynamic_smem);
  if (err != cudaSuccess) {
    r.status = failed("cudaOccupancyMaxActiveBlocksPerMultiprocessor", err);
    return r;
  }
  r.ctas_per_sm = ctas;
  return r;
}
#endif

}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS
