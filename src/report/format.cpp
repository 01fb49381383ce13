// Printers for a report's results: aligned table (fmt), JSON, CSV, Markdown; the cells of the
// table and Markdown come from results_view.h.
#include "report/format.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "common/units.h"
#include "report/table.h"
#include "results/knees.h"
#include "results/point_identity.h"

namespace decodebench {

OutputFormat parse_output_format(std::string_view s) {
  for (OutputFormat f :
       {OutputFormat::table, OutputFormat::json, OutputFormat::csv, OutputFormat::md}) {
    if (output_format_name(f) == s) return f;
  }
  throw InputError(fmt::format("unknown output format '{}'; valid: table, json, csv, md", s));
}

std::string_view output_format_name(OutputFormat f) {
  switch (f) {
    case OutputFormat::table: return "table";
    case OutputFormat::json: return "json";
    case OutputFormat::csv: return "csv";
    case OutputFormat::md: return "md";
  }
  return "?";
}

namespace {

constexpr const char* kNa = "-";

std::string knees_heading() {
  return fmt::format(
      "knees (the smallest batch of a series reaching {:.0f}% of its maximum GB/s; scope layer: "
      "of its tok/s)",
      100 * kKneeFraction);
}

std::string device_lines(std::span<const LabelledReport> reports, std::string_view end) {
  std::string out;
  for (const LabelledReport& lr : reports) {
    for (const auto& d : lr.report->devices) {
      out += (reports.size() > 1 ? lr.label + ": " : std::string()) + device_line(d) +
             std::string(end);
    }
  }
  return out;
}

std::string format_table(std::span<const LabelledReport> reports, const ResultsView& v) {
  std::string out = device_lines(reports, "\n");
  out += render_text(v.results);
  for (const std::string& l : v.legend) out += l + "\n";
  if (!v.only_in_some.empty()) {
    out += "points in only some reports:\n";
    for (const std::string& l : v.only_in_some) out += "  " + l + "\n";
  }
  if (!v.knees.rows.empty()) out += knees_heading() + ":\n" + render_text(v.knees, "  ");
  if (!v.not_ok.empty()) {
    out += "not ok:\n";
    for (const std::string& l : v.not_ok) out += "  " + l + "\n";
  }
  for (const std::string& l : v.completion) out += l + "\n";
  return out;
}

std::string format_md(std::span<const LabelledReport> reports, const ResultsView& v) {
  std::string out = device_lines(reports, "\n\n");
  out += render_md(v.results);
  out += "\n";
  for (const std::string& l : v.legend) out += "- " + md_escape(l) + "\n";
  if (!v.only_in_some.empty()) {
    out += "\nPoints in only some reports:\n\n";
    for (const std::string& l : v.only_in_some) out += "- " + md_escape(l) + "\n";
  }
  if (!v.knees.rows.empty()) out += fmt::format("\n{}:\n\n{}", knees_heading(), render_md(v.knees));
  if (!v.not_ok.empty()) {
    out += "\nNot ok:\n\n";
    for (const std::string& l : v.not_ok) out += "- " + md_escape(l) + "\n";
  }
  if (!v.completion.empty()) out += "\n";
  for (const std::string& l : v.completion) out += md_escape(l) + "\n";
  return out;
}

std::string csv_number(double x) { return std::isfinite(x) ? fmt::format("{}", x) : ""; }

// The self-checks' flags of a point, ';'-separated ("" where none).
std::string flag_names(const PointResult& p) {
  std::string out;
  for (const PointFlag& f : p.flags) out += (out.empty() ? "" : ";") + f.name;
  return out;
}
std::string flag_reasons(const PointResult& p) {
  std::string out;
  for (const PointFlag& f : p.flags) out += (out.empty() ? "" : "; ") + f.reason;
  return out;
}

std::string format_csv(const Report& r, const FormatOptions& o) {
  const double max_noise = max_noise_for(r, o);
  std::string out =
      "index,kernel,kernel_requested,backend,model,kv_dtype,q_dtype,block_size,batch,"
      "context_kind,context_lo,context_hi,hit_rate,hit_rate_actual,prefix_groups,status,"
      "median_s,min_s,max_s,p10_s,p90_s,mean_s,rel_noise,samples,bytes_min,kv_bytes_logical,"
      "kv_bytes_unique,flops,arithmetic_intensity,achieved_bandwidth_Bps,"
      "logical_bandwidth_Bps,bound,compute_unit,compute_ceiling,compute_ceiling_flops,t_roof_s,"
      "fraction_measured,fraction_datasheet,"
      "paired_read_Bps,fraction_paired,tokens_per_s_attention_only,max_abs_err,max_rel_err,quant_"
      "rel_err,scope,tokens_per_s,weights_dtype,weight_bytes,activation_bytes,time_weights_s,"
      "time_kv_s,tokens_per_s_with_lm_head,busy,busy_source,power_W,energy_J_per_step,"
      "energy_J_per_token,flags,flag_reasons,flush_bytes,cache_bytes,noise_exceeded,"
      "stopped_at_timeout,reason\n";
  for (const auto& p : r.results) {
    const bool ok = p.status == PointStatus::ok;
    const bool layer = p.layer.has_value();
    const std::optional<ComputeCeiling>& ceiling = p.roofline.compute_ceiling;
    const UtilizationRecord* u = p.utilization ? &*p.utilization : nullptr;
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},"
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},"
        "{},{},{},{},{},{}\n",
        p.index, csv_cell(p.kernel), csv_cell(p.kernel_requested), csv_cell(p.backend),
        csv_cell(p.model), dtype_name(p.kv_dtype), dtype_name(p.q_dtype), p.block_size, p.batch,
        p.context.kind == ContextSpec::Kind::fixed ? "fixed" : "ragged", p.context.lo, p.context.hi,
        p.hit_rate, p.hit_rate_actual, p.prefix_groups, status_name(p.status),
        csv_number(p.time_s.median), csv_number(p.time_s.min), csv_number(p.time_s.max),
        csv_number(p.time_s.p10), csv_number(p.time_s.p90), csv_number(p.time_s.mean),
        csv_number(p.time_s.rel_noise), p.time_s.samples, p.bytes.min, p.bytes.kv_logical,
        p.bytes.kv_unique, p.flops, p.arithmetic_intensity, csv_number(p.bandwidth.achieved),
        csv_number(p.bandwidth.logical), ok ? bound_name(p.roofline.bound) : "",
        ceiling ? compute_unit_name(ceiling->unit) : "", ceiling ? csv_cell(ceiling->name) : "",
        csv_number(ceiling ? ceiling->flops : kNotAvailable), csv_number(p.roofline.t_roof_s),
        csv_number(p.roofline.fraction_measured), csv_number(p.roofline.fraction_datasheet),
        csv_number(p.roofline.paired_read_Bps), csv_number(p.roofline.fraction_paired),
        csv_number(layer ? kNotAvailable : p.tokens_per_s), csv_number(p.error.max_abs),
        csv_number(p.error.max_rel), csv_number(p.error.quant_rel), scope_name(p.scope),
        csv_number(p.tokens_per_s), layer ? dtype_name(p.layer->weights_dtype) : "",
        csv_number(layer ? p.layer->weight_bytes : kNotAvailable),
        csv_number(layer ? p.layer->activation_bytes : kNotAvailable),
        csv_number(layer ? p.layer->time_weights_s : kNotAvailable),
        csv_number(layer ? p.layer->time_kv_s : kNotAvailable),
        csv_number(layer ? p.layer->tokens_per_s_with_lm_head : kNotAvailable),
        csv_number(u ? u->busy : kNotAvailable), u ? busy_source_name(u->source) : "",
        csv_number(u ? u->power_W : kNotAvailable),
        csv_number(u ? u->energy_J_per_step : kNotAvailable),
        csv_number(u ? u->energy_J_per_token : kNotAvailable), csv_cell(flag_names(p)),
        csv_cell(flag_reasons(p)), csv_number(p.flush ? p.flush->flush_bytes : kNotAvailable),
        csv_number(p.flush ? p.flush->cache_bytes : kNotAvailable),
        noise_exceeded(p, max_noise) ? 1 : 0, stopped_at_timeout(p, r.config) ? 1 : 0,
        csv_cell(p.reason));
  }
  return out;
}

// Side by side for machines: the identity once, then per report its status, times, bandwidths,
// tokens/s and marks, and each later report's median over the first's. Every point of any
// report gets a row (the table lists those below it); a report without the point has empty cells.
std::string format_csv(std::span<const LabelledReport> reports, const FormatOptions& o) {
  std::vector<std::map<std::string, const PointResult*>> by_id(reports.size());
  std::vector<std::pair<std::string, const PointResult*>> order;  // first appearance
  for (std::size_t i = 0; i < reports.size(); ++i) {
    for (const PointResult& p : reports[i].report->results) {
      const std::string id = point_identity(p);
      const bool known =
          std::any_of(by_id.begin(), by_id.end(), [&](const auto& m) { return m.count(id) > 0; });
      if (!known) order.emplace_back(id, &p);
      by_id[i].emplace(id, &p);
    }
  }
  std::string out =
      "identity,backend,kernel_requested,model,kv_dtype,q_dtype,block_size,batch,context_kind,"
      "context_lo,context_hi,hit_rate,prefix_groups";
  for (const LabelledReport& lr : reports) {
    for (const char* col :
         {"status", "kernel", "median_s", "rel_noise", "samples", "achieved_bandwidth_Bps",
          "logical_bandwidth_Bps", "tokens_per_s_attention_only", "flags", "noise_exceeded",
          "stopped_at_timeout"}) {
      out += fmt::format(",{}", csv_cell(lr.label + "_" + col));
    }
  }
  for (std::size_t i = 1; i < reports.size(); ++i) {
    out += fmt::format(",{}", csv_cell(reports[i].label + "_median_over_" + reports[0].label));
  }
  out += "\n";
  for (const auto& [id, p] : order) {
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}", csv_cell(id), csv_cell(p->backend),
                       csv_cell(p->kernel_requested), csv_cell(p->model), dtype_name(p->kv_dtype),
                       dtype_name(p->q_dtype), p->block_size, p->batch,
                       p->context.kind == ContextSpec::Kind::fixed ? "fixed" : "ragged",
                       p->context.lo, p->context.hi, p->hit_rate, p->prefix_groups);
    std::vector<const PointResult*> pts;
    for (std::size_t i = 0; i < reports.size(); ++i) {
      const auto it = by_id[i].find(id);
      const PointResult* q = it == by_id[i].end() ? nullptr : it->second;
      pts.push_back(q);
      if (!q) {
        out += std::string(11, ',');
        continue;
      }
      out += fmt::format(",{},{},{},{},{},{},{},{},{},{},{}", status_name(q->status),
                         csv_cell(q->kernel), csv_number(q->time_s.median),
                         csv_number(q->time_s.rel_noise), q->time_s.samples,
                         csv_number(q->bandwidth.achieved), csv_number(q->bandwidth.logical),
                         csv_number(q->tokens_per_s), csv_cell(flag_names(*q)),
                         noise_exceeded(*q, max_noise_for(*reports[i].report, o)) ? 1 : 0,
                         stopped_at_timeout(*q, reports[i].report->config) ? 1 : 0);
    }
    for (std::size_t i = 1; i < reports.size(); ++i) {
      const bool both = pts[0] && pts[i] && pts[0]->status == PointStatus::ok &&
                        pts[i]->status == PointStatus::ok && pts[0]->time_s.median > 0;
      out +=
          fmt::format(",{}", both ? csv_number(pts[i]->time_s.median / pts[0]->time_s.median) : "");
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string format_reports(std::span<const LabelledReport> reports, OutputFormat fmt_kind,
                           const FormatOptions& o) {
  if (reports.empty()) return {};
  switch (fmt_kind) {
    case OutputFormat::table: return format_table(reports, results_view(reports, o));
    case OutputFormat::json:
      if (reports.size() > 1) {
        throw InputError("--format json prints one report; give one file, or table, md or csv");
      }
      return to_json(*reports[0].report).dump(2) + "\n";
    case OutputFormat::csv:
      return reports.size() == 1 ? format_csv(*reports[0].report, o) : format_csv(reports, o);
    case OutputFormat::md: return format_md(reports, results_view(reports, o));
  }
  return {};
}

std::string format_results(const Report& r, OutputFormat fmt_kind, const FormatOptions& o) {
  const LabelledReport one{"", &r};
  return format_reports({&one, 1}, fmt_kind, o);
}

}  // namespace decodebench
