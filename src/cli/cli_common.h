// Pieces shared by the `decodebench` subcommands: list-valued flags, the sweep axes as flags
// layered over a config file, SIGINT/SIGTERM handling and the progress line.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "backends/backend.h"
#include "backends/datasheet.h"  // LinkDatasheet
#include "common/units.h"        // or_na
#include "harness/sweep_axes.h"
#include "harness/sweep_config.h"
#include "report/format.h"
#include "results/report.h"
#include "trace/cache_sim.h"  // ReloadPolicy

namespace decodebench::cli {

// The list parsers the axis flags use (harness/sweep_axes.h), also for other subcommands' flags.
using decodebench::parse_context_list;
using decodebench::parse_double_list;
using decodebench::parse_dtype_list;
using decodebench::parse_int_list;
using decodebench::split_list;

// The sweep's axes and settings as flags, one per entry of kAxes and kSettings
// (harness/sweep_axes.h). Every flag is optional; a flag given on the command line replaces that
// axis or setting of --config (or of the built-in defaults).
struct SweepFlags {
  std::string config;  // --config FILE
  int device = 0;      // --device (not part of the sweep config)
  struct Bound {
    std::string flag;       // "--batch"
    bool workload = false;  // an axis that shapes the workload (not --kernel, not a setting)
    CLI::Option* option = nullptr;
    std::function<void(SweepConfig&)> apply;  // writes the flag's value into a config
  };
  std::vector<Bound> bound;  // in the order the tables list them
};
// `measure`: also add the measurement flags (settings of the "measure" group; sweep yes, check
// no).
void add_sweep_flags(CLI::App& cmd, SweepFlags& f, bool measure);
// Only the measurement flags (the settings of the "measure" group: --min-time, --max-noise,
// --min-samples, --timeout, --warm), for a command that runs sweep points of its own making.
void add_measure_flags(CLI::App& cmd, SweepFlags& f);
// Writes the flags given (and only those) into `c`.
void apply_given_flags(const SweepFlags& f, SweepConfig& c);
// Defaults, then --config, then the flags given. Not yet validate()d.
SweepConfig resolve_sweep_config(const SweepFlags& f);
bool flag_given(const SweepFlags& f, std::string_view name);
// Whether a flag of an axis that shapes the workload (any axis but --kernel) was given.
bool workload_axis_given(const SweepFlags& f);

// "note: FILE is partial: ...; CONSEQUENCE" on stderr for a report that is not whole
// (results/report.h partial_note).
void note_if_partial(const Report& r, const std::string& path, std::string_view consequence);

// --format: table|json|csv|md (InputError listing them).
OutputFormat parse_format(std::string_view s);

// The one command language (README.md "Commands"): --out FILE is always the command's JSON
// document, written atomically, and --format always what stdout prints. Every command adds them
// through these, so none words them its own way (a test holds each --help to README).
CLI::Option* add_out_option(CLI::App& cmd, std::string& out, std::string_view what);
CLI::Option* add_format_option(CLI::App& cmd, std::string& format, std::string_view choices);
// An old spelling kept for one release: hidden from --help, it sets `target` and says the new
// name on stderr, so a script that uses it keeps working and learns the new one.
void add_renamed_option(CLI::App& cmd, const std::string& old_name, const std::string& new_name,
                        std::string& target);
// The long option of `cmd` nearest to `word` ("--kv-dtypes" -> "--kv-dtype"), "" when none is
// close enough to be a likely typo.
std::string nearest_option(const CLI::App& cmd, std::string_view word);
// The first "--name" in `args` that `cmd` does not know, "" when all are known.
std::string first_unknown_option(const CLI::App& cmd, const std::vector<std::string>& args);

// SIGINT and SIGTERM: the first sets the flag and records the signal (the sweep stops within a
// sample, keeping finished points); a second one ends the process at once with the signal's
// default action.
std::atomic<bool>& interrupted_flag();
std::atomic<int>& interrupt_signal();  // the first signal received, 0 before any
int interrupted_exit_code();           // 128 + that signal: 130 for SIGINT, 143 for SIGTERM
void install_stop_handlers();

// Ceilings measured earlier on this same device (`decodebench ceilings --out FILE`, a command's
// --ceilings FILE), so a series of sweeps or shards on one machine measures them once. The file
// must name this backend and device: ceilings of another device would make every roofline
// fraction wrong. InputError naming the file otherwise.
Ceilings load_ceilings(const std::string& file, Backend& backend);
// --ceilings FILE, as every measuring command (sweep, replay, quant-error) takes it.
CLI::Option* add_ceilings_option(CLI::App& cmd, std::string& file);

// The one progress line of every command that measures points, on stderr:
// "[3/12] elapsed 4.1 s, ETA 12 s — gqa llama... ok*~ 1.20 ms". One line per finished point (not a
// \r-updated line) so logs of CI jobs and Slurm arrays read well. `kept`: points a resumed sweep
// took from its report (not part of the rate). The status is the table's (status_text), judged
// by the run's config.
void print_progress(int done, int kept, int total, double elapsed_s, const PointResult& r,
                    const nlohmann::json& config, double max_noise);

// "naive llama-3.1-8b kv=f16 b=8 ctx=8192 h=0.5" for progress and check lines.
std::string point_label(const PointResult& r);
std::string point_label(const SweepPoint& p);

// Writes `text` to `path` (atomically) or, when path is empty, to stdout.
void emit(const std::string& text, const std::string& path);

// A finished run's exit code from its points: 1 when one is wrong, else 3 (the completion's
// reason on stderr) when one is an error or a device failed, else 0.
int results_exit_code(const Report& report);

// Writes the report to `out` atomically, creating its directory; nothing for an empty path.
// RuntimeFailure naming the path when it cannot.
void write_report(const std::string& out, const Report& r);
// Before anything is measured: `dir` exists (created if need be) and a file can be created in
// it, which is what the atomic writes need. InputError naming the flag, the path and why.
void check_can_create_in(const std::filesystem::path& dir, std::string_view flag,
                         const std::string& path);
// An output file flag's value can be written: not a directory, its directory writable.
void check_output_file(const std::string& path, std::string_view flag);
// An output directory flag's value: a directory (created if need be) a file can be created in.
void check_output_dir(const std::string& path, std::string_view flag);

// The host tier's options of cache-sim and replay: --host-capacity (tokens, a list, 0: none),
// --link (configs/devices.json "links" keys, a list), --reload-policy (a list) and
// --link-overhead (seconds per transfer), checked together: a link or a reload policy other than
// always needs a host tier, and a reload policy other than always a link to price it.
struct TierOptions {
  std::vector<double> host_capacities;
  std::vector<LinkDatasheet> links;  // empty: bytes only
  std::vector<ReloadPolicy> reloads;
  double link_overhead_s = 0;
};
TierOptions parse_tier_options(const std::string& host_capacity, const std::string& link,
                               const std::string& reload, double link_overhead_s);

}  // namespace decodebench::cli
