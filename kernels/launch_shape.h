// What each paged-decode launcher launches a kernel with, for host code that reads compiled
// kernels without running them (the static model, `decodebench kernels --static`): threads per
// block and dynamic shared memory, from the launchers' own constants (kernels/paged_decode/*.cuh).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "kernels.h"  // DType

namespace decodebench::kernels {

struct LaunchShape {
  int threads = 0;               // per thread block
  std::size_t dynamic_smem = 0;  // bytes passed at launch
};

// The shape rung `rung`'s launcher gives its kernel `kernel` (the unqualified __global__ name:
// "pipelined_kernel", "split_kernel", "merge_kernel", ...) for KV dtype `kv`, `head_dim` and
// group cap `group_cap` (the template arguments; a kernel without one ignores it). nullopt for a
// rung, kernel or combination no launcher has. Any combination the rungs' templates take is
// answered, compiled into this build or not.
std::optional<LaunchShape> launch_shape(std::string_view rung, std::string_view kernel, DType kv,
                                        int head_dim, int group_cap);

}  // namespace decodebench::kernels
