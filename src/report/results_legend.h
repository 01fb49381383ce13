// The legend under a results table (results_view.cpp): what each shown column means, the marks
// and why points carry them, the busy figures' notes and how the cold points were made cold.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "report/results_view.h"  // LabelledReport
#include "report/table.h"
#include "results/point_result.h"

namespace decodebench {

// Which scopes the listed points measured: the tok/s legend names what was timed.
struct ScopesListed {
  bool attention = false, layer = false;
};
ScopesListed scopes_listed(std::span<const LabelledReport> reports);

// Whether `t` shows a column of this title.
bool shown(const Table& t, std::string_view title);

// One line per column `t` shows that needs saying (single: one report; else side by side).
void add_column_legend(const Table& t, std::vector<std::string>& legend, bool single,
                       ScopesListed scopes);
// One line per distinct note of the points' busy figures (what is unavailable and why, or a
// caution), naming how many points and the first few indices.
void add_utilization_notes(std::span<const PointResult> points, const std::string& prefix,
                           std::vector<std::string>& legend);
// How the cold points were made cold: by rotation (with the copy counts) or by a flush (each
// reason once). Nothing where every cold point was flushed without a reason.
void add_cold_notes(std::span<const PointResult> points, const std::string& prefix,
                    std::vector<std::string>& legend);
// The marks shown: * stopped at the timeout, ~ noisy (`max_noises`: "0.50%", or side by side
// "a 0.50%, b 1.00%" where the reports differ), ! flagged by a self-check.
void add_mark_legend(bool any_timeout, bool any_noisy, bool any_flagged,
                     const std::string& max_noises, bool single, std::vector<std::string>& legend);

}  // namespace decodebench
