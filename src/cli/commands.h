// The subcommands of `decodebench`. Each add_*_command registers its CLI11 subcommand; when that
// subcommand runs, its callback stores the process exit code in `exit_code` (README.md "Commands":
// 0 ok, 1 wrong results or a regression, 2 bad input, 3 runtime/device failure). Errors are thrown
// as InputError / RuntimeFailure and mapped to codes by main().
#pragma once

#include <CLI/CLI.hpp>

namespace decodebench::cli {

void add_sweep_command(CLI::App& app, int& exit_code);
void add_check_command(CLI::App& app, int& exit_code);
void add_ceilings_command(CLI::App& app, int& exit_code);
void add_devices_command(CLI::App& app, int& exit_code);
void add_kernels_command(CLI::App& app, int& exit_code);
void add_model_command(CLI::App& app, int& exit_code);
void add_compare_command(CLI::App& app, int& exit_code);
void add_merge_command(CLI::App& app, int& exit_code);
void add_report_command(CLI::App& app, int& exit_code);
void add_cache_sim_command(CLI::App& app, int& exit_code);
void add_replay_command(CLI::App& app, int& exit_code);
void add_quantize_command(CLI::App& app, int& exit_code);
void add_quant_error_command(CLI::App& app, int& exit_code);

// SIGINT or SIGTERM during a sweep: finished points are written, then the process exits with
// 128 + the signal (130, 143), the shell's convention for "ended by that signal"
// (interrupted_exit_code(), cli_common.h).

}  // namespace decodebench::cli
