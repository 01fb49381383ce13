#include "report/ceilings_view.h"

#include <fmt/format.h>

#include "common/errors.h"
#include "common/json_in.h"
#include "common/units.h"
#include "report/table.h"

namespace decodebench {
namespace {

nlohmann::json link_json(const LinkDatasheet& l) {
  return {{"key", l.key},
          {"name", l.name},
          {"to_device_Bps", l.to_device},
          {"to_host_Bps", l.to_host},
          {"kind", "datasheet"},
          {"source", l.source}};
}

nlohmann::json link_json(const LinkMeasurement& l) {
  nlohmann::json sizes = nlohmann::json::array();
  for (const auto& [bytes, rate] : l.by_size) sizes.push_back({{"bytes", bytes}, {"Bps", rate}});
  return {{"name", l.name},         {"direction", l.direction},   {"kind", "measured"},
          {"best_Bps", l.best_Bps}, {"overhead_s", l.overhead_s}, {"by_size", sizes}};
}

}  // namespace

nlohmann::json ceilings_json(const CeilingsDocument& d) {
  nlohmann::json j = to_json(d.device);
  j["links"] = nlohmann::json::array();
  for (const LinkDatasheet& l : d.datasheet_links) j["links"].push_back(link_json(l));
  for (const LinkMeasurement& l : d.measured_links) j["links"].push_back(link_json(l));
  return j;
}

bool is_ceilings_document(const nlohmann::json& j) {
  return j.is_object() && j.contains("links") && j.contains("bandwidth") && j.contains("backend") &&
         !j.contains("results");
}

CeilingsDocument ceilings_from_json(const nlohmann::json& j, const std::string& source) {
  const JsonIn in(j, source);
  in.reject_unknown_keys({"backend", "name", "sm_count", "l2_bytes", "mem_bytes", "bandwidth",
                          "flops_peak", "flops_peak_tensor_f16", "flops_peak_tensor_fp8",
                          "flops_measured", "gemm_ceiling", "links"});
  CeilingsDocument d;
  d.device = device_record_from_json(j, source);
  const JsonIn links = in.at("links");
  for (std::size_t i = 0; i < links.size(); ++i) {
    const JsonIn l = links.at(i);
    const std::string kind = l.at("kind").string();
    if (kind == "datasheet") {
      l.reject_unknown_keys({"key", "name", "to_device_Bps", "to_host_Bps", "kind", "source"});
      d.datasheet_links.push_back({l.at("key").string(), l.at("name").string(),
                                   l.at("to_device_Bps").number(), l.at("to_host_Bps").number(),
                                   l.at("source").string()});
    } else if (kind == "measured") {
      l.reject_unknown_keys({"name", "direction", "kind", "best_Bps", "overhead_s", "by_size"});
      LinkMeasurement m;
      m.name = l.at("name").string();
      m.direction = l.at("direction").string();
      m.best_Bps = l.at("best_Bps").number();
      m.overhead_s = l.at("overhead_s").number();
      const JsonIn sizes = l.at("by_size");
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        const JsonIn s = sizes.at(k);
        s.reject_unknown_keys({"bytes", "Bps"});
        m.by_size.emplace_back(s.at("bytes").integer(), s.at("Bps").number());
      }
      d.measured_links.push_back(std::move(m));
    } else {
      l.at("kind").fail("expected \"datasheet\" or \"measured\"");
    }
  }
  return d;
}

std::string ceilings_text(const CeilingsDocument& doc) {
  const DeviceRecord& d = doc.device;
  std::string s;
  s += fmt::format("backend     {}\n", d.backend);
  s += fmt::format("device      {}\n", d.name);
  s += fmt::format("units       {} {}\n", d.sm_count, d.backend == "cpu" ? "threads" : "SMs");
  s += fmt::format("cache       {} ({})\n", or_na(static_cast<double>(d.l2_bytes), format_bytes),
                   d.backend == "cpu" ? "last-level cache" : "L2");
  s += fmt::format("memory      {}\n", or_na(static_cast<double>(d.mem_bytes), format_bytes));
  s += fmt::format("datasheet   {} (configs/devices.json)\n",
                   or_na(d.bandwidth_datasheet, format_bandwidth));
  s += fmt::format("theoretical {} (2 x memory clock x bus width / 8)\n",
                   or_na(d.bandwidth_theoretical, format_bandwidth));
  const Ceilings& m = d.measured;
  if (m.read <= 0 && m.copy <= 0 && m.triad <= 0) {
    s += "measured    not measured";
    if (d.backend == "emu") s += ": the emulator's speed says nothing about a GPU";
    s += '\n';
  } else {
    s += fmt::format(
        "measured    read {}, copy {} (read + write), triad {} (3 arrays); buffers of {} each\n",
        or_na(m.read, format_bandwidth), or_na(m.copy, format_bandwidth),
        or_na(m.triad, format_bandwidth), or_na(static_cast<double>(m.buffer_bytes), format_bytes));
  }
  if (!m.note.empty()) s += fmt::format("note        {}\n", m.note);
  s += fmt::format("fp32 peak   measured {}, device/datasheet {}\n", format_flops(m.fma_flops),
                   format_flops(d.flops_peak));
  for (const LinkDatasheet& l : doc.datasheet_links) {
    s += fmt::format("link        {} ({}): to device {}, to host {} (datasheet, not measured)\n",
                     l.key, l.name, format_bandwidth(l.to_device), format_bandwidth(l.to_host));
  }
  for (const LinkMeasurement& l : doc.measured_links) {
    std::string sizes;
    for (const auto& [bytes, rate] : l.by_size) {
      sizes += fmt::format("{}{} MiB {:.1f}", sizes.empty() ? "" : ", ",
                           static_cast<double>(bytes) / (1 << 20), rate / 1e9);
    }
    s += fmt::format(
        "link        {} ({}): {:.1f} GB/s measured, {:.1f} us per transfer; GB/s by "
        "size: {}\n",
        l.name, l.direction, l.best_Bps / 1e9, l.overhead_s * 1e6, sizes);
  }
  return s;
}

std::string ceilings_rows(const CeilingsDocument& doc, bool markdown) {
  const DeviceRecord& d = doc.device;
  // One row per ceiling, SI base units.
  const std::vector<std::pair<std::string, double>> rows = {
      {"bandwidth_datasheet_Bps", d.bandwidth_datasheet},
      {"bandwidth_theoretical_Bps", d.bandwidth_theoretical},
      {"measured_read_Bps", d.measured.read},
      {"measured_copy_Bps", d.measured.copy},
      {"measured_triad_Bps", d.measured.triad},
      {"measured_fma_flops", d.measured.fma_flops},
      {"flops_peak", d.flops_peak}};
  Table t;
  t.columns = {{"backend"}, {"device"}, {"quantity"}, {"value", true}};
  for (const auto& [k, v] : rows) {
    t.add_row({d.backend, d.name, k, v > 0 ? fmt::format("{:.6g}", v) : ""});
  }
  for (const LinkDatasheet& l : doc.datasheet_links) {
    t.add_row({d.backend, d.name, "datasheet_link_" + l.key + "_to_device_Bps",
               fmt::format("{:.6g}", l.to_device)});
    t.add_row({d.backend, d.name, "datasheet_link_" + l.key + "_to_host_Bps",
               fmt::format("{:.6g}", l.to_host)});
  }
  return markdown ? render_md(t) : render_csv(t);
}

}  // namespace decodebench
