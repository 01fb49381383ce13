// The point record's JSON (a report's results[]): its writer and its reader, every field of
// PointResult with the keys docs/report-schema.md names. The report around it is report.cpp's.
#include "results/point_json.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "common/json_text.h"
#include "results/report.h"

namespace decodebench {

using nlohmann::json;

namespace {

DType dtype_from(const JsonIn& in) {
  try {
    return parse_dtype(in.string(), in.path());
  } catch (const InputError& e) {
    in.fail(e.what());
  }
}

json ceiling_to_json(const std::optional<ComputeCeiling>& c) {
  if (!c) return nullptr;
  return {
      {"unit", compute_unit_name(c->unit)}, {"name", c->name}, {"flops", number_or_null(c->flops)}};
}

ComputeCeiling ceiling_from(const JsonIn& in) {
  ComputeCeiling c;
  const JsonIn unit = in.at("unit");
  try {
    c.unit = parse_compute_unit(unit.string());
  } catch (const InputError& e) {
    unit.fail(e.what());
  }
  c.name = in.at("name").string();
  c.flops = in.at("flops").number_or_nan();
  return c;
}

json timing_to_json(const std::optional<TimingRecord>& t) {
  if (!t) return nullptr;
  json cold = {{"method", cold_method_name(cold_method(*t))}};
  if (cold_method(*t) == ColdMethod::rotation) {
    cold["copies"] = t->rotation_copies;
    cold["bytes"] = t->rotation_bytes;
  } else if (cold_method(*t) == ColdMethod::flush) {
    cold["reason"] = t->flush_reason;
  }
  return {{"method", timing_method_name(t->method)},
          {"steps_per_sample", t->steps_per_sample},
          {"l2", t->warm_l2 ? "warm" : "cold"},
          {"cold", cold}};
}

// "cold" (added with rotation; absent in older reports: a flush, or warm, as "l2" says). Its
// method must agree with "l2", and each method has its own keys only.
void cold_from(const JsonIn& in, TimingRecord& t) {
  const JsonIn m = in.at("method");
  const std::string method = m.string();
  if (method != "warm" && method != "flush" && method != "rotation")
    m.fail(fmt::format("'{}' is not a cold method; valid: warm, flush, rotation", method));
  if ((method == "warm") != t.warm_l2)
    m.fail(fmt::format("cold method '{}' disagrees with l2 '{}'", method,
                       t.warm_l2 ? "warm" : "cold"));
  if (method == "rotation") {
    in.reject_unknown_keys({"method", "copies", "bytes"});
    const JsonIn copies = in.at("copies");
    t.rotation_copies = copies.int32();
    if (t.rotation_copies < 2) copies.fail("a rotation has >= 2 copies");
    const JsonIn bytes = in.at("bytes");
    t.rotation_bytes = bytes.integer();
    if (t.rotation_bytes <= 0) bytes.fail("a rotation's bytes are > 0");
  } else if (method == "flush") {
    in.reject_unknown_keys({"method", "reason"});
    t.flush_reason = in.at("reason").string();
  } else {
    in.reject_unknown_keys({"method"});
  }
}

TimingRecord timing_from(const JsonIn& in) {
  TimingRecord t;
  {
    const JsonIn m = in.at("method");
    try {
      t.method = parse_timing_method(m.string());
    } catch (const InputError& e) {
      m.fail(e.what());
    }
  }
  const JsonIn steps = in.at("steps_per_sample");
  t.steps_per_sample = steps.int32();
  if (t.steps_per_sample < 1) steps.fail("steps_per_sample must be >= 1");
  const JsonIn l2 = in.at("l2");
  const std::string cache = l2.string();
  if (cache != "warm" && cache != "cold") {
    l2.fail(fmt::format("'{}' is not an L2 state; valid: warm, cold", cache));
  }
  t.warm_l2 = cache == "warm";
  if (in.has("cold")) cold_from(in.at("cold"), t);
  return t;
}

json utilization_to_json(const std::optional<UtilizationRecord>& u) {
  if (!u) return nullptr;
  return {{"source", busy_source_name(u->source)},
          {"busy", number_or_null(u->busy)},
          {"threads", u->threads > 0 ? json(u->threads) : json(nullptr)},
          {"cpu_time_s", number_or_null(u->cpu_time_s)},
          {"window_s", number_or_null(u->window_s)},
          {"energy_J", number_or_null(u->energy_J)},
          {"power_W", number_or_null(u->power_W)},
          {"power_reading_W", number_or_null(u->power_reading_W)},
          {"energy_J_per_step", number_or_null(u->energy_J_per_step)},
          {"energy_J_per_token", number_or_null(u->energy_J_per_token)},
          {"note", u->note}};
}

UtilizationRecord utilization_from(const JsonIn& in) {
  UtilizationRecord u;
  {
    const JsonIn src = in.at("source");
    try {
      u.source = parse_busy_source(src.string());
    } catch (const InputError& e) {
      src.fail(e.what());
    }
  }
  const JsonIn busy = in.at("busy");
  u.busy = busy.number_or_nan();
  if (u.busy < 0) busy.fail(fmt::format("a busy fraction is >= 0, got {}", u.busy));
  const JsonIn threads = in.at("threads");
  if (!threads.json().is_null()) {
    u.threads = threads.int32();
    if (u.threads < 1) threads.fail(fmt::format("threads must be >= 1 or null, got {}", u.threads));
  }
  u.cpu_time_s = in.at("cpu_time_s").number_or_nan();
  u.window_s = in.at("window_s").number_or_nan();
  u.energy_J = in.at("energy_J").number_or_nan();
  u.power_W = in.at("power_W").number_or_nan();
  u.power_reading_W = in.at("power_reading_W").number_or_nan();
  u.energy_J_per_step = in.at("energy_J_per_step").number_or_nan();
  u.energy_J_per_token = in.at("energy_J_per_token").number_or_nan();
  u.note = in.at("note").string();
  return u;
}

json stats_to_json(const SampleStats& t) {
  return {{"median", number_or_null(t.median)},
          {"min", number_or_null(t.min)},
          {"max", number_or_null(t.max)},
          {"p10", number_or_null(t.p10)},
          {"p90", number_or_null(t.p90)},
          {"mean", number_or_null(t.mean)},
          {"rel_noise", number_or_null(t.rel_noise)},
          {"samples", t.samples}};
}

SampleStats stats_from(const JsonIn& t) {
  SampleStats s;
  s.median = t.at("median").number_or_nan();
  s.min = t.at("min").number_or_nan();
  s.max = t.at("max").number_or_nan();
  s.p10 = t.at("p10").number_or_nan();
  s.p90 = t.at("p90").number_or_nan();
  s.mean = t.at("mean").number_or_nan();
  s.rel_noise = t.at("rel_noise").number_or_nan();
  s.samples = t.at("samples").int32();
  return s;
}

json layer_to_json(const std::optional<LayerRecord>& layer) {
  if (!layer) return nullptr;
  const LayerRecord& l = *layer;
  json stages = json::array();
  for (const StageRecord& st : l.stages) {
    stages.push_back({{"name", st.name},
                      {"m", st.m},
                      {"n", st.n},
                      {"k", st.k},
                      {"bytes", st.bytes},
                      {"flops", st.flops},
                      {"time_s", stats_to_json(st.time_s)},
                      {"t_roof_s", number_or_null(st.t_roof_s)},
                      {"max_rel_error", number_or_null(st.max_rel_error)}});
  }
  return {{"weights_dtype", dtype_name(l.weights_dtype)},
          {"gemm_library", l.gemm_library},
          {"left_out", l.left_out},
          {"stages", stages},
          {"bytes",
           {{"weights", l.weight_bytes}, {"kv", l.kv_bytes}, {"activations", l.activation_bytes}}},
          {"flops", {{"weights", l.gemm_flops}, {"attention", l.attention_flops}}},
          {"time_s",
           {{"weights", number_or_null(l.time_weights_s)}, {"kv", number_or_null(l.time_kv_s)}}},
          {"gemm_ceiling", ceiling_to_json(l.gemm_ceiling)},
          {"tokens_per_s_with_lm_head", number_or_null(l.tokens_per_s_with_lm_head)}};
}

LayerRecord layer_from(const JsonIn& in) {
  LayerRecord l;
  l.weights_dtype = dtype_from(in.at("weights_dtype"));
  l.gemm_library = in.at("gemm_library").string();
  const JsonIn left = in.at("left_out");
  for (std::size_t i = 0; i < left.size(); ++i) l.left_out.push_back(left.at(i).string());
  const JsonIn stages = in.at("stages");
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const JsonIn st = stages.at(i);
    StageRecord r;
    r.name = st.at("name").string();
    r.m = st.at("m").integer();
    r.n = st.at("n").integer();
    r.k = st.at("k").integer();
    r.bytes = st.at("bytes").number();
    r.flops = st.at("flops").number();
    r.time_s = stats_from(st.at("time_s"));
    r.t_roof_s = st.at("t_roof_s").number_or_nan();
    r.max_rel_error = st.at("max_rel_error").number_or_nan();
    l.stages.push_back(std::move(r));
  }
  const JsonIn b = in.at("bytes");
  l.weight_bytes = b.at("weights").number();
  l.kv_bytes = b.at("kv").number();
  l.activation_bytes = b.at("activations").number();
  const JsonIn f = in.at("flops");
  l.gemm_flops = f.at("weights").number();
  l.attention_flops = f.at("attention").number();
  const JsonIn t = in.at("time_s");
  l.time_weights_s = t.at("weights").number_or_nan();
  l.time_kv_s = t.at("kv").number_or_nan();
  if (!in.at("gemm_ceiling").json().is_null()) l.gemm_ceiling = ceiling_from(in.at("gemm_ceiling"));
  l.tokens_per_s_with_lm_head = in.at("tokens_per_s_with_lm_head").number_or_nan();
  return l;
}

}  // namespace

json context_to_json(const ContextSpec& c) {
  if (c.kind == ContextSpec::Kind::fixed) return {{"kind", "fixed"}, {"values", {c.lo}}};
  return {{"kind", "ragged"}, {"values", {c.lo, c.hi}}};
}

ContextSpec context_from(const JsonIn& in) {
  const std::string kind = in.at("kind").string();
  const JsonIn values = in.at("values");
  if (kind == "fixed") {
    if (values.size() != 1) values.fail("a fixed context has exactly one value");
    return ContextSpec::fixed(values.at(0).int32());
  }
  if (kind == "ragged") {
    if (values.size() != 2) values.fail("a ragged context has two values [lo, hi]");
    return ContextSpec::ragged(values.at(0).int32(), values.at(1).int32());
  }
  in.at("kind").fail(fmt::format("'{}' is not a context kind; valid: fixed, ragged", kind));
}

json to_json(const PointResult& r) {
  json samples = json::array();
  for (double s : r.samples) samples.push_back(s);
  json paired = json::array();
  for (double b : r.paired_read_samples) paired.push_back(b);
  json shape = {{"num_q_heads", r.num_q_heads},
                {"num_kv_heads", r.num_kv_heads},
                {"head_dim", r.head_dim},
                {"num_layers", r.num_layers}};
  if (r.sliding_window > 0) {
    shape["sliding_window"] = r.sliding_window;
    shape["windowed_layers"] = r.windowed_layers;
  }
  if (r.sinks) shape["sinks"] = true;
  if (r.attn_logit_softcapping > 0) shape["attn_logit_softcapping"] = r.attn_logit_softcapping;
  if (r.kv_lora_rank > 0) {
    shape["kv_lora_rank"] = r.kv_lora_rank;
    shape["qk_rope_head_dim"] = r.qk_rope_head_dim;
  }
  json out = {
      {"index", r.index},
      {"kernel", r.kernel},
      {"kernel_requested", r.kernel_requested},
      {"backend", r.backend},
      {"scope", scope_name(r.scope)},
      {"model", r.model},
      {"model_shape", shape},
      {"kv_dtype", dtype_name(r.kv_dtype)},
      {"q_dtype", dtype_name(r.q_dtype)},
      {"block_size", r.block_size},
      {"batch", r.batch},
      {"context", context_to_json(r.context)},
      {"hit_rate", r.hit_rate},
      {"hit_rate_actual", r.hit_rate_actual},
      {"prefix_groups", r.prefix_groups},
      {"seed", r.seed},
      {"status", status_name(r.status)},
      {"reason", r.reason},
      {"time_s", stats_to_json(r.time_s)},
      {"samples", samples},
      {"paired_read_samples", paired},
      {"timing", timing_to_json(r.timing)},
      {"utilization", utilization_to_json(r.utilization)},
      {"bytes",
       {{"kv_logical", r.bytes.kv_logical},
        {"kv_unique", r.bytes.kv_unique},
        {"min", r.bytes.min}}},
      {"flops", r.flops},
      {"arithmetic_intensity", r.arithmetic_intensity},
      {"bandwidth",
       {{"achieved", number_or_null(r.bandwidth.achieved)},
        {"logical", number_or_null(r.bandwidth.logical)}}},
      {"roofline",
       {{"bound", bound_name(r.roofline.bound)},
        {"compute_ceiling", ceiling_to_json(r.roofline.compute_ceiling)},
        {"t_roof_s", number_or_null(r.roofline.t_roof_s)},
        {"fraction_measured", number_or_null(r.roofline.fraction_measured)},
        {"fraction_datasheet", number_or_null(r.roofline.fraction_datasheet)},
        {"paired_read_Bps", number_or_null(r.roofline.paired_read_Bps)},
        {"fraction_paired", number_or_null(r.roofline.fraction_paired)}}},
      {"tokens_per_s", number_or_null(r.tokens_per_s)},
      {"tokens_per_s_scope",
       r.scope == Scope::layer
           ? "the model's layers: batch / (median layer step time * num_layers), LM head not "
             "included (layer.tokens_per_s_with_lm_head adds it)"
           : "attention-only: batch / (median step time * num_layers)"},
      {"error",
       {{"max_abs", number_or_null(r.error.max_abs)},
        {"max_rel", number_or_null(r.error.max_rel)},
        {"quant_rel", number_or_null(r.error.quant_rel)},
        {"rows_checked", r.error.rows_checked},
        {"first_mismatch", r.error.first_mismatch}}},
      {"layer", layer_to_json(r.layer)},
  };
  // Written only when set, so reports without them read as before.
  if (r.flush) {
    out["flush"] = {{"flush_bytes", r.flush->flush_bytes}, {"cache_bytes", r.flush->cache_bytes}};
  }
  if (!r.flags.empty()) {
    json flags = json::array();
    for (const PointFlag& f : r.flags) flags.push_back({{"name", f.name}, {"reason", f.reason}});
    out["flags"] = std::move(flags);
  }
  return out;
}

PointResult point_from(const JsonIn& in) {
  PointResult r;
  r.index = in.at("index").int32();
  r.kernel = in.at("kernel").string();
  r.kernel_requested = in.at("kernel_requested").string();
  r.backend = in.at("backend").string();
  // Added with layer scope: absent means attention.
  if (in.has("scope")) {
    const JsonIn sc = in.at("scope");
    try {
      r.scope = parse_scope(sc.string());
    } catch (const InputError& e) {
      sc.fail(e.what());
    }
  }
  r.model = in.at("model").string();
  const JsonIn shape = in.at("model_shape");
  r.num_q_heads = shape.at("num_q_heads").int32();
  r.num_kv_heads = shape.at("num_kv_heads").int32();
  r.head_dim = shape.at("head_dim").int32();
  r.num_layers = shape.at("num_layers").int32();
  // Added with the attention variants: absent means none.
  if (shape.has("sliding_window")) {
    r.sliding_window = shape.at("sliding_window").int32();
    r.windowed_layers = shape.at("windowed_layers").int32();
  }
  if (shape.has("sinks")) r.sinks = shape.at("sinks").boolean();
  if (shape.has("attn_logit_softcapping"))
    r.attn_logit_softcapping = shape.at("attn_logit_softcapping").number();
  if (shape.has("kv_lora_rank")) {  // added with MLA: absent means per-head K and V
    r.kv_lora_rank = shape.at("kv_lora_rank").int32();
    r.qk_rope_head_dim = shape.at("qk_rope_head_dim").int32();
  }
  r.kv_dtype = dtype_from(in.at("kv_dtype"));
  r.q_dtype = dtype_from(in.at("q_dtype"));
  r.block_size = in.at("block_size").int32();
  r.batch = in.at("batch").int32();
  r.context = context_from(in.at("context"));
  r.hit_rate = in.at("hit_rate").number();
  r.hit_rate_actual = in.at("hit_rate_actual").number();
  r.prefix_groups = in.at("prefix_groups").int32();
  r.seed = in.at("seed").uint64();
  {
    const JsonIn st = in.at("status");
    try {
      r.status = parse_status(st.string());
    } catch (const InputError& e) {
      st.fail(e.what());
    }
  }
  r.reason = in.at("reason").string();
  r.time_s = stats_from(in.at("time_s"));
  const JsonIn samples = in.at("samples");
  for (std::size_t i = 0; i < samples.size(); ++i) r.samples.push_back(samples.at(i).number());
  // Added after the first reports were written: absent means none measured.
  if (in.has("paired_read_samples")) {
    const JsonIn paired = in.at("paired_read_samples");
    for (std::size_t i = 0; i < paired.size(); ++i)
      r.paired_read_samples.push_back(paired.at(i).number());
    if (!r.paired_read_samples.empty() && r.paired_read_samples.size() != r.samples.size()) {
      paired.fail(fmt::format("has {} entries for {} samples", r.paired_read_samples.size(),
                              r.samples.size()));
    }
  }
  // Added after the first reports were written: absent (or null) means not recorded.
  if (in.has("timing") && !in.at("timing").json().is_null())
    r.timing = timing_from(in.at("timing"));
  // Added later: absent (or null) means not measured.
  if (in.has("utilization") && !in.at("utilization").json().is_null())
    r.utilization = utilization_from(in.at("utilization"));
  // Added with the self-checks: absent (or null) means none recorded.
  if (in.has("flush") && !in.at("flush").json().is_null()) {
    const JsonIn f = in.at("flush");
    r.flush = FlushRecord{f.at("flush_bytes").number(), f.at("cache_bytes").number()};
  }
  if (in.has("flags") && !in.at("flags").json().is_null()) {
    const JsonIn flags = in.at("flags");
    for (std::size_t i = 0; i < flags.size(); ++i) {
      const JsonIn f = flags.at(i);
      r.flags.push_back({f.at("name").string(), f.at("reason").string()});
    }
  }
  const JsonIn b = in.at("bytes");
  r.bytes.kv_logical = b.at("kv_logical").number();
  r.bytes.kv_unique = b.at("kv_unique").number();
  r.bytes.min = b.at("min").number();
  r.flops = in.at("flops").number();
  r.arithmetic_intensity = in.at("arithmetic_intensity").number();
  const JsonIn bw = in.at("bandwidth");
  r.bandwidth.achieved = bw.at("achieved").number_or_nan();
  r.bandwidth.logical = bw.at("logical").number_or_nan();
  const JsonIn roof = in.at("roofline");
  {
    const std::string bound = roof.at("bound").string();
    if (bound == "memory") {
      r.roofline.bound = Bound::memory;
    } else if (bound == "compute") {
      r.roofline.bound = Bound::compute;
    } else {
      roof.at("bound").fail(fmt::format("'{}' is not a bound; valid: memory, compute", bound));
    }
  }
  // Added after the first reports were written: absent (or null) means not known.
  if (roof.has("compute_ceiling") && !roof.at("compute_ceiling").json().is_null())
    r.roofline.compute_ceiling = ceiling_from(roof.at("compute_ceiling"));
  r.roofline.t_roof_s = roof.at("t_roof_s").number_or_nan();
  r.roofline.fraction_measured = roof.at("fraction_measured").number_or_nan();
  r.roofline.fraction_datasheet = roof.at("fraction_datasheet").number_or_nan();
  // Added after the first reports were written: absent means not measured.
  if (roof.has("paired_read_Bps"))
    r.roofline.paired_read_Bps = roof.at("paired_read_Bps").number_or_nan();
  if (roof.has("fraction_paired"))
    r.roofline.fraction_paired = roof.at("fraction_paired").number_or_nan();
  r.tokens_per_s = in.at("tokens_per_s").number_or_nan();
  const JsonIn err = in.at("error");
  r.error.max_abs = err.at("max_abs").number_or_nan();
  r.error.max_rel = err.at("max_rel").number_or_nan();
  r.error.quant_rel = err.at("quant_rel").number_or_nan();
  r.error.rows_checked = err.at("rows_checked").int32();
  r.error.first_mismatch = err.at("first_mismatch").string();
  if (in.has("layer") && !in.at("layer").json().is_null()) r.layer = layer_from(in.at("layer"));
  if (r.scope == Scope::layer && !r.layer && r.status == PointStatus::ok) {
    in.at("layer").fail("a layer-scope point that is ok needs its layer record");
  }
  return r;
}

}  // namespace decodebench
