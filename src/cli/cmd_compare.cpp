// `decodebench compare`: a report against a baseline, point by point (the performance gate).
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/errors.h"
#include "report/compare.h"
#include "results/report.h"

namespace decodebench::cli {
namespace {

struct CompareArgs {
  std::string baseline, current;
  CompareOptions options;
  std::string format = "table";
  std::string out;  // the verdicts as JSON
};

int run_compare(const CompareArgs& a) {
  const CompareFormat format = parse_compare_format(a.format);
  check_output_file(a.out, "--out");
  const Report baseline = read_report(a.baseline);
  const Report current = read_report(a.current);
  note_if_partial(baseline, a.baseline, "only its finished points are compared");
  note_if_partial(current, a.current,
                  "only the common finished points are compared, its unfinished ones are "
                  "MISSING");
  ReportComparison c = compare_reports(baseline, current, a.options);
  c.baseline.path = a.baseline;
  c.current.path = a.current;
  const std::string text = format_comparison(c, format);
  std::cout << text;
  std::cout.flush();
  if (!a.out.empty()) write_text_atomic(a.out, format_comparison(c, CompareFormat::json));
  return c.failed() ? kExitWrongOrRegression : kExitOk;
}

}  // namespace

void add_compare_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Compare a report against a baseline, point by point (matched by identity, not index), "
      "from the recorded samples: a Mann-Whitney U test and a bootstrap interval of the median "
      "ratio, on the raw times and, where both reports paired each sample with a read bandwidth, "
      "on time x bandwidth (docs/design.md \"Comparing two reports\"). Exit 1 when a point is "
      "SLOWER, wrong, error or missing (or AMBIGUOUS with --fail-on-ambiguous); 2 when the "
      "reports come from different devices, hosts or schemas.");
  cmd->add_option("baseline", a->baseline, "Baseline report (JSON)")->required();
  cmd->add_option("current", a->current, "New report (JSON)")->required();
  cmd->add_option("--threshold", a->options.threshold,
                  "Smallest change of the median that counts, as a fraction (0.05 = 5 %)")
      ->capture_default_str();
  cmd->add_option("--alpha", a->options.alpha,
                  "Significance level of the test; intervals at confidence 1 - alpha")
      ->capture_default_str();
  add_format_option(*cmd, a->format, "table, md (a pull-request comment) or json");
  add_out_option(*cmd, a->out, "the verdicts (what --format json prints)");
  cmd->add_flag("--allow-mismatch", a->options.allow_mismatch,
                "Compare reports of different devices, host classes or schema versions (the "
                "output lists what differs)");
  cmd->add_flag("--fail-on-ambiguous", a->options.fail_on_ambiguous,
                "Exit 1 also when a point is AMBIGUOUS");
  cmd->callback([a, &exit_code] { exit_code = run_compare(*a); });
}

}  // namespace decodebench::cli
