// Baseline vs current (`decodebench compare`, the perf gate): each matched point's recorded
// samples decide whether it got slower, faster, stayed the same, or cannot be told
// (docs/design.md "Comparing two reports"; the statistics are in significance.h).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/significance.h"
#include "results/report.h"

namespace decodebench {

struct CompareOptions {
  double threshold = 0.05;         // a change smaller than 5 % is SAME
  double alpha = 0.05;             // significance level; intervals at confidence 1 - alpha
  bool allow_mismatch = false;     // compare reports of different devices / hosts / schemas
  bool fail_on_ambiguous = false;  // AMBIGUOUS fails the gate too
};

// What the output says about each input report.
struct ReportSide {
  std::string path;  // as given on the command line; empty for reports built in memory
  std::string git_sha, created;
  std::vector<std::string> devices;  // "backend name" of each devices[] entry
  std::string host_cpu;
  int cpu_threads = 0;
};
ReportSide describe_report(const Report& r, std::string path = "");

// (Named ReportComparison: reference/reference.h already has a Comparison of two outputs.)
// Points are matched by point_identity() (not by index, so sweeps with different axes still
// compare on their common points).
struct PointComparison {
  std::string key;    // point_identity()
  PointResult point;  // the current report's point, samples dropped: what the output names
  double baseline_median_s = 0, current_median_s = 0;  // time_s.median of each
  SpaceComparison raw;                                 // on the time samples
  // On sample_i * paired_read_samples_i (seconds x B/s of that moment: bytes-equivalent), when
  // both reports have paired samples for the point.
  std::optional<SpaceComparison> normalized;
  Verdict verdict = Verdict::ambiguous;
  std::string decided_by;  // "raw", "normalized" or "both"
  std::string reason;      // why AMBIGUOUS without a test (e.g. "no samples"); else empty
  // The space whose ratio, interval and p the output shows first: the deciding one (raw for
  // "both").
  const SpaceComparison& deciding() const {
    return decided_by == "normalized" && normalized ? *normalized : raw;
  }
};

// Geometric mean of the raw median ratios of the compared points.
struct GeomeanChange {
  std::string kernel;  // empty for all points
  double ratio = 1;
  int points = 0;
};

struct MissingPoint {
  std::string key, why;
};
struct WrongPoint {
  std::string key, status, reason;
};

struct ReportComparison {
  CompareOptions options;
  ReportSide baseline, current;
  std::vector<std::string> mismatches;  // non-empty only with allow_mismatch
  std::vector<PointComparison> points;  // matched points ok in both, by key
  GeomeanChange geomean_all;
  std::vector<GeomeanChange> geomean_by_kernel;  // by the current report's resolved kernel
  std::array<int, 4> counts{};                   // indexed by Verdict
  std::vector<std::string> added;                // ok now, nothing ok to compare to before
  std::vector<MissingPoint> missing;             // ok in the baseline, absent or skipped now
  std::vector<WrongPoint> wrong;                 // wrong or error in the current report
  int count(Verdict v) const { return counts[static_cast<std::size_t>(v)]; }
  // The gate fails on a SLOWER, wrong, error or missing point, and on AMBIGUOUS when asked to.
  bool failed() const;
};

// What differs between the reports in devices (backend + name), host class (host.cpu and
// host.cpu_threads) or schema version; empty when they may be compared.
std::vector<std::string> report_mismatches(const Report& baseline, const Report& current);

// Throws InputError for a threshold < 0 or an alpha outside (0, 1), for mismatched reports
// unless options.allow_mismatch (the message names what differs), and for a report holding two
// points of one identity.
ReportComparison compare_reports(const Report& baseline, const Report& current,
                                 const CompareOptions& options);

enum class CompareFormat { table, md, json };
CompareFormat parse_compare_format(std::string_view s);  // InputError listing table|md|json

// table: one aligned line per point, verdict first, then the summary; md: the same for a
//        pull-request comment; json: to_json(c), the "decodebench-compare" format
//        (docs/report-schema.md "Other JSON"). Every format ends with "result: pass|fail" (json:
//        the "result" key).
std::string format_comparison(const ReportComparison& c, CompareFormat f);
nlohmann::json to_json(const ReportComparison& c);

}  // namespace decodebench
