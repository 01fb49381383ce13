// `decodebench devices`: the backends this build has and whether each is usable here, and the
// datasheet peaks (configs/devices.json).
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
#include "common/errors.h"
#include "common/text.h"
#include "common/units.h"
#include "report/table.h"
#include "results/report.h"

namespace decodebench::cli {
namespace {

// ---------------------------------------------------------------------------------- devices
struct DevicesOptions {
  std::string format = "table";
  int device = 0;
};

int run_devices(const DevicesOptions& o) {
  const OutputFormat format = parse_format(o.format);
  nlohmann::json j = {{"backends", nlohmann::json::array()},
                      {"datasheets", nlohmann::json::array()}};
  Table backends;
  backends.columns = {{"name", false, 6}, {"status", false, 10}, {"device"}};
  for (const std::string& name : backend_names()) {
    try {
      std::unique_ptr<Backend> b = make_backend(name, o.device);
      const DeviceInfo d = b->device_info();
      backends.add_row({name, "usable",
                        fmt::format("{} ({} {}, cache {}, memory {}, datasheet {})", d.name,
                                    d.sm_count, name == "cpu" ? "threads" : "SMs",
                                    or_na(static_cast<double>(d.l2_bytes), format_bytes),
                                    or_na(static_cast<double>(d.mem_bytes), format_bytes),
                                    or_na(d.bandwidth_datasheet, format_bandwidth))});
      j["backends"].push_back({{"name", name}, {"usable", true}, {"device", to_json(d)}});
    } catch (const RuntimeFailure& e) {
      backends.add_row({name, "not usable", e.what()});
      j["backends"].push_back({{"name", name}, {"usable", false}, {"reason", e.what()}});
    }
  }
  Table sheets;
  sheets.columns = {{"key", false, 15},      {"name", false, 24},
                    {"bandwidth", true, 11}, {"fp32 (no TC)", true, 15},
                    {"memory", true, 9},     {"matches device names containing"}};
  for (const Datasheet& d : all_datasheets()) {
    sheets.add_row({d.key, d.name, format_bandwidth(d.bandwidth), format_flops(d.fp32_flops),
                    format_bytes(static_cast<double>(d.mem_bytes)), join(d.match)});
    j["datasheets"].push_back({{"key", d.key},
                               {"name", d.name},
                               {"match", d.match},
                               {"bandwidth", d.bandwidth},
                               {"fp32_flops", d.fp32_flops},
                               {"mem_bytes", d.mem_bytes}});
  }
  const std::string table =
      "Backends in this build:\n" + render_text(backends, "  ", " ") +
      fmt::format("  auto   -> {}\n", cuda_device_present() ? "cuda" : "cpu") +
      fmt::format("\nDatasheet peaks ({}):\n", datasheet_file().string()) +
      render_text(sheets, "  ", " ");
  if (format == OutputFormat::json) {
    emit(j.dump(2), "");
  } else if (format == OutputFormat::table) {
    emit(table, "");
  } else {
    throw InputError("--format: `devices` prints table or json (got " + o.format + ")");
  }
  return kExitOk;
}

}  // namespace

void add_devices_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<DevicesOptions>();
  CLI::App* cmd = app.add_subcommand(
      "devices",
      "List the backends of this build, the device each would use, and the datasheet rows.");
  cmd->add_option("--device", o->device, "CUDA device index");
  add_format_option(*cmd, o->format, "table or json");
  cmd->callback([o, &exit_code] { exit_code = run_devices(*o); });
}

}  // namespace decodebench::cli
