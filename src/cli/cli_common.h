// Pieces shared by the `decodebench` subcommands: list-valued flags, the sweep axes as flags
// layered over a config file, SIGINT handling and the progress line.
#pragma once

#include <atomic>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/sweep_config.h"
#include "report/format.h"

namespace decodebench::cli {

// "1,8,64" -> {1, 8, 64}. Each parser throws InputError naming the flag and the bad item.
std::vector<std::string> split_list(std::string_view text, std::string_view flag);
std::vector<int> parse_int_list(std::string_view text, std::string_view flag);
std::vector<double> parse_double_list(std::string_view text, std::string_view flag);
// Items as parse_context() takes them ("1024", "8k", "512:4096"); "512-4096" is accepted as a
// spelling of the ragged range "512:4096".
std::vector<ContextSpec> parse_context_list(std::string_view text, std::string_view flag);
std::vector<DType> parse_dtype_list(std::string_view text, std::string_view flag);

// The sweep's axes and measurement settings as flags. Every flag is optional; a flag given on
// the command line replaces that axis of --config (or of the built-in defaults).
struct SweepFlags {
  std::string config;  // --config FILE
  std::string model, batch, context, hit_rate, prefix_groups, kv_dtype, q_dtype, block_size,
      kernel, backend, shard;
  std::uint64_t seed = 0;
  int device = 0;
  double min_time = 0, max_noise = 0, timeout = 0;
  int min_samples = 0, validate_rows = 0;
  bool warm = false;
  // Which were given (CLI11 options, to ask count()).
  std::vector<std::pair<std::string, CLI::Option*>> given;
  CLI::Option* seed_opt = nullptr;
  CLI::Option* min_time_opt = nullptr;
  CLI::Option* max_noise_opt = nullptr;
  CLI::Option* timeout_opt = nullptr;
  CLI::Option* min_samples_opt = nullptr;
  CLI::Option* validate_rows_opt = nullptr;
  CLI::Option* warm_opt = nullptr;
};
// `measure`: also add the measurement flags (sweep yes, check no).
void add_sweep_flags(CLI::App& cmd, SweepFlags& f, bool measure);
// Defaults, then --config, then the flags given. Not yet validate()d.
SweepConfig resolve_sweep_config(const SweepFlags& f);
bool flag_given(const SweepFlags& f, std::string_view name);

// Every name in config.kernels is "auto", "all" or one of `available` (InputError listing them).
void check_kernel_names(const SweepConfig& config, const std::vector<std::string>& available,
                        std::string_view backend);

// --format: table|json|csv|md (InputError listing them).
OutputFormat parse_format(std::string_view s);

// SIGINT: the first sets the flag (the sweep stops after the current point, keeping finished
// ones); a second one ends the process at once with the default action.
std::atomic<bool>& interrupted_flag();
void install_sigint_handler();

// "naive llama-3.1-8b kv=f16 b=8 ctx=8192 h=0.5" for progress and check lines.
std::string point_label(const PointResult& r);
std::string point_label(const SweepPoint& p);

// Writes `text` to `path` (atomically) or, when path is empty, to stdout.
void emit(const std::string& text, const std::string& path);

}  // namespace decodebench::cli
