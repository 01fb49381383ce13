// `decodebench sweep`: run the cartesian product of the axes on one backend, print the results
// and write the JSON report (atomically, and again after every point so a crash, a kill or
// Ctrl-C loses nothing measured); `--resume REPORT` runs only what REPORT lacks.
// docs/design.md "Sweeps that survive".
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <stdlib.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/dump.h"
#include "common/errors.h"
#include "harness/runner.h"
#include "harness/sweep_axes.h"
#include "report/format.h"
#include "report/results_view.h"
#include "results/report.h"
#include "workload/byte_model.h"
#include "workload/layer_model.h"
#include "workload/workload.h"

namespace decodebench::cli {
namespace {

struct SweepOptions {
  SweepFlags flags;
  std::string format = "table";
  std::string out = "results/latest.json";
  std::string dump;
  std::string ceilings;  // --ceilings FILE: reuse what `decodebench ceilings --out FILE` measured
  std::string resume;    // --resume REPORT
  std::string timing;    // --timing graph|eager ("" = graph); not part of the sweep config
  bool quiet = false;
  bool plan = false;                  // --plan: print what would run, run nothing
  CLI::Option* out_option = nullptr;  // whether --out was given (a resume writes REPORT otherwise)
};

// --plan's per-sample figure where nothing better is known: a few cores of a small VM read
// about this much (README's results: 19-27 GB/s on 2 vCPUs).
constexpr double kNominalHostBandwidth = 20e9;

// "4.00 s", "12 min 30 s", "3 h 5 min": a duration as a person plans around it.
std::string duration_text(double s) {
  if (s < 60) return format_seconds(s);
  const auto whole = static_cast<long long>(std::llround(s));
  if (whole < 3600) return fmt::format("{} min {} s", whole / 60, whole % 60);
  return fmt::format("{} h {} min", whole / 3600, whole % 3600 / 60);
}

// "1, 8, 64": an axis' values as the config holds them.
template <class Axis>
std::string axis_values_text(const Axis& axis, const SweepConfig& cfg) {
  std::string out;
  for (const auto& v : cfg.*axis.values) {
    const nlohmann::json j = axis.write_json(v);
    const std::string text = j.is_string()         ? j.get<std::string>()
                             : j.is_number_float() ? fmt::format("{:g}", j.get<double>())
                                                   : j.dump();
    out += (out.empty() ? "" : ", ") + text;
  }
  return out;
}

// --plan: the points this sweep would run and a rough estimate of its time; nothing is run or
// written. The stopping rule's min time counts measured step time only, so per point the loop
// takes max(min samples, min time / step) samples when the noise allows, each costing the step
// plus what makes it cold (Backend::cold_sample_plan: a flush's read, or rotation's paired read
// of one copy), capped by the timeout. Bytes over a bandwidth: --ceilings' measured read, else
// the datasheet's, else a nominal host figure. Points the backend would skip take no time.
// Validation, warm-up and the ceilings' measurement are left out and said so.
void print_plan(const SweepConfig& cfg, Backend& backend, const std::vector<SweepPoint>& points,
                const Report* previous, const std::optional<Ceilings>& ceilings) {
  const DeviceInfo device = backend.device_info();
  double bandwidth = kNominalHostBandwidth;
  std::string bandwidth_source = fmt::format("nominal {}", format_bandwidth(bandwidth));
  if (ceilings && ceilings->read > 0) {
    bandwidth = ceilings->read;
    bandwidth_source = fmt::format("{} measured read (--ceilings)", format_bandwidth(bandwidth));
  } else if (device.bandwidth_datasheet > 0) {
    bandwidth = device.bandwidth_datasheet;
    bandwidth_source = fmt::format("{} datasheet", format_bandwidth(bandwidth));
  }
  TimingOptions timing;
  timing.warm_l2 = cfg.measure.warm_l2;

  std::set<int> finished;  // a resume runs only what its report lacks
  if (previous) {
    for (const PointResult& r : previous->results) {
      if (r.status != PointStatus::not_run) finished.insert(r.index);
    }
  }
  const MeasureOptions& m = cfg.measure;
  int to_run = 0, skipped = 0;
  double eta_s = 0;
  std::map<std::string, int> skip_reasons;
  std::map<ColdMethod, int> by_cold;  // points of each cold method (warm: --warm)
  for (const SweepPoint& p : points) {
    if (finished.count(p.index) > 0) continue;
    ++to_run;
    const PagedLayout layout = build_layout(p.spec);
    const std::string kernel =
        p.kernel == "auto" ? backend.choose_kernel(p.spec, layout) : p.kernel;
    const bool layer = p.scope == Scope::layer;
    std::string skip = backend.skip_reason(p.spec, layout, kernel);
    if (layer && skip.empty()) {
      skip = layer_support_error(p.spec.model, cfg.weights_dtype, p.spec.q_dtype);
      if (skip.empty()) {
        skip = backend.layer_skip_reason(p.spec, layout, kernel, LayerOptions{cfg.weights_dtype});
      }
    }
    if (!skip.empty()) {
      ++skipped;
      ++skip_reasons[skip];
      continue;
    }
    const double bytes =
        layer ? static_cast<double>(layer_model(p.spec, layout, cfg.weights_dtype).bytes_min)
              : static_cast<double>(byte_model(p.spec, layout).min);
    const Backend::ColdSamplePlan cold =
        backend.cold_sample_plan(p.spec, layout, layer, timing, device);
    ++by_cold[cold.method];
    const double step_s = bytes / bandwidth;
    const double samples = std::max(static_cast<double>(m.min_samples),
                                    step_s > 0 ? std::ceil(m.min_time_s / step_s) : 0.0);
    eta_s += std::min(m.timeout_s, samples * (step_s + cold.overhead_bytes / bandwidth));
  }

  std::string out =
      fmt::format("plan: {} points on {} \"{}\"", to_run, backend.name(), device.name);
  if (cfg.shard_count > 1) out += fmt::format(" (shard {}/{})", cfg.shard_index, cfg.shard_count);
  if (previous) {
    out += fmt::format(" ({} of {} already in the report)", points.size() - to_run, points.size());
  }
  if (skipped > 0) out += fmt::format(", {} of them skipped by the backend", skipped);
  out += "\naxes:\n";
  for_each_axis([&](const auto& axis) {
    out += fmt::format("  {:<16} {}\n", axis.flag, axis_values_text(axis, cfg));
  });
  const bool any_layer = std::any_of(points.begin(), points.end(),
                                     [](const SweepPoint& p) { return p.scope == Scope::layer; });
  if (any_layer)
    out += fmt::format("  {:<16} {}\n", "--weights-dtype", dtype_name(cfg.weights_dtype));
  for (const auto& [reason, n] : skip_reasons) out += fmt::format("skipped ({}): {}\n", n, reason);
  out += fmt::format(
      "measure: each point samples until it has >= {} samples over >= {} with noise <= "
      "{:.2f}%, or until its timeout ({}){}\n",
      m.min_samples, format_seconds(m.min_time_s), 100 * m.max_noise, format_seconds(m.timeout_s),
      m.warm_l2 ? ", warm" : "");
  if (!m.warm_l2 && to_run > skipped) {
    std::string methods;
    for (const auto& [method, n] : by_cold) {
      const std::string_view what =
          method == ColdMethod::rotation ? "by rotation (a paired read of one copy per sample)"
          : method == ColdMethod::flush
              ? "by a cache flush (a read of about 2x the last-level cache per sample)"
              : "warm";
      methods += fmt::format("{}{} {}", methods.empty() ? "" : ", ", n, what);
    }
    out += fmt::format("cold samples: {}\n", methods);
  }
  out += fmt::format(
      "ETA: about {} of timing (an estimate: per point min(timeout, max(min samples, min time / "
      "one step) x (one step + {})), one step = the step's bytes / {}; noise may keep a point "
      "sampling up to its timeout)\n",
      duration_text(eta_s),
      m.warm_l2 ? "nothing: warm" : "what makes the sample cold, its bytes at the same bandwidth",
      bandwidth_source);
  out += fmt::format(
      "not counted, and often longer on a CPU: validation against the CPU reference and the "
      "warm-up run of each point{}\n",
      ceilings || (previous && !previous->devices.empty() && previous->devices[0].measured.read > 0)
          ? ""
          : ", the ceilings' measurement at the start (--ceilings FILE reuses one)");
  if (backend.name() == "emu") {
    out +=
        "note: backend emu runs the CUDA kernels in an emulator, far slower than this "
        "estimate\n";
  }
  out += "nothing was run (--plan)\n";
  emit(out, "");
}

bool any_config_given(const SweepFlags& f) {
  if (!f.config.empty()) return true;
  for (const auto& b : f.bound) {
    if (b.option->count() > 0) return true;
  }
  return false;
}

// Where the run stands at its end, for the exit code and the last lines on stderr.
struct Ending {
  std::string out;          // the report's path ('' for none)
  std::string write_error;  // a report write that failed (the sweep stopped there)
};

// Writes the final report and prints the results; returns the exit code. Shared by the normal
// end and the abandon path (a stop that a stuck call did not heed).
int finish(const Report& report, Ending& e, const SweepOptions& o, OutputFormat format) {
  if (e.write_error.empty()) {
    try {
      write_report(e.out, report);
    } catch (const RuntimeFailure& err) {
      e.write_error = err.what();
    }
  }
  emit(format_results(report, format), "");
  const int finished = points_finished(report);
  const int planned = report.completion.points_planned;
  if (!e.write_error.empty()) {
    std::cerr << fmt::format(
        "failure: {}\nthe sweep stopped there: {} of {} points finished (the output above has "
        "them)\n",
        e.write_error, finished, planned);
    return kExitRuntimeFailure;
  }
  if (!e.out.empty() && !o.quiet) std::cerr << "report written to " << e.out << '\n';
  if (report.completion.state == Completion::State::interrupted || interrupt_signal() != 0) {
    const int sig = interrupt_signal().load();
    std::cerr << fmt::format("interrupted{}: {} of {} points finished{}\n",
                             sig == SIGTERM  ? " (SIGTERM)"
                             : sig == SIGINT ? " (SIGINT)"
                                             : "",
                             finished, planned,
                             e.out.empty() || finished == planned
                                 ? ""
                                 : fmt::format("; the rest: decodebench sweep --resume {}", e.out));
    return interrupted_exit_code();
  }
  return -1;  // not decided here
}

int run(const SweepOptions& o) {
  const OutputFormat format = parse_format(o.format);
  std::optional<Report> previous;
  if (!o.resume.empty()) previous = read_report(o.resume);
  // A resume reruns the report's own config unless the command gives one (then they must match).
  SweepConfig cfg = previous && !any_config_given(o.flags)
                        ? sweep_config_from_json(previous->config, o.resume)
                        : resolve_sweep_config(o.flags);
  validate(cfg);
  // Checked before the backend starts: a bad value fails fast, without a GPU.
  const WarmTiming warm_timing = o.timing.empty() ? WarmTiming::graph : parse_warm_timing(o.timing);
  if (!o.timing.empty() && !cfg.measure.warm_l2) {
    // A cold sample times one step after its own flush: nothing to replay as a graph.
    throw InputError("--timing chooses how --warm samples launch their steps; add --warm");
  }
  std::unique_ptr<Backend> backend = make_backend(cfg.backend, o.flags.device);
  backend->set_warm_timing(warm_timing);
  cfg.backend = backend->name();  // the report records what "auto" resolved to

  // Bad model or kernel names fail here, before the ceilings take their seconds.
  check_kernel_names(cfg.kernels, *backend);
  const std::vector<SweepPoint> points = expand(cfg, backend->kernel_names());
  if (!o.dump.empty()) {
    if (points.size() != 1) {
      throw InputError(fmt::format(
          "--dump writes one point, but this sweep has {} points; give one value per axis "
          "(--model, --batch, --context, --hit-rate, --kv-dtype, --kernel, ...)",
          points.size()));
    }
  }
  if (o.plan) {
    // Nothing is created or written: the output checks below make directories.
    for (const SweepPoint& p : points) validate(p.spec);
    if (previous) check_resumable(*previous, cfg, backend->device_info(), points, backend->name());
    std::optional<Ceilings> ceilings;
    if (!o.ceilings.empty()) ceilings = load_ceilings(o.ceilings, *backend);
    print_plan(cfg, *backend, points, previous ? &*previous : nullptr, ceilings);
    return kExitOk;
  }
  Ending ending;
  ending.out = previous && o.out_option->count() == 0 ? o.resume : o.out;
  // Every output is checked before anything is measured.
  check_output_file(ending.out, "--out");
  check_output_dir(o.dump, "--dump");
  if (previous) {
    // Before the first byte is written: a report of another sweep is refused unchanged.
    check_resumable(*previous, cfg, backend->device_info(), points, backend->name());
  }
  if (backend->name() == "emu") {
    std::cerr << "note: backend emu runs the CUDA kernels in the SIMT emulator on the CPU: slow, "
                 "for correctness only; its timings are not GPU timings\n";
  }

  install_stop_handlers();
  RunOptions run_options;
  run_options.interrupted = &interrupted_flag();
  int kept = 0;
  if (previous) kept = points_finished(*previous);
  if (!o.quiet) {
    // The config the report will carry, so the marks match the table's.
    run_options.progress = [kept, config = to_json(cfg), max_noise = cfg.measure.max_noise](
                               int done, int total, double elapsed_s, const PointResult& r) {
      print_progress(done, kept, total, elapsed_s, r, config, max_noise);
    };
  }
  if (!o.ceilings.empty()) run_options.ceilings = load_ceilings(o.ceilings, *backend);
  run_options.resume = previous ? &*previous : nullptr;
  run_options.checkpoint = [&](const Report& partial) {
    if (!ending.write_error.empty()) return;
    try {
      write_report(ending.out, partial);
    } catch (const RuntimeFailure& e) {
      // The previous file is intact (atomic write); measuring on would only lose more.
      ending.write_error = e.what();
      interrupted_flag() = true;
    }
  };
  run_options.abandon = [&](const Report& r) {
    int code = kExitRuntimeFailure;
    try {
      code = finish(r, ending, o, format);
    } catch (...) {
    }
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(code < 0 ? interrupted_exit_code() : code);  // the stuck call is not waited for
  };

  const Report report = run_sweep(*backend, cfg, run_options);
  if (const int code = finish(report, ending, o, format); code >= 0) return code;

  if (!o.dump.empty() && !report.results.empty()) {
    write_dump(o.dump, *backend, points.front(), report.results.front());
    if (!o.quiet) std::cerr << "dump written to " << o.dump << '\n';
  }

  return results_exit_code(report);
}

}  // namespace

void add_sweep_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "Run a sweep (the cartesian product of the axes), validate each point against the CPU "
      "reference, time it, print the results and write the JSON report. One progress line per "
      "point goes to stderr. Ctrl-C or SIGTERM stops within a sample and keeps the finished "
      "points (exit 130 / 143); a second one ends the process at once. --resume REPORT runs "
      "only the points REPORT lacks.");
  add_sweep_flags(*cmd, o->flags, /*measure=*/true);
  add_format_option(*cmd, o->format, "table, json, csv or md");
  o->out_option = add_out_option(*cmd, o->out,
                                 "the report, checkpointed after each point (with --resume: "
                                 "REPORT); '' for none")
                      ->capture_default_str();
  cmd->add_option("--resume", o->resume,
                  "Resume the sweep that wrote REPORT (interrupted, killed or stopped at a "
                  "device failure): run only its missing and not_run points, after checking "
                  "that the config, build and device are the same");
  cmd->add_option(
      "--dump", o->dump,
      "Directory: write the single point's inputs, output and reference as .npy plus meta.json");
  add_ceilings_option(*cmd, o->ceilings);
  cmd->add_option("--timing", o->timing,
                  "With --warm, how a sample's steps are launched: graph (a CUDA graph of them, "
                  "the default; plain launches where capture fails) or eager (plain launches). "
                  "The report's timing.method says which ran; cpu and emu ignore it");
  cmd->add_flag("--quiet,-q", o->quiet, "No progress lines on stderr");
  cmd->add_flag("--plan", o->plan,
                "Run nothing: print the points the sweep would run (their count, each axis' "
                "values), how each point's samples are made cold, and an ETA, then exit 0. The "
                "ETA is an estimate: per point min(timeout, max(min samples, min time / one step) "
                "x (one step + what makes a sample cold: a flush's read, or rotation's read of "
                "one copy)), bytes over a bandwidth (--ceilings' read, the datasheet's, or a "
                "nominal 20 GB/s); validation, warm-up and the ceilings' measurement are not "
                "counted");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace decodebench::cli
