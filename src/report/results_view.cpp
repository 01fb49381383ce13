#include "report/results_view.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "common/dtype.h"
#include "report/format.h"
#include "report/results_legend.h"
#include "results/knees.h"
#include "results/point_identity.h"
#include "workload/context_spec.h"

namespace decodebench {

namespace {

constexpr const char* kNa = "-";

std::string kernel_label(const PointResult& p) {
  if (p.kernel_requested == "auto" && !p.kernel.empty() && p.kernel != "auto") {
    return fmt::format("auto→{}", p.kernel);
  }
  return p.kernel.empty() ? p.kernel_requested : p.kernel;
}

std::string gbps(double bytes_per_s) {
  return available(bytes_per_s) ? fmt::format("{:.1f}", bytes_per_s / 1e9) : kNa;
}

// A column as built: kept or dropped once every row is known.
struct ColumnDef {
  std::string title;
  bool right = false;
  bool drop_if_empty = false;     // every cell "-": nothing to show (no datasheet, no pairing)
  bool drop_if_constant = false;  // every cell equal: says nothing a row needs (side by side)
};

Table drop_columns(const std::vector<ColumnDef>& defs,
                   const std::vector<std::vector<std::string>>& rows) {
  Table t;
  std::vector<std::size_t> keep;
  for (std::size_t c = 0; c < defs.size(); ++c) {
    const bool empty =
        std::all_of(rows.begin(), rows.end(), [&](const auto& row) { return row[c] == kNa; });
    const bool constant = std::all_of(rows.begin(), rows.end(),
                                      [&](const auto& row) { return row[c] == rows[0][c]; });
    if (!rows.empty() &&
        ((defs[c].drop_if_empty && empty) || (defs[c].drop_if_constant && constant))) {
      continue;
    }
    keep.push_back(c);
    t.columns.push_back({defs[c].title, defs[c].right});
  }
  for (const auto& row : rows) {
    std::vector<std::string> cells;
    for (std::size_t c : keep) cells.push_back(row[c]);
    t.rows.push_back(std::move(cells));
  }
  return t;
}

// The marks an ok point's status or median carries: "*" stopped at the timeout, "~" noisy,
// "!" flagged by a self-check (no result).
struct Marks {
  bool timeout = false;
  bool noisy = false;
  bool flagged = false;
  std::string text() const {
    return std::string(timeout ? "*" : "") + (noisy ? "~" : "") + (flagged ? "!" : "");
  }
};

Marks marks_of(const PointResult& p, const Report& r, double max_noise) {
  return {stopped_at_timeout(p, r.config), noise_exceeded(p, max_noise), flagged(p)};
}

std::string percent_if_ok(bool ok, double fraction) { return ok ? format_percent(fraction) : kNa; }

// Scope layer: the step's time split and its weight bytes' share ("-" at scope attention).
std::string layer_seconds(const PointResult& p, double LayerRecord::*t) {
  return p.status == PointStatus::ok && p.layer ? format_seconds((*p.layer).*t) : kNa;
}
std::string weight_share(const PointResult& p) {
  if (!p.layer) return kNa;
  const double total = p.layer->weight_bytes + p.layer->kv_bytes;
  return total > 0 ? format_percent(p.layer->weight_bytes / total) : kNa;
}

// The busy figure and, on a GPU, the board's power and energy per token ("-" where not measured).
double utilization_figure(const PointResult& p, double UtilizationRecord::*figure) {
  return p.status == PointStatus::ok && p.utilization ? (*p.utilization).*figure : kNotAvailable;
}
std::string watts(double w) { return available(w) ? fmt::format("{:.0f}", w) : kNa; }
std::string joules(double j) { return available(j) ? fmt::format("{:.3g}", j) : kNa; }

std::vector<std::string> single_row(const PointResult& p, const std::string& status) {
  const bool ok = p.status == PointStatus::ok;
  return {std::string(scope_name(p.scope)),
          kernel_label(p),
          p.model,
          std::string(dtype_name(p.kv_dtype)),
          fmt::format("{}", p.batch),
          context_label(p.context),
          fmt::format("{:.2f}/{:.2f}", p.hit_rate, p.hit_rate_actual),
          status,
          ok ? format_seconds(p.time_s.median) : kNa,
          ok ? gbps(p.bandwidth.achieved) : kNa,
          ok ? gbps(p.bandwidth.logical) : kNa,
          format_percent(utilization_figure(p, &UtilizationRecord::busy)),
          percent_if_ok(ok, p.roofline.fraction_measured),
          percent_if_ok(ok, p.roofline.fraction_datasheet),
          percent_if_ok(ok, p.roofline.fraction_paired),
          ok ? std::string(bound_label(p.roofline)) : kNa,
          layer_seconds(p, &LayerRecord::time_weights_s),
          layer_seconds(p, &LayerRecord::time_kv_s),
          weight_share(p),
          ok ? format_si(p.tokens_per_s, "") : kNa,
          ok && p.layer ? format_si(p.layer->tokens_per_s_with_lm_head, "") : kNa,
          watts(utilization_figure(p, &UtilizationRecord::power_W)),
          joules(utilization_figure(p, &UtilizationRecord::energy_J_per_token)),
          percent_if_ok(ok, p.time_s.rel_noise),
          ok ? fmt::format("{}", p.time_s.samples) : kNa};
}

// The tokens/s title says what it counts: attention only unless a layer point is listed.
std::vector<ColumnDef> single_columns(bool any_layer) {
  return {{"scope", false, false, /*drop_if_constant=*/true},
          {"kernel"},
          {"model"},
          {"kv"},
          {"batch", true},
          {"context", true},
          {"h req/act", true},
          {"status"},
          {"median", true},
          {"GB/s unique", true},
          {"GB/s logical", true},
          {"% busy", true, /*drop_if_empty=*/true},
          {"% roof", true, /*drop_if_empty=*/true},
          {"% datasheet", true, /*drop_if_empty=*/true},
          {"% paired", true, /*drop_if_empty=*/true},
          {"bound", false, /*drop_if_empty=*/true},
          {"t weights", true, /*drop_if_empty=*/true},
          {"t kv", true, /*drop_if_empty=*/true},
          {"weights % bytes", true, /*drop_if_empty=*/true},
          {any_layer ? "tok/s" : "tok/s (attn only)", true},
          {"tok/s +lm_head", true, /*drop_if_empty=*/true},
          {"W", true, /*drop_if_empty=*/true},
          {"J/tok", true, /*drop_if_empty=*/true},
          {"noise", true},
          {"samples", true}};
}

std::string not_ok_line(const PointResult& p) {
  return fmt::format("point {} ({}, {}, batch {}, context {}): {}: {}", p.index, kernel_label(p),
                     dtype_name(p.kv_dtype), p.batch, context_label(p.context),
                     status_name(p.status), p.reason);
}

// One line per flag of a flagged ok point, listed with the points that are not ok: its figures
// are in the table, but they are no result.
std::vector<std::string> flag_lines(const PointResult& p) {
  std::vector<std::string> lines;
  for (const PointFlag& f : p.flags) {
    lines.push_back(fmt::format("point {} ({}, {}, batch {}, context {}): flagged {}: {}", p.index,
                                kernel_label(p), dtype_name(p.kv_dtype), p.batch,
                                context_label(p.context), f.name, f.reason));
  }
  return lines;
}

std::vector<std::string> completion_lines(const LabelledReport& lr, bool prefix) {
  const Report& r = *lr.report;
  if (r.completion.state == Completion::State::complete) return {};
  return {fmt::format("{}sweep {}: {} ({} of {} points finished)", prefix ? lr.label + ": " : "",
                      completion_state_name(r.completion.state), r.completion.reason,
                      points_finished(r), r.completion.points_planned)};
}

Table knees_table(std::span<const LabelledReport> reports) {
  const bool several = reports.size() > 1;
  std::vector<ColumnDef> defs;
  if (several) defs.push_back({"report"});
  for (const ColumnDef& c : std::initializer_list<ColumnDef>{
           {"series"},
           {"knee batch", true},
           {"knee GB/s", true},
           {"max GB/s", true},
           {"at batch", true},
           {"knee tok/s", true, /*drop_if_empty=*/true},
           {"plateau tok/s", true, /*drop_if_empty=*/true},
           {"weights % bytes at knee", true, /*drop_if_empty=*/true}}) {
    defs.push_back(c);
  }
  std::vector<std::vector<std::string>> rows;
  for (const LabelledReport& lr : reports) {
    if (!lr.report->knees.is_array()) continue;
    for (const nlohmann::json& k : lr.report->knees) {
      if (!k.is_object()) continue;
      const bool layer = k.value("scope", "attention") == "layer";
      std::vector<std::string> row;
      if (several) row.push_back(lr.label);
      row.push_back(knee_series_label(k));
      row.push_back(fmt::format("{}", k.value("knee_batch", 0)));
      row.push_back(gbps(k.value("knee_bandwidth", kNotAvailable)));
      row.push_back(gbps(k.value("max_bandwidth", kNotAvailable)));
      row.push_back(fmt::format("{}", k.value("max_batch", 0)));
      row.push_back(layer ? format_si(k.value("knee_tokens_per_s", kNotAvailable), "") : kNa);
      row.push_back(layer ? format_si(k.value("plateau_tokens_per_s", kNotAvailable), "") : kNa);
      row.push_back(layer ? format_percent(k.value("weight_bytes_share_at_knee", kNotAvailable))
                          : kNa);
      rows.push_back(std::move(row));
    }
  }
  return drop_columns(defs, rows);
}

ResultsView single_view(const LabelledReport& lr, const FormatOptions& o) {
  const Report& r = *lr.report;
  const double max_noise = max_noise_for(r, o);
  ResultsView v;
  std::vector<std::vector<std::string>> rows;
  bool any_timeout = false, any_noisy = false, any_flagged = false;
  for (const PointResult& p : r.results) {
    const Marks m = marks_of(p, r, max_noise);
    any_timeout |= m.timeout;
    any_noisy |= m.noisy;
    any_flagged |= m.flagged;
    rows.push_back(single_row(p, status_text(p, r.config, max_noise)));
    if (p.status != PointStatus::ok) v.not_ok.push_back(not_ok_line(p));
    if (m.flagged) {
      for (std::string& l : flag_lines(p)) v.not_ok.push_back(std::move(l));
    }
  }
  const bool any_layer = std::any_of(r.results.begin(), r.results.end(),
                                     [](const PointResult& p) { return p.scope == Scope::layer; });
  v.results = drop_columns(single_columns(any_layer), rows);
  add_column_legend(v.results, v.legend, /*single=*/true, scopes_listed({&lr, 1}));
  add_mark_legend(any_timeout, any_noisy, any_flagged, fmt::format("{:.2f}%", 100 * max_noise),
                  /*single=*/true, v.legend);
  add_utilization_notes(r.results, "", v.legend);
  add_cold_notes(r.results, "", v.legend);
  v.knees = knees_table({&lr, 1});
  v.completion = completion_lines(lr, /*prefix=*/false);
  return v;
}

ResultsView side_by_side_view(std::span<const LabelledReport> reports, const FormatOptions& o) {
  // Each report's points by identity; a repeated identity keeps its first point.
  std::vector<std::map<std::string, const PointResult*>> by_id(reports.size());
  std::vector<std::string> order;  // identities by first appearance, report 0 first
  std::set<std::string> seen;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    for (const PointResult& p : reports[i].report->results) {
      const std::string id = point_identity(p);
      by_id[i].emplace(id, &p);
      if (seen.insert(id).second) order.push_back(id);
    }
  }
  std::vector<double> max_noise;
  std::string max_noises;
  for (const LabelledReport& lr : reports) {
    max_noise.push_back(max_noise_for(*lr.report, o));
    max_noises += fmt::format("{}{} {:.2f}%", max_noises.empty() ? "" : ", ", lr.label,
                              100 * max_noise.back());
  }
  if (std::all_of(max_noise.begin(), max_noise.end(),
                  [&](double x) { return x == max_noise[0]; })) {
    max_noises = fmt::format("{:.2f}%", 100 * max_noise[0]);
  }

  std::vector<ColumnDef> defs{{"kernel"},
                              {"model"},
                              {"kv"},
                              {"q", false, false, /*drop_if_constant=*/true},
                              {"P", true, false, /*drop_if_constant=*/true},
                              {"batch", true},
                              {"context", true},
                              {"h", true},
                              {"G", true, false, /*drop_if_constant=*/true}};
  for (const LabelledReport& lr : reports) {
    defs.push_back({lr.label + " median", true});
    defs.push_back({lr.label + " GB/s", true});
    defs.push_back({lr.label + " tok/s", true});
  }
  for (std::size_t i = 1; i < reports.size(); ++i) {
    defs.push_back({fmt::format("{}/{}", reports[i].label, reports[0].label), true});
  }

  ResultsView v;
  std::vector<std::vector<std::string>> rows;
  bool any_timeout = false, any_noisy = false, any_flagged = false;
  for (const std::string& id : order) {
    std::vector<const PointResult*> pts;
    std::vector<std::string> present;
    for (std::size_t i = 0; i < reports.size(); ++i) {
      const auto it = by_id[i].find(id);
      pts.push_back(it == by_id[i].end() ? nullptr : it->second);
      if (pts.back()) present.push_back(reports[i].label);
    }
    if (present.size() < reports.size()) {
      std::string names;
      for (const std::string& n : present) names += (names.empty() ? "" : ", ") + n;
      v.only_in_some.push_back(fmt::format("{}: only in {}", id, names));
      continue;
    }
    const PointResult& p0 = *pts[0];
    // The resolved kernel once, where every report resolved "auto" to the same one.
    const bool same_kernel = std::all_of(
        pts.begin(), pts.end(), [&](const PointResult* p) { return p->kernel == p0.kernel; });
    std::vector<std::string> row{same_kernel ? kernel_label(p0) : p0.kernel_requested,
                                 p0.model,
                                 std::string(dtype_name(p0.kv_dtype)),
                                 std::string(dtype_name(p0.q_dtype)),
                                 fmt::format("{}", p0.block_size),
                                 fmt::format("{}", p0.batch),
                                 context_label(p0.context),
                                 fmt::format("{:g}", p0.hit_rate),
                                 fmt::format("{}", p0.prefix_groups)};
    for (std::size_t i = 0; i < reports.size(); ++i) {
      const PointResult& p = *pts[i];
      if (p.status != PointStatus::ok) {
        row.insert(row.end(), {std::string(status_name(p.status)), kNa, kNa});
        v.not_ok.push_back(fmt::format("{}: {}", reports[i].label, not_ok_line(p)));
        continue;
      }
      const Marks m = marks_of(p, *reports[i].report, max_noise[i]);
      any_timeout |= m.timeout;
      any_noisy |= m.noisy;
      any_flagged |= m.flagged;
      if (m.flagged) {
        for (std::string& l : flag_lines(p))
          v.not_ok.push_back(fmt::format("{}: {}", reports[i].label, l));
      }
      row.push_back(format_seconds(p.time_s.median) + m.text());
      row.push_back(gbps(p.bandwidth.achieved));
      row.push_back(format_si(p.tokens_per_s, ""));
    }
    for (std::size_t i = 1; i < reports.size(); ++i) {
      const bool both = pts[0]->status == PointStatus::ok && pts[i]->status == PointStatus::ok &&
                        pts[0]->time_s.median > 0;
      row.push_back(both ? fmt::format("{:.3f}x", pts[i]->time_s.median / pts[0]->time_s.median)
                         : kNa);
    }
    rows.push_back(std::move(row));
  }
  v.results = drop_columns(defs, rows);
  add_column_legend(v.results, v.legend, /*single=*/false, scopes_listed(reports));
  if (reports.size() > 1) {
    v.legend.push_back(
        fmt::format("{}/{}: a median time over {}'s for the same point (above 1: slower than {}).",
                    reports.size() > 2 ? "X" : reports[1].label, reports[0].label, reports[0].label,
                    reports[0].label));
  }
  add_mark_legend(any_timeout, any_noisy, any_flagged, max_noises, /*single=*/false, v.legend);
  for (const LabelledReport& lr : reports)
    add_cold_notes(lr.report->results, reports.size() > 1 ? lr.label + ": " : "", v.legend);
  v.knees = knees_table(reports);
  for (const LabelledReport& lr : reports) {
    for (std::string& line : completion_lines(lr, /*prefix=*/true)) {
      v.completion.push_back(std::move(line));
    }
  }
  return v;
}

}  // namespace

double max_noise_for(const Report& r, const FormatOptions& o) {
  if (available(o.max_noise)) return o.max_noise;
  if (r.config.is_object() && r.config.contains("measure")) {
    const nlohmann::json& m = r.config["measure"];
    if (m.is_object() && m.contains("max_noise") && m["max_noise"].is_number()) {
      return m["max_noise"].get<double>();
    }
  }
  return kDefaultMaxNoise;
}

bool noise_exceeded(const PointResult& p, double max_noise) {
  return p.status == PointStatus::ok && available(p.time_s.rel_noise) &&
         p.time_s.rel_noise > max_noise;
}

bool stopped_at_timeout(const PointResult& p, const nlohmann::json& config) {
  if (p.status != PointStatus::ok || p.time_s.samples == 0) return false;  // never timed
  const nlohmann::json* m = nullptr;
  if (config.is_object() && config.contains("measure")) m = &config["measure"];
  const auto number = [&](const char* key) { return m->contains(key) && m->at(key).is_number(); };
  const bool has_rule = m && m->is_object() && number("min_samples") && number("min_time_s") &&
                        number("max_noise") && !p.samples.empty();
  if (!has_rule) return !p.reason.empty();
  // As a double: the config is kept as read, and a huge count must not be cast to int.
  const double min_samples = m->at("min_samples").get<double>();
  const double min_time_s = m->at("min_time_s").get<double>();
  const double max_noise = m->at("max_noise").get<double>();
  const int n = static_cast<int>(p.samples.size());
  const double measured = std::accumulate(p.samples.begin(), p.samples.end(), 0.0);
  // With a single sample there is no noise estimate; min_samples = 1 means "don't care".
  const bool quiet = n == 1 ? min_samples == 1 : p.time_s.rel_noise <= max_noise;
  return !(n >= min_samples && measured >= min_time_s && quiet);
}

bool flagged(const PointResult& p) { return p.status == PointStatus::ok && !p.flags.empty(); }

std::string status_text(const PointResult& p, const nlohmann::json& config, double max_noise) {
  const Marks m{stopped_at_timeout(p, config), noise_exceeded(p, max_noise), flagged(p)};
  return std::string(status_name(p.status)) + (p.status == PointStatus::ok ? m.text() : "");
}

std::string device_line(const DeviceRecord& d) {
  auto bw = [](double x) { return x > 0 ? format_bandwidth(x) : std::string("n/a"); };
  std::string line = fmt::format(
      "device: {} \"{}\" | measured read {}, copy {}, triad {}, fp32 FMA {} | theoretical {} | "
      "datasheet {}",
      d.backend, d.name, bw(d.measured.read), bw(d.measured.copy), bw(d.measured.triad),
      d.measured.fma_flops > 0 ? format_si(d.measured.fma_flops, "FLOP/s") : std::string("n/a"),
      bw(d.bandwidth_theoretical), bw(d.bandwidth_datasheet));
  // The datasheet's compute roofs, where it gives them (a GPU): the CPU's only FLOP roof is the
  // measured FMA above, which its flops_peak repeats.
  if (d.flops_peak > 0 && d.flops_peak != d.measured.fma_flops) {
    line += fmt::format(", fp32 {}", format_si(d.flops_peak, "FLOP/s"));
  }
  if (d.flops_peak_tensor_f16 > 0) {
    line += fmt::format(", tensor f16 {}", format_si(d.flops_peak_tensor_f16, "FLOP/s"));
  }
  if (!d.measured.gemm_ceiling_name.empty()) {
    line += fmt::format(
        " | layer GEMMs {} {}",
        d.measured.gemm_flops > 0 ? format_si(d.measured.gemm_flops, "FLOP/s") : std::string("n/a"),
        d.measured.gemm_ceiling_name);
  }
  return line;
}

ResultsView results_view(std::span<const LabelledReport> reports, const FormatOptions& o) {
  if (reports.empty()) return {};
  return reports.size() == 1 ? single_view(reports[0], o) : side_by_side_view(reports, o);
}

}  // namespace decodebench
