#include "results/point_identity.h"

#include <fmt/format.h>

#include "common/dtype.h"

namespace decodebench {

std::string point_identity(const PointResult& p) {
  const std::string context = p.context.kind == ContextSpec::Kind::fixed
                                  ? fmt::format("{}", p.context.lo)
                                  : fmt::format("{}:{}", p.context.lo, p.context.hi);
  // Attention points keep the identity they had before scopes existed (old reports still match).
  return fmt::format("{}/{} {} kv={} q={} P={} B={} L={} h={} G={}{}", p.backend,
                     p.kernel_requested, p.model, dtype_name(p.kv_dtype), dtype_name(p.q_dtype),
                     p.block_size, p.batch, context, p.hit_rate, p.prefix_groups,
                     p.scope == Scope::layer ? " scope=layer" : "");
}

}  // namespace decodebench
