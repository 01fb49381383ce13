// `decodebench ceilings | devices | kernels`: what this machine and this build have.
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/datasheet.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "kernels.h"
#include "report/report.h"

namespace decodebench::cli {
namespace {

std::string or_na(double v, std::string (*format)(double)) { return v > 0 ? format(v) : "n/a"; }
std::string flops_label(double v) {
  if (v <= 0) return "n/a";
  return v >= 1e12 ? fmt::format("{:.1f} TFLOP/s", v / 1e12)
                   : fmt::format("{:.1f} GFLOP/s", v / 1e9);
}

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

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
  s += fmt::format("fp32 peak   measured {}, device/datasheet {}\n", flops_label(m.fma_flops),
                   flops_label(d.flops_peak));
  return s;
}

int run_ceilings(const CeilingsOptions& o) {
  const OutputFormat format = parse_format(o.format);
  std::unique_ptr<Backend> backend = make_backend(o.backend, o.device);
  DeviceInfo info = backend->device_info();
  if (backend->name() != "emu") std::cerr << "measuring ceilings on " << info.name << " ...\n";
  info.measured = backend->measure_ceilings();
  const nlohmann::json j = to_json(info);
  if (!o.out.empty()) write_text_atomic(o.out, j.dump(2) + "\n");
  if (format == OutputFormat::json) {
    emit(j.dump(2), "");
  } else if (format == OutputFormat::table) {
    emit(ceilings_table(info), "");
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
    std::string s = format == OutputFormat::csv
                        ? "backend,device,quantity,value\n"
                        : "| backend | device | quantity | value |\n|---|---|---|---|\n";
    for (const auto& [k, v] : rows) {
      const std::string value = v > 0 ? fmt::format("{:.6g}", v) : "";
      s += format == OutputFormat::csv
               ? fmt::format("{},\"{}\",{},{}\n", info.backend, info.name, k, value)
               : fmt::format("| {} | {} | {} | {} |\n", info.backend, info.name, k, value);
    }
    emit(s, "");
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------------- devices
struct DevicesOptions {
  std::string format = "table";
  int device = 0;
};

int run_devices(const DevicesOptions& o) {
  const OutputFormat format = parse_format(o.format);
  nlohmann::json j = {{"backends", nlohmann::json::array()},
                      {"datasheets", nlohmann::json::array()}};
  std::string table = "Backends in this build:\n";
  table += fmt::format("  {:<6} {:<10} {}\n", "name", "status", "device");
  for (const std::string& name : backend_names()) {
    try {
      std::unique_ptr<Backend> b = make_backend(name, o.device);
      const DeviceInfo d = b->device_info();
      table += fmt::format("  {:<6} {:<10} {} ({} {}, cache {}, memory {}, datasheet {})\n", name,
                           "usable", d.name, d.sm_count, name == "cpu" ? "threads" : "SMs",
                           or_na(static_cast<double>(d.l2_bytes), format_bytes),
                           or_na(static_cast<double>(d.mem_bytes), format_bytes),
                           or_na(d.bandwidth_datasheet, format_bandwidth));
      j["backends"].push_back({{"name", name}, {"usable", true}, {"device", to_json(d)}});
    } catch (const RuntimeFailure& e) {
      table += fmt::format("  {:<6} {:<10} {}\n", name, "not usable", e.what());
      j["backends"].push_back({{"name", name}, {"usable", false}, {"reason", e.what()}});
    }
  }
  table += fmt::format("  auto   -> {}\n", cuda_device_present() ? "cuda" : "cpu");
  table += fmt::format("\nDatasheet peaks ({}):\n", datasheet_file().string());
  table += fmt::format("  {:<15} {:<24} {:>11} {:>15} {:>9}  {}\n", "key", "name", "bandwidth",
                       "fp32 (no TC)", "memory", "matches device names containing");
  for (const Datasheet& d : all_datasheets()) {
    table += fmt::format("  {:<15} {:<24} {:>11} {:>15} {:>9}  {}\n", d.key, d.name,
                         format_bandwidth(d.bandwidth), flops_label(d.fp32_flops),
                         format_bytes(static_cast<double>(d.mem_bytes)), join(d.match));
    j["datasheets"].push_back({{"key", d.key},
                               {"name", d.name},
                               {"match", d.match},
                               {"bandwidth", d.bandwidth},
                               {"fp32_flops", d.fp32_flops},
                               {"mem_bytes", d.mem_bytes}});
  }
  if (format == OutputFormat::json) {
    emit(j.dump(2), "");
  } else if (format == OutputFormat::table) {
    emit(table, "");
  } else {
    throw InputError("--format: `devices` prints table or json (got " + o.format + ")");
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------------- kernels
struct KernelsOptions {
  std::string format = "table";
};

std::string dtype_list(const std::vector<DType>& types) {
  std::vector<std::string> names;
  for (DType t : types) names.emplace_back(dtype_name(t));
  return join(names);
}

std::string int_list(const std::vector<int>& v) {
  std::vector<std::string> names;
  for (int x : v) names.push_back(std::to_string(x));
  return join(names);
}

// The ladder as a Markdown table, the one README.md carries between its kernel-table markers
// (a test compares the two byte for byte). Only what a rung is, never what a build compiled:
// head dims and KV dtypes are left out because DECODEBENCH_HEAD_DIMS / _KV_DTYPES narrow them,
// and the README must read the same whichever build printed it.
std::string md_cell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string kernels_markdown(const std::vector<kernels::KernelInfo>& ladder) {
  std::string s = "| rung | idea | q/out dtypes | block sizes | GQA group | workspace |\n";
  s += "|---|---|---|---|---|---|\n";
  int rung = 0;
  for (const kernels::KernelInfo& k : ladder) {
    const std::string group = k.max_group > 0 ? "1 to " + std::to_string(k.max_group) : "any";
    s += fmt::format("| v{} `{}` | {} | {} | powers of two ≥ {} | {} | {} |\n", rung++, k.name,
                     md_cell(k.idea), dtype_list(k.q_dtypes), k.min_block_size, group,
                     k.uses_workspace ? "split partials, planned per point" : "none");
  }
  return s;
}

int run_kernels(const KernelsOptions& o) {
  const OutputFormat format = parse_format(o.format);
  const auto& ladder = kernels::kernel_ladder();
  nlohmann::json j = {{"ladder", nlohmann::json::array()}, {"backends", nlohmann::json::object()}};
  std::string table = "The paged-decode ladder (kernels/, each rung adds one idea; this build):\n";
  int rung = 0;
  for (const kernels::KernelInfo& k : ladder) {
    const std::string group = k.max_group > 0 ? "<= " + std::to_string(k.max_group) : "any";
    const std::string blocks = "powers of two >= " + std::to_string(k.min_block_size);
    table += fmt::format("  v{} {}\n", rung++, k.name);
    table += fmt::format("      idea:        {}\n", k.idea);
    table += fmt::format("      head_dim:    {}\n", int_list(k.head_dims));
    table += fmt::format("      kv dtypes:   {}\n", dtype_list(k.kv_dtypes));
    table += fmt::format("      q dtypes:    {}\n", dtype_list(k.q_dtypes));
    table += fmt::format("      block sizes: {}\n", blocks);
    table += fmt::format("      GQA group:   {}{}\n", group,
                         k.uses_workspace ? "; needs a split workspace (planned per point)" : "");
    nlohmann::json entry = {{"name", k.name},           {"idea", k.idea},
                            {"head_dims", k.head_dims}, {"min_block_size", k.min_block_size},
                            {"max_group", k.max_group}, {"uses_workspace", k.uses_workspace}};
    entry["kv_dtypes"] = nlohmann::json::array();
    for (DType t : k.kv_dtypes) entry["kv_dtypes"].push_back(dtype_name(t));
    entry["q_dtypes"] = nlohmann::json::array();
    for (DType t : k.q_dtypes) entry["q_dtypes"].push_back(dtype_name(t));
    j["ladder"].push_back(std::move(entry));
  }
  if (ladder.empty()) table += "  (no paged-decode kernel compiled: see DECODEBENCH_KERNELS)\n";
  table += "\nKernels per backend (`--kernel auto` lets the backend choose per point):\n";
  for (const std::string& name : backend_names()) {
    try {
      const std::vector<std::string> names = make_backend(name)->kernel_names();
      table += fmt::format("  {:<5} {}\n", name, join(names));
      j["backends"][name] = names;
    } catch (const RuntimeFailure& e) {
      // cuda compiled in but no device here: it runs the ladder above when one is present.
      std::vector<std::string> names;
      for (const kernels::KernelInfo& k : ladder) names.push_back(k.name);
      table += fmt::format("  {:<5} {} (no device here: {})\n", name, join(names), e.what());
      j["backends"][name] = names;
    }
  }
  if (format == OutputFormat::json) {
    emit(j.dump(2), "");
  } else if (format == OutputFormat::table) {
    emit(table, "");
  } else if (format == OutputFormat::md) {
    emit(kernels_markdown(ladder), "");
  } else {
    throw InputError("--format: `kernels` prints table, json or md (got " + o.format + ")");
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
  cmd->add_option("--format", o->format, "table or json (csv, md: one row per ceiling)")
      ->capture_default_str();
  cmd->add_option("--out", o->out, "Also write the device record as JSON to this file");
  cmd->callback([o, &exit_code] { exit_code = run_ceilings(*o); });
}

void add_devices_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<DevicesOptions>();
  CLI::App* cmd = app.add_subcommand(
      "devices",
      "List the backends of this build, the device each would use, and the datasheet rows.");
  cmd->add_option("--device", o->device, "CUDA device index");
  cmd->add_option("--format", o->format, "table or json")->capture_default_str();
  cmd->callback([o, &exit_code] { exit_code = run_devices(*o); });
}

void add_kernels_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<KernelsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "kernels",
      "List the kernel ladder of this build: idea, head dims, dtypes, block sizes, GQA "
      "groups, and which backend runs which kernels.");
  cmd->add_option("--format", o->format,
                  "table or json (this build), or md (the ladder as README.md's Markdown table)")
      ->capture_default_str();
  cmd->callback([o, &exit_code] { exit_code = run_kernels(*o); });
}

}  // namespace decodebench::cli
