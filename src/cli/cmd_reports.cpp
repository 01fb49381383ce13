// `decodebench compare | merge`: work on reports, never on kernels.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.h"
#include "common/errors.h"
#include "report/compare.h"
#include "report/report.h"

namespace decodebench::cli {
namespace {

struct CompareOptions {
  std::string baseline, current;
  double max_slowdown = 0.05;
};

int run_compare(const CompareOptions& o) {
  const Report baseline = read_report(o.baseline);
  const Report current = read_report(o.current);
  const ReportComparison c = compare_reports(baseline, current, o.max_slowdown);
  std::cout << format_comparison(c);
  return c.failed() ? kExitWrongOrRegression : kExitOk;
}

struct MergeOptions {
  std::string out;
  std::vector<std::string> inputs;
};

int run_merge(const MergeOptions& o) {
  std::vector<Report> shards;
  for (const std::string& in : o.inputs) shards.push_back(read_report(in));
  const Report merged = merge_reports(shards);
  write_report_atomic(o.out, merged);
  std::cout << fmt::format("merged {} reports, {} points -> {}\n", shards.size(),
                           merged.results.size(), o.out);
  return kExitOk;
}

}  // namespace

void add_compare_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Compare a report against a baseline, point by point (matched by identity, not index). "
      "Exit 1 when a point is slower than the baseline by more than --max-slowdown, wrong, or "
      "missing.");
  cmd->add_option("baseline", o->baseline, "Baseline report (JSON)")->required();
  cmd->add_option("current", o->current, "New report (JSON)")->required();
  cmd->add_option("--max-slowdown", o->max_slowdown,
                  "Allowed slowdown of the median time as a fraction (0.05 = 5 %)")
      ->capture_default_str();
  cmd->callback([o, &exit_code] { exit_code = run_compare(*o); });
}

void add_merge_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<MergeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "merge", "Merge the reports of the shards of one sweep (--shard i/n) into OUT.");
  cmd->add_option("out", o->out, "Merged report to write (atomically)")->required();
  cmd->add_option("inputs", o->inputs, "Shard reports")->required();
  cmd->callback([o, &exit_code] { exit_code = run_merge(*o); });
}

}  // namespace decodebench::cli
