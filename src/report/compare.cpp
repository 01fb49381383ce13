// Baseline vs current: the CI perf gate.
#include "report/compare.h"

#include <map>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "report/point_identity.h"

namespace decodebench {

ReportComparison compare_reports(const Report& baseline, const Report& current,
                                 double max_slowdown) {
  if (!(max_slowdown >= 0)) {
    throw InputError(
        fmt::format("max slowdown must be >= 0 (e.g. 0.1 for 10 %), got {}", max_slowdown));
  }
  if (baseline.schema_version != current.schema_version) {
    throw InputError(fmt::format("cannot compare reports of schema versions {} and {}",
                                 baseline.schema_version, current.schema_version));
  }
  ReportComparison c;
  c.max_slowdown = max_slowdown;
  std::map<std::string, const PointResult*> base;
  for (const auto& p : baseline.results) base.emplace(point_identity(p), &p);
  std::map<std::string, const PointResult*> cur;
  for (const auto& p : current.results) cur.emplace(point_identity(p), &p);

  for (const auto& [key, p] : cur) {
    if (p->status == PointStatus::wrong || p->status == PointStatus::error) {
      c.wrong.push_back(fmt::format("{}: {}: {}", key, status_name(p->status), p->reason));
    }
    if (!base.count(key)) c.added.push_back(key);
  }
  for (const auto& [key, b] : base) {
    if (b->status != PointStatus::ok) continue;  // nothing to hold the current run to
    auto it = cur.find(key);
    if (it == cur.end()) {
      c.missing.push_back(key + ": not in the current report");
      continue;
    }
    const PointResult& p = *it->second;
    if (p.status != PointStatus::ok) {
      // wrong/error are listed above; a skipped point lost its measurement.
      if (p.status == PointStatus::skipped) {
        c.missing.push_back(fmt::format("{}: skipped now: {}", key, p.reason));
      }
      continue;
    }
    PointComparison pc;
    pc.key = key;
    pc.baseline_s = b->time_s.median;
    pc.current_s = p.time_s.median;
    pc.ratio = pc.current_s / pc.baseline_s;
    pc.regression = pc.ratio > 1 + max_slowdown;
    if (pc.regression) {
      c.regressions.push_back(fmt::format("{}: {:.1f}% slower", key, 100 * (pc.ratio - 1)));
    }
    c.points.push_back(pc);
  }
  return c;
}

std::string format_comparison(const ReportComparison& c) {
  std::size_t key_width = 5;
  for (const auto& p : c.points) key_width = std::max(key_width, p.key.size());
  std::string out = fmt::format("{:<{}}  {:>12}  {:>12}  {:>8}\n", "point", key_width, "baseline s",
                                "current s", "ratio");
  for (const auto& p : c.points) {
    out += fmt::format("{:<{}}  {:>12.4e}  {:>12.4e}  {:>8.3f}{}\n", p.key, key_width, p.baseline_s,
                       p.current_s, p.ratio, p.regression ? "  REGRESSION" : "");
  }
  for (const auto& w : c.wrong) out += "WRONG    " + w + "\n";
  for (const auto& m : c.missing) out += "MISSING  " + m + "\n";
  for (const auto& a : c.added) out += "new      " + a + "\n";
  out += fmt::format(
      "{} points compared, {} regressions (threshold {:.1f}% slower), {} wrong, {} missing: {}\n",
      c.points.size(), c.regressions.size(), 100 * c.max_slowdown, c.wrong.size(), c.missing.size(),
      c.failed() ? "FAIL" : "pass");
  return out;
}

}  // namespace decodebench
