#include "backends/datasheet.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/errors.h"
#include "common/json_text.h"
#include "workload/workload.h"  // configs_dir()

namespace decodebench {
namespace {

using nlohmann::json;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& key,
                       const std::string& what) {
  throw InputError(file.string() + ": key '" + key + "': " + what);
}

double positive_number(const json& row, const char* key, const std::filesystem::path& file,
                       const std::string& where) {
  if (!row.contains(key)) fail(file, where + "." + key, "missing");
  const json& v = row.at(key);
  if (!v.is_number() || v.get<double>() <= 0) {
    fail(file, where + "." + key, "must be a positive number, got " + v.dump());
  }
  return v.get<double>();
}

Datasheet parse_row(const json& row, const std::filesystem::path& file, const std::string& where) {
  static const std::vector<std::string> kKeys = {"key",
                                                 "name",
                                                 "match",
                                                 "bandwidth",
                                                 "fp32_flops",
                                                 "tensor_f16_flops",
                                                 "tensor_fp8_flops",
                                                 "mem_bytes",
                                                 "sm_count",
                                                 "boost_clock_hz",
                                                 "compute_capability"};
  if (!row.is_object()) fail(file, where, "must be an object");
  for (const auto& [k, v] : row.items()) {
    if (std::find(kKeys.begin(), kKeys.end(), k) == kKeys.end()) {
      std::string valid;
      for (const std::string& key : kKeys) valid += (valid.empty() ? "" : ", ") + key;
      fail(file, where + "." + k, "unknown key (valid: " + valid + ")");
    }
  }
  Datasheet d;
  for (const char* k : {"key", "name"}) {
    if (!row.contains(k) || !row.at(k).is_string() || row.at(k).get<std::string>().empty()) {
      fail(file, where + "." + k, "must be a non-empty string");
    }
  }
  d.key = row.at("key").get<std::string>();
  d.name = row.at("name").get<std::string>();
  const std::string here = "devices[" + d.key + "]";
  if (!row.contains("match") || !row.at("match").is_array() || row.at("match").empty()) {
    fail(file, here + ".match", "must be a non-empty array of strings");
  }
  for (const json& m : row.at("match")) {
    if (!m.is_string() || m.get<std::string>().empty()) {
      fail(file, here + ".match", "must hold non-empty strings, got " + m.dump());
    }
    d.match.push_back(m.get<std::string>());
  }
  d.bandwidth = positive_number(row, "bandwidth", file, here);
  d.fp32_flops = positive_number(row, "fp32_flops", file, here);
  if (!row.contains("tensor_f16_flops")) {
    fail(file, here + ".tensor_f16_flops",
         "missing: the dense f16/bf16 tensor-core peak in FLOP/s (the FLOP roof of the "
         "tensor-core kernels) is required for every device");
  }
  d.tensor_f16_flops = positive_number(row, "tensor_f16_flops", file, here);
  if (row.contains("tensor_fp8_flops")) {
    d.tensor_fp8_flops = positive_number(row, "tensor_fp8_flops", file, here);
  }
  // Checked before the cast: a double beyond int64's range does not convert (undefined).
  const double mem_bytes = positive_number(row, "mem_bytes", file, here);
  if (mem_bytes >= 9.0e18) {
    fail(file, here + ".mem_bytes", "must be below 9e18 bytes, got " + row.at("mem_bytes").dump());
  }
  d.mem_bytes = static_cast<std::int64_t>(mem_bytes);
  if (row.contains("sm_count")) {
    const json& v = row.at("sm_count");
    if (!v.is_number_integer() || v.get<std::int64_t>() <= 0 ||
        v.get<std::int64_t>() > std::numeric_limits<int>::max()) {
      fail(file, here + ".sm_count", "must be a positive integer, got " + v.dump());
    }
    d.sm_count = v.get<int>();
  }
  if (row.contains("boost_clock_hz")) {
    d.boost_clock_hz = positive_number(row, "boost_clock_hz", file, here);
  }
  if (row.contains("compute_capability")) {
    const json& v = row.at("compute_capability");
    const std::string cc = v.is_string() ? v.get<std::string>() : "";
    const std::size_t dot = cc.find('.');
    const auto digits = [](const std::string& s) {
      return !s.empty() &&
             std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
    };
    if (dot == std::string::npos || !digits(cc.substr(0, dot)) || !digits(cc.substr(dot + 1))) {
      fail(file, here + ".compute_capability",
           "must be a string MAJOR.MINOR such as \"9.0\", got " + v.dump());
    }
    d.compute_capability = cc;
  }
  return d;
}

}  // namespace

std::filesystem::path datasheet_file() { return configs_dir() / "devices.json"; }

std::vector<Datasheet> load_datasheets(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw InputError(file.string() + ": cannot open the device datasheet file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_datasheets(ss.view(), file);
}

std::vector<Datasheet> parse_datasheets(std::string_view text, const std::filesystem::path& file) {
  const json doc = parse_json_text(text, file.string());
  if (!doc.is_object()) throw InputError(file.string() + ": must hold a JSON object");
  for (const auto& [k, v] : doc.items()) {
    if (k != "devices" && k != "links" && k != "_comment")
      fail(file, k, "unknown key (valid: devices, links, _comment)");
  }
  if (!doc.contains("devices") || !doc.at("devices").is_array()) {
    fail(file, "devices", "must be an array of device rows");
  }
  std::vector<Datasheet> rows;
  int i = 0;
  for (const json& row : doc.at("devices")) {
    Datasheet d = parse_row(row, file, "devices[" + std::to_string(i++) + "]");
    for (const Datasheet& other : rows) {
      if (lower(other.key) == lower(d.key))
        fail(file, "devices[" + d.key + "].key", "duplicate key");
    }
    rows.push_back(std::move(d));
  }
  return rows;
}

std::vector<Datasheet> all_datasheets() { return load_datasheets(datasheet_file()); }

std::vector<LinkDatasheet> parse_link_datasheets(std::string_view text,
                                                 const std::filesystem::path& file) {
  parse_datasheets(text, file);  // the whole file is checked, devices too
  const json doc = parse_json_text(text, file.string());
  std::vector<LinkDatasheet> links;
  if (!doc.contains("links")) return links;
  if (!doc.at("links").is_array()) fail(file, "links", "must be an array of link rows");
  static const std::vector<std::string> kKeys = {"key", "name", "to_device", "to_host", "source"};
  int i = 0;
  for (const json& row : doc.at("links")) {
    const std::string where = "links[" + std::to_string(i++) + "]";
    if (!row.is_object()) fail(file, where, "must be an object");
    for (const auto& [k, v] : row.items()) {
      if (std::find(kKeys.begin(), kKeys.end(), k) == kKeys.end())
        fail(file, where + "." + k, "unknown key (valid: key, name, to_device, to_host, source)");
    }
    for (const char* k : {"key", "name", "source"}) {
      if (!row.contains(k) || !row.at(k).is_string() || row.at(k).get<std::string>().empty())
        fail(file, where + "." + k, "must be a non-empty string");
    }
    LinkDatasheet l;
    l.key = row.at("key").get<std::string>();
    l.name = row.at("name").get<std::string>();
    l.source = row.at("source").get<std::string>();
    const std::string here = "links[" + l.key + "]";
    l.to_device = positive_number(row, "to_device", file, here);
    l.to_host = positive_number(row, "to_host", file, here);
    for (const LinkDatasheet& other : links) {
      if (lower(other.key) == lower(l.key)) fail(file, here + ".key", "duplicate key");
    }
    links.push_back(std::move(l));
  }
  return links;
}

std::vector<LinkDatasheet> all_link_datasheets() {
  const std::filesystem::path file = datasheet_file();
  std::ifstream in(file);
  if (!in) throw InputError(file.string() + ": cannot open the device datasheet file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_link_datasheets(ss.view(), file);
}

LinkDatasheet link_by_key(std::string_view key) {
  std::string keys;
  for (LinkDatasheet& l : all_link_datasheets()) {
    if (lower(l.key) == lower(key)) return l;
    keys += (keys.empty() ? "" : ", ") + l.key;
  }
  throw InputError("unknown link '" + std::string(key) + "' in " + datasheet_file().string() +
                   " (valid: " + keys + ")");
}

namespace {

// `pattern` (lower case) occurs in `name` (lower case), and where it ends in a digit, at a place
// the name does not go on with one.
bool found_in(const std::string& name, const std::string& pattern) {
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  for (std::size_t at = name.find(pattern); at != std::string::npos;
       at = name.find(pattern, at + 1)) {
    const std::size_t end = at + pattern.size();
    if (!digit(pattern.back()) || end == name.size() || !digit(name[end])) return true;
  }
  return false;
}

}  // namespace

std::optional<Datasheet> find_datasheet(std::string_view device_name) {
  const std::string name = lower(device_name);
  std::optional<Datasheet> best;
  std::size_t best_len = 0;
  for (Datasheet& d : all_datasheets()) {
    for (const std::string& m : d.match) {
      if (m.size() > best_len && found_in(name, lower(m))) {
        best_len = m.size();
        best = d;
      }
    }
  }
  return best;
}

Datasheet datasheet_by_key(std::string_view key) {
  std::vector<Datasheet> rows = all_datasheets();
  std::string keys;
  for (Datasheet& d : rows) {
    if (lower(d.key) == lower(key)) return d;
    keys += (keys.empty() ? "" : ", ") + d.key;
  }
  throw InputError("unknown device '" + std::string(key) + "' in " + datasheet_file().string() +
                   " (valid: " + keys + ")");
}

}  // namespace decodebench
