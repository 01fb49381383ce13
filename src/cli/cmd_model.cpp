// `decodebench model`: the napkin calculator. For a model x device x context x KV dtype x hit
// rate x batch x kernel kind, what one decode step must move and what that allows, from the byte
// model (src/workload/byte_model.h), the layer model (src/workload/layer_model.h) and the
// datasheet peaks (configs/devices.json) or a report's measured ceilings. Nothing runs.
//
// --scope layer (the default): the whole decode step of the model.
//   stages          = per layer qkv_proj, attention, o_proj, gate_up_proj, down_proj; the
//                     lm_head once per step
//   t_stage         = max(bytes / BW, flops / roof): GEMMs against the GEMM roof (the dense
//                     tensor-core peak of the weights dtype; a report's measured GEMM peak),
//                     attention against its kind's roof and reading its kind's KV bytes
//   t_step          = num_layers x sum of the layer's t_stage + t_lm_head
//   tokens/s        = batch / t_step
//   knee            = per series (every row but batch) find_knee() over the listed batches
//   max batch       = largest B with all weights once + the KV pool of all layers + the
//                     activations of B sequences <= device memory
// --scope attention: the attention of every layer only, as the calculator was before weights
// (its output is kept as it was, for scripts that read it):
//   bytes/step      = what the kind streams, x num_layers: cascade (prefix-aware) the unique KV,
//                     byte_model().min; cuda-core, tensor-core (prefix-unaware) the same with
//                     the logical KV (every sequence reads its whole context)
//   t_roof          = max(bytes / BW_datasheet, flops / FLOP_roof)   all layers; FLOP_roof: the
//                     fp32 FMA peak (cuda-core) or the dense f16 tensor-core peak (tensor-core,
//                     cascade); bound: memory, fma or tensor, whichever term is larger
//   tokens/s        = batch / t_roof                        attention-only
//   max batch       = largest B whose KV pool (all layers, whole blocks, shared prefix blocks
//                     counted once per group) fits device memory minus --weights-bytes
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/datasheet.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "common/json_text.h"
#include "results/knees.h"
#include "results/point_result.h"  // compute_unit_name
#include "workload/byte_model.h"
#include "workload/layer_model.h"
#include "workload/workload.h"

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

// The datasheet row for a key ("h200") or a device name ("NVIDIA H100 80GB HBM3").
Datasheet resolve_device(const std::string& text) {
  try {
    return datasheet_by_key(text);
  } catch (const InputError&) {
    if (std::optional<Datasheet> d = find_datasheet(text)) return *d;
    throw;  // the key error lists the valid keys
  }
}

// The ceilings a prediction runs against: a datasheet row, or a report's measured device.
// `sheet` carries what the attention scope reads (bandwidth, fp32_flops as the FMA roof,
// tensor_f16_flops as the tensor roof, mem_bytes).
struct Roofs {
  Datasheet sheet;
  std::string source = "datasheet";  // or the report's path
  std::string bandwidth_name = "datasheet";
  std::string fma_name = "fp32 FMA (datasheet)";
  std::string tensor_name = "tensor-core f16 dense (datasheet)";
  double gemm_flops = 0;  // 0: unknown, the GEMMs get only their byte term
  std::string gemm_name;
};

std::string peak_label(double flops) {
  return flops > 0 ? fmt::format("{:.1f} TFLOP/s", flops / 1e12) : std::string("unknown");
}

Roofs roofs_from_datasheet(const Datasheet& d, DType weights) {
  Roofs r;
  r.sheet = d;
  if (is_fp8(weights) && d.tensor_fp8_flops > 0) {
    r.gemm_flops = d.tensor_fp8_flops;
    r.gemm_name = "tensor-core fp8 dense (datasheet)";
  } else if (is_fp8(weights)) {
    // No fp8 tensor cores (A100): fp8 weights are widened to f16 on the way in.
    r.gemm_flops = d.tensor_f16_flops;
    r.gemm_name = "tensor-core f16 dense (datasheet; no fp8 tensor cores)";
  } else {
    r.gemm_flops = d.tensor_f16_flops;
    r.gemm_name = fmt::format("tensor-core {} dense (datasheet)", dtype_name(weights));
  }
  return r;
}

const nlohmann::json* child(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}
double positive_number(const nlohmann::json* j, const char* key) {
  const nlohmann::json* v = j ? child(*j, key) : nullptr;
  return v && v->is_number() && v->get<double>() > 0 ? v->get<double>() : 0.0;
}

// devices[0] of a report or a ceilings file (docs/report-schema.md), read leniently so an older
// report works: the measured read bandwidth (else copy, else triad, else the datasheet's), the
// measured GEMM peak where the report has one (else the report's tensor-core peak of the weights
// dtype, else the FMA peak, measured then datasheet), the FMA and tensor roofs for attention, and
// mem_bytes.
Roofs roofs_from_report(const std::string& path, DType weights) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("--ceilings: cannot open report {}", path));
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = parse_json_text(ss.view(), path);
  // A report (devices[0]) or the device record `decodebench ceilings --out` writes.
  const nlohmann::json* devices = child(j, "devices");
  const bool record = !devices && child(j, "bandwidth");
  if (!record &&
      (!devices || !devices->is_array() || devices->empty() || !(*devices)[0].is_object())) {
    throw InputError(fmt::format(
        "--ceilings {}: neither a report with devices[0] nor a device record with 'bandwidth' "
        "(expected a `decodebench sweep` report or a `decodebench ceilings --out` file)",
        path));
  }
  const nlohmann::json& d = record ? j : (*devices)[0];
  Roofs r;
  r.source = path;
  const nlohmann::json* name = child(d, "name");
  r.sheet.key = "report";
  r.sheet.name = name && name->is_string() ? name->get<std::string>() : "unnamed device";
  const nlohmann::json* bw = child(d, "bandwidth");
  const nlohmann::json* measured = bw ? child(*bw, "measured") : nullptr;
  for (const char* key : {"read", "copy", "triad"}) {
    if (r.sheet.bandwidth > 0) break;
    r.sheet.bandwidth = positive_number(measured, key);
    r.bandwidth_name = fmt::format("measured {}", key);
  }
  if (r.sheet.bandwidth <= 0) {
    r.sheet.bandwidth = positive_number(bw, "datasheet");
    r.bandwidth_name = "datasheet";
  }
  if (r.sheet.bandwidth <= 0) {
    throw InputError(fmt::format(
        "--ceilings {}: devices[0] has no bandwidth (bandwidth.measured.read, copy, triad or "
        "bandwidth.datasheet); run `decodebench ceilings` or a sweep that measures them",
        path));
  }
  const nlohmann::json* mem = child(d, "mem_bytes");
  if (!mem || !mem->is_number_integer() || mem->get<std::int64_t>() <= 0) {
    throw InputError(
        fmt::format("--ceilings {}: devices[0].mem_bytes must be a positive integer", path));
  }
  r.sheet.mem_bytes = mem->get<std::int64_t>();
  const double fma_measured = positive_number(&d, "flops_measured");
  const double fma_peak = positive_number(&d, "flops_peak");
  r.sheet.fp32_flops = fma_measured > 0 ? fma_measured : fma_peak;
  r.fma_name = fma_measured > 0 ? "fp32 FMA (measured)" : "fp32 FMA (report's datasheet)";
  const double tensor_f16 = positive_number(&d, "flops_peak_tensor_f16");
  const double tensor_fp8 = positive_number(&d, "flops_peak_tensor_fp8");
  r.sheet.tensor_f16_flops = tensor_f16 > 0 ? tensor_f16 : r.sheet.fp32_flops;
  r.sheet.tensor_fp8_flops = tensor_fp8;
  // A CPU has no tensor cores: its tensor-core and cascade kernels run on the FMA units.
  r.tensor_name = tensor_f16 > 0 ? "tensor-core f16 dense (report's datasheet)"
                                 : "no tensor cores: " + r.fma_name;
  // The GEMM ceiling (devices[0].gemm_ceiling {flops, name}, measured by a sweep with layer
  // points) is newer than most reports: where it is, it wins.
  if (const nlohmann::json* g = child(d, "gemm_ceiling"); g && g->is_object()) {
    r.gemm_flops = positive_number(g, "flops");
    const nlohmann::json* n = child(*g, "name");
    r.gemm_name = n && n->is_string() && !n->get<std::string>().empty() ? n->get<std::string>()
                                                                        : "GEMM (measured)";
  }
  const double tensor_w = is_fp8(weights) && tensor_fp8 > 0 ? tensor_fp8 : tensor_f16;
  if (r.gemm_flops <= 0 && tensor_w > 0) {
    r.gemm_flops = tensor_w;
    r.gemm_name = fmt::format("tensor-core {} dense (report's datasheet)",
                              is_fp8(weights) && tensor_fp8 > 0 ? "fp8" : "f16");
  }
  if (r.gemm_flops <= 0 && r.sheet.fp32_flops > 0) {
    r.gemm_flops = r.sheet.fp32_flops;
    r.gemm_name = "no GEMM ceiling in the report: " + r.fma_name;
  }
  if (r.gemm_flops <= 0) r.gemm_name = "unknown (bytes only)";
  return r;
}

// Largest batch whose KV pool plus `extra_per_seq` bytes per sequence fits `budget` bytes, for
// the layout rule of build_layout(): each of min(B, G) groups shares S = floor(h * L / P)
// leading blocks, every sequence owns ceil(L / P) - S private blocks. Ragged contexts take hi
// (every sequence at its longest) and share from lo (the shortest a group can have): a safe
// upper bound on memory. nullopt when nothing grows with batch (every block shared, no extra).
std::optional<std::int64_t> max_batch_in_memory(const WorkloadSpec& s, double bytes_per_block,
                                                double budget, double extra_per_seq = 0) {
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

// Whole tokens/s where they are many (a GPU), three digits where few (a CPU: 1.67).
std::string tokens_text(double t) {
  return t >= 100 ? fmt::format("{:.0f}", t) : fmt::format("{:.3g}", t);
}

std::string max_batch_label(const std::optional<std::int64_t>& b) {
  return b ? std::to_string(*b) : "unbounded (all KV shared)";
}

nlohmann::json max_batch_json(const std::optional<std::int64_t>& b) {
  return b ? nlohmann::json(*b) : nlohmann::json(nullptr);
}

// A fixed-width (or markdown) table: the header, then one line per row.
std::string render_table(std::span<const char* const> header,
                         const std::vector<std::vector<std::string>>& cells, bool md) {
  std::vector<std::size_t> width(header.size());
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
  std::string s = line([&](std::size_t c) { return std::string(header[c]); });
  if (md) s += line([](std::size_t) { return std::string("---"); });
  for (const auto& row : cells) s += line([&](std::size_t c) { return row[c]; });
  return s;
}

WorkloadSpec point_spec(const ModelShape& model, const ModelOptions& o, DType kv, DType q,
                        const ContextSpec& ctx, double h, int batch) {
  WorkloadSpec s;
  s.model = model;
  s.batch = batch;
  s.context = ctx;
  s.hit_rate = h;
  s.prefix_groups = o.prefix_groups;
  s.kv_dtype = kv;
  s.q_dtype = q;
  s.block_size = o.block_size;
  validate(s);
  return s;
}

// ----------------------------------------------------------------------- scope attention

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
          {"max_batch_in_memory", max_batch_json(r.max_batch)}};
}

int run_attention(const ModelOptions& o, const Roofs& roofs) {
  const OutputFormat format = parse_format(o.format);
  const Datasheet& device = roofs.sheet;
  const std::vector<std::string> models = split_list(o.model, "--model");
  const std::vector<ContextSpec> contexts = parse_context_list(o.context, "--context");
  const std::vector<DType> kv_dtypes = parse_dtype_list(o.kv_dtype, "--kv-dtype");
  const DType q_dtype = parse_dtype(o.q_dtype.empty() ? "f16" : o.q_dtype, "--q-dtype");
  const std::vector<double> hit_rates = parse_double_list(o.hit_rate, "--hit-rate");
  const std::vector<int> batches = parse_int_list(o.batch.empty() ? "1" : o.batch, "--batch");
  const std::vector<KernelKind> kinds = parse_kernel_kinds(o.kernel_kind);
  const auto flop_roof = [&](ComputeUnit u) {
    return u == ComputeUnit::tensor_core ? device.tensor_f16_flops : device.fp32_flops;
  };
  const double weights_bytes = o.weights_bytes.value_or(0);
  if (weights_bytes < 0 || weights_bytes >= static_cast<double>(device.mem_bytes)) {
    throw InputError(fmt::format("--weights-bytes must be in [0, {:.0f}) for {} (got {:.0f})",
                                 static_cast<double>(device.mem_bytes), device.key, weights_bytes));
  }
  const double budget = static_cast<double>(device.mem_bytes) - weights_bytes;

  std::vector<Row> rows;
  for (const std::string& model_name : models) {
    const ModelShape model = load_model(model_name);
    for (DType kv : kv_dtypes) {
      for (const ContextSpec& ctx : contexts) {
        for (double h : hit_rates) {
          for (int batch : batches) {
            const WorkloadSpec s = point_spec(model, o, kv, q_dtype, ctx, h, batch);
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
              const double t_flop = r.flop_roof > 0 ? r.flops_step_all / r.flop_roof : 0.0;
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
        {"weights_bytes", weights_bytes},
        {"block_size", o.block_size},
        {"prefix_groups", o.prefix_groups},
        {"q_dtype", dtype_name(q_dtype)},
        {"rows", nlohmann::json::array()}};
    if (roofs.source != "datasheet") j["device"]["ceilings_report"] = roofs.source;
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
      "{} ({}): {} {} bandwidth, {:.1f} TFLOP/s fp32 FMA, {:.1f} TFLOP/s tensor-core f16 "
      "(dense), {} memory\n"
      "Kernel kinds: cuda-core and tensor-core are prefix-unaware (every sequence streams its "
      "whole context: the logical bytes), cascade reads a shared prefix once (the unique bytes); "
      "cuda-core is capped by the fp32 FMA peak, tensor-core and cascade by the tensor-core f16 "
      "peak (fp8 KV enters the MMA as f16). Bound: memory, fma or tensor.\n"
      "Attention only: tokens/s counts the KV reads of every layer, not weights or MLP. "
      "Max batch: KV of all layers in whole {}-token blocks, shared prefix blocks once per group, "
      "{}.\n\n",
      device.name, device.key, format_bandwidth(device.bandwidth), roofs.bandwidth_name,
      device.fp32_flops / 1e12, device.tensor_f16_flops / 1e12,
      format_bytes(static_cast<double>(device.mem_bytes)), o.block_size,
      weights_bytes > 0 ? fmt::format("{} of weights subtracted", format_bytes(weights_bytes))
                        : "weights excluded (--weights-bytes to subtract them)");
  static constexpr const char* header[] = {"model",
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
  s += render_table(header, cells, md);
  emit(s, "");
  return kExitOk;
}

// ----------------------------------------------------------------------- scope layer

struct StageTime {
  LayerStage stage = LayerStage::qkv_proj;
  double bytes = 0, flops = 0, flop_roof = 0, t_s = 0;
  bool compute_bound = false;
};

StageTime stage_time(LayerStage stage, double bytes, double flops, double roof, double bw) {
  StageTime st{stage, bytes, flops, roof};
  const double t_mem = bytes / bw;
  const double t_flop = roof > 0 ? flops / roof : 0.0;
  st.t_s = std::max(t_mem, t_flop);
  st.compute_bound = t_flop > t_mem;
  return st;
}

struct LayerRow {
  std::size_t series = 0;  // index into the knees
  std::string model, kv_dtype, context, kernel_kind;
  double hit_rate = 0, hit_rate_actual = 0;
  int batch = 0, num_layers = 0;
  bool prefix_aware = false;
  ComputeUnit attention_compute = ComputeUnit::fma;
  std::int64_t weight_bytes_layer = 0, weight_bytes_lm_head = 0;
  double weight_bytes_step = 0;  // all layers + the LM head once
  double kv_unique_step = 0, kv_logical_step = 0, kv_streamed_step = 0;  // all layers
  double activation_bytes_step = 0;  // GEMM inputs and outputs, q, out, tables
  double bytes_step = 0;             // weights + KV streamed + activations
  double flops_step = 0, gemm_flops_step = 0;
  std::vector<StageTime> layer_stages;  // one layer, in run order
  StageTime lm_head;
  double t_layer_s = 0, t_step_s = 0, tokens_per_s = 0;
  double weight_share = 0, kv_share = 0;  // of bytes_step
  std::string bound_by;                   // memory, gemm, attention, gemm+attention
  std::optional<std::int64_t> max_batch;
  double model_weight_bytes_in_memory = 0;
};

struct Series {
  std::string model, kv_dtype, context, kernel_kind;
  double hit_rate = 0;
  std::vector<const LayerRow*> rows;  // ascending batch, distinct
  std::optional<Knee> knee;
  const LayerRow* at_knee = nullptr;
  std::optional<std::int64_t> max_batch;  // of the series' knee row
};

nlohmann::json stage_json(const StageTime& s) {
  return {{"stage", stage_name(s.stage)},
          {"bytes", s.bytes},
          {"flops", s.flops},
          {"flop_roof", s.flop_roof},
          {"t_s", s.t_s},
          {"bound_by", s.compute_bound ? "compute" : "memory"}};
}

nlohmann::json to_json(const LayerRow& r, const Series& series) {
  nlohmann::json stages = nlohmann::json::array();
  for (const StageTime& s : r.layer_stages) stages.push_back(stage_json(s));
  return {{"model", r.model},
          {"kv_dtype", r.kv_dtype},
          {"context", r.context},
          {"hit_rate", r.hit_rate},
          {"hit_rate_actual", r.hit_rate_actual},
          {"batch", r.batch},
          {"num_layers", r.num_layers},
          {"kernel_kind", r.kernel_kind},
          {"prefix_aware", r.prefix_aware},
          {"attention_compute_unit", compute_unit_name(r.attention_compute)},
          {"weight_bytes_per_layer", r.weight_bytes_layer},
          {"weight_bytes_lm_head", r.weight_bytes_lm_head},
          {"weight_bytes_per_step", r.weight_bytes_step},
          {"kv_bytes_unique_per_step", r.kv_unique_step},
          {"kv_bytes_logical_per_step", r.kv_logical_step},
          {"kv_bytes_streamed_per_step", r.kv_streamed_step},
          {"activation_bytes_per_step", r.activation_bytes_step},
          {"bytes_per_step", r.bytes_step},
          {"flops_per_step", r.flops_step},
          {"gemm_flops_per_step", r.gemm_flops_step},
          {"layer_stages", stages},
          {"lm_head", stage_json(r.lm_head)},
          {"t_layer_s", r.t_layer_s},
          {"t_lm_head_s", r.lm_head.t_s},
          {"t_step_s", r.t_step_s},
          {"tokens_per_s", r.tokens_per_s},
          {"weight_byte_share", r.weight_share},
          {"kv_byte_share", r.kv_share},
          {"bound_by", r.bound_by},
          {"model_weight_bytes_in_memory", r.model_weight_bytes_in_memory},
          {"max_batch_in_memory", max_batch_json(r.max_batch)},
          {"fits_in_memory", !r.max_batch || r.batch <= *r.max_batch},
          {"knee_batch",
           series.knee ? nlohmann::json(series.knee->knee_batch) : nlohmann::json(nullptr)}};
}

nlohmann::json to_json(const Series& s) {
  nlohmann::json batches = nlohmann::json::array(), tps = nlohmann::json::array();
  for (const LayerRow* r : s.rows) {
    batches.push_back(r->batch);
    tps.push_back(r->tokens_per_s);
  }
  const Knee& k = *s.knee;
  const LayerRow& at = *s.at_knee;
  return {{"model", s.model},
          {"kv_dtype", s.kv_dtype},
          {"context", s.context},
          {"hit_rate", s.hit_rate},
          {"kernel_kind", s.kernel_kind},
          {"batches", batches},
          {"tokens_per_s", tps},
          {"knee_batch", k.knee_batch},
          {"knee_tokens_per_s", k.knee_value},
          {"plateau_tokens_per_s", k.plateau},
          {"plateau_batch", k.plateau_batch},
          {"knee_is_last_batch", k.knee_batch == s.rows.back()->batch},
          {"weight_byte_share_at_knee", at.weight_share},
          {"kv_byte_share_at_knee", at.kv_share},
          {"t_step_s_at_knee", at.t_step_s},
          {"max_batch_in_memory", max_batch_json(s.max_batch)},
          {"knee_fits_memory", !s.max_batch || k.knee_batch <= *s.max_batch}};
}

const char* const kLayerKneesDefinition =
    "A series is every row sharing model, KV dtype, context, hit rate and kernel kind, ordered "
    "by batch. Its plateau is the largest predicted tokens/s over the listed batches, its knee "
    "the smallest listed batch reaching 90 % of the plateau: the rule of the sweep's measured "
    "knees (find_knee), here on tokens/s. Series with one batch have no knee.";

std::string bound_label(bool gemm, bool attention) {
  if (gemm && attention) return "gemm+attention";
  if (gemm) return "gemm";
  if (attention) return "attention";
  return "memory";
}

// Workspace per sequence, an estimate: one layer's activations (every GEMM's input and output,
// the attention's q and output) and the LM head's logits, as if all were live at once. A
// serving engine's allocator slack, GEMM workspaces and CUDA graphs are not counted.
double workspace_bytes_per_sequence(const ModelShape& m, DType weights, DType act) {
  double bytes = 0;
  for (LayerStage s : kLayerGemms) {
    const GemmModel g = gemm_model(gemm_shape(m, s, 1), weights, act);
    bytes += static_cast<double>(g.input_bytes + g.output_bytes);
  }
  const GemmModel lm = gemm_model(gemm_shape(m, LayerStage::lm_head, 1), weights, act);
  bytes += static_cast<double>(lm.input_bytes + lm.output_bytes);
  return bytes + 2.0 * m.num_q_heads * m.head_dim * static_cast<double>(dtype_size(act));
}

// A model whose weights alone take the device's memory: no batch of it can run there, so it
// gets this instead of rows of throughput. What would fit: tensor parallel over enough devices
// to leave room for a KV cache, or a smaller weights dtype.
struct DoesNotFit {
  std::string model;
  std::string weights;  // "bf16 weights", or "--weights-bytes"
  double weight_bytes = 0, mem_bytes = 0;
  int devices_needed = 0;                      // weights split evenly, some memory left on each
  std::vector<DType> weights_dtypes_that_fit;  // empty with --weights-bytes
  std::string message;
};

// One decimal of GB: 3 significant digits would print 141.1 GB of weights and 141 GB of memory
// both as "141 GB".
std::string gigabytes(double bytes) { return fmt::format("{:.1f} GB", bytes / 1e9); }

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

nlohmann::json to_json(const DoesNotFit& d) {
  nlohmann::json dtypes = nlohmann::json::array();
  for (DType w : d.weights_dtypes_that_fit) dtypes.push_back(dtype_name(w));
  return {{"model", d.model},
          {"weight_bytes_in_memory", d.weight_bytes},
          {"mem_bytes", d.mem_bytes},
          {"devices_needed", d.devices_needed},
          {"weights_dtypes_that_fit", dtypes},
          {"message", d.message}};
}

int run_layer(const ModelOptions& o, const Roofs& roofs, DType weights) {
  const OutputFormat format = parse_format(o.format);
  const Datasheet& device = roofs.sheet;
  const std::vector<std::string> models = split_list(o.model, "--model");
  const std::vector<ContextSpec> contexts = parse_context_list(o.context, "--context");
  const std::vector<DType> kv_dtypes = parse_dtype_list(o.kv_dtype, "--kv-dtype");
  // The activations are the q dtype; 16-bit weights need it to be theirs (layer_model.h).
  const DType act = o.q_dtype.empty() ? (is_fp8(weights) ? DType::bf16 : weights)
                                      : parse_dtype(o.q_dtype, "--q-dtype");
  const std::vector<double> hit_rates = parse_double_list(o.hit_rate, "--hit-rate");
  std::vector<int> batches =
      parse_int_list(o.batch.empty() ? kLayerDefaultBatches : o.batch, "--batch");
  const std::vector<KernelKind> kinds = parse_kernel_kinds(o.kernel_kind);
  const auto attention_roof = [&](ComputeUnit u) {
    return u == ComputeUnit::tensor_core ? device.tensor_f16_flops : device.fp32_flops;
  };
  if (o.weights_bytes && *o.weights_bytes < 0) {
    throw InputError(fmt::format("--weights-bytes must be >= 0 (got {:.0f})", *o.weights_bytes));
  }
  const double bw = device.bandwidth;

  std::vector<ModelShape> shapes;
  for (const std::string& name : models) {
    ModelShape m = load_model(name);
    const std::string why = layer_support_error(m, weights, act);
    if (!why.empty()) {
      throw InputError(
          fmt::format("--scope layer: {} (--scope attention needs only the attention "
                      "shape)",
                      why));
    }
    shapes.push_back(std::move(m));
  }

  std::vector<LayerRow> rows;
  std::vector<Series> series;
  std::vector<DoesNotFit> not_fitting;
  for (const ModelShape& model : shapes) {
    const double weights_mem =
        o.weights_bytes.value_or(static_cast<double>(model_weight_bytes(model, weights)));
    const double budget = static_cast<double>(device.mem_bytes) - weights_mem;
    if (budget <= 0) {
      not_fitting.push_back(
          does_not_fit(model, device, weights, weights_mem, o.weights_bytes.has_value()));
      continue;
    }
    const double workspace = workspace_bytes_per_sequence(model, weights, act);
    for (DType kv : kv_dtypes) {
      for (const ContextSpec& ctx : contexts) {
        for (double h : hit_rates) {
          const std::size_t first_series = series.size();
          for (const KernelKind& kind : kinds) {
            Series s;
            s.model = model.name;
            s.kv_dtype = std::string(dtype_name(kv));
            s.context = context_label(ctx);
            s.hit_rate = h;
            s.kernel_kind = kind.name;
            series.push_back(std::move(s));
          }
          for (int batch : batches) {
            const WorkloadSpec spec = point_spec(model, o, kv, act, ctx, h, batch);
            const PagedLayout layout = build_layout(spec);
            const LayerModel lm = layer_model(spec, layout, weights);
            const ByteModel& bm = lm.attention;
            const std::optional<std::int64_t> max_batch = max_batch_in_memory(
                spec,
                static_cast<double>(bm.kv_bytes_per_token) * spec.block_size * model.num_layers,
                budget, workspace);
            const double layers = model.num_layers;
            for (std::size_t ki = 0; ki < kinds.size(); ++ki) {
              const KernelKind& kind = kinds[ki];
              LayerRow r;
              r.series = first_series + ki;
              r.model = model.name;
              r.kv_dtype = std::string(dtype_name(kv));
              r.context = context_label(ctx);
              r.kernel_kind = kind.name;
              r.hit_rate = h;
              r.hit_rate_actual = layout.hit_rate_actual;
              r.batch = batch;
              r.num_layers = model.num_layers;
              r.prefix_aware = kind.prefix_aware;
              r.attention_compute = kind.compute;
              const double kv_read =
                  static_cast<double>(kind.prefix_aware ? bm.kv_unique : bm.kv_logical);
              const double attn_other = static_cast<double>(bm.min - bm.kv_unique);
              bool gemm_bound = false, attention_bound = false;
              for (std::size_t g = 0, stage = 0; stage < 5; ++stage) {
                if (stage == 1) {
                  r.layer_stages.push_back(stage_time(LayerStage::attention, kv_read + attn_other,
                                                      bm.flops, attention_roof(kind.compute), bw));
                  attention_bound = r.layer_stages.back().compute_bound;
                } else {
                  const GemmModel& gm = lm.gemms[g++];
                  r.layer_stages.push_back(stage_time(gm.shape.stage,
                                                      static_cast<double>(gm.bytes()), gm.flops,
                                                      roofs.gemm_flops, bw));
                  gemm_bound = gemm_bound || r.layer_stages.back().compute_bound;
                }
                r.t_layer_s += r.layer_stages.back().t_s;
              }
              r.lm_head = stage_time(LayerStage::lm_head, static_cast<double>(lm.lm_head.bytes()),
                                     lm.lm_head.flops, roofs.gemm_flops, bw);
              gemm_bound = gemm_bound || r.lm_head.compute_bound;
              r.t_step_s = layers * r.t_layer_s + r.lm_head.t_s;
              r.tokens_per_s = batch / r.t_step_s;
              r.weight_bytes_layer = lm.weight_bytes;
              r.weight_bytes_lm_head = lm.lm_head.weight_bytes;
              r.weight_bytes_step = layers * static_cast<double>(lm.weight_bytes) +
                                    static_cast<double>(lm.lm_head.weight_bytes);
              r.kv_unique_step = layers * static_cast<double>(bm.kv_unique);
              r.kv_logical_step = layers * static_cast<double>(bm.kv_logical);
              r.kv_streamed_step = layers * kv_read;
              r.activation_bytes_step =
                  layers * (static_cast<double>(lm.activation_bytes) + attn_other) +
                  static_cast<double>(lm.lm_head.input_bytes + lm.lm_head.output_bytes);
              r.bytes_step = r.weight_bytes_step + r.kv_streamed_step + r.activation_bytes_step;
              r.gemm_flops_step = layers * lm.gemm_flops + lm.lm_head.flops;
              r.flops_step = r.gemm_flops_step + layers * bm.flops;
              r.weight_share = r.weight_bytes_step / r.bytes_step;
              r.kv_share = r.kv_streamed_step / r.bytes_step;
              r.bound_by = bound_label(gemm_bound, attention_bound);
              r.max_batch = max_batch;
              r.model_weight_bytes_in_memory = weights_mem;
              rows.push_back(std::move(r));
            }
          }
        }
      }
    }
  }
  // rows is complete: pointers into it stay valid from here on.
  for (const LayerRow& r : rows) series[r.series].rows.push_back(&r);
  for (Series& s : series) {
    std::stable_sort(s.rows.begin(), s.rows.end(),
                     [](const LayerRow* a, const LayerRow* b) { return a->batch < b->batch; });
    s.rows.erase(
        std::unique(s.rows.begin(), s.rows.end(),
                    [](const LayerRow* a, const LayerRow* b) { return a->batch == b->batch; }),
        s.rows.end());
    std::vector<int> bs;
    std::vector<double> tps;
    for (const LayerRow* r : s.rows) {
      bs.push_back(r->batch);
      tps.push_back(r->tokens_per_s);
    }
    s.knee = find_knee(bs, tps);
    if (!s.knee) continue;
    for (const LayerRow* r : s.rows) {
      if (r->batch == s.knee->knee_batch) s.at_knee = r;
    }
    s.max_batch = s.at_knee->max_batch;
  }
  const std::vector<std::string_view> left_out = [] {
    std::vector<std::string_view> v(kLayerLeftOut.begin(), kLayerLeftOut.end());
    v.push_back("the embedding lookup (batch rows of the table, not the whole of it)");
    v.push_back("the final RMSNorm and sampling");
    return v;
  }();

  if (format == OutputFormat::json) {
    nlohmann::json j = {{"scope", "layer"},
                        {"device",
                         {{"key", device.key},
                          {"name", device.name},
                          {"ceilings", roofs.source},
                          {"bandwidth", device.bandwidth},
                          {"bandwidth_source", roofs.bandwidth_name},
                          {"gemm_flop_roof", roofs.gemm_flops > 0 ? nlohmann::json(roofs.gemm_flops)
                                                                  : nlohmann::json(nullptr)},
                          {"gemm_flop_roof_name", roofs.gemm_name},
                          {"fma_flop_roof", device.fp32_flops},
                          {"fma_flop_roof_name", roofs.fma_name},
                          {"tensor_flop_roof", device.tensor_f16_flops},
                          {"tensor_flop_roof_name", roofs.tensor_name},
                          {"mem_bytes", device.mem_bytes}}},
                        {"weights_dtype", dtype_name(weights)},
                        {"activation_dtype", dtype_name(act)},
                        {"block_size", o.block_size},
                        {"prefix_groups", o.prefix_groups},
                        {"left_out", left_out},
                        {"knees_definition", kLayerKneesDefinition},
                        {"rows", nlohmann::json::array()},
                        {"knees", nlohmann::json::array()},
                        {"does_not_fit", nlohmann::json::array()}};
    for (const LayerRow& r : rows) j["rows"].push_back(to_json(r, series[r.series]));
    for (const DoesNotFit& d : not_fitting) j["does_not_fit"].push_back(to_json(d));
    for (const Series& s : series) {
      if (s.knee) j["knees"].push_back(to_json(s));
    }
    emit(j.dump(2), "");
    return kExitOk;
  }
  if (format == OutputFormat::csv) {
    // A CSV has no place for a sentence: the models left out are named on stderr.
    for (const DoesNotFit& d : not_fitting) std::cerr << "note: " << d.message << '\n';
    std::string s =
        "model,device,weights_dtype,activation_dtype,kv_dtype,context,hit_rate,hit_rate_actual,"
        "batch,num_layers,kernel_kind,prefix_aware,weight_bytes_per_step,"
        "kv_bytes_unique_per_step,kv_bytes_logical_per_step,kv_bytes_streamed_per_step,"
        "activation_bytes_per_step,bytes_per_step,flops_per_step,t_layer_s,t_lm_head_s,t_step_s,"
        "tokens_per_s,weight_byte_share,kv_byte_share,bound_by,max_batch_in_memory,knee_batch,"
        "plateau_tokens_per_s\n";
    for (const LayerRow& r : rows) {
      const Series& se = series[r.series];
      s += fmt::format(
          "{},{},{},{},{},{},{:g},{:.6g},{},{},{},{},{:.0f},{:.0f},{:.0f},{:.0f},{:.0f},{:.0f},"
          "{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{},{}\n",
          r.model, device.key, dtype_name(weights), dtype_name(act), r.kv_dtype, r.context,
          r.hit_rate, r.hit_rate_actual, r.batch, r.num_layers, r.kernel_kind,
          r.prefix_aware ? 1 : 0, r.weight_bytes_step, r.kv_unique_step, r.kv_logical_step,
          r.kv_streamed_step, r.activation_bytes_step, r.bytes_step, r.flops_step, r.t_layer_s,
          r.lm_head.t_s, r.t_step_s, r.tokens_per_s, r.weight_share, r.kv_share, r.bound_by,
          r.max_batch ? std::to_string(*r.max_batch) : "",
          se.knee ? std::to_string(se.knee->knee_batch) : "",
          se.knee ? fmt::format("{:.6g}", se.knee->plateau) : "");
    }
    emit(s, "");
    return kExitOk;
  }
  const bool md = format == OutputFormat::md;
  std::string left;
  for (std::string_view l : left_out) left += (left.empty() ? "" : "; ") + std::string(l);
  std::string s = fmt::format(
      "{} ({}): {} {} bandwidth, GEMM roof {} ({}), attention roofs {} ({}) and {} ({}), {} "
      "memory\n"
      "Layer scope: one decode step = num_layers x (qkv_proj, attention, o_proj, gate_up_proj, "
      "down_proj) + lm_head once; each stage max(bytes / bandwidth, FLOPs / its roof), summed. "
      "Weights {}, activations {}. Weights/step: every layer's and the LM head once. KV/step: "
      "what the kind reads (cascade the unique bytes, the others the logical ones). Bound: the "
      "stages whose FLOP term wins (memory: none).\n"
      "Left out: {}.\n"
      "Max batch: all weights once + KV of all layers in whole {}-token blocks (shared prefix "
      "blocks once per group) + the batch's activations <= memory; tok/s is '-' for a batch "
      "above it (it cannot run there).\n\n",
      device.name, device.key, format_bandwidth(bw), roofs.bandwidth_name,
      peak_label(roofs.gemm_flops), roofs.gemm_name, peak_label(device.fp32_flops), roofs.fma_name,
      peak_label(device.tensor_f16_flops), roofs.tensor_name,
      format_bytes(static_cast<double>(device.mem_bytes)), dtype_name(weights), dtype_name(act),
      left, o.block_size);
  static constexpr const char* header[] = {"model",     "kv",          "context",      "h req/act",
                                           "batch",     "kernel kind", "weights/step", "KV/step",
                                           "act/step",  "t_step",      "bound",        "tok/s",
                                           "weights %", "KV %",        "max batch"};
  std::vector<std::vector<std::string>> cells;
  for (const LayerRow& r : rows) {
    cells.push_back({r.model, r.kv_dtype, r.context,
                     fmt::format("{:g}/{:.3f}", r.hit_rate, r.hit_rate_actual),
                     std::to_string(r.batch), r.kernel_kind, format_bytes(r.weight_bytes_step),
                     format_bytes(r.kv_streamed_step), format_bytes(r.activation_bytes_step),
                     format_seconds(r.t_step_s), r.bound_by,
                     !r.max_batch || r.batch <= *r.max_batch ? tokens_text(r.tokens_per_s) : "-",
                     fmt::format("{:.1f}", 100 * r.weight_share),
                     fmt::format("{:.1f}", 100 * r.kv_share), max_batch_label(r.max_batch)});
  }
  for (const DoesNotFit& d : not_fitting) s += d.message + "\n";
  if (!not_fitting.empty() && !rows.empty()) s += "\n";
  if (!rows.empty()) s += render_table(header, cells, md);
  static constexpr const char* knee_header[] = {"model",
                                                "kv",
                                                "context",
                                                "h",
                                                "kernel kind",
                                                "knee batch",
                                                "tok/s at knee",
                                                "plateau tok/s (batch)",
                                                "weights % at knee",
                                                "KV % at knee",
                                                "max batch",
                                                "note"};
  std::vector<std::vector<std::string>> knee_cells;
  for (const Series& se : series) {
    if (!se.knee) continue;
    std::string note;
    if (se.knee->knee_batch == se.rows.back()->batch) note = "last listed batch: list more";
    if (se.max_batch && se.knee->knee_batch > *se.max_batch) {
      note += std::string(note.empty() ? "" : "; ") + "beyond memory";
    }
    // The curve's shape is kept (its batches); a batch that cannot run gets no tok/s.
    const auto fits = [&](int b) { return !se.max_batch || b <= *se.max_batch; };
    knee_cells.push_back(
        {se.model, se.kv_dtype, se.context, fmt::format("{:g}", se.hit_rate), se.kernel_kind,
         std::to_string(se.knee->knee_batch),
         fits(se.knee->knee_batch) ? tokens_text(se.knee->knee_value) : "-",
         fmt::format("{} ({})", fits(se.knee->plateau_batch) ? tokens_text(se.knee->plateau) : "-",
                     se.knee->plateau_batch),
         fmt::format("{:.1f}", 100 * se.at_knee->weight_share),
         fmt::format("{:.1f}", 100 * se.at_knee->kv_share), max_batch_label(se.max_batch), note});
  }
  if (rows.empty()) {
    emit(s, "");
    return kExitOk;
  }
  s += "\nKnees: the smallest listed batch reaching 90 % of the plateau (the largest tokens/s "
       "over the listed batches), per model, KV dtype, context, hit rate and kernel kind.\n";
  s += knee_cells.empty() ? std::string("(none: a knee needs at least 2 batches)\n")
                          : render_table(knee_header, knee_cells, md);
  emit(s, "");
  return kExitOk;
}

int run(const ModelOptions& o) {
  if (o.scope != "attention" && o.scope != "layer") {
    throw InputError(fmt::format("--scope: unknown scope '{}' (valid: attention, layer)", o.scope));
  }
  const DType weights = parse_dtype(o.weights_dtype, "--weights-dtype");
  if (weights != DType::bf16 && weights != DType::f16 && weights != DType::fp8_e4m3) {
    throw InputError(
        fmt::format("--weights-dtype must be bf16, f16 or fp8_e4m3, got {}", o.weights_dtype));
  }
  const Roofs roofs = o.ceilings.empty() ? roofs_from_datasheet(resolve_device(o.device), weights)
                                         : roofs_from_report(o.ceilings, weights);
  if (o.scope == "attention") return run_attention(o, roofs);
  return run_layer(o, roofs, weights);
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
  cmd->add_option("--format", o->format, "table, json, csv, md")->capture_default_str();
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace decodebench::cli
