#include "report/cache_sim_view.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "common/json_in.h"
#include "common/units.h"
#include "report/table.h"
#include "trace/prefix_cache.h"
#include "trace/trace.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

std::string tokens_label(double tokens) {
  if (std::isinf(tokens)) return "inf";
  return tokens == std::floor(tokens) && tokens < 1e15 ? fmt::format("{:.0f}", tokens)
                                                       : fmt::format("{:g}", tokens);
}

std::string ttl_label(const CacheSimSetting& s) {
  return s.policy == EvictionPolicy::ttl ? fmt::format("{:g} s", s.ttl_s) : "-";
}

// A capacity, TTL or trade figure: a number, or "inf" for infinity (cache_sim.cpp's writer).
double number_or_inf(const JsonIn& v) {
  if (v.json().is_string()) {
    if (v.string() != "inf") v.fail("expected a number or \"inf\"");
    return INFINITY;
  }
  return v.number();
}

CacheSimResult result_from(const JsonIn& s) {
  s.reject_unknown_keys({"policy",
                         "capacity_tokens",
                         "capacity_blocks",
                         "ttl_s",
                         "requests",
                         "input_tokens",
                         "hit_tokens",
                         "hit_rate",
                         "hit_rate_ceiling",
                         "blocks",
                         "prefill_tokens_computed",
                         "prefill_tokens_saved",
                         "prefill_flops_saved",
                         "cache_bytes",
                         "cache_bytes_by_layer",
                         "cache_bytes_all_layers",
                         "windowed_blocks",
                         "elapsed_s",
                         "host_capacity_tokens",
                         "host_capacity_blocks",
                         "hit_rate_by_tier",
                         "hit_tokens_by_tier",
                         "tier_blocks",
                         "link_bytes",
                         "host_bytes",
                         "reload_policy",
                         "reloads",
                         "reloaded_tokens",
                         "recomputed_tokens",
                         "link",
                         "trade"});
  CacheSimResult r;
  try {
    r.setting.policy = parse_policy(s.at("policy").string());
  } catch (const InputError& e) {
    s.at("policy").fail(e.what());
  }
  r.setting.capacity_tokens = number_or_inf(s.at("capacity_tokens"));
  const JsonIn blocks_at = s.at("capacity_blocks");
  r.capacity_blocks = blocks_at.json().is_string() && blocks_at.string() == "inf"
                          ? kUnboundedBlocks
                          : blocks_at.integer();
  const JsonIn ttl = s.at("ttl_s");
  if (r.setting.policy == EvictionPolicy::ttl) {
    r.setting.ttl_s = number_or_inf(ttl);
  } else if (!ttl.json().is_null()) {
    ttl.fail("expected null: only the ttl policy has a time to live");
  }
  r.requests = s.at("requests").integer();
  r.input_tokens = s.at("input_tokens").integer();
  r.hit_tokens = s.at("hit_tokens").integer();
  r.hit_rate = s.at("hit_rate").number();
  r.hit_rate_ceiling = s.at("hit_rate_ceiling").number();
  const JsonIn b = s.at("blocks");
  b.reject_unknown_keys({"inserted", "evicted", "expired", "peak"});
  r.blocks.inserted = b.at("inserted").integer();
  r.blocks.evicted = b.at("evicted").integer();
  r.blocks.expired = b.at("expired").integer();
  r.blocks.peak_blocks = b.at("peak").integer();
  r.prefill_tokens_computed = s.at("prefill_tokens_computed").integer();
  r.prefill_tokens_saved = s.at("prefill_tokens_saved").integer();
  r.prefill_flops_saved = s.at("prefill_flops_saved").number();
  r.cache_bytes = s.at("cache_bytes").number();
  // A model with windowed layers, without a host tier (cache_sim.h CacheSimWindowed).
  if (s.has("cache_bytes_by_layer")) {
    CacheSimWindowed& w = r.windowed;
    w.modeled = true;
    const JsonIn by_layer = s.at("cache_bytes_by_layer");
    by_layer.reject_unknown_keys({"full", "windowed"});
    w.full_layers_bytes = by_layer.at("full").number();
    w.windowed_layers_bytes = by_layer.at("windowed").number();
    w.all_layers_bytes = s.at("cache_bytes_all_layers").number();
    const JsonIn wb = s.at("windowed_blocks");
    wb.reject_unknown_keys({"peak", "kept"});
    w.peak_blocks = wb.at("peak").integer();
    w.kept_blocks = wb.at("kept").integer();
  }
  r.elapsed_s = s.at("elapsed_s").number();
  if (!s.has("host_capacity_tokens")) return r;
  CacheSimTiers& t = r.tiers;
  r.setting.host_capacity_tokens = s.at("host_capacity_tokens").number();
  t.host_capacity_blocks = s.at("host_capacity_blocks").integer();
  const JsonIn rate = s.at("hit_rate_by_tier");
  rate.reject_unknown_keys({"hbm", "host"});
  t.hit_rate_hbm = rate.at("hbm").number();
  t.hit_rate_host = rate.at("host").number();
  const JsonIn hits = s.at("hit_tokens_by_tier");
  hits.reject_unknown_keys({"hbm", "host"});
  t.hit_tokens_hbm = hits.at("hbm").integer();
  t.hit_tokens_host = hits.at("host").integer();
  const JsonIn tb = s.at("tier_blocks");
  tb.reject_unknown_keys({"promoted", "demoted", "dropped", "host_peak"});
  t.blocks.promoted = tb.at("promoted").integer();
  t.blocks.demoted = tb.at("demoted").integer();
  t.blocks.dropped = tb.at("dropped").integer();
  t.blocks.host_peak = tb.at("host_peak").integer();
  const JsonIn lb = s.at("link_bytes");
  lb.reject_unknown_keys({"host_to_hbm", "hbm_to_host"});
  t.link_bytes_to_hbm = lb.at("host_to_hbm").number();
  t.link_bytes_to_host = lb.at("hbm_to_host").number();
  t.host_bytes = s.at("host_bytes").number();
  try {
    r.setting.reload = parse_reload_policy(s.at("reload_policy").string());
  } catch (const InputError& e) {
    s.at("reload_policy").fail(e.what());
  }
  t.reloads = s.at("reloads").integer();
  t.reloaded_tokens = s.at("reloaded_tokens").integer();
  t.recomputed_tokens = s.at("recomputed_tokens").integer();
  if (!s.has("link")) return r;
  const JsonIn l = s.at("link");
  l.reject_unknown_keys({"key", "to_device", "to_host", "overhead_s", "busy_s", "busy_fraction"});
  r.setting.link = l.at("key").string();
  if (r.setting.link.empty()) l.at("key").fail("expected a link's key");
  r.setting.link_to_device = l.at("to_device").number();
  r.setting.link_to_host = l.at("to_host").number();
  r.setting.link_overhead_s = l.at("overhead_s").number();
  const JsonIn busy = l.at("busy_s");
  busy.reject_unknown_keys({"to_hbm", "to_host"});
  t.link_busy_s_to_hbm = busy.at("to_hbm").number();
  t.link_busy_s_to_host = busy.at("to_host").number();
  const JsonIn fraction = l.at("busy_fraction");
  fraction.reject_unknown_keys({"to_hbm", "to_host"});
  t.link_busy_fraction_to_hbm = fraction.at("to_hbm").number();
  t.link_busy_fraction_to_host = fraction.at("to_host").number();
  const JsonIn trade = s.at("trade");
  trade.reject_unknown_keys(
      {"load_per_token_s", "recompute_per_token_s", "prefill_flops", "break_even_tokens"});
  t.trade.load_per_token_s = number_or_inf(trade.at("load_per_token_s"));
  t.trade.recompute_per_token_s = number_or_inf(trade.at("recompute_per_token_s"));
  t.trade.break_even_tokens = number_or_inf(trade.at("break_even_tokens"));
  t.trade.overhead_s = r.setting.link_overhead_s;
  r.setting.prefill_flops = trade.at("prefill_flops").number();
  return r;
}

}  // namespace

CacheSimDocument cache_sim_document(const Trace& trace, const ModelShape& model, DType kv_dtype,
                                    const std::vector<CacheSimResult>& results) {
  // Through the writer and back: the document a saved run re-prints from is this one.
  return cache_sim_from_json(cache_sim_json(trace, model, kv_dtype, results), "cache-sim");
}

CacheSimDocument cache_sim_from_json(const nlohmann::json& cache_sim, const std::string& source) {
  const JsonIn in(cache_sim, source, "cache_sim");
  in.reject_unknown_keys({"trace", "model", "kv_dtype", "definitions", "note", "settings"});
  CacheSimDocument d;
  const JsonIn t = in.at("trace");
  t.reject_unknown_keys({"source", "format", "block_tokens", "requests", "span_s", "input_tokens",
                         "output_tokens", "has_prefix_info"});
  d.trace_source = t.at("source").string();
  d.trace_format = t.at("format").string();
  d.block_tokens = t.at("block_tokens").int32();
  if (d.block_tokens < 1) t.at("block_tokens").fail("expected >= 1 tokens");
  d.requests = t.at("requests").integer();
  d.span_s = t.at("span_s").number();
  d.input_tokens = t.at("input_tokens").integer();
  d.output_tokens = t.at("output_tokens").integer();
  d.has_prefix_info = t.at("has_prefix_info").boolean();
  const JsonIn m = in.at("model");
  m.reject_unknown_keys({"name", "params", "params_source", "kv_bytes_per_token", "num_layers",
                         "sliding_window", "windowed_layers", "kv_bytes_per_token_by_layer"});
  d.model = m.at("name").string();
  d.params = m.at("params").number();
  d.params_source = m.at("params_source").string();
  d.kv_bytes_per_token = m.at("kv_bytes_per_token").number();
  // Documents written before the layer count was recorded have none.
  if (m.has("num_layers")) d.num_layers = m.at("num_layers").int32();
  // A model with windowed layers only.
  if (m.has("sliding_window")) {
    d.sliding_window = m.at("sliding_window").int32();
    d.windowed_layers = m.at("windowed_layers").int32();
    const JsonIn by_layer = m.at("kv_bytes_per_token_by_layer");
    by_layer.reject_unknown_keys({"full", "windowed"});
    d.kv_bytes_per_token_full = by_layer.at("full").number();
    d.kv_bytes_per_token_windowed = by_layer.at("windowed").number();
  }
  d.kv_dtype = in.at("kv_dtype").string();
  try {
    (void)parse_dtype(d.kv_dtype, "kv_dtype");
  } catch (const InputError& e) {
    in.at("kv_dtype").fail(e.what());
  }
  (void)in.at("definitions");  // what the figures mean; present, not printed by the views
  const JsonIn settings = in.at("settings");
  for (std::size_t i = 0; i < settings.size(); ++i)
    d.settings.push_back(result_from(settings.at(i)));
  return d;
}

std::string cache_sim_table_text(const CacheSimDocument& d, bool markdown) {
  const std::vector<CacheSimResult>& results = d.settings;
  std::string s =
      fmt::format("trace: {} ({}, {} requests over {}, {}-token blocks{})\n", d.trace_source,
                  d.trace_format, d.requests, format_seconds(d.span_s), d.block_tokens,
                  d.has_prefix_info ? "" : "; no prefix information: every request is a miss");
  s += fmt::format("model: {}, KV {} ({} per token{})\n", d.model, d.kv_dtype,
                   format_bytes(d.kv_bytes_per_token),
                   d.num_layers > 0 ? fmt::format(" over {} layers", d.num_layers) : "");
  if (d.windowed_layers > 0 && d.windowed_layers == d.num_layers) {
    s += fmt::format(
        "windowed layers: window {} on all {} ({} per token); a cached block's KV is held only "
        "while a later hit's window reads it (the least that keeps every hit), so the capacity "
        "bounds the cached prefixes' index alone: cache GB is the windowed layers' peak, "
        "all-layer GB every layer holding every block\n",
        d.sliding_window, d.windowed_layers, format_bytes(d.kv_bytes_per_token_windowed));
  } else if (d.windowed_layers > 0) {
    s += fmt::format(
        "windowed layers: window {} on {} ({} per token), full layers {} per token: the full "
        "layers hold every cached block, the windowed ones only the blocks a later hit's window "
        "reads (the least that keeps every hit); cache GB is both, all-layer GB every layer "
        "holding every block\n",
        d.sliding_window,
        d.num_layers > 0 ? fmt::format("{} of {}", d.windowed_layers, d.num_layers)
                         : std::to_string(d.windowed_layers),
        format_bytes(d.kv_bytes_per_token_windowed), format_bytes(d.kv_bytes_per_token_full));
  }
  s += "definition: requests in arrival order, no concurrency; hit = min(leading run of its "
       "blocks cached x block tokens, prompt); hit rate = hit / prompt tokens; ceiling = "
       "infinite capacity\n\n";
  // Numbers right-aligned, the policy and ttl left. With a host tier: its capacity, the hits by
  // tier, the tier traffic and the link bytes each way.
  const bool tiered = std::any_of(results.begin(), results.end(), [](const CacheSimResult& r) {
    return r.setting.host_capacity_tokens > 0;
  });
  Table table;
  std::vector<const char*> titles = {"capacity tokens", "policy", "ttl", "hit rate", "ceiling"};
  if (tiered) {
    titles.insert(titles.begin() + 1, "host tokens");
    for (const char* t :
         {"HBM hits", "host hits", "promoted", "demoted", "dropped", "to HBM GB", "to host GB"})
      titles.push_back(t);
  }
  const bool priced = std::any_of(results.begin(), results.end(),
                                  [](const CacheSimResult& r) { return !r.setting.link.empty(); });
  if (priced) {
    for (const char* t : {"link", "reload", "recomputed", "busy to HBM", "busy to host"})
      titles.push_back(t);
  }
  const bool windowed = std::any_of(results.begin(), results.end(),
                                    [](const CacheSimResult& r) { return r.windowed.modeled; });
  for (const char* t :
       {"inserted", "evicted", "expired", "prefill computed", "saved", "PFLOP saved", "cache GB"})
    titles.push_back(t);
  if (windowed) {
    for (const char* t : {"windowed GB", "all-layer GB", "windowed peak"}) titles.push_back(t);
  }
  titles.push_back("replay s");
  for (const char* title : titles) {
    const std::string_view name(title);
    table.columns.push_back(
        {title, /*right=*/name != "policy" && name != "ttl" && name != "link" && name != "reload"});
  }
  for (const CacheSimResult& r : results) {
    std::vector<std::string> row = {tokens_label(r.setting.capacity_tokens),
                                    std::string(policy_name(r.setting.policy)),
                                    ttl_label(r.setting), fmt::format("{:.2f}%", 100 * r.hit_rate),
                                    fmt::format("{:.2f}%", 100 * r.hit_rate_ceiling)};
    if (tiered) {
      const CacheSimTiers& t = r.tiers;
      row.insert(row.begin() + 1, tokens_label(r.setting.host_capacity_tokens));
      for (std::string cell :
           {fmt::format("{:.2f}%",
                        100 * (r.setting.host_capacity_tokens > 0 ? t.hit_rate_hbm : r.hit_rate)),
            fmt::format("{:.2f}%", 100 * t.hit_rate_host), std::to_string(t.blocks.promoted),
            std::to_string(t.blocks.demoted), std::to_string(t.blocks.dropped),
            fmt::format("{:.2f}", t.link_bytes_to_hbm / 1e9),
            fmt::format("{:.2f}", t.link_bytes_to_host / 1e9)})
        row.push_back(std::move(cell));
    }
    if (priced) {
      const CacheSimTiers& tiers = r.tiers;
      const bool has = !r.setting.link.empty();
      for (std::string cell :
           {has ? r.setting.link : "-",
            has ? std::string(reload_policy_name(r.setting.reload)) : "-",
            has ? std::to_string(tiers.recomputed_tokens) : "-",
            has ? fmt::format("{:.2f}%", 100 * tiers.link_busy_fraction_to_hbm) : "-",
            has ? fmt::format("{:.2f}%", 100 * tiers.link_busy_fraction_to_host) : "-"})
        row.push_back(std::move(cell));
    }
    for (std::string cell :
         {std::to_string(r.blocks.inserted), std::to_string(r.blocks.evicted),
          std::to_string(r.blocks.expired), std::to_string(r.prefill_tokens_computed),
          std::to_string(r.prefill_tokens_saved),
          fmt::format("{:.2f}", r.prefill_flops_saved / 1e15),
          fmt::format("{:.2f}", r.cache_bytes / 1e9)})
      row.push_back(std::move(cell));
    if (windowed) {
      const CacheSimWindowed& w = r.windowed;
      for (std::string cell :
           {w.modeled ? fmt::format("{:.2f}", w.windowed_layers_bytes / 1e9) : "-",
            w.modeled ? fmt::format("{:.2f}", w.all_layers_bytes / 1e9) : "-",
            w.modeled ? std::to_string(w.peak_blocks) : "-"})
        row.push_back(std::move(cell));
    }
    row.push_back(fmt::format("{:.3f}", r.elapsed_s));
    table.add_row(std::move(row));
  }
  s += markdown ? render_md(table) : render_text(table);
  // The trade behind --reload-policy cheaper, once per link.
  std::vector<std::string> seen;
  for (const CacheSimResult& r : results) {
    if (r.setting.link.empty() || std::find(seen.begin(), seen.end(), r.setting.link) != seen.end())
      continue;
    seen.push_back(r.setting.link);
    const ReloadTrade& t = r.tiers.trade;
    s += fmt::format(
        "{}: reloading a host prefix costs {} per token ({} to HBM) + {} per transfer, "
        "recomputing it {} per token ({:.0f} TFLOP/s); ",
        r.setting.link, format_seconds(t.load_per_token_s),
        format_bandwidth(r.setting.link_to_device), format_seconds(t.overhead_s),
        format_seconds(t.recompute_per_token_s), r.setting.prefill_flops / 1e12);
    s += std::isinf(t.break_even_tokens)
             ? "recomputing is cheaper at every length\n"
             : fmt::format("reloading is cheaper from {:.0f} tokens on\n",
                           std::ceil(t.break_even_tokens));
  }
  return s;
}

std::string cache_sim_csv_text(const std::vector<CacheSimResult>& results) {
  // With a host tier the tier columns come last (elapsed_s stays where it was without one).
  const bool tiered = std::any_of(results.begin(), results.end(), [](const CacheSimResult& r) {
    return r.setting.host_capacity_tokens > 0;
  });
  Table table;
  for (const char* title :
       {"policy", "capacity_tokens", "capacity_blocks", "ttl_s", "requests", "input_tokens",
        "hit_tokens", "hit_rate", "hit_rate_ceiling", "inserted", "evicted", "expired",
        "peak_blocks", "prefill_tokens_computed", "prefill_tokens_saved", "prefill_flops_saved",
        "cache_bytes", "elapsed_s"})
    table.columns.push_back({title});
  if (tiered) {
    for (const char* title : {"host_capacity_tokens", "hit_rate_hbm", "hit_rate_host", "promoted",
                              "demoted", "dropped", "link_bytes_to_hbm", "link_bytes_to_host"})
      table.columns.push_back({title});
  }
  // With windowed layers modeled their columns come last (empty for a host tier's settings).
  const bool windowed = std::any_of(results.begin(), results.end(),
                                    [](const CacheSimResult& r) { return r.windowed.modeled; });
  if (windowed) {
    for (const char* title :
         {"cache_bytes_full_layers", "cache_bytes_windowed_layers", "cache_bytes_all_layers",
          "windowed_peak_blocks", "windowed_kept_blocks"})
      table.columns.push_back({title});
  }
  const auto g = [](double x) { return fmt::format("{:.6g}", x); };
  for (const CacheSimResult& r : results) {
    std::vector<std::string> row = {
        std::string(policy_name(r.setting.policy)),
        tokens_label(r.setting.capacity_tokens),
        r.capacity_blocks == kUnboundedBlocks ? "inf" : std::to_string(r.capacity_blocks),
        r.setting.policy == EvictionPolicy::ttl ? fmt::format("{:g}", r.setting.ttl_s) : "",
        std::to_string(r.requests),
        std::to_string(r.input_tokens),
        std::to_string(r.hit_tokens),
        g(r.hit_rate),
        g(r.hit_rate_ceiling),
        std::to_string(r.blocks.inserted),
        std::to_string(r.blocks.evicted),
        std::to_string(r.blocks.expired),
        std::to_string(r.blocks.peak_blocks),
        std::to_string(r.prefill_tokens_computed),
        std::to_string(r.prefill_tokens_saved),
        g(r.prefill_flops_saved),
        g(r.cache_bytes),
        g(r.elapsed_s)};
    if (tiered) {
      const CacheSimTiers& t = r.tiers;
      for (std::string cell :
           {tokens_label(r.setting.host_capacity_tokens),
            g(r.setting.host_capacity_tokens > 0 ? t.hit_rate_hbm : r.hit_rate), g(t.hit_rate_host),
            std::to_string(t.blocks.promoted), std::to_string(t.blocks.demoted),
            std::to_string(t.blocks.dropped), g(t.link_bytes_to_hbm), g(t.link_bytes_to_host)})
        row.push_back(std::move(cell));
    }
    if (windowed) {
      const CacheSimWindowed& w = r.windowed;
      for (std::string cell :
           {w.modeled ? g(w.full_layers_bytes) : "", w.modeled ? g(w.windowed_layers_bytes) : "",
            w.modeled ? g(w.all_layers_bytes) : "", w.modeled ? std::to_string(w.peak_blocks) : "",
            w.modeled ? std::to_string(w.kept_blocks) : ""})
        row.push_back(std::move(cell));
    }
    table.add_row(std::move(row));
  }
  return render_csv(table);
}

}  // namespace decodebench
