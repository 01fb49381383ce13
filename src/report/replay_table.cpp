#include "report/replay_table.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "common/errors.h"

namespace decodebench {

using nlohmann::json;

namespace {

double num(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j.at(key).is_number() ? j.at(key).get<double>()
                                                                   : std::nan("");
}

std::string fixed(double x, int digits) {
  return std::isfinite(x) ? fmt::format("{:.{}f}", x, digits) : "-";
}

struct Column {
  const char* header;
  bool left = false;
};

constexpr Column kColumns[] = {
    {"kv pool GB"},     {"policy", true}, {"ttl s"},         {"kv", true},
    {"kernel", true},   {"hit rate"},     {"evicted"},       {"PFLOP saved"},
    {"recomputed"},     {"preempt"},      {"steps"},         {"batch p50"},
    {"KV MB/step p50"}, {"shareable"},    {"tok/s modeled"}, {"tok/s measured"}};

}  // namespace

std::string format_replay(const Report& r, OutputFormat out) {
  if (!r.replay.is_object()) {
    throw InputError(
        "not a replay report: it has no 'replay' section (made by `decodebench "
        "replay`)");
  }
  if (out == OutputFormat::json) return r.replay.dump(2) + "\n";
  std::vector<std::vector<std::string>> rows;
  const json& settings = r.replay.value("settings", json::array());
  for (const json& cell : settings) {
    const json& s = cell.value("setting", json::object());
    const json& sch = cell.value("schedule", json::object());
    const json& modeled = sch.value("modeled", json::object());
    const json& kv = sch.value("kv_bytes_per_step", json::object());
    const json& batch = sch.value("batch", json::object());
    const std::string ttl = s.contains("ttl_s") && s.at("ttl_s").is_number()
                                ? fixed(s.at("ttl_s").get<double>(), 0)
                                : "-";
    for (const json& k : cell.value("kernels", json::array())) {
      const json& m = k.value("measured", json());
      std::string measured = "-";
      if (m.is_object() && m.contains("tokens_per_s") && m.at("tokens_per_s").is_number()) {
        measured = fixed(m.at("tokens_per_s").get<double>(), 1);
      } else if (m.is_object() && m.contains("reason")) {
        measured = "failed";
      }
      rows.push_back(
          {fixed(num(s, "kv_pool_bytes") / 1e9, 2), s.value("policy", "?"), ttl,
           s.value("kv_dtype", "?"), k.value("kernel", "?"), fixed(num(sch, "hit_rate"), 3),
           fixed(num(sch.value("blocks", json::object()), "evicted"), 0),
           fixed(num(sch, "prefill_flops_saved") / 1e15, 1),
           fixed(num(sch, "recomputed_tokens"), 0), fixed(num(sch, "preemptions"), 0),
           fixed(num(sch, "steps"), 0), fixed(num(batch, "p50"), 0), fixed(num(kv, "p50") / 1e6, 1),
           fmt::format("{:.1f}%", 100 * num(sch, "shareable_fraction")),
           fixed(num(modeled, "decode_tokens_per_s"), 1), measured});
    }
  }
  std::string text;
  if (out == OutputFormat::csv) {
    for (std::size_t c = 0; c < std::size(kColumns); ++c)
      text += fmt::format("{}{}", c ? "," : "", kColumns[c].header);
    text += '\n';
    for (const auto& row : rows) {
      for (std::size_t c = 0; c < row.size(); ++c)
        text += fmt::format("{}{}", c ? "," : "", row[c]);
      text += '\n';
    }
    return text;
  }
  std::vector<std::size_t> width(std::size(kColumns));
  for (std::size_t c = 0; c < width.size(); ++c) {
    width[c] = std::string_view(kColumns[c].header).size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  const bool md = out == OutputFormat::md;
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string l = md ? "| " : "";
    for (std::size_t c = 0; c < cells.size(); ++c) {
      l += kColumns[c].left ? fmt::format("{:<{}}", cells[c], width[c])
                            : fmt::format("{:>{}}", cells[c], width[c]);
      l += c + 1 < cells.size() ? (md ? " | " : "  ") : (md ? " |" : "");
    }
    return l + "\n";
  };
  const json& trace = r.replay.value("trace", json::object());
  const json& sm = r.replay.value("schedule_model", json::object());
  text += fmt::format("replay of {} ({} requests) with {}, scope {}\n", trace.value("source", "?"),
                      trace.value("requests", 0), r.replay.value("model", "?"),
                      r.replay.value("scope", "?"));
  text += fmt::format("schedule modeled for {}; prefill {}\n", sm.value("device", "?"),
                      sm.value("prefill_rate_basis", "?"));
  text += fmt::format(
      "tok/s measured: decode tokens over the trace / the sampled steps' times ({}), {}\n\n",
      r.replay.value("scope", "") == "attention"
          ? "the attention alone; tok/s modeled counts the weights too"
          : "every layer and the LM head",
      r.replay.value("interpolation", "?"));
  std::vector<std::string> headers;
  for (const Column& c : kColumns) headers.push_back(c.header);
  text += line(headers);
  if (md) {
    std::string sep = "|";
    for (std::size_t c = 0; c < width.size(); ++c)
      sep += std::string(width[c] + 1, '-') + (kColumns[c].left ? "-|" : ":|");
    text += sep + "\n";
  } else {
    std::size_t total = 0;
    for (std::size_t w : width) total += w + 2;
    text += std::string(total - 2, '-') + "\n";
  }
  for (const auto& row : rows) text += line(row);
  return text;
}

}  // namespace decodebench
