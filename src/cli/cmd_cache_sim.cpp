// `decodebench cache-sim`: a request trace replayed through a prefix cache of each capacity and
// eviction policy asked for (src/trace/cache_sim.h): the hit rate against the ceiling of an
// infinite cache, the block traffic, and the prefill tokens and FLOPs the hits save. Nothing runs
// on a device; the model and KV dtype only turn tokens into FLOPs and bytes.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/datasheet.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "common/units.h"
#include "report/cache_sim_view.h"
#include "report/format.h"
#include "report/table.h"
#include "results/report.h"
#include "trace/cache_sim.h"
#include "trace/trace.h"
#include "workload/workload.h"

namespace decodebench::cli {
namespace {

constexpr const char* kDefaultCapacities = "1e5,1e6,3e6,1e7,inf";

struct CacheSimOptions {
  std::string trace;
  std::string trace_format = "auto";
  int block_tokens = 512;
  std::int64_t max_requests = 0;
  std::string capacity = kDefaultCapacities;
  std::string host_capacity = "0";
  std::string link;  // configs/devices.json "links" keys (list); empty: bytes only
  std::string reload = "always";
  double link_overhead_s = 0;
  std::string device = "h200";  // whose tensor-core peak recomputation runs at
  std::string policy = "lru";
  std::string ttl = "300";
  CLI::Option* ttl_option = nullptr;
  std::string model = "llama-3.1-8b";
  std::string kv_dtype = "bf16";
  std::string out;  // --out FILE: the JSON document
  std::string format = "table";
};

// Tokens, or "inf" for an unbounded capacity; > 0 each (InputError naming the flag).
std::vector<double> parse_capacities(const std::string& text) {
  std::vector<double> out;
  for (const std::string& item : split_list(text, "--capacity")) {
    const double v = item == "inf" || item == "infinity"
                         ? kUnboundedTokens
                         : parse_double_list(item, "--capacity").front();
    if (std::isnan(v) || v <= 0) {
      throw InputError(fmt::format(
          "--capacity: '{}' is not a capacity; valid: a number of tokens > 0 (e.g. 1e6) or inf",
          item));
    }
    out.push_back(v);
  }
  return out;
}

std::vector<double> parse_ttls(const std::string& text) {
  std::vector<double> out;
  for (const std::string& item : split_list(text, "--ttl")) {
    const double v = parse_double_list(item, "--ttl").front();
    if (!(v > 0) || !std::isfinite(v)) {
      throw InputError(fmt::format(
          "--ttl: '{}' is not a time to live; valid: a finite number of seconds of trace time > 0 "
          "(e.g. 300)",
          item));
    }
    out.push_back(v);
  }
  return out;
}

std::vector<CacheSimSetting> settings_of(const CacheSimOptions& o) {
  const std::vector<double> capacities = parse_capacities(o.capacity);
  std::vector<EvictionPolicy> policies;
  for (const std::string& p : split_list(o.policy, "--policy")) {
    try {
      policies.push_back(parse_policy(p));
    } catch (const InputError& e) {
      throw InputError(fmt::format("--policy: {}", e.what()));
    }
  }
  const bool has_ttl = std::count(policies.begin(), policies.end(), EvictionPolicy::ttl) > 0;
  if (o.ttl_option->count() > 0 && !has_ttl) {
    throw InputError("--ttl is used by the ttl policy only; add ttl to --policy (e.g. lru,ttl)");
  }
  const std::vector<double> ttls = has_ttl ? parse_ttls(o.ttl) : std::vector<double>{};
  const TierOptions tiers =
      parse_tier_options(o.host_capacity, o.link, o.reload, o.link_overhead_s);
  const std::vector<double>& hosts = tiers.host_capacities;
  const std::vector<LinkDatasheet>& links = tiers.links;
  const std::vector<ReloadPolicy>& reloads = tiers.reloads;
  double prefill_flops = 0;
  if (!links.empty()) {
    try {
      prefill_flops = datasheet_by_key(o.device).tensor_f16_flops;
    } catch (const InputError& e) {
      throw InputError(fmt::format("--device: {}", e.what()));
    }
  }
  // A host tier's settings for every link x reload policy (none: one, bytes only).
  const auto priced = [&](CacheSimSetting base, std::vector<CacheSimSetting>& into) {
    if (base.host_capacity_tokens == 0 || links.empty()) {
      into.push_back(base);
      return;
    }
    for (const LinkDatasheet& l : links) {
      for (ReloadPolicy r : reloads) {
        CacheSimSetting s = base;
        s.link = l.key;
        s.link_to_device = l.to_device;
        s.link_to_host = l.to_host;
        s.link_overhead_s = o.link_overhead_s;
        s.prefill_flops = prefill_flops;
        s.reload = r;
        into.push_back(s);
      }
    }
  };
  // Grouped by host tier, policy (and ttl), capacities innermost: each group is one line of a
  // figure. An unbounded HBM never demotes a block, so it is not paired with a host tier.
  std::vector<CacheSimSetting> out;
  for (double host : hosts) {
    for (EvictionPolicy p : policies) {
      const std::vector<double> ttl_values = p == EvictionPolicy::ttl ? ttls : std::vector{0.0};
      for (double ttl : ttl_values) {
        for (double c : capacities) {
          if (host > 0 && std::isinf(c)) continue;
          CacheSimSetting base;
          base.policy = p;
          base.capacity_tokens = c;
          base.ttl_s = ttl;
          base.host_capacity_tokens = host;
          priced(base, out);
        }
      }
    }
  }
  if (out.empty()) {
    throw InputError(
        "--host-capacity: every --capacity is inf; a host tier needs a finite HBM capacity (e.g. "
        "--capacity 1e6)");
  }
  return out;
}

nlohmann::json document(const Trace& trace, const ModelShape& model, DType kv,
                        const std::vector<CacheSimResult>& results) {
  const ToolInfo tool = this_tool();
  const HostInfo host = this_host();
  return {{"schema_version", kSchemaVersion},
          {"tool", {{"name", tool.name}, {"version", tool.version}, {"git_sha", tool.git_sha}}},
          {"created", iso8601_utc_now()},
          {"host",
           {{"hostname", host.hostname},
            {"os", host.os},
            {"cpu", host.cpu},
            {"cpu_threads", host.cpu_threads},
            {"compiler", host.compiler},
            {"build_type", host.build_type}}},
          {"cache_sim", cache_sim_json(trace, model, kv, results)}};
}

int run(const CacheSimOptions& o) {
  // Every flag is checked before the trace is read or anything replayed.
  if (o.format != "table" && o.format != "csv" && o.format != "json") {
    throw InputError(
        fmt::format("--format: unknown format '{}'; valid: table, csv, json", o.format));
  }
  if (o.trace_format != "auto" && o.trace_format != "mooncake" && o.trace_format != "csv") {
    throw InputError(fmt::format("--trace-format: unknown format '{}'; valid: auto, mooncake, csv",
                                 o.trace_format));
  }
  if (o.block_tokens < 1) {
    throw InputError(
        fmt::format("--trace-block-tokens: {} is not valid; valid: >= 1 tokens", o.block_tokens));
  }
  if (o.max_requests < 0) {
    throw InputError(fmt::format(
        "--max-requests: {} is not valid; valid: >= 1, or 0 for the whole trace", o.max_requests));
  }
  const std::string& out = o.out;
  const std::vector<CacheSimSetting> settings = settings_of(o);
  const DType kv = parse_dtype(o.kv_dtype, "--kv-dtype");
  ModelShape model;
  try {
    model = load_model(o.model);
  } catch (const InputError& e) {
    throw InputError(fmt::format("--model: {}", e.what()));
  }
  // Before the replay: the file can be created (atomic writes need its directory).
  check_output_file(out, "--out");
  Trace trace;
  try {
    trace = load_trace(o.trace, o.trace_format, o.block_tokens, o.max_requests);
  } catch (const InputError& e) {
    throw InputError(fmt::format("--trace: {}", e.what()));
  }
  const std::vector<CacheSimResult> results = simulate_cache(trace, settings, model, kv);
  const std::string json = out.empty() && o.format != "json"
                               ? std::string()
                               : document(trace, model, kv, results).dump(2);
  if (!out.empty()) write_text_atomic(out, json);
  if (o.format == "json") {
    emit(json, "");
  } else if (o.format == "csv") {
    emit(cache_sim_csv_text(results), "");
  } else {
    emit(cache_sim_table_text(cache_sim_document(trace, model, kv, results)), "");
  }
  return kExitOk;
}

}  // namespace

void add_cache_sim_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CacheSimOptions>();
  CLI::App* cmd = app.add_subcommand(
      "cache-sim",
      "Replay a request trace (Mooncake JSONL with hash ids, or a CSV without) through a prefix "
      "cache per capacity x eviction policy (x ttl): hit rate against the infinite cache's "
      "ceiling, blocks inserted/evicted/expired, prefill tokens and FLOPs saved, the cache's KV "
      "bytes. Requests in arrival order, no concurrency; nothing runs on a device.");
  cmd->add_option("--trace", o->trace, "Trace file (.jsonl: Mooncake, .csv)")->required();
  cmd->add_option("--trace-format", o->trace_format, "auto (by extension), mooncake or csv")
      ->capture_default_str();
  cmd->add_option("--trace-block-tokens", o->block_tokens,
                  "Tokens per hash id of the trace (Mooncake's release: 512)")
      ->capture_default_str();
  cmd->add_option("--max-requests", o->max_requests,
                  "Replay only the first N requests by arrival (0: all)")
      ->capture_default_str();
  cmd->add_option("--capacity", o->capacity,
                  "Cache capacities in tokens (list; inf: unbounded); blocks = floor(tokens / "
                  "block tokens), held by the full-attention layers (a windowed layer holds only "
                  "the blocks a later hit's window reads)")
      ->capture_default_str();
  cmd->add_option("--policy", o->policy, "Eviction policies (list of lru, lfu, ttl)")
      ->capture_default_str();
  cmd->add_option("--link", o->link,
                  "Links the host tier's blocks cross (list of configs/devices.json \"links\" "
                  "keys, e.g. pcie-gen5-x16,nvlink-c2c): each host hit's reload is priced at its "
                  "datasheet rate and compared with recomputing it")
      ->capture_default_str();
  cmd->add_option("--reload-policy", o->reload,
                  "What a host hit does (list): always reload it, never (recompute), or the "
                  "cheaper per request")
      ->capture_default_str();
  cmd->add_option("--link-overhead", o->link_overhead_s,
                  "Seconds per transfer on the link (one per request and direction; no datasheet "
                  "gives it: a GPU's ceilings measure it)")
      ->capture_default_str();
  cmd->add_option("--device", o->device,
                  "Device whose dense f16 tensor-core peak recomputation is priced at "
                  "(configs/devices.json)")
      ->capture_default_str();
  cmd->add_option("--host-capacity", o->host_capacity,
                  "Host-memory tier behind the cache, in tokens (list; 0: none): --capacity is "
                  "then HBM, its victims are demoted to the host tier and host hits promoted "
                  "back over the link; an unbounded --capacity is not paired with a host tier")
      ->capture_default_str();
  o->ttl_option =
      cmd->add_option("--ttl", o->ttl,
                      "Times to live in seconds of trace time (list; the ttl policy only)")
          ->capture_default_str();
  cmd->add_option("--model", o->model,
                  "Model preset or JSON path: its parameters for the FLOPs saved, its KV shape "
                  "and sliding windows for the cache's bytes")
      ->capture_default_str();
  cmd->add_option("--kv-dtype", o->kv_dtype, "KV dtype of the cache's bytes")
      ->capture_default_str();
  add_out_option(*cmd, o->out, "the results (docs/report-schema.md \"cache_sim\")");
  add_format_option(*cmd, o->format, "table, csv or json");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace decodebench::cli
