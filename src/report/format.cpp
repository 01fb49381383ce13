// Printers for a report's results: aligned table (fmt), JSON, CSV, Markdown.
#include "report/format.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"

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

// value scaled to [1, 1000) with an SI prefix; 3 significant digits.
std::string si(double x, std::string_view unit) {
  if (!std::isfinite(x)) return kNa;
  static constexpr std::array<std::pair<double, const char*>, 5> kUp{
      {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}, {1, ""}}};
  for (const auto& [scale, prefix] : kUp) {
    if (std::fabs(x) >= scale) {
      const double v = x / scale;
      std::string out =
          fmt::format("{:.{}f} {}{}", v, v >= 100 ? 0 : (v >= 10 ? 1 : 2), prefix, unit);
      if (out.back() == ' ') out.pop_back();  // no prefix and no unit
      return out;
    }
  }
  return unit.empty() ? fmt::format("{:.3g}", x) : fmt::format("{:.3g} {}", x, unit);
}

std::string percent(double fraction) {
  if (!std::isfinite(fraction)) return kNa;
  return fmt::format("{:.1f}%", 100 * fraction);
}

// Display width in code points (the table has "µ" and "→"; all our text is otherwise ASCII).
std::size_t display_width(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string pad(std::string_view s, std::size_t width, bool right) {
  const std::size_t w = display_width(s);
  const std::string fill(width > w ? width - w : 0, ' ');
  return right ? fill + std::string(s) : std::string(s) + fill;
}

std::string kernel_label(const PointResult& p) {
  if (p.kernel_requested == "auto" && !p.kernel.empty() && p.kernel != "auto") {
    return fmt::format("auto→{}", p.kernel);
  }
  return p.kernel.empty() ? p.kernel_requested : p.kernel;
}

std::string context_text(const ContextSpec& c) {
  return c.kind == ContextSpec::Kind::fixed ? fmt::format("{}", c.lo)
                                            : fmt::format("{}:{}", c.lo, c.hi);
}

struct Column {
  const char* title;
  bool right;  // numbers right-aligned
};

constexpr std::array<Column, 15> kColumns{{{"kernel", false},
                                           {"model", false},
                                           {"kv", false},
                                           {"batch", true},
                                           {"context", true},
                                           {"h req/act", true},
                                           {"status", false},
                                           {"median", true},
                                           {"GB/s", true},
                                           {"% roof", true},
                                           {"% datasheet", true},
                                           {"% paired", true},
                                           {"tok/s (attn only)", true},
                                           {"noise", true},
                                           {"samples", true}}};

std::vector<std::string> row_cells(const PointResult& p) {
  const bool ok = p.status == PointStatus::ok;
  return {kernel_label(p),
          p.model,
          std::string(dtype_name(p.kv_dtype)),
          fmt::format("{}", p.batch),
          context_text(p.context),
          fmt::format("{:.2f}/{:.2f}", p.hit_rate, p.hit_rate_actual),
          std::string(status_name(p.status)),
          ok ? format_seconds(p.time_s.median) : kNa,
          ok && available(p.bandwidth.achieved) ? fmt::format("{:.1f}", p.bandwidth.achieved / 1e9)
                                                : kNa,
          ok ? percent(p.roofline.fraction_measured) : kNa,
          ok ? percent(p.roofline.fraction_datasheet) : kNa,
          ok ? percent(p.roofline.fraction_paired) : kNa,
          ok ? si(p.tokens_per_s, "") : kNa,
          ok ? percent(p.time_s.rel_noise) : kNa,
          ok ? fmt::format("{}", p.time_s.samples) : kNa};
}

std::string device_line(const DeviceRecord& d) {
  auto bw = [](double x) { return x > 0 ? format_bandwidth(x) : std::string("n/a"); };
  return fmt::format(
      "device: {} \"{}\" | measured read {}, copy {}, triad {}, fp32 FMA {} | theoretical {} | "
      "datasheet {}",
      d.backend, d.name, bw(d.measured.read), bw(d.measured.copy), bw(d.measured.triad),
      d.measured.fma_flops > 0 ? si(d.measured.fma_flops, "FLOP/s") : std::string("n/a"),
      bw(d.bandwidth_theoretical), bw(d.bandwidth_datasheet));
}

std::string not_ok_notes(const Report& r) {
  std::string out;
  for (const auto& p : r.results) {
    if (p.status == PointStatus::ok) continue;
    out += fmt::format("  point {} ({}, {}, batch {}, context {}): {}: {}\n", p.index,
                       kernel_label(p), dtype_name(p.kv_dtype), p.batch, context_text(p.context),
                       status_name(p.status), p.reason);
  }
  return out;
}

std::string format_table(const Report& r) {
  std::string out;
  for (const auto& d : r.devices) out += device_line(d) + "\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : r.results) rows.push_back(row_cells(p));
  std::array<std::size_t, kColumns.size()> width{};
  for (std::size_t c = 0; c < kColumns.size(); ++c) {
    width[c] = display_width(kColumns[c].title);
    for (const auto& row : rows) width[c] = std::max(width[c], display_width(row[c]));
  }
  auto line = [&](auto cell_of) {
    std::string s;
    for (std::size_t c = 0; c < kColumns.size(); ++c) {
      s += pad(cell_of(c), width[c], kColumns[c].right);
      s += c + 1 < kColumns.size() ? "  " : "\n";
    }
    return s;
  };
  out += line([&](std::size_t c) { return std::string(kColumns[c].title); });
  for (const auto& row : rows) out += line([&](std::size_t c) { return row[c]; });
  out +=
      "% roof: the median time's fraction of the roofline time against the measured "
      "ceilings; % paired: the same against the read bandwidth measured right before each "
      "sample (cpu); tok/s counts attention only (batch / (step time x layers)).\n";
  const std::string notes = not_ok_notes(r);
  if (!notes.empty()) out += "not ok:\n" + notes;
  if (r.completion.state != Completion::State::complete) {
    out += fmt::format("sweep {}: {} ({} of {} points finished)\n",
                       completion_state_name(r.completion.state), r.completion.reason,
                       r.results.size(), r.completion.points_planned);
  }
  return out;
}

std::string format_md(const Report& r) {
  std::string out;
  for (const auto& d : r.devices) out += device_line(d) + "\n\n";
  out += "|";
  for (const auto& c : kColumns) out += fmt::format(" {} |", c.title);
  out += "\n|";
  for (const auto& c : kColumns) out += c.right ? "---:|" : "---|";
  out += "\n";
  for (const auto& p : r.results) {
    out += "|";
    for (const auto& cell : row_cells(p)) out += fmt::format(" {} |", cell);
    out += "\n";
  }
  const std::string notes = not_ok_notes(r);
  if (!notes.empty()) out += "\nNot ok:\n\n" + notes;
  return out;
}

std::string csv_number(double x) { return std::isfinite(x) ? fmt::format("{}", x) : ""; }

std::string csv_text(std::string_view s) {
  if (s.find_first_of(",\"\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string format_csv(const Report& r) {
  std::string out =
      "index,kernel,kernel_requested,backend,model,kv_dtype,q_dtype,block_size,batch,"
      "context_kind,context_lo,context_hi,hit_rate,hit_rate_actual,prefix_groups,status,"
      "median_s,min_s,max_s,p10_s,p90_s,mean_s,rel_noise,samples,bytes_min,kv_bytes_logical,"
      "kv_bytes_unique,flops,arithmetic_intensity,achieved_bandwidth_Bps,"
      "logical_bandwidth_Bps,bound,t_roof_s,fraction_measured,fraction_datasheet,"
      "paired_read_Bps,fraction_paired,tokens_per_s_attention_only,max_abs_err,max_rel_err,quant_"
      "rel_err,reason\n";
  for (const auto& p : r.results) {
    const bool ok = p.status == PointStatus::ok;
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},"
        "{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
        p.index, csv_text(p.kernel), csv_text(p.kernel_requested), csv_text(p.backend),
        csv_text(p.model), dtype_name(p.kv_dtype), dtype_name(p.q_dtype), p.block_size, p.batch,
        p.context.kind == ContextSpec::Kind::fixed ? "fixed" : "ragged", p.context.lo, p.context.hi,
        p.hit_rate, p.hit_rate_actual, p.prefix_groups, status_name(p.status),
        csv_number(p.time_s.median), csv_number(p.time_s.min), csv_number(p.time_s.max),
        csv_number(p.time_s.p10), csv_number(p.time_s.p90), csv_number(p.time_s.mean),
        csv_number(p.time_s.rel_noise), p.time_s.samples, p.bytes.min, p.bytes.kv_logical,
        p.bytes.kv_unique, p.flops, p.arithmetic_intensity, csv_number(p.bandwidth.achieved),
        csv_number(p.bandwidth.logical), ok ? bound_name(p.roofline.bound) : "",
        csv_number(p.roofline.t_roof_s), csv_number(p.roofline.fraction_measured),
        csv_number(p.roofline.fraction_datasheet), csv_number(p.roofline.paired_read_Bps),
        csv_number(p.roofline.fraction_paired), csv_number(p.tokens_per_s),
        csv_number(p.error.max_abs), csv_number(p.error.max_rel), csv_number(p.error.quant_rel),
        csv_text(p.reason));
  }
  return out;
}

}  // namespace

std::string format_bandwidth(double bytes_per_s) { return si(bytes_per_s, "B/s"); }
std::string format_bytes(double bytes) { return si(bytes, "B"); }

std::string format_seconds(double s) {
  if (!std::isfinite(s)) return kNa;
  auto three = [](double v) { return fmt::format("{:.{}f}", v, v >= 100 ? 0 : (v >= 10 ? 1 : 2)); };
  if (s >= 1) return three(s) + " s";
  if (s >= 1e-3) return three(s * 1e3) + " ms";
  if (s >= 1e-6) return three(s * 1e6) + " µs";
  return three(s * 1e9) + " ns";
}

std::string format_results(const Report& r, OutputFormat fmt_kind) {
  switch (fmt_kind) {
    case OutputFormat::table: return format_table(r);
    case OutputFormat::json: return to_json(r).dump(2) + "\n";
    case OutputFormat::csv: return format_csv(r);
    case OutputFormat::md: return format_md(r);
  }
  return {};
}

}  // namespace decodebench
