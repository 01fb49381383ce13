// `decodebench merge`: shard reports into one (docs/design.md "Scale-out").
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "backends/backend.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/errors.h"
#include "harness/runner.h"
#include "harness/sweep_config.h"
#include "results/merge.h"
#include "results/report.h"

namespace decodebench::cli {
namespace {

struct MergeArgs {
  std::string out;                 // --out FILE
  std::vector<std::string> files;  // the shard reports; without --out the first is OUT
  bool allow_partial = false;
};

// The full sweep of a shard's config as not_run entries, for naming the points of missing
// shards; empty when it cannot be expanded here (a model file or a backend this machine lacks).
std::vector<PointResult> planned_points(const Report& shard, const std::string& source) {
  try {
    nlohmann::json j = shard.config;
    j["shard"] = "0/1";
    const SweepConfig cfg = sweep_config_from_json(j, source);
    std::vector<std::string> kernels;
    for (const std::string& k : cfg.kernels) {
      if (k == "all") kernels = make_backend(cfg.backend)->kernel_names();
    }
    std::vector<PointResult> out;
    for (const SweepPoint& p : expand(cfg, kernels)) out.push_back(not_run_result(p, cfg.backend));
    return out;
  } catch (const std::exception& e) {
    std::cerr << fmt::format(
        "note: the missing shards' points are not listed one by one (cannot expand the config "
        "here: {})\n",
        e.what());
    return {};
  }
}

int run_merge(const MergeArgs& given) {
  MergeArgs a = given;
  // `merge OUT IN...`, the form before --out, is still read so scripts written for it run.
  if (a.out.empty()) {
    if (a.files.size() < 2) {
      throw InputError("merge: --out FILE is required (the merged report to write)");
    }
    a.out = a.files.front();
    a.files.erase(a.files.begin());
  }
  const std::vector<std::string>& inputs = a.files;
  std::vector<Report> shards;
  for (const std::string& in : inputs) shards.push_back(read_report(in));
  MergeOptions options;
  options.allow_partial = a.allow_partial;
  options.names = inputs;
  options.planned_points = [&] { return planned_points(shards.at(0), inputs.at(0)); };
  const Report merged = merge_reports(shards, options);
  write_report_atomic(a.out, merged);
  std::cout << fmt::format("merged {} reports, {} of {} points finished -> {}\n", shards.size(),
                           points_finished(merged), merged.results.size(), a.out);
  note_if_partial(merged, a.out, "its not_run points are the ones missing");
  return kExitOk;
}

}  // namespace

void add_merge_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<MergeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "merge",
      "Merge the reports of the shards of one sweep (--shard i/n) into the --out report. The "
      "set must be whole: shards 0..n-1 of one n, each once and each complete; else exit 2 "
      "naming what is missing.");
  add_out_option(*cmd, o->out, "the merged report");
  cmd->add_option("inputs", o->files, "Shard reports")->required();
  cmd->add_flag("--allow-partial", o->allow_partial,
                "Merge an incomplete set anyway: the merged report's completion is partial and "
                "lists the missing points as not_run");
  cmd->callback([o, &exit_code] { exit_code = run_merge(*o); });
}

}  // namespace decodebench::cli
