// A point's identity across runs (compare, report side by side): everything that defines the
// work and the kernel asked for, never its index, so sweeps with different axes still meet on
// their common points.
#pragma once

#include <string>

#include "results/point_result.h"

namespace decodebench {

// "cpu/auto llama-3.1-8b kv=f16 q=f16 P=16 b=8 ctx=8192 h=0.5 G=1" (ragged: ctx=lo:hi), the
// label every command prints (cli point_label adds the resolved kernel).
std::string point_identity(const PointResult& p);

}  // namespace decodebench
