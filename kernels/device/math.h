// Numeric facts used by host code (the registry, the CPU backend, the workload, the harness) and
// by device code (the kernels, under nvcc and under the SIMT emulator). Written once here.
#pragma once

#include "device/float_formats.h"  // DECODEBENCH_HD

namespace decodebench {

// log2(e). Scores are multiplied by it once (folded into the score scale) so the online
// softmax runs in base 2: exp2 is one ex2.approx instruction on the GPU, exp is not.
inline constexpr float kLog2e = 1.4426950408889634f;

// 1, 2, 4, ...; false for 0 and negative values. Block sizes must be powers of two so a token's
// block and slot are a shift and a mask.
DECODEBENCH_HD constexpr bool is_power_of_two(long long x) { return x > 0 && (x & (x - 1)) == 0; }

}  // namespace decodebench
