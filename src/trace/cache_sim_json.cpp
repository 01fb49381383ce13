// cache-sim's JSON section (docs/report-schema.md "cache_sim"): the writer of what
// src/report/cache_sim_view.cpp reads back.
#include <algorithm>
#include <cmath>
#include <string>

#include "trace/cache_sim.h"
#include "workload/layer_model.h"  // params_from_shape

namespace decodebench {
namespace {

std::int64_t model_params(const ModelShape& m) {
  return m.num_params > 0 ? m.num_params : params_from_shape(m);
}

std::string_view params_source(const ModelShape& m) {
  if (m.num_params > 0) return "num_params";
  return params_from_shape(m) > 0 ? "params_from_shape" : "none";
}

nlohmann::json tokens_or_inf(double tokens) {
  return std::isinf(tokens) ? nlohmann::json("inf") : nlohmann::json(tokens);
}

}  // namespace

nlohmann::json to_json(const CacheSimResult& r) {
  nlohmann::json j;
  j["policy"] = std::string(policy_name(r.setting.policy));
  j["capacity_tokens"] = tokens_or_inf(r.setting.capacity_tokens);
  j["capacity_blocks"] = r.capacity_blocks == kUnboundedBlocks ? nlohmann::json("inf")
                                                               : nlohmann::json(r.capacity_blocks);
  j["ttl_s"] = r.setting.policy == EvictionPolicy::ttl ? tokens_or_inf(r.setting.ttl_s)
                                                       : nlohmann::json(nullptr);
  j["requests"] = r.requests;
  j["input_tokens"] = r.input_tokens;
  j["hit_tokens"] = r.hit_tokens;
  j["hit_rate"] = r.hit_rate;
  j["hit_rate_ceiling"] = r.hit_rate_ceiling;
  j["blocks"] = {{"inserted", r.blocks.inserted},
                 {"evicted", r.blocks.evicted},
                 {"expired", r.blocks.expired},
                 {"peak", r.blocks.peak_blocks}};
  j["prefill_tokens_computed"] = r.prefill_tokens_computed;
  j["prefill_tokens_saved"] = r.prefill_tokens_saved;
  j["prefill_flops_saved"] = r.prefill_flops_saved;
  j["cache_bytes"] = r.cache_bytes;
  if (r.windowed.modeled) {
    const CacheSimWindowed& w = r.windowed;
    j["cache_bytes_by_layer"] = {{"full", w.full_layers_bytes},
                                 {"windowed", w.windowed_layers_bytes}};
    j["cache_bytes_all_layers"] = w.all_layers_bytes;
    j["windowed_blocks"] = {{"peak", w.peak_blocks}, {"kept", w.kept_blocks}};
  }
  j["elapsed_s"] = r.elapsed_s;
  if (r.setting.host_capacity_tokens > 0) {
    const CacheSimTiers& t = r.tiers;
    j["host_capacity_tokens"] = r.setting.host_capacity_tokens;
    j["host_capacity_blocks"] = t.host_capacity_blocks;
    j["hit_rate_by_tier"] = {{"hbm", t.hit_rate_hbm}, {"host", t.hit_rate_host}};
    j["hit_tokens_by_tier"] = {{"hbm", t.hit_tokens_hbm}, {"host", t.hit_tokens_host}};
    j["tier_blocks"] = {{"promoted", t.blocks.promoted},
                        {"demoted", t.blocks.demoted},
                        {"dropped", t.blocks.dropped},
                        {"host_peak", t.blocks.host_peak}};
    j["link_bytes"] = {{"host_to_hbm", t.link_bytes_to_hbm}, {"hbm_to_host", t.link_bytes_to_host}};
    j["host_bytes"] = t.host_bytes;
    j["reload_policy"] = std::string(reload_policy_name(r.setting.reload));
    j["reloads"] = t.reloads;
    j["reloaded_tokens"] = t.reloaded_tokens;
    j["recomputed_tokens"] = t.recomputed_tokens;
    if (!r.setting.link.empty()) {
      const auto finite_or_inf = [](double x) {
        return std::isinf(x) ? nlohmann::json("inf") : nlohmann::json(x);
      };
      j["link"] = {
          {"key", r.setting.link},
          {"to_device", r.setting.link_to_device},
          {"to_host", r.setting.link_to_host},
          {"overhead_s", r.setting.link_overhead_s},
          {"busy_s", {{"to_hbm", t.link_busy_s_to_hbm}, {"to_host", t.link_busy_s_to_host}}},
          {"busy_fraction",
           {{"to_hbm", t.link_busy_fraction_to_hbm}, {"to_host", t.link_busy_fraction_to_host}}}};
      j["trade"] = {{"load_per_token_s", finite_or_inf(t.trade.load_per_token_s)},
                    {"recompute_per_token_s", finite_or_inf(t.trade.recompute_per_token_s)},
                    {"prefill_flops", r.setting.prefill_flops},
                    {"break_even_tokens", finite_or_inf(t.trade.break_even_tokens)}};
    }
  }
  return j;
}

nlohmann::json trace_summary_json(const Trace& trace) {
  std::int64_t input = 0, output = 0;
  double span = 0;
  for (const TraceRequest& q : trace.requests) {
    input += q.input_tokens;
    output += q.output_tokens;
    span = std::max(span, q.arrival_s);
  }
  // Arrivals start at 0 (the readers shift them), so the last arrival is the span.
  return {{"source", trace.source},
          {"format", std::string(trace_format_name(trace.format))},
          {"block_tokens", trace.block_tokens},
          {"requests", static_cast<std::int64_t>(trace.requests.size())},
          {"span_s", span},
          {"input_tokens", input},
          {"output_tokens", output},
          {"has_prefix_info", trace.has_prefix_info}};
}

nlohmann::json cache_sim_json(const Trace& trace, const ModelShape& model, DType kv_dtype,
                              const std::vector<CacheSimResult>& results) {
  nlohmann::json j;
  j["trace"] = trace_summary_json(trace);
  j["model"] = {{"name", model.name},
                {"params", model_params(model)},
                {"params_source", std::string(params_source(model))},
                {"kv_bytes_per_token", kv_bytes_per_token_all_layers(model, kv_dtype)},
                {"num_layers", model.num_layers}};
  if (model.windowed_layers() > 0) {
    const KvBytesByLayer per_token = kv_bytes_per_token_by_layer(model, kv_dtype);
    j["model"]["sliding_window"] = model.sliding_window;
    j["model"]["windowed_layers"] = model.windowed_layers();
    j["model"]["kv_bytes_per_token_by_layer"] = {{"full", per_token.full},
                                                 {"windowed", per_token.windowed}};
  }
  j["kv_dtype"] = std::string(dtype_name(kv_dtype));
  j["definitions"] = {
      {"replay",
       "the trace's requests in arrival order, one at a time, no concurrency: a request's blocks "
       "are cached at its arrival (trace time)"},
      {"hit_tokens",
       "per request at its arrival: expire(now) (ttl); min(leading run of its hash ids found in "
       "the cache x block_tokens, input tokens); then every id is touched, last to first"},
      {"hit_rate", "sum of hit tokens / sum of input tokens"},
      {"hit_rate_ceiling",
       "the same trace at infinite capacity (lru, no ttl): every reuse of an earlier prefix"},
      {"capacity_blocks", "floor(capacity_tokens / block_tokens); \"inf\": unbounded"},
      {"policies",
       "victims among the cached blocks: lru least recently used, lfu fewest uses then lru, ttl "
       "as lru plus expiry of blocks idle longer than ttl_s"},
      {"prefill_flops_saved", "2 x model params x prefill_tokens_saved"},
      {"cache_bytes",
       "capacity_blocks x block_tokens x kv_bytes_per_token (all layers); at infinite capacity "
       "the peak blocks held instead"}};
  const bool tiered = std::any_of(results.begin(), results.end(), [](const CacheSimResult& r) {
    return r.setting.host_capacity_tokens > 0;
  });
  if (tiered) {
    j["definitions"]["tiers"] =
        "with host_capacity_tokens: the cache above is HBM and a host-memory LRU sits behind it, "
        "exclusive; the run is found in either tier and block k of a hit counts min(block_tokens, "
        "input - k x block_tokens) tokens for the tier it was found in; every block of the request "
        "then ends in HBM as most recent (a host hit is promoted, a miss inserted), each HBM "
        "victim (and, under ttl, each expired block) is demoted to the host tier as its most "
        "recent, and a host overflow drops the host's least recent block; link_bytes = promoted "
        "(host_to_hbm) or demoted (hbm_to_host) blocks x block_tokens x kv_bytes_per_token";
  }
  if (model.windowed_layers() > 0) {
    j["definitions"]["windowed_layers"] =
        "capacity counts blocks the full-attention layers hold; a hit of n tokens needs a windowed "
        "layer's blocks from floor(max(0, n - sliding_window) / block_tokens) to the hit's last; "
        "the windowed layers keep a block from its insertion to the last hit whose window reads "
        "it (the least that loses no hit: hits equal the model's without windows), so "
        "cache_bytes = full layers' bytes (as before) + windowed_blocks.peak x block_tokens x "
        "their bytes per token; cache_bytes_all_layers: every layer holding every block; with a "
        "host tier every layer is counted";
  }
  if (!trace.has_prefix_info) {
    j["note"] =
        "the trace has no prefix information (no hash ids): every request is a miss, hit rates "
        "are 0";
  }
  nlohmann::json settings = nlohmann::json::array();
  for (const CacheSimResult& r : results) settings.push_back(to_json(r));
  j["settings"] = std::move(settings);
  return j;
}

}  // namespace decodebench
