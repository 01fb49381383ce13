#include "results/point_identity.h"

#include <fmt/format.h>

#include "common/dtype.h"
#include "workload/context_spec.h"

namespace decodebench {

std::string point_identity(const PointResult& p) {
  const std::string context = context_label(p.context);
  // Attention points keep the identity they had before scopes existed (old reports still match).
  return fmt::format("{}/{} {} kv={} q={} P={} b={} ctx={} h={} G={}{}", p.backend,
                     p.kernel_requested, p.model, dtype_name(p.kv_dtype), dtype_name(p.q_dtype),
                     p.block_size, p.batch, context, p.hit_rate, p.prefix_groups,
                     p.scope == Scope::layer ? " scope=layer" : "");
}

}  // namespace decodebench
