#include "backends/cuda/occupancy_model.h"

#include <cuda_occupancy.h>

#include <cuda_runtime_api.h>  // __host__ __device__, which cuda_occupancy.h's functions carry
#include <utility>

namespace decodebench::cuda {

SmSpec hopper_sm() {
  SmSpec sm;
  sm.cc_major = 9;
  sm.cc_minor = 0;
  return sm;  // the defaults are sm_90's figures (CUDA C++ Programming Guide, "Compute
              // Capabilities")
}

Occupancy occupancy(const KernelResources& k, const SmSpec& sm) {
  cudaOccDeviceProp prop;
  prop.computeMajor = sm.cc_major;
  prop.computeMinor = sm.cc_minor;
  prop.maxThreadsPerBlock = sm.max_threads_per_block;
  prop.maxThreadsPerMultiprocessor = sm.max_threads_per_sm;
  prop.regsPerBlock = sm.regs_per_block;
  prop.regsPerMultiprocessor = sm.regs_per_sm;
  prop.warpSize = 32;
  prop.sharedMemPerBlock = sm.smem_per_block;
  prop.sharedMemPerMultiprocessor = sm.smem_per_sm;
  prop.numSms = 1;  // per-SM figures only; the SM count never enters the per-SM answer
  prop.sharedMemPerBlockOptin = sm.smem_per_block_optin;
  prop.reservedSharedMemPerBlock = sm.reserved_smem_per_block;

  cudaOccFuncAttributes attr;
  attr.maxThreadsPerBlock = sm.max_threads_per_block;
  attr.numRegs = k.registers;
  attr.sharedSizeBytes = k.static_smem;
  attr.maxDynamicSharedSizeBytes = k.dynamic_smem;
  attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;  // the launchers opt in above 48 KiB

  cudaOccDeviceState state;
  cudaOccResult result{};
  Occupancy out;
  const cudaOccError err = cudaOccMaxActiveBlocksPerMultiprocessor(&result, &prop, &attr, &state,
                                                                   k.threads, k.dynamic_smem);
  if (err != CUDA_OCC_SUCCESS) {
    out.error = err == CUDA_OCC_ERROR_UNKNOWN_DEVICE
                    ? "the occupancy calculator does not know compute capability " +
                          std::to_string(sm.cc_major) + "." + std::to_string(sm.cc_minor)
                    : "the occupancy calculator refuses these resources (registers " +
                          std::to_string(k.registers) + ", threads " + std::to_string(k.threads) +
                          ", shared memory " + std::to_string(k.static_smem) + " + " +
                          std::to_string(k.dynamic_smem) + " B)";
    return out;
  }
  out.ctas_per_sm = result.activeBlocksPerMultiprocessor;
  const int f = result.limitingFactors;
  const std::pair<int, const char*> factors[] = {{OCC_LIMIT_WARPS, "warps"},
                                                 {OCC_LIMIT_REGISTERS, "registers"},
                                                 {OCC_LIMIT_SHARED_MEMORY, "shared memory"},
                                                 {OCC_LIMIT_BLOCKS, "blocks"},
                                                 {OCC_LIMIT_BARRIERS, "barriers"}};
  for (const auto& [bit, name] : factors) {
    if ((f & bit) == 0) continue;
    if (!out.limited_by.empty()) out.limited_by += ", ";
    out.limited_by += name;
  }
  if (out.ctas_per_sm == 0) {
    out.error = "one block of " + std::to_string(k.threads) + " threads, " +
                std::to_string(k.registers) + " registers each and " +
                std::to_string(k.static_smem + k.dynamic_smem) +
                " B of shared memory does not fit an SM of compute capability " +
                std::to_string(sm.cc_major) + "." + std::to_string(sm.cc_minor) +
                (out.limited_by.empty() ? "" : " (" + out.limited_by + ")");
  }
  return out;
}

}  // namespace decodebench::cuda
