// decodebench: paged-attention decode benchmark. See README.md "Commands".
//
// Every failure ends here as an exit code, never as an uncaught exception:
//   0 ok   1 wrong results or a regression   2 bad input   3 runtime/device failure
//   130 / 143 a sweep interrupted by SIGINT / SIGTERM (finished points written)
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/errors.h"
#include "results/report.h"

int main(int argc, char** argv) {
  using namespace decodebench;
  int exit_code = kExitOk;
  CLI::App app{
      "decodebench: how fast paged-attention decode runs, and how close it gets to the memory "
      "roofline.\nExit codes: 0 ok, 1 wrong results or regression, 2 bad input, 3 runtime/device "
      "failure, 130/143 interrupted (SIGINT/SIGTERM).",
      "decodebench"};
  app.require_subcommand(1);
  const ToolInfo tool = this_tool();
  app.set_version_flag("--version", tool.name + " " + tool.version + " (" + tool.git_sha + ")");
  try {
    cli::add_sweep_command(app, exit_code);
    cli::add_check_command(app, exit_code);
    cli::add_ceilings_command(app, exit_code);
    cli::add_devices_command(app, exit_code);
    cli::add_kernels_command(app, exit_code);
    cli::add_model_command(app, exit_code);
    cli::add_compare_command(app, exit_code);
    cli::add_merge_command(app, exit_code);
    cli::add_report_command(app, exit_code);
    cli::add_cache_sim_command(app, exit_code);
    cli::add_replay_command(app, exit_code);
    cli::add_quantize_command(app, exit_code);
    cli::add_quant_error_command(app, exit_code);
    if (argc > 1 && argv[1][0] != '-') {
      // CLI11 would say only "a subcommand is required"; name the word and the choices.
      std::string valid;
      bool known = false;
      for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        known |= sub->get_name() == argv[1];
        valid += (valid.empty() ? "" : ", ") + sub->get_name();
      }
      if (!known)
        throw InputError(std::string("unknown command '") + argv[1] + "' (valid: " + valid + ")");
    }
    app.parse(argc, argv);  // runs the chosen subcommand's callback
    return exit_code;
  } catch (const CLI::ParseError& e) {
    // --help and --version print and succeed; every other parse error (a number that does not
    // convert, a missing required option) is bad input, reported as an InputError is.
    if (e.get_exit_code() == 0) return app.exit(e);
    // CLI11 says only "The following argument was not expected"; name the option and the one
    // that was probably meant.
    if (argc > 1) {
      const std::vector<std::string> args(argv + 2, argv + argc);
      for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        if (sub->get_name() != argv[1]) continue;
        const std::string unknown = cli::first_unknown_option(*sub, args);
        if (unknown.empty()) break;
        const std::string nearest = cli::nearest_option(*sub, unknown);
        std::cerr << "decodebench: error: " << argv[1] << ": unknown option " << unknown
                  << (nearest.empty() ? "" : "; did you mean " + nearest + "?") << " (decodebench "
                  << argv[1] << " --help lists the options)\n";
        return kExitBadInput;
      }
    }
    std::cerr << "decodebench: error: " << e.what() << " (--help lists the options)\n";
    return kExitBadInput;
  } catch (const InputError& e) {
    std::cerr << "decodebench: error: " << e.what() << '\n';
    return kExitBadInput;
  } catch (const RuntimeFailure& e) {
    std::cerr << "decodebench: failure: " << e.what() << '\n';
    return kExitRuntimeFailure;
  } catch (const std::exception& e) {
    std::cerr << "decodebench: internal error: " << e.what() << '\n';
    return kExitRuntimeFailure;
  } catch (...) {
    std::cerr << "decodebench: internal error: unknown exception\n";
    return kExitRuntimeFailure;
  }
}
