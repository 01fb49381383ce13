// `decodebench model`: the napkin calculator's command line. For a model x device x context x KV
// dtype x hit rate x batch x kernel kind, what one decode step must move and what that allows;
// nothing runs. The flags become a calculator::Request (src/calculator/request.h), the rows come
// from src/calculator (layer_calc.h: the whole step, the default; attention_calc.h: the attention
// only) and are printed by src/report/calculator_view.h.
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "calculator/attention_calc.h"
#include "calculator/layer_calc.h"
#include "calculator/roofs.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "report/calculator_view.h"

namespace decodebench::cli {
namespace {

constexpr const char* kLayerDefaultBatches = "1,2,4,8,16,32,64,128,256";

struct ModelOptions {
  std::string scope = "layer";
  std::string model = "llama-3.1-8b";
  std::string device = "h200";
  std::string ceilings;  // a report whose devices[0] replaces the datasheet row
  std::string context = "8192";
  std::string kv_dtype = "f16";
  std::string q_dtype;  // empty: f16 (attention), the weights' 16-bit type (layer)
  std::string weights_dtype = "bf16";
  std::string hit_rate = "0";
  std::string batch;  // empty: 1 (attention), kLayerDefaultBatches (layer)
  int block_size = 16;
  int prefix_groups = 1;
  std::string kernel_kind = "cuda-core,tensor-core,cascade";
  std::optional<double> weights_bytes;
  std::string format = "table";
};

std::vector<calculator::KernelKind> parse_kernel_kinds(const std::string& text) {
  std::vector<calculator::KernelKind> kinds;
  for (const std::string& name : split_list(text, "--kernel-kind")) {
    const calculator::KernelKind* kind = calculator::find_kernel_kind(name);
    if (kind == nullptr) {
      throw InputError(fmt::format("--kernel-kind: unknown kernel kind '{}' (valid: {})", name,
                                   calculator::kernel_kind_names()));
    }
    kinds.push_back(*kind);
  }
  return kinds;
}

// The flags as the calculator's axes, parsed in the order their errors have always come.
calculator::Request parse_request(const ModelOptions& o, DType weights) {
  const bool layer = o.scope == "layer";
  calculator::Request r;
  r.models = split_list(o.model, "--model");
  r.contexts = parse_context_list(o.context, "--context");
  r.kv_dtypes = parse_dtype_list(o.kv_dtype, "--kv-dtype");
  if (!o.q_dtype.empty()) r.q_dtype = parse_dtype(o.q_dtype, "--q-dtype");
  r.hit_rates = parse_double_list(o.hit_rate, "--hit-rate");
  r.batches =
      parse_int_list(o.batch.empty() ? (layer ? kLayerDefaultBatches : "1") : o.batch, "--batch");
  r.kinds = parse_kernel_kinds(o.kernel_kind);
  r.block_size = o.block_size;
  r.prefix_groups = o.prefix_groups;
  r.weights_dtype = weights;
  r.weights_bytes = o.weights_bytes;
  return r;
}

int run(const ModelOptions& o) {
  if (o.scope != "attention" && o.scope != "layer") {
    throw InputError(fmt::format("--scope: unknown scope '{}' (valid: attention, layer)", o.scope));
  }
  const DType weights = parse_dtype(o.weights_dtype, "--weights-dtype");
  if (weights != DType::bf16 && weights != DType::f16 && weights != DType::fp8_e4m3) {
    throw InputError(
        fmt::format("--weights-dtype must be bf16, f16 or fp8_e4m3, got '{}'", o.weights_dtype));
  }
  const calculator::Roofs roofs =
      o.ceilings.empty()
          ? calculator::roofs_from_datasheet(calculator::resolve_device(o.device), weights)
          : calculator::roofs_from_report(o.ceilings, weights);
  const OutputFormat format = parse_format(o.format);
  const calculator::Request request = parse_request(o, weights);
  if (o.scope == "attention") {
    emit(attention_view(calculator::attention_rows(request, roofs), format), "");
    return kExitOk;
  }
  const calculator::LayerResult result = calculator::layer_rows(request, roofs);
  std::cerr << layer_view_notes(result, format);
  emit(layer_view(result, format), "");
  return kExitOk;
}

}  // namespace

void add_model_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ModelOptions>();
  CLI::App* cmd = app.add_subcommand(
      "model",
      "Napkin calculator (nothing runs). --scope layer (default): bytes per decode step "
      "(weights, KV unique and logical, activations), the roofline step time of the whole model, "
      "tokens/s vs batch, the knee of each series and the largest batch that fits (weights + KV "
      "+ activations). --scope attention: the attention of every layer only. Per model x device "
      "x context x KV dtype x hit rate x batch x kernel kind, from configs/devices.json or a "
      "report's measured ceilings.");
  cmd->add_option("--scope", o->scope,
                  "layer (the whole step: weight GEMMs, attention, LM head) or attention "
                  "(attention only, the calculator's output before weights)")
      ->capture_default_str();
  cmd->add_option("--model", o->model, "Model presets or JSON paths (list)")->capture_default_str();
  CLI::Option* device =
      cmd->add_option("--device", o->device,
                      "Datasheet key (see `decodebench devices`) or a device name such as \"NVIDIA "
                      "H100 80GB HBM3\"")
          ->capture_default_str();
  cmd->add_option("--ceilings", o->ceilings,
                  "A report (sweep) or ceilings file (`ceilings --out`) whose device replaces "
                  "the datasheet: its measured read bandwidth, measured GEMM peak (else its "
                  "tensor-core or FMA peak) and memory size")
      ->excludes(device);
  cmd->add_option("--context", o->context, "Context lengths (list; n, nk, lo:hi)")
      ->capture_default_str();
  cmd->add_option("--kv-dtype", o->kv_dtype, "KV dtypes (list)")->capture_default_str();
  cmd->add_option("--q-dtype", o->q_dtype,
                  "Q/output (activation) dtype: f16 or bf16 (default: f16 for attention scope; "
                  "the weights dtype, bf16 with fp8 weights, for layer scope)");
  cmd->add_option("--weights-dtype", o->weights_dtype,
                  "Weights dtype (layer scope): bf16, f16, fp8_e4m3")
      ->capture_default_str();
  cmd->add_option("--hit-rate", o->hit_rate, "Prefix-hit rates (list)")->capture_default_str();
  cmd->add_option("--batch", o->batch,
                  fmt::format("Batch sizes (list; default: 1 for attention scope, {} for layer "
                              "scope, so each series has a knee)",
                              kLayerDefaultBatches));
  cmd->add_option("--block-size", o->block_size, "KV block size")->capture_default_str();
  cmd->add_option("--prefix-groups", o->prefix_groups, "Prefix groups")->capture_default_str();
  cmd->add_option("--kernel-kind", o->kernel_kind,
                  "Kernel kinds (list): cuda-core (prefix-unaware, fp32 FMA), tensor-core "
                  "(prefix-unaware, tensor-core f16 peak), cascade (prefix-aware, tensor cores)")
      ->capture_default_str();
  cmd->add_option("--weights-bytes", o->weights_bytes,
                  "Bytes of device memory taken by weights etc. for the max-batch calculation "
                  "(attention scope: default 0, KV only; layer scope: replaces the model's "
                  "weights, num_params x sizeof(weights dtype))");
  add_format_option(*cmd, o->format, "table, json, csv or md");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace decodebench::cli
