// What the human-facing printers (table, md, html) show of one or several reports, as cells of
// text: the results table with its marks and legend, the points found in only some reports,
// the knees and the notes of points that are not ok. format.cpp and format_html.cpp render it;
// CSV is written from the reports directly (it keeps every column, for machines).
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/table.h"
#include "results/report.h"

namespace decodebench {

inline constexpr double kDefaultMaxNoise = 0.005;  // MeasureOptions' default

struct FormatOptions {
  // Points whose time_s.rel_noise exceeds this are marked; NaN: each report's own
  // config.measure.max_noise, else kDefaultMaxNoise.
  double max_noise = kNotAvailable;
};

// A report and the name its columns carry when several are printed side by side.
struct LabelledReport {
  std::string label;
  const Report* report = nullptr;
};

double max_noise_for(const Report& r, const FormatOptions& o);

// An ok point whose noise estimate is above `max_noise`.
bool noise_exceeded(const PointResult& p, double max_noise);
// An ok point whose samples do not satisfy the stopping rule of the config it ran with
// (samples >= min_samples, their sum >= min_time_s, rel_noise <= max_noise; harness/measure.h
// stop_reason, which a test keeps equal to this): the measurement loop ends only on that rule
// or at the timeout, so such a point stopped at the timeout. Recomputed from the stored samples
// rather than read from the wording of `reason`; a config without "measure" falls back to "ok
// with a reason", the only ok points the runner gives one.
bool stopped_at_timeout(const PointResult& p, const nlohmann::json& config);

// An ok point that a self-check flagged (results/self_check.h): marked "!", no result.
bool flagged(const PointResult& p);

// The status cell of the results table: "ok" with its marks ("ok*": stopped at the timeout,
// "ok~": noise above `max_noise`, "ok!": flagged by a self-check; combined in that order, e.g.
// "ok*~!"), else the status's name. The sweep's progress line prints the same text.
std::string status_text(const PointResult& p, const nlohmann::json& config, double max_noise);

struct ResultsView {
  Table results;
  std::vector<std::string> legend;        // one sentence per shown column or mark that needs one
  std::vector<std::string> only_in_some;  // side by side: "<identity>: only in a, c"
  Table knees;                            // series, knee batch, knee GB/s, max GB/s, at batch
  std::vector<std::string> not_ok;        // "point 3 (gqa, f16, batch 7, context 8192): wrong: ..."
  std::vector<std::string> completion;    // a line per report that did not complete
};

// One report: a row per point (the sweep's table). Several: the points present in every report
// (matched by point_identity), identity columns once, then each report's median, GB/s and tok/s
// and each later report's median over the first's; the rest listed in only_in_some.
// Columns whose cells are "-" in every row are left out where they are optional (% roof,
// % datasheet, % paired, bound; q dtype, block size and prefix groups side by side when all
// equal).
ResultsView results_view(std::span<const LabelledReport> reports, const FormatOptions& o);

// "device: cuda "NVIDIA H200" | measured read 4.10 TB/s, ..." (table and md).
std::string device_line(const DeviceRecord& d);

}  // namespace decodebench
