// `decodebench ceilings`: the bandwidth and FLOP ceilings of a backend's device, measured now.
#include <algorithm>
#include <iostream>
#include <memory>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/datasheet.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/atomic_write.h"
#include "common/errors.h"
#include "common/units.h"
#include "report/table.h"
#include "results/report.h"

namespace decodebench::cli {
namespace {

// ---------------------------------------------------------------------------------- ceilings
struct CeilingsOptions {
  std::string backend = "auto";
  int device = 0;
  std::string format = "table";
  std::string out;
};

std::string ceilings_table(const DeviceInfo& d) {
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
  for (const LinkDatasheet& l : all_link_datasheets()) {
    s += fmt::format("link        {} ({}): to device {}, to host {} (datasheet, not measured)\n",
                     l.key, l.name, format_bandwidth(l.to_device), format_bandwidth(l.to_host));
  }
  return s;
}

// The links' datasheet rows: what a KV cache's tiers cross, labelled datasheet; a GPU's measured
// links (Backend::measure_links) follow them in the same list, labelled measured.
nlohmann::json links_json() {
  nlohmann::json links = nlohmann::json::array();
  for (const LinkDatasheet& l : all_link_datasheets()) {
    links.push_back({{"key", l.key},
                     {"name", l.name},
                     {"to_device_Bps", l.to_device},
                     {"to_host_Bps", l.to_host},
                     {"kind", "datasheet"},
                     {"source", l.source}});
  }
  return links;
}

nlohmann::json link_json(const LinkMeasurement& l) {
  nlohmann::json sizes = nlohmann::json::array();
  for (const auto& [bytes, rate] : l.by_size) sizes.push_back({{"bytes", bytes}, {"Bps", rate}});
  return {{"name", l.name},         {"direction", l.direction},   {"kind", "measured"},
          {"best_Bps", l.best_Bps}, {"overhead_s", l.overhead_s}, {"by_size", sizes}};
}

std::string measured_link_lines(const std::vector<LinkMeasurement>& links) {
  std::string s;
  for (const LinkMeasurement& l : links) {
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

int run_ceilings(const CeilingsOptions& o) {
  const OutputFormat format = parse_format(o.format);
  std::unique_ptr<Backend> backend = make_backend(o.backend, o.device);
  DeviceInfo info = backend->device_info();
  if (backend->name() != "emu") std::cerr << "measuring ceilings on " << info.name << " ...\n";
  info.measured = backend->measure_ceilings();
  const std::vector<LinkMeasurement> measured_links = backend->measure_links();
  nlohmann::json j = to_json(info);
  j["links"] = links_json();
  for (const LinkMeasurement& l : measured_links) j["links"].push_back(link_json(l));
  if (!o.out.empty()) write_text_atomic(o.out, j.dump(2) + "\n");
  if (format == OutputFormat::json) {
    emit(j.dump(2), "");
  } else if (format == OutputFormat::table) {
    emit(ceilings_table(info) + measured_link_lines(measured_links), "");
  } else {
    // csv/md: one row per ceiling, SI base units.
    const std::vector<std::pair<std::string, double>> rows = {
        {"bandwidth_datasheet_Bps", info.bandwidth_datasheet},
        {"bandwidth_theoretical_Bps", info.bandwidth_theoretical},
        {"measured_read_Bps", info.measured.read},
        {"measured_copy_Bps", info.measured.copy},
        {"measured_triad_Bps", info.measured.triad},
        {"measured_fma_flops", info.measured.fma_flops},
        {"flops_peak", info.flops_peak}};
    Table t;
    t.columns = {{"backend"}, {"device"}, {"quantity"}, {"value", true}};
    for (const auto& [k, v] : rows) {
      t.add_row({info.backend, info.name, k, v > 0 ? fmt::format("{:.6g}", v) : ""});
    }
    for (const LinkDatasheet& l : all_link_datasheets()) {
      t.add_row({info.backend, info.name, "datasheet_link_" + l.key + "_to_device_Bps",
                 fmt::format("{:.6g}", l.to_device)});
      t.add_row({info.backend, info.name, "datasheet_link_" + l.key + "_to_host_Bps",
                 fmt::format("{:.6g}", l.to_host)});
    }
    const std::string s = format == OutputFormat::csv ? render_csv(t) : render_md(t);
    emit(s, "");
  }
  return kExitOk;
}

}  // namespace

void add_ceilings_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CeilingsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "ceilings",
      "Print the device and its ceilings: datasheet and theoretical bandwidth, and the measured "
      "read / copy / triad bandwidth and fp32 FMA peak (a few seconds).");
  cmd->add_option("--backend", o->backend, "auto, cpu, emu, cuda")->capture_default_str();
  cmd->add_option("--device", o->device, "CUDA device index");
  add_format_option(*cmd, o->format, "table or json (csv, md: one row per ceiling)");
  add_out_option(*cmd, o->out, "the device record");
  cmd->callback([o, &exit_code] { exit_code = run_ceilings(*o); });
}

}  // namespace decodebench::cli
