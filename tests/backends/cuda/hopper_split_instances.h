// The split kernel instances the planner is tested with on H100 / H200 figures
// (cuda_plan_test.cpp), with their registers as ptxas allocates them for sm_90a. The figures
// follow the compiler: StaticModelBuild.PlannerTestRegistersAreCurrent (label cuda-build) reads
// the built binary and fails, naming the new count, when they no longer match.
#pragma once

#include "common/dtype.h"

namespace decodebench::testing {

struct SplitInstance {
  DType kv;
  int group;      // Hq / Hkv; the compiled cap serving it is what launch_shape reports
  int registers;  // split_kernel<kv, 128, cap> on sm_90a
};
inline constexpr SplitInstance kF16Cap4{DType::f16, 4, 124};
inline constexpr SplitInstance kFp8Cap4{DType::fp8_e4m3, 4, 124};
inline constexpr SplitInstance kFp8Cap8{DType::fp8_e4m3, 8, 198};
inline constexpr SplitInstance kHopperSplitInstances[] = {kF16Cap4, kFp8Cap4, kFp8Cap8};

}  // namespace decodebench::testing
