#include "report/quant_error_view.h"

#include <fmt/format.h>

#include "common/json_in.h"
#include "common/units.h"

namespace decodebench {
namespace {

std::string sci(double x) { return fmt::format("{:.2e}", x); }
std::string tokens(double x) { return x > 0 ? fmt::format("{:.1f}", x) : "-"; }

std::vector<std::string> error_cells(const quant::ErrorMeasures& m) {
  return {sci(m.k_rel_rms),   sci(m.v_rel_rms),    sci(m.out_rel_l2),
          sci(m.out_max_rel), sci(m.attn_kl_mean), sci(m.attn_kl_max)};
}

nlohmann::json measures_json(const quant::ErrorMeasures& m) {
  return {{"k_rel_rms", number_or_null(m.k_rel_rms)},
          {"v_rel_rms", number_or_null(m.v_rel_rms)},
          {"out_rel_l2", number_or_null(m.out_rel_l2)},
          {"out_max_rel", number_or_null(m.out_max_rel)},
          {"attn_kl_mean", number_or_null(m.attn_kl_mean)},
          {"attn_kl_max", number_or_null(m.attn_kl_max)}};
}

quant::ErrorMeasures measures_from(const JsonIn& in) {
  in.reject_unknown_keys({"k_rel_rms", "v_rel_rms", "out_rel_l2", "out_max_rel", "attn_kl_mean",
                          "attn_kl_max", "layer"});
  quant::ErrorMeasures m;
  m.k_rel_rms = in.at("k_rel_rms").number_or_nan();
  m.v_rel_rms = in.at("v_rel_rms").number_or_nan();
  m.out_rel_l2 = in.at("out_rel_l2").number_or_nan();
  m.out_max_rel = in.at("out_max_rel").number_or_nan();
  m.attn_kl_mean = in.at("attn_kl_mean").number_or_nan();
  m.attn_kl_max = in.at("attn_kl_max").number_or_nan();
  return m;
}

}  // namespace

Table quant_error_table(const QuantErrorResult& r, bool per_layer) {
  Table t;
  t.columns.push_back({"format"});
  if (per_layer) t.columns.push_back({"layer"});
  for (const char* title : {"K rel rms", "V rel rms", "out rel L2", "out max rel", "KL mean",
                            "KL max", "bytes/step", "tok/s roof", "tok/s"}) {
    t.columns.push_back({title, true});
  }
  t.columns.push_back({"status"});
  t.columns.push_back({"kernel"});
  t.rule = true;
  for (const QuantFormatResult& f : r.formats) {
    const std::string name(quant::format_name(f.format));
    std::vector<std::string> row = {name};
    if (per_layer) row.push_back("all");
    for (std::string& c : error_cells(f.overall)) row.push_back(std::move(c));
    row.push_back(f.bytes_per_step > 0 ? format_bytes(f.bytes_per_step) : "-");
    row.push_back(tokens(f.tokens_per_s_roof));
    row.push_back(tokens(f.tokens_per_s));
    row.push_back(f.status.empty() ? "-" : f.status);
    row.push_back(f.not_measured.empty() ? f.kernel : "not run");
    t.add_row(std::move(row));
    if (!per_layer) continue;
    for (std::size_t l = 0; l < f.layers.size(); ++l) {
      std::vector<std::string> lrow = {name, r.layers.at(l)};
      for (std::string& c : error_cells(f.layers[l])) lrow.push_back(std::move(c));
      lrow.resize(t.columns.size());
      t.add_row(std::move(lrow));
    }
  }
  return t;
}

std::string quant_error_header(const QuantErrorResult& r) {
  return fmt::format(
      "data: {} ({} layer{}; {} query / {} KV heads, head_dim {}, blocks of {} tokens); errors "
      "against the unquantized cache, double precision\n",
      r.data, r.layers.size(), r.layers.size() == 1 ? "" : "s", r.num_q_heads, r.num_kv_heads,
      r.head_dim, r.block_size);
}

std::string quant_error_footer(const QuantErrorResult& r) {
  if (r.backend.empty()) return "speed: not measured (--no-speed)\n";
  std::string s = fmt::format(
      "speed: the attention of {} ({} layers), batch {}, context {}, on {} \"{}\"; bytes/step: "
      "one layer's step in each format (codes, scales, zeros, q, out); tok/s roof = batch / "
      "({} x bytes/step / read {}, the best of the ceiling and the points' paired reads); tok/s "
      "measured by a sweep in this run\n",
      r.model, r.num_layers, r.batch, r.context, r.backend, r.device, r.num_layers,
      format_bandwidth(r.read_ceiling_Bps));
  bool marked = false;
  for (const QuantFormatResult& f : r.formats) {
    marked |= f.status.rfind("ok", 0) == 0 && f.status.size() > 2;
  }
  if (marked) {
    s += "status: as the sweep marks a point: * stopped at the timeout before its stopping rule "
         "held, ~ noise above the max noise, ! flagged by a self-check; such a tok/s is not a "
         "measurement to quote (rerun with a longer --timeout or on a quieter machine)\n";
  }
  for (const QuantFormatResult& f : r.formats) {
    if (!f.not_measured.empty()) {
      s += fmt::format("  {}: tok/s not measured: {}\n", quant::format_name(f.format),
                       f.not_measured);
    }
  }
  return s;
}

nlohmann::json quant_error_json(const QuantErrorResult& r) {
  nlohmann::json formats = nlohmann::json::array();
  for (const QuantFormatResult& f : r.formats) {
    nlohmann::json layers = nlohmann::json::array();
    for (std::size_t l = 0; l < f.layers.size(); ++l) {
      nlohmann::json j = measures_json(f.layers[l]);
      j["layer"] = r.layers.at(l);
      layers.push_back(std::move(j));
    }
    formats.push_back({{"format", quant::format_name(f.format)},
                       {"overall", measures_json(f.overall)},
                       {"layers", std::move(layers)},
                       {"bytes_per_step", positive_or_null(f.bytes_per_step)},
                       {"tokens_per_s_roof", positive_or_null(f.tokens_per_s_roof)},
                       {"tokens_per_s", positive_or_null(f.tokens_per_s)},
                       {"kernel", f.kernel},
                       {"status", f.status},
                       {"not_measured", f.not_measured}});
  }
  nlohmann::json speed = nullptr;
  if (!r.backend.empty()) {
    speed = {{"backend", r.backend},
             {"device", r.device},
             {"model", r.model},
             {"batch", r.batch},
             {"context", r.context},
             {"num_layers", r.num_layers},
             {"read_ceiling_Bps", positive_or_null(r.read_ceiling_Bps)}};
  }
  return {{"kind", "quant-error"},
          {"data", r.data},
          {"layers", r.layers},
          {"num_q_heads", r.num_q_heads},
          {"num_kv_heads", r.num_kv_heads},
          {"head_dim", r.head_dim},
          {"block_size", r.block_size},
          {"speed", std::move(speed)},
          {"formats", std::move(formats)}};
}

}  // namespace decodebench

namespace decodebench {

QuantErrorResult quant_error_from_json(const nlohmann::json& j, const std::string& source) {
  const JsonIn in(j, source);
  in.reject_unknown_keys({"kind", "data", "layers", "num_q_heads", "num_kv_heads", "head_dim",
                          "block_size", "speed", "formats"});
  if (in.at("kind").string() != "quant-error") in.at("kind").fail("expected \"quant-error\"");
  QuantErrorResult r;
  r.data = in.at("data").string();
  const JsonIn layers = in.at("layers");
  for (std::size_t i = 0; i < layers.size(); ++i) r.layers.push_back(layers.at(i).string());
  r.num_q_heads = in.at("num_q_heads").int32();
  r.num_kv_heads = in.at("num_kv_heads").int32();
  r.head_dim = in.at("head_dim").int32();
  r.block_size = in.at("block_size").int32();
  const JsonIn speed = in.at("speed");
  if (!speed.json().is_null()) {
    speed.reject_unknown_keys(
        {"backend", "device", "model", "batch", "context", "num_layers", "read_ceiling_Bps"});
    r.backend = speed.at("backend").string();
    r.device = speed.at("device").string();
    r.model = speed.at("model").string();
    r.batch = speed.at("batch").int32();
    r.context = speed.at("context").int32();
    r.num_layers = speed.at("num_layers").int32();
    r.read_ceiling_Bps = speed.at("read_ceiling_Bps").number_or_zero();
  }
  const JsonIn formats = in.at("formats");
  for (std::size_t i = 0; i < formats.size(); ++i) {
    const JsonIn f = formats.at(i);
    f.reject_unknown_keys({"format", "overall", "layers", "bytes_per_step", "tokens_per_s_roof",
                           "tokens_per_s", "kernel", "status", "not_measured"});
    QuantFormatResult fr;
    try {
      fr.format = quant::parse_format(f.at("format").string(), "format");
    } catch (const InputError& e) {
      f.at("format").fail(e.what());
    }
    fr.overall = measures_from(f.at("overall"));
    const JsonIn per_layer = f.at("layers");
    if (per_layer.size() != r.layers.size()) {
      per_layer.fail(fmt::format("{} entries for {} layers", per_layer.size(), r.layers.size()));
    }
    for (std::size_t l = 0; l < per_layer.size(); ++l) {
      fr.layers.push_back(measures_from(per_layer.at(l)));
    }
    fr.bytes_per_step = f.at("bytes_per_step").number_or_zero();
    fr.tokens_per_s_roof = f.at("tokens_per_s_roof").number_or_zero();
    fr.tokens_per_s = f.at("tokens_per_s").number_or_zero();
    fr.kernel = f.at("kernel").string();
    // Documents written before the status column have none: no marks were recorded.
    if (f.has("status")) fr.status = f.at("status").string();
    fr.not_measured = f.at("not_measured").string();
    r.formats.push_back(std::move(fr));
  }
  return r;
}

}  // namespace decodebench
