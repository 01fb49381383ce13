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
#include "report/ceilings_view.h"
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

int run_ceilings(const CeilingsOptions& o) {
  const OutputFormat format = parse_format(o.format);
  std::unique_ptr<Backend> backend = make_backend(o.backend, o.device);
  DeviceInfo info = backend->device_info();
  if (backend->name() != "emu") std::cerr << "measuring ceilings on " << info.name << " ...\n";
  info.measured = backend->measure_ceilings();
  CeilingsDocument doc;
  doc.device = info;
  doc.datasheet_links = all_link_datasheets();
  doc.measured_links = backend->measure_links();
  const nlohmann::json j = ceilings_json(doc);
  if (!o.out.empty()) write_text_atomic(o.out, j.dump(2) + "\n");
  if (format == OutputFormat::json) {
    emit(j.dump(2), "");
  } else if (format == OutputFormat::table) {
    emit(ceilings_text(doc), "");
  } else {
    emit(ceilings_rows(doc, format == OutputFormat::md), "");
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
