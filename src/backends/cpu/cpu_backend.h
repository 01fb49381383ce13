// The `cpu` backend: the optimized multi-threaded host decode (cpu_decode.h) and the measured CPU
// ceilings (cpu_ceilings.h), behind the harness's Backend interface. Kernels "cpu" and "cascade"
// (prefix-aware).
#pragma once

#include <memory>

#include "backends/backend.h"

namespace decodebench {

// prepare() keeps a reference to the Workload (no copy: a point can be GiBs), so the Workload
// must outlive the PreparedPoint it returns.
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace decodebench
