// `decodebench compare | merge`: work on reports, never on kernels.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "backends/backend.h"
#include "cli/commands.h"
#include "common/errors.h"
#include "harness/runner.h"
#include "harness/sweep_config.h"
#include "report/compare.h"
#include "results/merge.h"
#include "results/report.h"

namespace decodebench::cli {
namespace {

struct CompareArgs {
  std::string baseline, current;
  CompareOptions options;
  std::string format = "table";
  std::string out;  // also write the formatted output here (atomically)
};

// "note: FILE is partial: ..." on stderr for a report that is not whole (report.h partial_note).
void note_if_partial(const Report& r, const std::string& path, std::string_view consequence) {
  const std::string note = partial_note(r);
  if (!note.empty())
    std::cerr << fmt::format("note: {} is partial: {}; {}\n", path, note, consequence);
}

int run_compare(const CompareArgs& a) {
  const CompareFormat format = parse_compare_format(a.format);
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
  if (!a.out.empty()) write_text_atomic(a.out, text);
  return c.failed() ? kExitWrongOrRegression : kExitOk;
}

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
  cmd->add_option("--format", a->format, "table | md (a pull-request comment) | json")
      ->capture_default_str();
  cmd->add_option("--out", a->out, "Also write the formatted output to FILE (atomically)");
  cmd->add_flag("--allow-mismatch", a->options.allow_mismatch,
                "Compare reports of different devices, host classes or schema versions (the "
                "output lists what differs)");
  cmd->add_flag("--fail-on-ambiguous", a->options.fail_on_ambiguous,
                "Exit 1 also when a point is AMBIGUOUS");
  cmd->callback([a, &exit_code] { exit_code = run_compare(*a); });
}

void add_merge_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<MergeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "merge",
      "Merge the reports of the shards of one sweep (--shard i/n) into the --out report. The "
      "set must be whole: shards 0..n-1 of one n, each once and each complete; else exit 2 "
      "naming what is missing.");
  cmd->add_option("--out", o->out, "Merged report to write (atomically)");
  cmd->add_option("inputs", o->files, "Shard reports")->required();
  cmd->add_flag("--allow-partial", o->allow_partial,
                "Merge an incomplete set anyway: the merged report's completion is partial and "
                "lists the missing points as not_run");
  cmd->callback([o, &exit_code] { exit_code = run_merge(*o); });
}

}  // namespace decodebench::cli
