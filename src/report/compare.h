// Baseline vs current (`decodebench compare`, the CI perf gate).
#pragma once

#include <string>
#include <vector>

#include "report/report.h"

namespace decodebench {

// (Named ReportComparison: reference/reference.h already has a Comparison of two outputs.)
// Points are matched by their identity: kernel_requested, backend, model, kv/q dtype,
// block_size, batch, context, hit_rate, prefix_groups (not by index, so sweeps with different
// axes still compare on their common points).
struct PointComparison {
  std::string key;        // printable identity of the point
  double baseline_s = 0;  // median times
  double current_s = 0;
  double ratio = 0;         // current / baseline: > 1 is slower
  bool regression = false;  // ratio > 1 + max_slowdown
};

struct ReportComparison {
  double max_slowdown = 0;               // e.g. 0.1 = 10 % slower allowed
  std::vector<PointComparison> points;   // matched points ok in both
  std::vector<std::string> regressions;  // keys of slower-than-threshold points
  std::vector<std::string> wrong;        // points wrong or error in the current report
  std::vector<std::string> missing;      // ok in the baseline, absent or not ok in current
  std::vector<std::string> added;        // in the current report only
  // A gate fails on a regression, a wrong point or a missing point.
  bool failed() const { return !regressions.empty() || !wrong.empty() || !missing.empty(); }
};

// Throws InputError for max_slowdown < 0 or reports of different schema versions.
ReportComparison compare_reports(const Report& baseline, const Report& current,
                                 double max_slowdown);
std::string format_comparison(const ReportComparison& c);  // aligned table + a summary line

}  // namespace decodebench
