// `decodebench sweep`: run the cartesian product of the axes on one backend, print the results
// and write the JSON report (atomically, and again after every point so a crash or Ctrl-C
// loses nothing measured).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/dump.h"
#include "common/errors.h"
#include "harness/runner.h"
#include "report/report.h"

namespace decodebench::cli {
namespace {

struct SweepOptions {
  SweepFlags flags;
  std::string format = "table";
  std::string out = "results/latest.json";
  std::string dump;
  std::string ceilings;  // --ceilings FILE: reuse what `decodebench ceilings --out FILE` measured
  bool quiet = false;
};

// Ceilings measured earlier on this same device (`decodebench ceilings --out FILE`), so a series
// of sweeps or shards on one machine measures them once. The file must name this backend and
// device: ceilings of another device would make every roofline fraction wrong.
Ceilings load_ceilings(const std::string& file, Backend& backend) {
  std::ifstream in(file);
  if (!in) throw InputError(file + ": cannot open the ceilings file (--ceilings)");
  DeviceRecord rec;
  try {
    rec = device_record_from_json(nlohmann::json::parse(in));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(file +
                     ": not a device record written by `decodebench ceilings --out`: " + e.what());
  } catch (const InputError& e) {
    throw InputError(file + ": " + e.what());
  }
  const DeviceInfo here = backend.device_info();
  if (rec.backend != here.backend || rec.name != here.name) {
    throw InputError(
        fmt::format("{}: ceilings were measured on {} '{}', this sweep runs on {} '{}'", file,
                    rec.backend, rec.name, here.backend, here.name));
  }
  return rec.measured;
}

// One line per finished point on stderr: "[3/12] elapsed 4.1 s, ETA 12 s — gqa llama... ok".
// One line per point (not a \r-updated line) so logs of CI jobs and Slurm arrays read well.
void print_progress(int done, int total, double elapsed_s, const PointResult& r) {
  const double eta = done > 0 ? elapsed_s / done * (total - done) : 0;
  std::string result(status_name(r.status));
  if (r.status == PointStatus::ok) {
    result += fmt::format(" {}", format_seconds(r.time_s.median));
  } else if (!r.reason.empty()) {
    result += ": " + r.reason;
  }
  std::cerr << fmt::format("[{}/{}] elapsed {:.1f} s, ETA {:.0f} s \u2014 {}: {}\n", done, total,
                           elapsed_s, eta, point_label(r), result);
}

void write_report(const std::string& out, const Report& r) {
  if (out.empty()) return;
  const std::filesystem::path path(out);
  if (path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec)
      throw RuntimeFailure("cannot create " + path.parent_path().string() + ": " + ec.message());
  }
  write_report_atomic(path, r);
}

int run(const SweepOptions& o) {
  const OutputFormat format = parse_format(o.format);
  SweepConfig cfg = resolve_sweep_config(o.flags);
  validate(cfg);
  std::unique_ptr<Backend> backend = make_backend(cfg.backend, o.flags.device);
  cfg.backend = backend->name();  // the report records what "auto" resolved to

  // Bad model or kernel names fail here, before the ceilings take their seconds.
  check_kernel_names(cfg, backend->kernel_names(), backend->name());
  const std::vector<SweepPoint> points = expand(cfg, backend->kernel_names());
  if (!o.dump.empty()) {
    if (points.size() != 1) {
      throw InputError(fmt::format(
          "--dump writes one point, but this sweep has {} points; give one value per axis "
          "(--model, --batch, --context, --hit-rate, --kv-dtype, --kernel, ...)",
          points.size()));
    }
  }
  if (backend->name() == "emu") {
    std::cerr << "note: backend emu runs the CUDA kernels in the SIMT emulator on the CPU: slow, "
                 "for correctness only; its timings are not GPU timings\n";
  }

  install_sigint_handler();
  RunOptions run_options;
  run_options.interrupted = &interrupted_flag();
  if (!o.quiet) run_options.progress = print_progress;
  if (!o.ceilings.empty()) run_options.ceilings = load_ceilings(o.ceilings, *backend);
  run_options.checkpoint = [&](const Report& partial) { write_report(o.out, partial); };

  const Report report = run_sweep(*backend, cfg, run_options);
  write_report(o.out, report);
  emit(format_results(report, format), "");
  if (!o.out.empty() && !o.quiet) std::cerr << "report written to " << o.out << '\n';

  if (!o.dump.empty() && !report.results.empty()) {
    write_dump(o.dump, *backend, points.front(), report.results.front());
    if (!o.quiet) std::cerr << "dump written to " << o.dump << '\n';
  }

  if (report.completion.state == Completion::State::interrupted) {
    std::cerr << "interrupted: " << report.results.size() << " finished points kept\n";
    return kExitInterrupted;
  }
  bool wrong = false, error = false;
  for (const PointResult& r : report.results) {
    wrong |= r.status == PointStatus::wrong;
    error |= r.status == PointStatus::error;
  }
  if (wrong) return kExitWrongOrRegression;
  if (error || report.completion.state == Completion::State::device_failure) {
    if (!report.completion.reason.empty())
      std::cerr << "failure: " << report.completion.reason << '\n';
    return kExitRuntimeFailure;
  }
  return kExitOk;
}

}  // namespace

void add_sweep_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "Run a sweep (the cartesian product of the axes), validate each point against the CPU "
      "reference, time it, print the results and write the JSON report. One progress line per "
      "point goes to stderr. Ctrl-C stops after the current point and keeps the finished ones.");
  add_sweep_flags(*cmd, o->flags, /*measure=*/true);
  cmd->add_option("--format", o->format, "Output on stdout: table, json, csv, md")
      ->capture_default_str();
  cmd->add_option(
         "--out", o->out,
         "JSON report path (written atomically, checkpointed after each point); '' for none")
      ->capture_default_str();
  cmd->add_option(
      "--dump", o->dump,
      "Directory: write the single point's inputs, output and reference as .npy plus meta.json");
  cmd->add_option("--ceilings", o->ceilings,
                  "Reuse the ceilings `decodebench ceilings --out FILE` measured on this device "
                  "instead of measuring them again");
  cmd->add_flag("--quiet,-q", o->quiet, "No progress lines on stderr");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace decodebench::cli
