// A point's identity across runs (compare, report side by side): everything that defines the
// work and the kernel asked for, never its index, so sweeps with different axes still meet on
// their common points.
#pragma once

#include <string>

#include "results/point_result.h"

namespace decodebench {

// "cpu/auto llama-3.1-8b kv=f16 q=f16 P=16 B=8 L=8192 h=0.5 G=1" (ragged context: L=lo:hi).
std::string point_identity(const PointResult& p);

}  // namespace decodebench
