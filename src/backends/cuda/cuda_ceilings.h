// The cuda backend's ceilings: what the device's memory can do (read, copy, triad), each the best
// of several launch shapes, and a check of those kernels' results on exact sums.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backends/backend.h"  // Ceilings, Backend::SelfCheck

namespace decodebench::cuda {

// Read, copy and triad bandwidth of the current device, timed on `stream`: buffers of 8x the L2
// (`l2_bytes`; capped to free memory, said in Ceilings::note), grids of `sm_count` x blocks per
// SM for each launch shape tried, the best median kept and its shape named.
Ceilings measure_ceilings(std::int64_t l2_bytes, int sm_count, cudaStream_t stream);

// The ceiling kernels against host sums on sizes that exercise every tail of their unrolled loops.
std::vector<Backend::SelfCheck> check_ceiling_kernels(cudaStream_t stream);

}  // namespace decodebench::cuda
