#include "report/replay_table.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "common/errors.h"
#include "report/table.h"

namespace decodebench {

using nlohmann::json;

namespace {

// The section is kept as read (report.cpp checks only that it is an object), so every access
// tolerates a missing key or another type: a number or NaN, a string or "?", an object or {}.
const json& member(const json& j, const char* key) {
  static const json kNull;
  return j.is_object() && j.contains(key) ? j.at(key) : kNull;
}
double num(const json& j, const char* key) {
  const json& v = member(j, key);
  return v.is_number() ? v.get<double>() : std::nan("");
}
std::string str(const json& j, const char* key) {
  const json& v = member(j, key);
  return v.is_string() ? v.get<std::string>() : v.is_number() ? v.dump() : "?";
}
const json& obj(const json& j, const char* key) {
  static const json kEmpty = json::object();
  const json& v = member(j, key);
  return v.is_object() ? v : kEmpty;
}
const json& arr(const json& j, const char* key) {
  static const json kEmpty = json::array();
  const json& v = member(j, key);
  return v.is_array() ? v : kEmpty;
}

std::string fixed(double x, int digits) {
  return std::isfinite(x) ? fmt::format("{:.{}f}", x, digits) : "-";
}

struct Column {
  const char* header;
  bool left = false;
};

constexpr Column kColumns[] = {{"kv pool GB"},   {"policy", true},   {"ttl s"},    {"kv", true},
                               {"kernel", true}, {"hit rate"},       {"evicted"},  {"PFLOP saved"},
                               {"recomputed"},   {"preempt"},        {"rejected"}, {"steps"},
                               {"batch p50"},    {"KV MB/step p50"}, {"shareable"}};
// With a host tier in any setting: the tier, its link and what crossed it.
constexpr Column kTierColumns[] = {{"host tokens"}, {"link", true},  {"reload", true},
                                   {"HBM hits"},    {"host hits"},   {"to HBM GB"},
                                   {"to host GB"},  {"busy to HBM"}, {"busy to host"}};
// With a prefill link: its busy fraction, the decode's, which binds; and, with either, the time
// to first token the link waits added.
constexpr Column kLinkColumns[] = {{"prefill link"}, {"decode busy"}, {"binds", true}};
constexpr Column kWaitColumns[] = {{"link wait p99 s"}, {"TTFT p50 s"}};
constexpr Column kRateColumns[] = {{"tok/s modeled"}, {"tok/s measured"}};

std::string percent(double x) { return std::isfinite(x) ? fmt::format("{:.1f}%", 100 * x) : "-"; }
// Hit rates as cache-sim prints them: a percentage with two decimals.
std::string hit_percent(double x) {
  return std::isfinite(x) ? fmt::format("{:.2f}%", 100 * x) : "-";
}

}  // namespace

std::string format_replay(const Report& r, OutputFormat out) {
  if (!r.replay.is_object()) {
    throw InputError(
        "not a replay report: it has no 'replay' section (made by `decodebench "
        "replay`)");
  }
  if (out == OutputFormat::json) return r.replay.dump(2) + "\n";
  bool has_tiers = false;
  bool has_prefill_link = false;
  for (const json& cell : arr(r.replay, "settings")) {
    has_tiers = has_tiers || member(obj(cell, "schedule"), "tiers").is_object();
    has_prefill_link =
        has_prefill_link || member(obj(cell, "schedule"), "prefill_link").is_object();
  }
  std::vector<std::vector<std::string>> rows;
  for (const json& cell : arr(r.replay, "settings")) {
    const json& s = obj(cell, "setting");
    const json& sch = obj(cell, "schedule");
    const double ttl_s = num(s, "ttl_s");
    for (const json& k : arr(cell, "kernels")) {
      const json& m = member(k, "measured");
      std::string measured = "-";
      if (std::isfinite(num(m, "tokens_per_s"))) {
        measured = fixed(num(m, "tokens_per_s"), 1);
      } else if (m.is_object() && m.contains("reason")) {
        measured = "failed";
      }
      std::vector<std::string> row = {
          fixed(num(s, "kv_pool_bytes") / 1e9, 2),
          str(s, "policy"),
          std::isfinite(ttl_s) ? fixed(ttl_s, 0) : "-",
          str(s, "kv_dtype"),
          str(k, "kernel"),
          hit_percent(num(sch, "hit_rate")),
          fixed(num(obj(sch, "blocks"), "evicted"), 0),
          fixed(num(sch, "prefill_flops_saved") / 1e15, 1),
          fixed(num(sch, "recomputed_tokens"), 0),
          fixed(num(sch, "preemptions"), 0),
          fixed(num(obj(sch, "requests"), "rejected"), 0),
          fixed(num(sch, "steps"), 0),
          fixed(num(obj(sch, "batch"), "p50"), 0),
          fixed(num(obj(sch, "kv_bytes_per_step"), "p50") / 1e6, 1),
          std::isfinite(num(sch, "shareable_fraction"))
              ? fmt::format("{:.1f}%", 100 * num(sch, "shareable_fraction"))
              : "-"};
      if (has_tiers) {
        const json& t = obj(sch, "tiers");
        const bool tier = member(sch, "tiers").is_object();
        const auto gb = [&](const char* key) {
          return tier ? fixed(num(obj(t, "link_bytes"), key) / 1e9, 2) : "-";
        };
        const auto busy = [&](const char* key) {
          return tier && s.contains("link") && !member(s, "link").is_null()
                     ? percent(num(obj(t, "link_busy_fraction"), key))
                     : "-";
        };
        row.insert(row.end(), {tier ? fmt::format("{:.3g}", num(t, "host_capacity_tokens")) : "-",
                               tier && member(s, "link").is_string() ? str(s, "link") : "-",
                               tier ? str(s, "reload_policy") : "-",
                               tier ? hit_percent(num(obj(t, "hit_rate_by_tier"), "hbm")) : "-",
                               tier ? hit_percent(num(obj(t, "hit_rate_by_tier"), "host")) : "-",
                               gb("to_hbm"), gb("to_host"), busy("to_hbm"), busy("to_host")});
      }
      if (has_prefill_link) {
        const json& pl = obj(sch, "prefill_link");
        row.insert(row.end(), {percent(num(pl, "busy_fraction")),
                               percent(num(pl, "decode_busy_fraction")), str(pl, "binds")});
      }
      if (has_tiers || has_prefill_link) {
        row.insert(row.end(), {fixed(num(obj(sch, "link_wait_s"), "p99"), 2),
                               fixed(num(obj(sch, "ttft_s"), "p50"), 2)});
      }
      row.insert(row.end(), {fixed(num(obj(sch, "modeled"), "decode_tokens_per_s"), 1), measured});
      rows.push_back(std::move(row));
    }
  }
  Table t;
  const auto add = [&](const auto& columns) {
    for (const Column& c : columns) t.columns.push_back({c.header, /*right=*/!c.left});
  };
  add(kColumns);
  if (has_tiers) add(kTierColumns);
  if (has_prefill_link) add(kLinkColumns);
  if (has_tiers || has_prefill_link) add(kWaitColumns);
  add(kRateColumns);
  t.rows = std::move(rows);
  t.rule = true;
  if (out == OutputFormat::csv) return render_csv(t);
  std::string text;
  const json& trace = obj(r.replay, "trace");
  const json& sm = obj(r.replay, "schedule_model");
  text += fmt::format("replay of {} ({} requests) with {}, scope {}\n", str(trace, "source"),
                      str(trace, "requests"), str(r.replay, "model"), str(r.replay, "scope"));
  text += fmt::format("schedule modeled for {}; prefill {}\n", str(sm, "device"),
                      str(sm, "prefill_rate_basis"));
  text += fmt::format(
      "tok/s measured: decode tokens over the trace / the sampled steps' times ({}), {}\n\n",
      str(r.replay, "scope") == "attention"
          ? "the attention alone; tok/s modeled counts the weights too"
          : "every layer and the LM head",
      str(r.replay, "interpolation"));
  return text + (out == OutputFormat::md ? render_md(t) : render_text(t));
}

}  // namespace decodebench
