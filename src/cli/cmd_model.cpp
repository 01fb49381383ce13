// `decodebench model`: the napkin calculator. For a model x device x context x KV dtype x hit
// rate x batch x kernel kind, what one decode step must move and what that allows, from the byte
// model (src/workload/byte_model.h) and the datasheet peaks (configs/devices.json). Nothing runs.
//
//   kv bytes/token  = 2 * Hkv * d * sizeof(kv)              per layer, then x num_layers
//   bytes/step      = what the kind streams, x num_layers: cascade (prefix-aware) the unique KV,
//                     byte_model().min; cuda-core, tensor-core (prefix-unaware) the same with
//                     the logical KV (every sequence reads its whole context)
//   t_roof          = max(bytes / BW_datasheet, flops / FLOP_roof)   all layers; FLOP_roof: the
//                     fp32 FMA peak (cuda-core) or the dense f16 tensor-core peak (tensor-core,
//                     cascade); bound: memory, fma or tensor, whichever term is larger
//   tokens/s        = batch / t_roof                        attention-only: weights, MLP,
//                                                           norms and sampling are not counted
//   max batch       = largest B whose KV pool (all layers, whole blocks, shared prefix blocks
//                     counted once per group) fits device memory minus --weights-bytes
#include <cmath>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/datasheet.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "report/point_result.h"  // compute_unit_name
#include "workload/byte_model.h"
#include "workload/workload.h"

namespace decodebench::cli {
namespace {

struct ModelOptions {
  std::string model = "llama-3.1-8b";
  std::string device = "h200";
  std::string context = "8192";
  std::string kv_dtype = "f16";
  std::string q_dtype = "f16";
  std::string hit_rate = "0";
  std::string batch = "1";
  int block_size = 16;
  int prefix_groups = 1;
  std::string kernel_kind = "cuda-core,tensor-core,cascade";
  double weights_bytes = 0;
  std::string format = "table";
};

// The datasheet row for a key ("h200") or a device name ("NVIDIA H100 80GB HBM3").
Datasheet resolve_device(const std::string& text) {
  try {
    return datasheet_by_key(text);
  } catch (const InputError&) {
    if (std::optional<Datasheet> d = find_datasheet(text)) return *d;
    throw;  // the key error lists the valid keys
  }
}

// Largest batch whose KV pool fits `budget` bytes, for the layout rule of build_layout():
// each of min(B, G) groups shares S = floor(h * L / P) leading blocks, every sequence owns
// ceil(L / P) - S private blocks. Ragged contexts take hi (every sequence at its longest) and
// share from lo (the shortest a group can have): a safe upper bound on memory. nullopt when
// every block is shared (memory does not grow with batch).
std::optional<std::int64_t> max_batch_in_memory(const WorkloadSpec& s, double bytes_per_block,
                                                double budget) {
  const std::int64_t p = s.block_size;
  const std::int64_t blocks = (s.context.hi + p - 1) / p;
  const std::int64_t shared =
      static_cast<std::int64_t>(std::floor(s.hit_rate * s.context.lo / p + 1e-9));
  const std::int64_t priv = blocks - shared;
  const std::int64_t groups = s.prefix_groups;
  auto bytes_for = [&](std::int64_t b) {
    return (static_cast<double>(std::min(b, groups) * shared) + static_cast<double>(b * priv)) *
           bytes_per_block;
  };
  if (bytes_for(1) > budget) return 0;
  if (priv == 0) return std::nullopt;
  // Past G sequences every one adds `priv` blocks; solve, then step down for the first G.
  std::int64_t b =
      static_cast<std::int64_t>((budget / bytes_per_block - static_cast<double>(groups * shared)) /
                                static_cast<double>(priv));
  b = std::max<std::int64_t>(b, 1);
  while (b > 1 && bytes_for(b) > budget) --b;
  while (bytes_for(b + 1) <= budget) ++b;
  return b;
}

// What a kernel reads and which peak caps it: the two axes the kinds differ on.
struct KernelKind {
  const char* name;
  bool prefix_aware;  // reads a shared prefix block once (unique bytes), else once per sequence
  ComputeUnit compute;
};
constexpr KernelKind kKernelKinds[] = {
    {"cuda-core", /*prefix_aware=*/false, ComputeUnit::fma},
    {"tensor-core", /*prefix_aware=*/false, ComputeUnit::tensor_core},
    {"cascade", /*prefix_aware=*/true, ComputeUnit::tensor_core},
};

std::vector<KernelKind> parse_kernel_kinds(const std::string& text) {
  std::vector<KernelKind> kinds;
  for (const std::string& name : split_list(text, "--kernel-kind")) {
    const KernelKind* found = nullptr;
    std::string valid;
    for (const KernelKind& k : kKernelKinds) {
      if (name == k.name) found = &k;
      valid += (valid.empty() ? "" : ", ") + std::string(k.name);
    }
    if (found == nullptr) {
      throw InputError(
          fmt::format("--kernel-kind: unknown kernel kind '{}' (valid: {})", name, valid));
    }
    kinds.push_back(*found);
  }
  return kinds;
}

std::string bound_by_name(bool memory, ComputeUnit unit) {
  if (memory) return "memory";
  return unit == ComputeUnit::tensor_core ? "tensor" : "fma";
}

struct Row {
  std::string model, device, kv_dtype, context;
  double hit_rate = 0, hit_rate_actual = 0;
  int batch = 0, num_layers = 0;
  std::int64_t kv_bytes_per_token_layer = 0, kv_bytes_per_token_all = 0;
  std::string kernel_kind;
  bool prefix_aware = false;
  ComputeUnit compute = ComputeUnit::fma;
  double bytes_step_layer = 0, bytes_step_all = 0;        // unique (byte_model().min), every kind
  double streamed_step_layer = 0, streamed_step_all = 0;  // what this kind reads
  double flops_step_all = 0;
  double intensity = 0;           // flops / the unique bytes (byte_model's), every kind
  double intensity_streamed = 0;  // flops / what this kind reads: the one its bound follows
  double flop_roof = 0;           // FLOP/s of this kind's compute ceiling
  double t_roof_s = 0, tokens_per_s = 0;
  std::string bound_by;  // memory, fma, tensor
  std::optional<std::int64_t> max_batch;
};

nlohmann::json to_json(const Row& r) {
  return {{"model", r.model},
          {"device", r.device},
          {"kv_dtype", r.kv_dtype},
          {"context", r.context},
          {"hit_rate", r.hit_rate},
          {"hit_rate_actual", r.hit_rate_actual},
          {"batch", r.batch},
          {"num_layers", r.num_layers},
          {"kv_bytes_per_token_per_layer", r.kv_bytes_per_token_layer},
          {"kv_bytes_per_token_all_layers", r.kv_bytes_per_token_all},
          {"kernel_kind", r.kernel_kind},
          {"prefix_aware", r.prefix_aware},
          {"compute_unit", compute_unit_name(r.compute)},
          {"bytes_per_step_per_layer", r.bytes_step_layer},
          {"bytes_per_step_all_layers", r.bytes_step_all},
          {"bytes_streamed_per_step_per_layer", r.streamed_step_layer},
          {"bytes_streamed_per_step_all_layers", r.streamed_step_all},
          {"flops_per_step_all_layers", r.flops_step_all},
          {"arithmetic_intensity", r.intensity},
          {"arithmetic_intensity_streamed", r.intensity_streamed},
          {"flop_roof", r.flop_roof},
          {"bound_by", r.bound_by},
          {"t_roof_s", r.t_roof_s},
          {"tokens_per_s_attention_only", r.tokens_per_s},
          {"max_batch_in_memory",
           r.max_batch ? nlohmann::json(*r.max_batch) : nlohmann::json(nullptr)}};
}

std::string max_batch_label(const std::optional<std::int64_t>& b) {
  return b ? std::to_string(*b) : "unbounded (all KV shared)";
}

int run(const ModelOptions& o) {
  const OutputFormat format = parse_format(o.format);
  const Datasheet device = resolve_device(o.device);
  const std::vector<std::string> models = split_list(o.model, "--model");
  const std::vector<ContextSpec> contexts = parse_context_list(o.context, "--context");
  const std::vector<DType> kv_dtypes = parse_dtype_list(o.kv_dtype, "--kv-dtype");
  const DType q_dtype = parse_dtype(o.q_dtype, "--q-dtype");
  const std::vector<double> hit_rates = parse_double_list(o.hit_rate, "--hit-rate");
  const std::vector<int> batches = parse_int_list(o.batch, "--batch");
  const std::vector<KernelKind> kinds = parse_kernel_kinds(o.kernel_kind);
  const auto flop_roof = [&](ComputeUnit u) {
    return u == ComputeUnit::tensor_core ? device.tensor_f16_flops : device.fp32_flops;
  };
  if (o.weights_bytes < 0 || o.weights_bytes >= static_cast<double>(device.mem_bytes)) {
    throw InputError(fmt::format("--weights-bytes must be in [0, {:.0f}) for {} (got {:.0f})",
                                 static_cast<double>(device.mem_bytes), device.key,
                                 o.weights_bytes));
  }
  const double budget = static_cast<double>(device.mem_bytes) - o.weights_bytes;

  std::vector<Row> rows;
  for (const std::string& model_name : models) {
    const ModelShape model = load_model(model_name);
    for (DType kv : kv_dtypes) {
      for (const ContextSpec& ctx : contexts) {
        for (double h : hit_rates) {
          for (int batch : batches) {
            WorkloadSpec s;
            s.model = model;
            s.batch = batch;
            s.context = ctx;
            s.hit_rate = h;
            s.prefix_groups = o.prefix_groups;
            s.kv_dtype = kv;
            s.q_dtype = q_dtype;
            s.block_size = o.block_size;
            validate(s);
            const PagedLayout layout = build_layout(s);
            const ByteModel bm = byte_model(s, layout);
            const std::optional<std::int64_t> max_batch = max_batch_in_memory(
                s, static_cast<double>(bm.kv_bytes_per_token) * s.block_size * model.num_layers,
                budget);
            for (const KernelKind& kind : kinds) {
              Row r;
              r.model = model.name;
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
              r.flop_roof = flop_roof(kind.compute);
              const double t_mem = r.streamed_step_all / device.bandwidth;
              const double t_flop = r.flops_step_all / r.flop_roof;
              r.t_roof_s = std::max(t_mem, t_flop);
              r.bound_by = bound_by_name(t_mem >= t_flop, kind.compute);
              r.tokens_per_s = batch / r.t_roof_s;
              r.max_batch = max_batch;
              rows.push_back(std::move(r));
            }
          }
        }
      }
    }
  }

  if (format == OutputFormat::json) {
    nlohmann::json j = {
        {"device",
         {{"key", device.key},
          {"name", device.name},
          {"bandwidth", device.bandwidth},
          {"fp32_flops", device.fp32_flops},
          {"tensor_f16_flops", device.tensor_f16_flops},
          {"tensor_fp8_flops", device.tensor_fp8_flops > 0 ? nlohmann::json(device.tensor_fp8_flops)
                                                           : nlohmann::json(nullptr)},
          {"mem_bytes", device.mem_bytes}}},
        {"weights_bytes", o.weights_bytes},
        {"block_size", o.block_size},
        {"prefix_groups", o.prefix_groups},
        {"q_dtype", dtype_name(q_dtype)},
        {"rows", nlohmann::json::array()}};
    for (const Row& r : rows) j["rows"].push_back(to_json(r));
    emit(j.dump(2), "");
    return kExitOk;
  }
  if (format == OutputFormat::csv) {
    std::string s =
        "model,device,kv_dtype,context,hit_rate,hit_rate_actual,batch,num_layers,"
        "kv_bytes_per_token_per_layer,kv_bytes_per_token_all_layers,kernel_kind,prefix_aware,"
        "compute_unit,bytes_per_step_per_layer,bytes_per_step_all_layers,"
        "bytes_streamed_per_step_per_layer,bytes_streamed_per_step_all_layers,"
        "flops_per_step_all_layers,arithmetic_intensity,arithmetic_intensity_streamed,flop_roof,"
        "bound_by,t_roof_s,"
        "tokens_per_s_attention_only,max_batch_in_memory\n";
    for (const Row& r : rows) {
      s += fmt::format(
          "{},{},{},{},{:g},{:.6g},{},{},{},{},{},{},{},{:.0f},{:.0f},{:.0f},{:.0f},{:.6g},{:.6g},"
          "{:.6g},{:.6g},{},{:.6g},{:.6g},{}\n",
          r.model, r.device, r.kv_dtype, r.context, r.hit_rate, r.hit_rate_actual, r.batch,
          r.num_layers, r.kv_bytes_per_token_layer, r.kv_bytes_per_token_all, r.kernel_kind,
          r.prefix_aware ? 1 : 0, compute_unit_name(r.compute), r.bytes_step_layer,
          r.bytes_step_all, r.streamed_step_layer, r.streamed_step_all, r.flops_step_all,
          r.intensity, r.intensity_streamed, r.flop_roof, r.bound_by, r.t_roof_s, r.tokens_per_s,
          r.max_batch ? std::to_string(*r.max_batch) : "");
    }
    emit(s, "");
    return kExitOk;
  }
  const bool md = format == OutputFormat::md;
  std::string s = fmt::format(
      "{} ({}): {} datasheet bandwidth, {:.1f} TFLOP/s fp32 FMA, {:.1f} TFLOP/s tensor-core f16 "
      "(dense), {} memory\n"
      "Kernel kinds: cuda-core and tensor-core are prefix-unaware (every sequence streams its "
      "whole context: the logical bytes), cascade reads a shared prefix once (the unique bytes); "
      "cuda-core is capped by the fp32 FMA peak, tensor-core and cascade by the tensor-core f16 "
      "peak (fp8 KV enters the MMA as f16). Bound: memory, fma or tensor.\n"
      "Attention only: tokens/s counts the KV reads of every layer, not weights or MLP. "
      "Max batch: KV of all layers in whole {}-token blocks, shared prefix blocks once per group, "
      "{}.\n\n",
      device.name, device.key, format_bandwidth(device.bandwidth), device.fp32_flops / 1e12,
      device.tensor_f16_flops / 1e12, format_bytes(static_cast<double>(device.mem_bytes)),
      o.block_size,
      o.weights_bytes > 0 ? fmt::format("{} of weights subtracted", format_bytes(o.weights_bytes))
                          : "weights excluded (--weights-bytes to subtract them)");
  const char* header[] = {"model",
                          "kv",
                          "context",
                          "h req/act",
                          "batch",
                          "kernel kind",
                          "KV B/tok/layer",
                          "KV B/tok (all layers)",
                          "bytes/step (all layers)",
                          "FLOP/B",
                          "t_roof",
                          "bound",
                          "tok/s (attn only)",
                          "max batch"};
  std::vector<std::vector<std::string>> cells;
  for (const Row& r : rows) {
    cells.push_back(
        {r.model, r.kv_dtype, r.context, fmt::format("{:g}/{:.3f}", r.hit_rate, r.hit_rate_actual),
         std::to_string(r.batch), r.kernel_kind, std::to_string(r.kv_bytes_per_token_layer),
         fmt::format("{} ({})", r.kv_bytes_per_token_all,
                     format_bytes(static_cast<double>(r.kv_bytes_per_token_all))),
         format_bytes(r.streamed_step_all), fmt::format("{:.2f}", r.intensity_streamed),
         format_seconds(r.t_roof_s), r.bound_by, fmt::format("{:.0f}", r.tokens_per_s),
         max_batch_label(r.max_batch)});
  }
  std::vector<std::size_t> width(std::size(header));
  for (std::size_t c = 0; c < width.size(); ++c) {
    width[c] = std::string_view(header[c]).size();
    for (const auto& row : cells) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](auto get) {
    std::string l = md ? "|" : "";
    for (std::size_t c = 0; c < width.size(); ++c) {
      l += md ? fmt::format(" {} |", get(c)) : fmt::format("{:<{}}  ", get(c), width[c]);
    }
    while (!md && !l.empty() && l.back() == ' ') l.pop_back();
    return l + "\n";
  };
  s += line([&](std::size_t c) { return std::string(header[c]); });
  if (md) s += line([](std::size_t) { return std::string("---"); });
  for (const auto& row : cells) s += line([&](std::size_t c) { return row[c]; });
  emit(s, "");
  return kExitOk;
}

}  // namespace

void add_model_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ModelOptions>();
  CLI::App* cmd = app.add_subcommand(
      "model",
      "Napkin calculator (nothing runs): KV bytes per token, bytes per decode step, roofline "
      "tokens/s (attention only) and the largest batch whose KV fits device memory, for model x "
      "device x context x KV dtype x hit rate x batch x kernel kind, from configs/devices.json.");
  cmd->add_option("--model", o->model, "Model presets or JSON paths (list)")->capture_default_str();
  cmd->add_option("--device", o->device,
                  "Datasheet key (see `decodebench devices`) or a device name such as \"NVIDIA "
                  "H100 80GB HBM3\"")
      ->capture_default_str();
  cmd->add_option("--context", o->context, "Context lengths (list; n, nk, lo:hi)")
      ->capture_default_str();
  cmd->add_option("--kv-dtype", o->kv_dtype, "KV dtypes (list)")->capture_default_str();
  cmd->add_option("--q-dtype", o->q_dtype, "Q/output dtype")->capture_default_str();
  cmd->add_option("--hit-rate", o->hit_rate, "Prefix-hit rates (list)")->capture_default_str();
  cmd->add_option("--batch", o->batch, "Batch sizes (list)")->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "KV block size")->capture_default_str();
  cmd->add_option("--prefix-groups", o->prefix_groups, "Prefix groups")->capture_default_str();
  cmd->add_option("--kernel-kind", o->kernel_kind,
                  "Kernel kinds (list): cuda-core (prefix-unaware, fp32 FMA), tensor-core "
                  "(prefix-unaware, tensor-core f16 peak), cascade (prefix-aware, tensor cores)")
      ->capture_default_str();
  cmd->add_option("--weights-bytes", o->weights_bytes,
                  "Bytes of device memory taken by weights etc., subtracted before the max-batch "
                  "calculation (default 0: KV only)");
  cmd->add_option("--format", o->format, "table, json, csv, md")->capture_default_str();
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace decodebench::cli
