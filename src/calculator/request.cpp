// The kernel kinds' lookup and a point's workload from the request.
#include "calculator/request.h"

#include <fmt/format.h>

namespace decodebench::calculator {

const KernelKind* find_kernel_kind(std::string_view name) {
  for (const KernelKind& k : kKernelKinds) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

std::string kernel_kind_names() {
  std::string names;
  for (const KernelKind& k : kKernelKinds)
    names += (names.empty() ? "" : ", ") + std::string(k.name);
  return names;
}

WorkloadSpec point_spec(const Request& r, const ModelShape& model, DType kv, DType q,
                        const ContextSpec& ctx, double h, int batch) {
  WorkloadSpec s;
  s.model = model;
  s.batch = batch;
  s.context = ctx;
  s.hit_rate = h;
  s.prefix_groups = r.prefix_groups;
  s.kv_dtype = kv;
  s.q_dtype = q;
  s.block_size = r.block_size;
  validate(s);
  return s;
}

}  // namespace decodebench::calculator
