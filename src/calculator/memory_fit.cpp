// Max batch in memory, the workspace of a sequence, and the models whose weights do not fit.
#include "calculator/memory_fit.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/dtype.h"
#include "workload/layer_model.h"

namespace decodebench::calculator {

std::optional<std::int64_t> max_batch_in_memory(const WorkloadSpec& s, double bytes_per_block,
                                                double budget, double extra_per_seq) {
  const std::int64_t p = s.block_size;
  const std::int64_t blocks = (s.context.hi + p - 1) / p;
  const std::int64_t shared =
      static_cast<std::int64_t>(std::floor(s.hit_rate * s.context.lo / p + 1e-9));
  const std::int64_t priv = blocks - shared;
  const std::int64_t groups = s.prefix_groups;
  auto bytes_for = [&](std::int64_t b) {
    return (static_cast<double>(std::min(b, groups) * shared) + static_cast<double>(b * priv)) *
               bytes_per_block +
           static_cast<double>(b) * extra_per_seq;
  };
  if (bytes_for(1) > budget) return 0;
  const double per_seq = static_cast<double>(priv) * bytes_per_block + extra_per_seq;
  if (per_seq <= 0) return std::nullopt;
  // Past G sequences every one adds per_seq bytes; solve, then step down for the first G.
  std::int64_t b = static_cast<std::int64_t>(
      (budget - static_cast<double>(groups * shared) * bytes_per_block) / per_seq);
  b = std::max<std::int64_t>(b, 1);
  while (b > 1 && bytes_for(b) > budget) --b;
  while (bytes_for(b + 1) <= budget) ++b;
  return b;
}

double workspace_bytes_per_sequence(const ModelShape& m, DType weights, DType act) {
  double bytes = 0;
  for (LayerStage s : kLayerGemms) {
    const GemmModel g = gemm_model(gemm_shape(m, s, 1), weights, act);
    bytes += static_cast<double>(g.input_bytes + g.output_bytes);
  }
  const GemmModel lm = gemm_model(gemm_shape(m, LayerStage::lm_head, 1), weights, act);
  bytes += static_cast<double>(lm.input_bytes + lm.output_bytes);
  return bytes + m.num_q_heads * static_cast<double>(m.head_dim + m.value_dim()) *
                     static_cast<double>(dtype_size(act));
}

namespace {

// One decimal of GB: 3 significant digits would print 141.1 GB of weights and 141 GB of memory
// both as "141 GB".
std::string gigabytes(double bytes) { return fmt::format("{:.1f} GB", bytes / 1e9); }

}  // namespace

DoesNotFit does_not_fit(const ModelShape& m, const Datasheet& device, DType weights,
                        double weight_bytes, bool bytes_given) {
  DoesNotFit d;
  d.model = m.name;
  d.weights =
      bytes_given ? std::string("--weights-bytes") : fmt::format("{} weights", dtype_name(weights));
  d.weight_bytes = weight_bytes;
  d.mem_bytes = static_cast<double>(device.mem_bytes);
  d.devices_needed = static_cast<int>(std::floor(weight_bytes / d.mem_bytes)) + 1;
  if (!bytes_given) {
    for (DType w : {DType::bf16, DType::f16, DType::fp8_e4m3}) {
      if (dtype_size(w) < dtype_size(weights) &&
          static_cast<double>(model_weight_bytes(m, w)) < d.mem_bytes) {
        d.weights_dtypes_that_fit.push_back(w);
      }
    }
  }
  std::string fits = fmt::format("{} devices ({} of weights each, tensor parallel)",
                                 d.devices_needed, gigabytes(weight_bytes / d.devices_needed));
  for (DType w : d.weights_dtypes_that_fit) {
    fits += fmt::format(" or one with --weights-dtype {} ({})", dtype_name(w),
                        gigabytes(static_cast<double>(model_weight_bytes(m, w))));
  }
  d.message = fmt::format(
      "{} does not fit {}: its {} take {}, the device has {} of memory, so no batch can run and "
      "no throughput is given; it would fit on {}.",
      m.name, device.key == "report" ? device.name : device.key, d.weights, gigabytes(weight_bytes),
      gigabytes(d.mem_bytes), fits);
  return d;
}

}  // namespace decodebench::calculator
