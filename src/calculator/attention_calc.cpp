// Attention-scope rows: each kind's bytes, roofline time, bound and max batch.
#include "calculator/attention_calc.h"

#include <algorithm>

#include <fmt/format.h>

#include "calculator/memory_fit.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "workload/byte_model.h"

namespace decodebench::calculator {

namespace {

std::string bound_by_name(bool memory, ComputeUnit unit) {
  if (memory) return "memory";
  return unit == ComputeUnit::tensor_core ? "tensor" : "fma";
}

}  // namespace

AttentionResult attention_rows(const Request& req, const Roofs& roofs) {
  const Datasheet& device = roofs.sheet;
  AttentionResult out;
  out.roofs = roofs;
  out.q_dtype = req.q_dtype.value_or(DType::f16);
  out.weights_bytes = req.weights_bytes.value_or(0);
  out.block_size = req.block_size;
  out.prefix_groups = req.prefix_groups;
  if (out.weights_bytes < 0 || out.weights_bytes >= static_cast<double>(device.mem_bytes)) {
    throw InputError(fmt::format("--weights-bytes must be in [0, {:.0f}) for {} (got {:.0f})",
                                 static_cast<double>(device.mem_bytes), device.key,
                                 out.weights_bytes));
  }
  const double budget = static_cast<double>(device.mem_bytes) - out.weights_bytes;

  for (const std::string& model_name : req.models) {
    const ModelShape model = load_model(model_name);
    for (DType kv : req.kv_dtypes) {
      for (const ContextSpec& ctx : req.contexts) {
        for (double h : req.hit_rates) {
          for (int batch : req.batches) {
            const WorkloadSpec s = point_spec(req, model, kv, out.q_dtype, ctx, h, batch);
            const PagedLayout layout = build_layout(s);
            const ByteModel bm = byte_model(s, layout);
            // Windowed layers hold only their window's blocks: per sequence, not per block.
            const KvHeld held = kv_held(model, ctx.hi, s.block_size, bm.kv_bytes_per_token);
            const std::optional<std::int64_t> max_batch = max_batch_in_memory(
                s, held.full_bytes_per_block, budget, held.windowed_bytes_per_seq);
            for (const KernelKind& kind : req.kinds) {
              AttentionRow r;
              r.model = model.name;
              r.attention = model.attention_summary();
              r.device = device.key;
              r.kv_dtype = std::string(dtype_name(kv));
              r.context = context_label(ctx);
              r.hit_rate = h;
              r.hit_rate_actual = layout.hit_rate_actual;
              r.batch = batch;
              r.num_layers = model.num_layers;
              r.kv_bytes_per_token_layer = bm.kv_bytes_per_token;
              r.kv_bytes_per_token_all = bm.kv_bytes_per_token * model.num_layers;
              r.kernel_kind = kind.name;
              r.prefix_aware = kind.prefix_aware;
              r.compute = kind.compute;
              r.bytes_step_layer = static_cast<double>(bm.min);
              r.bytes_step_all = r.bytes_step_layer * model.num_layers;
              r.streamed_step_layer =
                  kind.prefix_aware ? r.bytes_step_layer
                                    : static_cast<double>(bm.min - bm.kv_unique + bm.kv_logical);
              r.streamed_step_all = r.streamed_step_layer * model.num_layers;
              r.flops_step_all = bm.flops * model.num_layers;
              r.intensity = bm.arithmetic_intensity;
              r.intensity_streamed = bm.flops / r.streamed_step_layer;
              r.flop_roof = roofs.attention_flops(kind.compute);
              const double t_mem = r.streamed_step_all / device.bandwidth;
              const double t_flop = r.flop_roof > 0 ? r.flops_step_all / r.flop_roof : 0.0;
              r.t_roof_s = std::max(t_mem, t_flop);
              r.bound_by = bound_by_name(t_mem >= t_flop, kind.compute);
              r.tokens_per_s = batch / r.t_roof_s;
              r.max_batch = max_batch;
              out.rows.push_back(std::move(r));
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace decodebench::calculator
