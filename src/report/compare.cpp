// Baseline vs current: the perf gate, decided from the recorded samples.
#include "report/compare.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "common/json_in.h"
#include "common/text.h"
#include "report/table.h"
#include "results/point_identity.h"
#include "results/self_check.h"

namespace decodebench {
namespace {

using nlohmann::json;

std::map<std::string, const PointResult*> by_identity(const Report& r, std::string_view which) {
  std::map<std::string, const PointResult*> out;
  for (const auto& p : r.results) {
    const std::string key = point_identity(p);
    if (!out.emplace(key, &p).second) {
      throw InputError(fmt::format(
          "the {} report has two points of identity '{}' (indices {} and {}); compare matches "
          "points by identity, so each must be unique",
          which, key, out.at(key)->index, p.index));
    }
  }
  return out;
}

// Seconds x the read bandwidth of the sample's moment; empty when the point has none.
std::vector<double> normalized_samples(const PointResult& p) {
  std::vector<double> out;
  if (p.paired_read_samples.size() != p.samples.size()) return out;
  for (std::size_t i = 0; i < p.samples.size(); ++i) {
    out.push_back(p.samples[i] * p.paired_read_samples[i]);
  }
  return out;
}

double geomean(const std::vector<double>& ratios) {
  double log_sum = 0;
  for (double r : ratios) log_sum += std::log(r);
  return ratios.empty() ? 1.0 : std::exp(log_sum / static_cast<double>(ratios.size()));
}

PointComparison compare_point(const std::string& key, const PointResult& b, const PointResult& c,
                              const CompareOptions& o) {
  PointComparison pc;
  pc.key = key;
  pc.point = c;
  pc.point.samples.clear();
  pc.point.paired_read_samples.clear();
  pc.baseline_median_s = b.time_s.median;
  pc.current_median_s = c.time_s.median;
  pc.raw = compare_samples(b.samples, c.samples, o.alpha, o.threshold);
  if (!std::isfinite(pc.raw.ratio)) pc.raw.ratio = c.time_s.median / b.time_s.median;
  const std::vector<double> nb = normalized_samples(b), nc = normalized_samples(c);
  if (!nb.empty() && !nc.empty()) {
    pc.normalized = compare_samples(nb, nc, o.alpha, o.threshold);
    const CombinedVerdict v = combine_verdicts(pc.raw.verdict, pc.normalized->verdict);
    pc.verdict = v.verdict;
    pc.decided_by = v.decided_by;
  } else {
    pc.verdict = pc.raw.verdict;
    pc.decided_by = "raw";
  }
  if (pc.verdict == Verdict::ambiguous) pc.reason = pc.raw.reason;
  return pc;
}

}  // namespace

ReportSide describe_report(const Report& r, std::string path) {
  ReportSide s;
  s.path = std::move(path);
  s.git_sha = r.tool.git_sha;
  s.created = r.created;
  for (const auto& d : r.devices) s.devices.push_back(d.backend + " " + d.name);
  s.host_cpu = r.host.cpu;
  s.cpu_threads = r.host.cpu_threads;
  return s;
}

std::vector<std::string> report_mismatches(const Report& baseline, const Report& current) {
  std::vector<std::string> out;
  const ReportSide b = describe_report(baseline), c = describe_report(current);
  if (baseline.schema_version != current.schema_version) {
    out.push_back(fmt::format("schema version: baseline {}, current {}", baseline.schema_version,
                              current.schema_version));
  }
  std::vector<std::string> bd = b.devices, cd = c.devices;
  std::sort(bd.begin(), bd.end());
  std::sort(cd.begin(), cd.end());
  if (bd != cd) {
    out.push_back(fmt::format("devices: baseline [{}], current [{}]", join(b.devices, ", "),
                              join(c.devices, ", ")));
  }
  if (b.host_cpu != c.host_cpu || b.cpu_threads != c.cpu_threads) {
    out.push_back(
        fmt::format("host class: baseline '{}' with {} threads, current '{}' with {} "
                    "threads",
                    b.host_cpu, b.cpu_threads, c.host_cpu, c.cpu_threads));
  }
  return out;
}

bool ReportComparison::failed() const {
  return count(Verdict::slower) > 0 || !wrong.empty() || !missing.empty() ||
         (options.fail_on_ambiguous && count(Verdict::ambiguous) > 0);
}

ReportComparison compare_reports(const Report& baseline, const Report& current,
                                 const CompareOptions& options) {
  if (!(options.threshold >= 0) || !std::isfinite(options.threshold)) {
    throw InputError(fmt::format(
        "threshold must be a finite fraction >= 0 (e.g. 0.05 for 5 %), got {}", options.threshold));
  }
  if (!(options.alpha > 0 && options.alpha < 1)) {
    throw InputError(fmt::format("alpha must be in (0, 1) (e.g. 0.05), got {}", options.alpha));
  }
  ReportComparison c;
  c.options = options;
  c.baseline = describe_report(baseline);
  c.current = describe_report(current);
  c.mismatches = report_mismatches(baseline, current);
  if (!c.mismatches.empty() && !options.allow_mismatch) {
    throw InputError(fmt::format(
        "the reports were not measured on the same setup, so their times do not compare: {} "
        "(--allow-mismatch compares them anyway)",
        join(c.mismatches, "; ")));
  }
  const auto base = by_identity(baseline, "baseline");
  const auto cur = by_identity(current, "current");

  // In the reports' order (the sweep's), not the keys': the output reads like the sweep.
  for (const PointResult& point : current.results) {
    const std::string key = point_identity(point);
    const PointResult* p = &point;
    if (p->status == PointStatus::wrong || p->status == PointStatus::error) {
      c.wrong.push_back({key, std::string(status_name(p->status)), p->reason});
    }
    const auto b = base.find(key);
    if (counts_as_result(*p) && (b == base.end() || !counts_as_result(*b->second))) {
      c.added.push_back(key);
    }
  }
  std::map<std::string, std::vector<double>> ratios_by_kernel;
  std::vector<double> ratios;
  for (const PointResult& point : baseline.results) {
    const std::string key = point_identity(point);
    const PointResult* b = &point;
    if (!counts_as_result(*b)) continue;  // nothing to hold the current run to (flagged too)
    const auto it = cur.find(key);
    if (it == cur.end()) {
      c.missing.push_back({key, "not in the current report"});
      continue;
    }
    const PointResult& p = *it->second;
    if (p.status != PointStatus::ok) {
      // wrong/error are listed above; a skipped point lost its measurement.
      if (p.status == PointStatus::skipped) c.missing.push_back({key, "skipped now: " + p.reason});
      if (p.status == PointStatus::not_run) {
        c.missing.push_back({key, fmt::format("not run (the current report is {})",
                                              completion_state_name(current.completion.state))});
      }
      continue;
    }
    if (!p.flags.empty()) {  // a self-check says its figure is no result: nothing to compare
      c.missing.push_back({key, "flagged now: " + p.flags.front().reason});
      continue;
    }
    PointComparison pc = compare_point(key, *b, p, options);
    ++c.counts[static_cast<std::size_t>(pc.verdict)];
    if (std::isfinite(pc.raw.ratio) && pc.raw.ratio > 0) {
      ratios.push_back(pc.raw.ratio);
      ratios_by_kernel[p.kernel].push_back(pc.raw.ratio);
    }
    c.points.push_back(std::move(pc));
  }
  c.geomean_all = {"", geomean(ratios), static_cast<int>(ratios.size())};
  for (const auto& [kernel, r] : ratios_by_kernel) {
    c.geomean_by_kernel.push_back({kernel, geomean(r), static_cast<int>(r.size())});
  }
  return c;
}

CompareFormat parse_compare_format(std::string_view s) {
  if (s == "table") return CompareFormat::table;
  if (s == "md") return CompareFormat::md;
  if (s == "json") return CompareFormat::json;
  throw InputError(fmt::format("unknown compare format '{}'; valid: table, md, json", s));
}

// ------------------------------------------------------------------------------- printers

namespace {

std::string percent_change(double ratio) {
  return std::isfinite(ratio) ? fmt::format("{:+.1f}%", 100 * (ratio - 1)) : "n/a";
}
std::string ratio_text(double r) { return std::isfinite(r) ? fmt::format("{:.3f}", r) : "n/a"; }
std::string interval_text(const Interval& i) {
  return std::isfinite(i.lo) ? fmt::format("[{:.3f}, {:.3f}]", i.lo, i.hi) : "[n/a]";
}
// "0.853 FASTER": a space's ratio and its own verdict; "-" for a space not compared.
std::string space_text(const std::optional<SpaceComparison>& s) {
  return s ? fmt::format("{} {}", ratio_text(s->ratio), verdict_name(s->verdict)) : "-";
}
std::string p_text(double p) { return std::isfinite(p) ? fmt::format("{:.2g}", p) : "n/a"; }
std::string confidence_text(double alpha) { return fmt::format("{:g}%", 100 * (1 - alpha)); }

std::string side_text(const ReportSide& s) {
  return fmt::format("{} ({} {})", s.path.empty() ? "(in memory)" : s.path, s.git_sha, s.created);
}

std::string rule_text(const CompareOptions& o) {
  return fmt::format(
      "alpha {:g}, threshold {:g}%: SLOWER/FASTER when p < alpha, the median ratio is beyond "
      "1+threshold (or its inverse) and the {} interval excludes 1 on that side; SAME when the "
      "interval lies within; else AMBIGUOUS",
      o.alpha, 100 * o.threshold, confidence_text(o.alpha));
}

std::string counts_text(const ReportComparison& c) {
  return fmt::format("{} points: {} SAME, {} SLOWER, {} FASTER, {} AMBIGUOUS", c.points.size(),
                     c.count(Verdict::same), c.count(Verdict::slower), c.count(Verdict::faster),
                     c.count(Verdict::ambiguous));
}

std::string geomean_text(const GeomeanChange& g) {
  return fmt::format("{} ({}, {} points)", ratio_text(g.ratio), percent_change(g.ratio), g.points);
}

std::string format_table(const ReportComparison& c) {
  std::string out = fmt::format("baseline {}\ncurrent  {}\n{}\n", side_text(c.baseline),
                                side_text(c.current), rule_text(c.options));
  for (const auto& m : c.mismatches) out += "MISMATCH (allowed) " + m + "\n";
  // Fixed widths (the widest cell still wins), so two runs' tables line up for a diff.
  Table t;
  t.columns = {{"verdict", false, 9},
               {"ratio", true, 6},
               {confidence_text(c.options.alpha) + " interval", false, 16},
               {"p", true, 7},
               {"decided by", false, 10},
               {"raw", false, 15},
               {"normalized", false, 15},
               {"samples", true, 9},
               {"point"}};
  for (const auto& p : c.points) {
    const SpaceComparison& d = p.deciding();
    t.add_row({std::string(verdict_name(p.verdict)), ratio_text(d.ratio), interval_text(d.ci),
               p_text(d.p_value), p.decided_by, space_text(p.raw), space_text(p.normalized),
               fmt::format("{}/{}", p.raw.baseline_samples, p.raw.current_samples),
               p.key + (p.reason.empty() ? "" : "  (" + p.reason + ")")});
  }
  out += render_text(t);
  for (const auto& w : c.wrong)
    out += fmt::format("WRONG    {}: {}: {}\n", w.key, w.status, w.reason);
  for (const auto& m : c.missing) out += fmt::format("MISSING  {}: {}\n", m.key, m.why);
  for (const auto& a : c.added) out += "ADDED    " + a + "\n";
  out += "geomean of raw median ratios: all " + geomean_text(c.geomean_all) + "\n";
  for (const auto& g : c.geomean_by_kernel) {
    out += fmt::format("  kernel {}: {}\n", g.kernel, geomean_text(g));
  }
  out += fmt::format("{}; {} wrong, {} missing, {} added\n", counts_text(c), c.wrong.size(),
                     c.missing.size(), c.added.size());
  out += fmt::format("result: {}\n", c.failed() ? "fail" : "pass");
  return out;
}

// Markdown for a pull-request comment: the summary first, then a table of every point with the
// points that are not SAME on top.
std::string format_md(const ReportComparison& c) {
  std::string out =
      fmt::format("### decodebench compare: {}\n\n", c.failed() ? "**fail**" : "pass");
  out += fmt::format("- baseline: `{}`\n- current: `{}`\n- {}\n", side_text(c.baseline),
                     side_text(c.current), rule_text(c.options));
  for (const auto& m : c.mismatches) out += "- **mismatch (allowed)**: " + m + "\n";
  out += fmt::format("- {}\n- geomean of raw median ratios: {}", counts_text(c),
                     geomean_text(c.geomean_all));
  for (const auto& g : c.geomean_by_kernel) {
    out += fmt::format("; `{}` {}", g.kernel, geomean_text(g));
  }
  out += "\n\n";
  Table t;
  t.columns = {{"verdict"},     {"point"},
               {"ratio", true}, {confidence_text(c.options.alpha) + " interval"},
               {"p", true},     {"decided by"},
               {"raw"},         {"normalized"}};
  std::vector<const PointComparison*> order;
  for (const auto& p : c.points) order.push_back(&p);
  std::stable_partition(order.begin(), order.end(),
                        [](const PointComparison* p) { return p->verdict != Verdict::same; });
  for (const PointComparison* p : order) {
    const SpaceComparison& d = p->deciding();
    const std::string verdict = p->verdict == Verdict::same
                                    ? std::string(verdict_name(p->verdict))
                                    : fmt::format("**{}**", verdict_name(p->verdict));
    t.add_row({verdict,
               fmt::format("`{}`{}", p->key, p->reason.empty() ? "" : " (" + p->reason + ")"),
               ratio_text(d.ratio), interval_text(d.ci), p_text(d.p_value), p->decided_by,
               space_text(p->raw), space_text(p->normalized)});
  }
  out += render_md(t);
  if (!c.wrong.empty() || !c.missing.empty() || !c.added.empty()) out += "\n";
  for (const auto& w : c.wrong) {
    out += fmt::format("- **{}** `{}`: {}\n", w.status, w.key, w.reason);
  }
  for (const auto& m : c.missing) out += fmt::format("- **missing** `{}`: {}\n", m.key, m.why);
  for (const auto& a : c.added) out += fmt::format("- added `{}`\n", a);
  out += fmt::format("\nresult: {}\n", c.failed() ? "fail" : "pass");
  return out;
}

json to_json(const ReportSide& s) {
  return {{"path", s.path},       {"git_sha", s.git_sha},   {"created", s.created},
          {"devices", s.devices}, {"host_cpu", s.host_cpu}, {"cpu_threads", s.cpu_threads}};
}

json to_json(const SpaceComparison& s) {
  return {{"ratio", number_or_null(s.ratio)},
          {"ci", {number_or_null(s.ci.lo), number_or_null(s.ci.hi)}},
          {"p_value", number_or_null(s.p_value)},
          {"verdict", verdict_name(s.verdict)},
          {"samples", {s.baseline_samples, s.current_samples}}};
}

json to_json(const PointComparison& p) {
  const PointResult& r = p.point;
  // The point's own report JSON supplies context in the report's form (one place for it).
  const json context = decodebench::to_json(r).at("context");
  return {{"key", p.key},
          {"kernel", r.kernel},
          {"kernel_requested", r.kernel_requested},
          {"backend", r.backend},
          {"model", r.model},
          {"kv_dtype", dtype_name(r.kv_dtype)},
          {"q_dtype", dtype_name(r.q_dtype)},
          {"block_size", r.block_size},
          {"batch", r.batch},
          {"context", context},
          {"hit_rate", r.hit_rate},
          {"prefix_groups", r.prefix_groups},
          {"baseline_median_s", number_or_null(p.baseline_median_s)},
          {"current_median_s", number_or_null(p.current_median_s)},
          {"verdict", verdict_name(p.verdict)},
          {"decided_by", p.decided_by},
          {"reason", p.reason},
          {"raw", to_json(p.raw)},
          {"normalized", p.normalized ? to_json(*p.normalized) : json(nullptr)}};
}

json to_json(const GeomeanChange& g) {
  json j = {{"ratio", number_or_null(g.ratio)}, {"points", g.points}};
  if (!g.kernel.empty()) j["kernel"] = g.kernel;
  return j;
}

}  // namespace

json to_json(const ReportComparison& c) {
  json points = json::array();
  for (const auto& p : c.points) points.push_back(to_json(p));
  json by_kernel = json::array();
  for (const auto& g : c.geomean_by_kernel) by_kernel.push_back(to_json(g));
  json missing = json::array();
  for (const auto& m : c.missing) missing.push_back({{"key", m.key}, {"why", m.why}});
  json wrong = json::array();
  for (const auto& w : c.wrong) {
    wrong.push_back({{"key", w.key}, {"status", w.status}, {"reason", w.reason}});
  }
  return {
      {"kind", "decodebench-compare"},
      {"version", 1},
      {"alpha", c.options.alpha},
      {"threshold", c.options.threshold},
      {"test", fmt::format("Mann-Whitney U two-sided (normal approximation, tie-corrected) + "
                           "bootstrap {} percentile interval of the median ratio ({} resamples, "
                           "fixed seed)",
                           confidence_text(c.options.alpha), kBootstrapResamples)},
      {"baseline", to_json(c.baseline)},
      {"current", to_json(c.current)},
      {"mismatches", c.mismatches},
      {"points", points},
      {"geomean", {{"all", to_json(c.geomean_all)}, {"by_kernel", by_kernel}}},
      {"counts",
       {{"SAME", c.count(Verdict::same)},
        {"SLOWER", c.count(Verdict::slower)},
        {"FASTER", c.count(Verdict::faster)},
        {"AMBIGUOUS", c.count(Verdict::ambiguous)}}},
      {"added", c.added},
      {"missing", missing},
      {"wrong", wrong},
      {"result", c.failed() ? "fail" : "pass"},
  };
}

std::string format_comparison(const ReportComparison& c, CompareFormat f) {
  switch (f) {
    case CompareFormat::table: return format_table(c);
    case CompareFormat::md: return format_md(c);
    case CompareFormat::json: return to_json(c).dump(2) + "\n";
  }
  return format_table(c);
}

}  // namespace decodebench
