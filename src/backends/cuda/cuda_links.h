// The links a KV cache's tiers cross, measured on a GPU for `decodebench ceilings`
// (docs/design.md "Ceilings"): pinned host memory <-> device copies at sizes from one page of
// KV to hundreds of MB (so the per-transfer cost shows), a kernel reading mapped host memory,
// and peer copies when a second GPU can reach this one.
#pragma once

#include <vector>

#include <cuda_runtime.h>

#include "backends/backend.h"  // LinkMeasurement

namespace decodebench::cuda {

std::vector<LinkMeasurement> measure_links(int device, int sm_count, cudaStream_t stream);

}  // namespace decodebench::cuda
