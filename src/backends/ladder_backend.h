// What the two backends of the CUDA kernel ladder (kernels/kernels.h) share: `cuda` runs the
// rungs on a GPU, `emu` runs the same source through the SIMT emulator. Naming the rungs,
// refusing an unknown one, and checking a point against a rung's preconditions are written once
// here, so the two cannot drift apart in what they accept or how they say no.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "common/errors.h"
#include "kernels.h"
#include "workload/workload.h"

namespace decodebench {

class LadderBackend : public Backend {
 public:
  std::vector<std::string> kernel_names() const override {
    std::vector<std::string> names;
    for (const kernels::KernelInfo& info : kernels::kernel_ladder()) names.push_back(info.name);
    return names;
  }

  ComputeUnit compute_unit(std::string_view kernel) const override { return rung(kernel).compute; }

 protected:
  // The ladder entry of `kernel` (InputError "<backend> backend: unknown kernel ..." listing the
  // compiled rungs).
  const kernels::KernelInfo& rung(std::string_view kernel) const {
    const kernels::KernelInfo* info = kernels::find_kernel(kernel);
    if (info == nullptr) throw InputError(name() + " backend: " + unknown_kernel(kernel));
    return *info;
  }

  // "" when the rung can run a point of this shape, else why not (unknown kernel, or the rung's
  // own preconditions: kernels::unsupported_reason). Device memory is the caller's to add.
  static std::string shape_skip_reason(const WorkloadSpec& spec, const PagedLayout& layout,
                                       std::string_view kernel) {
    const kernels::KernelInfo* info = kernels::find_kernel(kernel);
    if (info == nullptr) return unknown_kernel(kernel);
    return kernels::unsupported_reason(*info, shape_params(spec, layout));
  }

  // The rung of `kernel`, checked against w's host block tables (layout scope) before anything
  // runs: a launch sees only the tables it is given and cannot check them itself.
  const kernels::KernelInfo& runnable_rung(const Workload& w, std::string_view kernel) const {
    const kernels::KernelInfo& info = rung(kernel);
    if (std::string why =
            kernels::unsupported_reason(info, w.params(), kernels::CheckScope::layout);
        !why.empty()) {
      throw InputError(name() + " backend: " + why);
    }
    return info;
  }

  // choose_kernel's guard: a build can narrow the ladder (DECODEBENCH_KERNELS) but not to nothing.
  void require_rungs() const {
    if (kernels::kernel_ladder().empty()) {
      throw RuntimeFailure(name() + " backend: no paged-decode kernel is compiled");
    }
  }

 private:
  static std::string unknown_kernel(std::string_view kernel) {
    return "unknown kernel '" + std::string(kernel) + "' (valid: " + kernels::ladder_names() + ")";
  }
};

}  // namespace decodebench
