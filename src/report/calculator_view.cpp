// `decodebench model`'s output: the calculator's rows as a table, Markdown, CSV or JSON.
#include "report/calculator_view.h"

#include <cmath>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/dtype.h"
#include "report/table.h"
#include "results/point_result.h"  // compute_unit_name

namespace decodebench {

using calculator::AttentionResult;
using calculator::AttentionRow;
using calculator::DoesNotFit;
using calculator::LayerResult;
using calculator::LayerRow;
using calculator::Series;
using calculator::StageTime;
using nlohmann::json;

namespace {

std::string peak_label(double flops) {
  return flops > 0 ? fmt::format("{:.1f} TFLOP/s", flops / 1e12) : std::string("unknown");
}

// Whole tokens/s where they are many (a GPU), three digits where few (a CPU: 1.67).
std::string tokens_text(double t) {
  return t >= 100 ? fmt::format("{:.0f}", t) : fmt::format("{:.3g}", t);
}

std::string max_batch_label(const std::optional<std::int64_t>& b) {
  return b ? std::to_string(*b) : "unbounded (all KV shared)";
}

json max_batch_json(const std::optional<std::int64_t>& b) { return b ? json(*b) : json(nullptr); }

// Every column left-aligned, as the calculator has always printed them.
Table table_of(std::initializer_list<const char*> titles) {
  Table t;
  for (const char* title : titles) t.columns.push_back({title});
  return t;
}

std::string render(const Table& t, OutputFormat f) {
  return f == OutputFormat::md ? render_md(t) : render_text(t);
}

// ----------------------------------------------------------------------- scope attention

// Bytes per token are whole for the float formats and may be fractional for an integer one
// (a per-block scale counted as 1/P per token): an integer where they are whole.
json byte_count(double bytes) {
  return bytes == std::floor(bytes) && std::fabs(bytes) < 0x1p53 ? json(std::llround(bytes))
                                                                 : json(bytes);
}

// A mixture of experts' MLP: one line per such model, with the experts read at each batch.
std::string moe_notes(const std::vector<LayerRow>& rows) {
  std::string notes;
  std::map<std::string, std::map<int, double>> read;  // model -> batch -> experts read
  std::map<std::string, std::pair<int, int>> shape;
  for (const LayerRow& r : rows) {
    if (r.num_experts == 0) continue;
    read[r.model][r.batch] = r.experts_read;
    shape[r.model] = {r.num_experts, r.experts_per_token};
  }
  for (const auto& [model, by_batch] : read) {
    std::string at;
    for (const auto& [batch, n] : by_batch)
      at += fmt::format("{}{:.3g} at batch {}", at.empty() ? "" : ", ", n, batch);
    notes += fmt::format(
        "{}: mixture of experts, {} experts, {} per token: gate_up/down_proj read the experts a "
        "batch is expected to touch under uniform routing, E (1 - (1 - k/E)^B) per layer ({}); "
        "weights/step grows with the batch until every expert is read.\n",
        model, shape[model].first, shape[model].second, at);
  }
  return notes;
}

// A model's windows, sinks and soft-cap: one line per model that has them, for the text views.
template <class Rows>
std::string attention_notes(const Rows& rows) {
  std::string notes, last;
  for (const auto& r : rows) {
    if (r.attention.empty() || r.model == last) continue;
    last = r.model;
    notes += fmt::format(
        "{}: {} (KV bytes, FLOPs and tokens/s sum the layers one by one: a "
        "windowed layer reads only the blocks holding its window).\n",
        r.model, r.attention);
  }
  return notes;
}

json to_json(const AttentionRow& r) {
  json j = {{"model", r.model},
            {"device", r.device},
            {"kv_dtype", r.kv_dtype},
            {"context", r.context},
            {"hit_rate", r.hit_rate},
            {"hit_rate_actual", r.hit_rate_actual},
            {"batch", r.batch},
            {"num_layers", r.num_layers},
            {"kv_bytes_per_token_per_layer", byte_count(r.kv_bytes_per_token_layer)},
            {"kv_bytes_per_token_all_layers", byte_count(r.kv_bytes_per_token_all)},
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
  if (!r.attention.empty()) j["attention"] = r.attention;  // only where the model has variants
  return j;
}

std::string attention_json(const AttentionResult& a) {
  const Datasheet& device = a.roofs.sheet;
  json j = {{"device",
             {{"key", device.key},
              {"name", device.name},
              {"bandwidth", device.bandwidth},
              {"fp32_flops", device.fp32_flops},
              {"tensor_f16_flops", device.tensor_f16_flops},
              {"tensor_fp8_flops",
               device.tensor_fp8_flops > 0 ? json(device.tensor_fp8_flops) : json(nullptr)},
              {"mem_bytes", device.mem_bytes}}},
            {"weights_bytes", a.weights_bytes},
            {"block_size", a.block_size},
            {"prefix_groups", a.prefix_groups},
            {"q_dtype", dtype_name(a.q_dtype)},
            {"rows", json::array()}};
  if (a.roofs.source != "datasheet") j["device"]["ceilings_report"] = a.roofs.source;
  for (const AttentionRow& r : a.rows) j["rows"].push_back(to_json(r));
  return j.dump(2);
}

std::string attention_csv(const AttentionResult& a) {
  std::string s =
      "model,device,kv_dtype,context,hit_rate,hit_rate_actual,batch,num_layers,"
      "kv_bytes_per_token_per_layer,kv_bytes_per_token_all_layers,kernel_kind,prefix_aware,"
      "compute_unit,bytes_per_step_per_layer,bytes_per_step_all_layers,"
      "bytes_streamed_per_step_per_layer,bytes_streamed_per_step_all_layers,"
      "flops_per_step_all_layers,arithmetic_intensity,arithmetic_intensity_streamed,flop_roof,"
      "bound_by,t_roof_s,"
      "tokens_per_s_attention_only,max_batch_in_memory\n";
  for (const AttentionRow& r : a.rows) {
    s += fmt::format(
        "{},{},{},{},{:g},{:.6g},{},{},{},{},{},{},{},{:.0f},{:.0f},{:.0f},{:.0f},{:.6g},{:.6g},"
        "{:.6g},{:.6g},{},{:.6g},{:.6g},{}\n",
        csv_cell(r.model), csv_cell(r.device), r.kv_dtype, r.context, r.hit_rate, r.hit_rate_actual,
        r.batch, r.num_layers, r.kv_bytes_per_token_layer, r.kv_bytes_per_token_all, r.kernel_kind,
        r.prefix_aware ? 1 : 0, compute_unit_name(r.compute), r.bytes_step_layer, r.bytes_step_all,
        r.streamed_step_layer, r.streamed_step_all, r.flops_step_all, r.intensity,
        r.intensity_streamed, r.flop_roof, csv_cell(r.bound_by), r.t_roof_s, r.tokens_per_s,
        r.max_batch ? std::to_string(*r.max_batch) : "");
  }
  return s;
}

std::string attention_table(const AttentionResult& a, OutputFormat f) {
  const Datasheet& device = a.roofs.sheet;
  std::string s = fmt::format(
      "{} ({}): {} {} bandwidth, {:.1f} TFLOP/s fp32 FMA, {:.1f} TFLOP/s tensor-core f16 "
      "(dense), {} memory\n"
      "Kernel kinds: cuda-core and tensor-core are prefix-unaware (every sequence streams its "
      "whole context: the logical bytes), cascade reads a shared prefix once (the unique bytes); "
      "cuda-core is capped by the fp32 FMA peak, tensor-core and cascade by the tensor-core f16 "
      "peak (fp8 KV enters the MMA as f16). Bound: memory, fma or tensor.\n"
      "Attention only: tokens/s counts the KV reads of every layer, not weights or MLP. "
      "Max batch: KV of all layers in whole {}-token blocks, shared prefix blocks once per group, "
      "{}.\n{}\n",
      device.name, device.key, format_bandwidth(device.bandwidth), a.roofs.bandwidth_name,
      device.fp32_flops / 1e12, device.tensor_f16_flops / 1e12,
      format_bytes(static_cast<double>(device.mem_bytes)), a.block_size,
      a.weights_bytes > 0 ? fmt::format("{} of weights subtracted", format_bytes(a.weights_bytes))
                          : "weights excluded (--weights-bytes to subtract them)",
      attention_notes(a.rows));
  Table t = table_of({"model", "kv", "context", "h req/act", "batch", "kernel kind",
                      "KV B/tok/layer", "KV B/tok (all layers)", "bytes/step (all layers)",
                      "FLOP/B", "t_roof", "bound", "tok/s (attn only)", "max batch"});
  for (const AttentionRow& r : a.rows) {
    t.add_row({r.model, r.kv_dtype, r.context,
               fmt::format("{:g}/{:.3f}", r.hit_rate, r.hit_rate_actual), std::to_string(r.batch),
               r.kernel_kind, fmt::format("{}", r.kv_bytes_per_token_layer),
               fmt::format("{} ({})", r.kv_bytes_per_token_all,
                           format_bytes(static_cast<double>(r.kv_bytes_per_token_all))),
               format_bytes(r.streamed_step_all), fmt::format("{:.2f}", r.intensity_streamed),
               format_seconds(r.t_roof_s), r.bound_by, fmt::format("{:.0f}", r.tokens_per_s),
               max_batch_label(r.max_batch)});
  }
  return s + render(t, f);
}

// ----------------------------------------------------------------------- scope layer

json stage_json(const StageTime& s) {
  return {{"stage", stage_name(s.stage)},
          {"bytes", s.bytes},
          {"flops", s.flops},
          {"flop_roof", s.flop_roof},
          {"t_s", s.t_s},
          {"bound_by", s.compute_bound ? "compute" : "memory"}};
}

json to_json(const LayerRow& r, const Series& series) {
  json stages = json::array();
  for (const StageTime& s : r.layer_stages) stages.push_back(stage_json(s));
  json j = {{"model", r.model},
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
            {"fits_in_memory", r.fits()},
            {"knee_batch", series.knee ? json(series.knee->knee_batch) : json(nullptr)}};
  if (!r.attention.empty()) j["attention"] = r.attention;  // only where the model has variants
  if (r.num_experts > 0) {                                 // only for a mixture of experts
    j["experts"] = {{"num_experts", r.num_experts},
                    {"experts_per_token", r.experts_per_token},
                    {"experts_read_per_layer", r.experts_read}};
  }
  if (r.num_experts > 0) {  // only for a mixture of experts
    j["experts"] = {{"num_experts", r.num_experts},
                    {"experts_per_token", r.experts_per_token},
                    {"experts_read_per_layer", r.experts_read}};
  }
  return j;
}

json to_json(const Series& s, const std::vector<LayerRow>& rows) {
  json batches = json::array(), tps = json::array();
  for (std::size_t i : s.rows) {
    batches.push_back(rows[i].batch);
    tps.push_back(rows[i].tokens_per_s);
  }
  const Knee& k = *s.knee;
  const LayerRow& at = rows[*s.at_knee];
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
          {"knee_is_last_batch", k.knee_batch == rows[s.rows.back()].batch},
          {"weight_byte_share_at_knee", at.weight_share},
          {"kv_byte_share_at_knee", at.kv_share},
          {"t_step_s_at_knee", at.t_step_s},
          {"max_batch_in_memory", max_batch_json(s.max_batch)},
          {"knee_fits_memory", !s.max_batch || k.knee_batch <= *s.max_batch}};
}

json to_json(const DoesNotFit& d) {
  json dtypes = json::array();
  for (DType w : d.weights_dtypes_that_fit) dtypes.push_back(dtype_name(w));
  return {{"model", d.model},
          {"weight_bytes_in_memory", d.weight_bytes},
          {"mem_bytes", d.mem_bytes},
          {"devices_needed", d.devices_needed},
          {"weights_dtypes_that_fit", dtypes},
          {"message", d.message}};
}

std::string layer_json(const LayerResult& l) {
  const calculator::Roofs& roofs = l.roofs;
  const Datasheet& device = roofs.sheet;
  json j = {{"scope", "layer"},
            {"device",
             {{"key", device.key},
              {"name", device.name},
              {"ceilings", roofs.source},
              {"bandwidth", device.bandwidth},
              {"bandwidth_source", roofs.bandwidth_name},
              {"gemm_flop_roof", roofs.gemm_flops > 0 ? json(roofs.gemm_flops) : json(nullptr)},
              {"gemm_flop_roof_name", roofs.gemm_name},
              {"fma_flop_roof", device.fp32_flops},
              {"fma_flop_roof_name", roofs.fma_name},
              {"tensor_flop_roof", device.tensor_f16_flops},
              {"tensor_flop_roof_name", roofs.tensor_name},
              {"mem_bytes", device.mem_bytes}}},
            {"weights_dtype", dtype_name(l.weights_dtype)},
            {"activation_dtype", dtype_name(l.activation_dtype)},
            {"block_size", l.block_size},
            {"prefix_groups", l.prefix_groups},
            {"left_out", calculator::layer_left_out()},
            {"knees_definition", calculator::kLayerKneesDefinition},
            {"rows", json::array()},
            {"knees", json::array()},
            {"does_not_fit", json::array()}};
  for (const LayerRow& r : l.rows) j["rows"].push_back(to_json(r, l.series[r.series]));
  for (const DoesNotFit& d : l.not_fitting) j["does_not_fit"].push_back(to_json(d));
  for (const Series& s : l.series) {
    if (s.knee) j["knees"].push_back(to_json(s, l.rows));
  }
  return j.dump(2);
}

std::string layer_csv(const LayerResult& l) {
  std::string s =
      "model,device,weights_dtype,activation_dtype,kv_dtype,context,hit_rate,hit_rate_actual,"
      "batch,num_layers,kernel_kind,prefix_aware,weight_bytes_per_step,"
      "kv_bytes_unique_per_step,kv_bytes_logical_per_step,kv_bytes_streamed_per_step,"
      "activation_bytes_per_step,bytes_per_step,flops_per_step,t_layer_s,t_lm_head_s,t_step_s,"
      "tokens_per_s,weight_byte_share,kv_byte_share,bound_by,max_batch_in_memory,knee_batch,"
      "plateau_tokens_per_s\n";
  for (const LayerRow& r : l.rows) {
    const Series& se = l.series[r.series];
    s += fmt::format(
        "{},{},{},{},{},{},{:g},{:.6g},{},{},{},{},{:.0f},{:.0f},{:.0f},{:.0f},{:.0f},{:.0f},"
        "{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{},{}\n",
        csv_cell(r.model), csv_cell(l.roofs.sheet.key), dtype_name(l.weights_dtype),
        dtype_name(l.activation_dtype), r.kv_dtype, r.context, r.hit_rate, r.hit_rate_actual,
        r.batch, r.num_layers, r.kernel_kind, r.prefix_aware ? 1 : 0, r.weight_bytes_step,
        r.kv_unique_step, r.kv_logical_step, r.kv_streamed_step, r.activation_bytes_step,
        r.bytes_step, r.flops_step, r.t_layer_s, r.lm_head.t_s, r.t_step_s, r.tokens_per_s,
        r.weight_share, r.kv_share, csv_cell(r.bound_by),
        r.max_batch ? std::to_string(*r.max_batch) : "",
        se.knee ? std::to_string(se.knee->knee_batch) : "",
        se.knee ? fmt::format("{:.6g}", se.knee->plateau) : "");
  }
  return s;
}

std::string layer_table(const LayerResult& l, OutputFormat f) {
  const calculator::Roofs& roofs = l.roofs;
  const Datasheet& device = roofs.sheet;
  std::string left;
  for (std::string_view s : calculator::layer_left_out()) {
    left += (left.empty() ? "" : "; ") + std::string(s);
  }
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
      "above it (it cannot run there).\n{}\n",
      device.name, device.key, format_bandwidth(device.bandwidth), roofs.bandwidth_name,
      peak_label(roofs.gemm_flops), roofs.gemm_name, peak_label(device.fp32_flops), roofs.fma_name,
      peak_label(device.tensor_f16_flops), roofs.tensor_name,
      format_bytes(static_cast<double>(device.mem_bytes)), dtype_name(l.weights_dtype),
      dtype_name(l.activation_dtype), left, l.block_size,
      attention_notes(l.rows) + moe_notes(l.rows));
  for (const DoesNotFit& d : l.not_fitting) s += d.message + "\n";
  if (l.rows.empty()) return s;
  if (!l.not_fitting.empty()) s += "\n";
  Table rows = table_of({"model", "kv", "context", "h req/act", "batch", "kernel kind",
                         "weights/step", "KV/step", "act/step", "t_step", "bound", "tok/s",
                         "weights %", "KV %", "max batch"});
  for (const LayerRow& r : l.rows) {
    rows.add_row(
        {r.model, r.kv_dtype, r.context, fmt::format("{:g}/{:.3f}", r.hit_rate, r.hit_rate_actual),
         std::to_string(r.batch), r.kernel_kind, format_bytes(r.weight_bytes_step),
         format_bytes(r.kv_streamed_step), format_bytes(r.activation_bytes_step),
         format_seconds(r.t_step_s), r.bound_by, r.fits() ? tokens_text(r.tokens_per_s) : "-",
         fmt::format("{:.1f}", 100 * r.weight_share), fmt::format("{:.1f}", 100 * r.kv_share),
         max_batch_label(r.max_batch)});
  }
  s += render(rows, f);
  Table knees =
      table_of({"model", "kv", "context", "h", "kernel kind", "knee batch", "tok/s at knee",
                "plateau tok/s (batch)", "weights % at knee", "KV % at knee", "max batch", "note"});
  for (const Series& se : l.series) {
    if (!se.knee) continue;
    std::string note;
    if (se.knee->knee_batch == l.rows[se.rows.back()].batch) note = "last listed batch: list more";
    if (se.max_batch && se.knee->knee_batch > *se.max_batch) {
      note += std::string(note.empty() ? "" : "; ") + "beyond memory";
    }
    // The curve's shape is kept (its batches); a batch that cannot run gets no tok/s.
    const auto fits = [&](int b) { return !se.max_batch || b <= *se.max_batch; };
    const LayerRow& at = l.rows[*se.at_knee];
    knees.add_row(
        {se.model, se.kv_dtype, se.context, fmt::format("{:g}", se.hit_rate), se.kernel_kind,
         std::to_string(se.knee->knee_batch),
         fits(se.knee->knee_batch) ? tokens_text(se.knee->knee_value) : "-",
         fmt::format("{} ({})", fits(se.knee->plateau_batch) ? tokens_text(se.knee->plateau) : "-",
                     se.knee->plateau_batch),
         fmt::format("{:.1f}", 100 * at.weight_share), fmt::format("{:.1f}", 100 * at.kv_share),
         max_batch_label(se.max_batch), note});
  }
  s += "\nKnees: the smallest listed batch reaching 90 % of the plateau (the largest tokens/s "
       "over the listed batches), per model, KV dtype, context, hit rate and kernel kind.\n";
  s += knees.rows.empty() ? std::string("(none: a knee needs at least 2 batches)\n")
                          : render(knees, f);
  return s;
}

}  // namespace

std::string attention_view(const AttentionResult& r, OutputFormat f) {
  if (f == OutputFormat::json) return attention_json(r);
  if (f == OutputFormat::csv) return attention_csv(r);
  return attention_table(r, f);
}

std::string layer_view(const LayerResult& r, OutputFormat f) {
  if (f == OutputFormat::json) return layer_json(r);
  if (f == OutputFormat::csv) return layer_csv(r);
  return layer_table(r, f);
}

std::string layer_view_notes(const LayerResult& r, OutputFormat f) {
  std::string s;
  if (f != OutputFormat::csv) return s;
  for (const DoesNotFit& d : r.not_fitting) s += "note: " + d.message + "\n";
  return s;
}

}  // namespace decodebench
