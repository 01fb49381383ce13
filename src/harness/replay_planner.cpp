#include "harness/replay_planner.h"

#include <fmt/format.h>

#include "common/errors.h"
#include "workload/layer_model.h"

namespace decodebench {

ReplayScopeChoice choose_replay_scope(Backend& backend, const ModelShape& model, DType weights,
                                      DType q_dtype, int block_size, std::string_view scope) {
  if (scope != "auto") return {parse_scope(scope), ""};
  WorkloadSpec probe;
  probe.model = model;
  probe.q_dtype = q_dtype;
  probe.block_size = block_size;
  probe.context = ContextSpec::fixed(block_size);
  const std::string probe_kernel = backend.choose_kernel(probe);
  std::string why = layer_support_error(model, weights, q_dtype);
  if (why.empty()) why = backend.layer_skip_reason(probe, probe_kernel, LayerOptions{weights});
  if (why.empty()) return {Scope::layer, ""};
  return {Scope::attention, "scope attention (no layer scope here: " + why + ")"};
}

ReplayDevice plan_replay_device(Backend& backend, const ModelShape& model, DType weights,
                                const ReplayDeviceRequest& request) {
  ReplayDevice d;
  d.params = model.num_params > 0      ? model.num_params
             : model.has_layer_shape() ? params_from_shape(model)
                                       : 0;
  d.device = backend.device_info();
  if (request.schedule_device != "this") d.sheet = datasheet_by_key(request.schedule_device);
  const double mem = static_cast<double>(d.sheet ? d.sheet->mem_bytes : d.device.mem_bytes);
  const double weight_bytes = static_cast<double>(model_weight_bytes(model, weights));
  d.default_pool_bytes = static_cast<std::int64_t>(mem - weight_bytes);
  if (!request.kv_pool_given && d.default_pool_bytes <= 0) {
    throw InputError(fmt::format(
        "the default KV pool (device memory {:.3g} GB minus the weights {:.3g} GB) is empty; "
        "give --kv-pool BYTES",
        mem / 1e9, weight_bytes / 1e9));
  }
  if (request.prefill_tokens_per_s <= 0 && d.params <= 0) {
    throw InputError(
        fmt::format("cannot model the prefill rate: model '{}' has no parameter count "
                    "(num_params or the layer shape); give --prefill-rate TOKENS_PER_S",
                    model.name));
  }
  return d;
}

void set_replay_rates(Backend& backend, ReplayDevice& d, DType weights,
                      const ReplayDeviceRequest& request, ReplayPlan& plan) {
  DeviceInfo& device = d.device;
  device.measured = request.ceilings ? *request.ceilings : backend.measure_ceilings();
  if (!(device.flops_peak > 0)) device.flops_peak = device.measured.fma_flops;
  double read = 0, flops = 0;
  std::string flops_basis;
  if (!d.sheet) {
    read = device.measured.read;
    plan.schedule_device = fmt::format("{} '{}' (this backend)", device.backend, device.name);
    plan.read_rate_basis = "the measured read ceiling of this device";
    if (request.prefill_tokens_per_s <= 0) {
      const Backend::GemmCeiling g = backend.gemm_ceiling(weights);
      device.measured.gemm_flops = g.flops;
      device.measured.gemm_ceiling_name = g.name;
      flops = g.flops > 0 ? g.flops : device.flops_peak;
      flops_basis = g.flops > 0 ? g.name : "the device's fp32 peak";
    }
  } else {
    read = d.sheet->bandwidth;
    flops = is_fp8(weights) && d.sheet->tensor_fp8_flops > 0 ? d.sheet->tensor_fp8_flops
                                                             : d.sheet->tensor_f16_flops;
    plan.schedule_device = fmt::format("{} (datasheet, configs/devices.json)", d.sheet->name);
    plan.read_rate_basis = "the datasheet memory bandwidth";
    flops_basis = "the datasheet dense tensor-core peak";
  }
  plan.schedule.decode_read_bytes_per_s = read;
  if (request.decode_read_bytes_per_s > 0) {
    plan.schedule.decode_read_bytes_per_s = request.decode_read_bytes_per_s;
    plan.read_rate_basis = "given (--decode-read-rate)";
  }
  if (!(plan.schedule.decode_read_bytes_per_s > 0)) {
    throw RuntimeFailure(
        "no read rate for the modeled decode step (the read ceiling measured 0); "
        "give --decode-read-rate BYTES_PER_S");
  }
  if (request.prefill_tokens_per_s > 0) {
    plan.schedule.prefill_tokens_per_s = request.prefill_tokens_per_s;
    plan.prefill_rate_basis = "given (--prefill-rate)";
    return;
  }
  if (!(flops > 0)) {
    throw RuntimeFailure(
        "no FLOP rate to model the prefill with on this device; give --prefill-rate "
        "TOKENS_PER_S");
  }
  plan.schedule.prefill_tokens_per_s = flops / (2.0 * static_cast<double>(d.params));
  plan.prefill_rate_basis = fmt::format(
      "modeled: 2 x {:.3g} parameters per token at {:.3g} FLOP/s ({}); attention FLOPs left "
      "out",
      static_cast<double>(d.params), flops, flops_basis);
}

}  // namespace decodebench
