// The HTML page of `decodebench report --format html`: the same cells as the table format
// (results_view.h), plus the devices, the figures and the configs.
#include "report/format_html.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "common/errors.h"
#include "report/format.h"
#include "report/table.h"
#include "results/knees.h"

namespace decodebench {

namespace {

bool starts_with_nocase(std::string_view s, std::size_t at, std::string_view prefix) {
  if (s.size() - std::min(at, s.size()) < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[at + i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

std::size_t skip_space(std::string_view s, std::size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

// Position after the prolog, doctype (with an internal subset) and comments; npos when one of
// them is not closed.
std::size_t skip_prolog(std::string_view s) {
  std::size_t i = 0;
  if (s.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // UTF-8 byte order mark
  for (;;) {
    i = skip_space(s, i);
    std::size_t end = std::string_view::npos;
    if (s.compare(i, 2, "<?") == 0) {
      end = s.find("?>", i);
      if (end != std::string_view::npos) end += 2;
    } else if (s.compare(i, 4, "<!--") == 0) {
      end = s.find("-->", i);
      if (end != std::string_view::npos) end += 3;
    } else if (starts_with_nocase(s, i, "<!DOCTYPE")) {
      int depth = 0;
      for (std::size_t j = i; j < s.size(); ++j) {
        if (s[j] == '[') ++depth;
        if (s[j] == ']') --depth;
        if (s[j] == '>' && depth == 0) {
          end = j + 1;
          break;
        }
      }
    } else {
      return i;
    }
    if (end == std::string_view::npos) return end;
    i = end;
  }
}

// The value that follows `name` = (quoted) or `name`( at each occurrence; values that point
// outside the file are refused. A plain scan: regexes recurse per character in libstdc++ and a
// figure may embed megabytes of base64.
std::string external_reference(std::string_view svg) {
  auto local = [](std::string_view v) {
    return v.empty() || v[0] == '#' || v.rfind("data:", 0) == 0;
  };
  for (std::size_t at = svg.find("href"); at != std::string_view::npos;
       at = svg.find("href", at + 4)) {
    std::size_t i = skip_space(svg, at + 4);
    if (i >= svg.size() || svg[i] != '=') continue;
    i = skip_space(svg, i + 1);
    if (i >= svg.size() || (svg[i] != '"' && svg[i] != '\'')) continue;
    const std::size_t close = svg.find(svg[i], i + 1);
    const std::string_view value =
        svg.substr(i + 1, close == std::string_view::npos ? std::string_view::npos : close - i - 1);
    if (!local(value)) return fmt::format("href=\"{}\"", value.substr(0, 80));
  }
  for (std::size_t at = svg.find("url("); at != std::string_view::npos;
       at = svg.find("url(", at + 4)) {
    std::size_t i = skip_space(svg, at + 4);
    if (i < svg.size() && (svg[i] == '"' || svg[i] == '\'')) ++i;
    const std::size_t close = svg.find_first_of(")\"'", i);
    const std::string_view value =
        svg.substr(i, close == std::string_view::npos ? std::string_view::npos : close - i);
    if (!local(value)) return fmt::format("url({})", value.substr(0, 80));
  }
  for (std::string_view bad : {"<script", "@import", " src="}) {
    if (svg.find(bad) != std::string_view::npos) return std::string(bad);
  }
  return {};
}

// The root's declarations of the SVG and XLink namespaces: names, not references, and the HTML
// parser puts an inline <svg> (and xlink:href) in those namespaces by itself; without them the
// page has no "http" anywhere.
std::string drop_root_namespaces(std::string svg) {
  const std::size_t root_end = svg.find('>');
  for (std::string_view decl :
       {" xmlns=\"http://www.w3.org/2000/svg\"", " xmlns:xlink=\"http://www.w3.org/1999/xlink\""}) {
    const std::size_t at = svg.find(decl);
    if (at != std::string::npos && at < root_end) svg.erase(at, decl.size());
  }
  return svg;
}

// <metadata> is never rendered; matplotlib's holds RDF/Dublin Core namespace URLs and its own
// home page as the creator: text, not references, but a page meant to have none keeps none.
std::string drop_metadata(std::string svg) {
  for (std::size_t at = svg.find("<metadata"); at != std::string::npos;
       at = svg.find("<metadata", at)) {
    const std::size_t tag_end = svg.find('>', at);
    if (tag_end == std::string::npos) break;
    std::size_t end = tag_end + 1;
    if (svg[tag_end - 1] != '/') {
      const std::size_t close = svg.find("</metadata>", tag_end);
      if (close == std::string::npos) break;
      end = close + std::string_view("</metadata>").size();
    }
    std::size_t line_start = at;  // and the indentation before it
    while (line_start > 0 && (svg[line_start - 1] == ' ' || svg[line_start - 1] == '\t')) {
      --line_start;
    }
    if (end < svg.size() && svg[end] == '\n') ++end;
    svg.erase(line_start, end - line_start);
    at = line_start;
  }
  return svg;
}

std::string id_safe(std::string_view s) {
  std::string out;
  for (char c : s) {
    out +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '-';
  }
  return out;
}

constexpr const char* kStyle = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d1d1f;
       max-width: 90rem; margin: 1.5rem auto; padding: 0 1rem; line-height: 1.45; }
h1 { font-size: 1.45rem; margin-bottom: .2rem; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
.db-meta, .db-legend, .db-note, figcaption { color: #555; font-size: .85rem; }
.db-legend { padding-left: 1.2rem; }
table { border-collapse: collapse; font-size: .82rem; margin: .6rem 0; display: block;
        overflow-x: auto; }
th, td { padding: .25rem .6rem; border-bottom: 1px solid #e6e6e6; text-align: left;
         white-space: nowrap; }
th { background: #f3f4f6; font-weight: 600; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody tr:nth-child(even) { background: #fafafa; }
.db-figure { margin: 1.2rem 0; }
.db-figure svg { max-width: 100%; height: auto; }
pre { background: #f6f8fa; padding: .8rem; overflow: auto; font-size: .78rem; }
)";

std::string list(const std::vector<std::string>& items, std::string_view css_class) {
  std::string out = css_class.empty() ? "<ul>\n" : fmt::format("<ul class=\"{}\">\n", css_class);
  for (const std::string& s : items) out += "<li>" + html_escape(s) + "</li>\n";
  return out + "</ul>\n";
}

// Distinct values in first-seen order, joined.
template <typename F>
std::string distinct(std::span<const LabelledReport> reports, F values_of) {
  std::vector<std::string> seen;
  for (const LabelledReport& lr : reports) {
    for (const std::string& v : values_of(*lr.report)) {
      if (std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
    }
  }
  std::string out;
  for (const std::string& v : seen) out += (out.empty() ? "" : ", ") + v;
  return out.empty() ? "no device" : out;
}

std::string devices_table(std::span<const LabelledReport> reports) {
  const bool several = reports.size() > 1;
  Table t;
  if (several) t.columns.push_back({"report"});
  for (const char* title : {"backend", "device", "SMs / threads", "memory"}) {
    t.columns.push_back({title});
  }
  for (const char* title :
       {"measured read", "measured copy", "measured triad", "fp32 FMA measured", "FLOP peak",
        "tensor f16 peak", "tensor fp8 peak", "theoretical", "datasheet"}) {
    t.columns.push_back({title, /*right=*/true});
  }
  std::vector<std::string> notes;
  auto bw = [](double x) { return x > 0 ? format_bandwidth(x) : std::string("n/a"); };
  auto flops = [](double x) { return x > 0 ? format_si(x, "FLOP/s") : std::string("n/a"); };
  for (const LabelledReport& lr : reports) {
    for (const DeviceRecord& d : lr.report->devices) {
      std::vector<std::string> row;
      if (several) row.push_back(lr.label);
      row.insert(
          row.end(),
          {d.backend, d.name, d.sm_count > 0 ? fmt::format("{}", d.sm_count) : "n/a",
           d.mem_bytes > 0 ? format_bytes(static_cast<double>(d.mem_bytes)) : "n/a",
           bw(d.measured.read), bw(d.measured.copy), bw(d.measured.triad),
           flops(d.measured.fma_flops), flops(d.flops_peak), flops(d.flops_peak_tensor_f16),
           flops(d.flops_peak_tensor_fp8), bw(d.bandwidth_theoretical), bw(d.bandwidth_datasheet)});
      t.rows.push_back(std::move(row));
      for (const std::string* s : {&d.measured.note, &d.measured.shapes}) {
        if (!s->empty()) notes.push_back(fmt::format("{}: {}", d.name, *s));
      }
      if (d.flops_peak_tensor_f16 > 0) {
        notes.push_back(fmt::format(
            "{}: tensor peaks are the datasheet's dense figures (no sparsity); the tensor-core "
            "kernels' FLOP roof is the f16 one (fp8 KV enters their MMA as f16), the others' the "
            "fp32 FMA peak",
            d.name));
      }
    }
  }
  std::string out = render_html(t, "db-devices");
  if (!notes.empty()) out += list(notes, "db-note");
  return out;
}

}  // namespace

HtmlFigure read_svg_figure(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("--figure {}: cannot open the file", path.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::size_t start = skip_prolog(text);
  const bool root = start != std::string::npos && text.compare(start, 4, "<svg") == 0 &&
                    start + 4 < text.size() &&
                    (std::isspace(static_cast<unsigned char>(text[start + 4])) ||
                     text[start + 4] == '>' || text[start + 4] == '/');
  const std::size_t close = text.rfind("</svg>");
  if (!root || close == std::string::npos || close < start ||
      skip_space(text, close + 6) != text.size()) {
    throw InputError(fmt::format(
        "--figure {}: not an SVG file (expected one <svg> element after the XML prolog)",
        path.string()));
  }
  std::string svg = text.substr(start, close + 6 - start);
  const std::string ref = external_reference(svg);
  if (!ref.empty()) {
    throw InputError(
        fmt::format("--figure {}: refers to something outside the file ({}); the page must be "
                    "self-contained",
                    path.string(), ref));
  }
  return {path.stem().string(), drop_metadata(drop_root_namespaces(std::move(svg)))};
}

std::string format_html(std::span<const LabelledReport> reports,
                        std::span<const HtmlFigure> figures, const FormatOptions& o) {
  std::set<std::string> ids;
  for (const HtmlFigure& f : figures) {
    if (!ids.insert(id_safe(f.stem)).second) {
      throw InputError(fmt::format(
          "--figure: two figures are named '{}'; their ids (fig-{}) would clash, rename one",
          f.stem, id_safe(f.stem)));
    }
  }
  const ResultsView v = results_view(reports, o);
  const std::string devices = distinct(reports, [](const Report& r) {
    std::vector<std::string> names;
    for (const DeviceRecord& d : r.devices) names.push_back(d.name);
    return names;
  });
  const std::string shas =
      distinct(reports, [](const Report& r) { return std::vector<std::string>{r.tool.git_sha}; });
  const std::string dates =
      distinct(reports, [](const Report& r) { return std::vector<std::string>{r.created}; });

  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += fmt::format("<title>decodebench: {} ({}, {})</title>\n", html_escape(devices),
                     html_escape(shas), html_escape(dates));
  out += fmt::format("<style>{}</style>\n</head>\n<body>\n", kStyle);
  out += fmt::format("<h1>decodebench: {}</h1>\n", html_escape(devices));
  for (const LabelledReport& lr : reports) {
    const Report& r = *lr.report;
    out += fmt::format(
        "<p class=\"db-meta\">{}{} {}, git {}, created {}, host {} ({}), {} points, {}</p>\n",
        reports.size() > 1 ? html_escape(lr.label) + ": " : "", html_escape(r.tool.name),
        html_escape(r.tool.version), html_escape(r.tool.git_sha), html_escape(r.created),
        html_escape(r.host.hostname), html_escape(r.host.cpu), r.results.size(),
        html_escape(completion_state_name(r.completion.state)));
  }

  out += "<h2>Device and ceilings</h2>\n" + devices_table(reports);

  out += "<h2>Figures</h2>\n";
  // This page draws nothing itself; say where figures come from rather than leave a gap.
  if (figures.empty()) {
    out +=
        "<p class=\"db-note\">No figures: decodebench inlines only the SVGs given with "
        "--figure. scripts/plot.py REPORT draws them; scripts/plot.py REPORT --html PAGE writes "
        "this page with every figure.</p>\n";
  }
  for (const HtmlFigure& f : figures) {
    out += fmt::format(
        "<figure class=\"db-figure\" id=\"fig-{}\">\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
        html_escape(id_safe(f.stem)), f.svg, html_escape(f.stem));
  }

  out += "<h2>Results</h2>\n" + render_html(v.results, "db-results");
  out += list(v.legend, "db-legend");
  if (!v.only_in_some.empty()) {
    out += "<h3>Points in only some reports</h3>\n" + list(v.only_in_some, "db-only-in-some");
  }

  if (!v.knees.rows.empty()) {
    out += "<h2>Knees</h2>\n";
    out += fmt::format("<p class=\"db-note\">{}</p>\n", html_escape(kKneesDefinition));
    out += render_html(v.knees, "db-knees");
  }
  if (!v.not_ok.empty()) out += "<h2>Not ok</h2>\n" + list(v.not_ok, "db-not-ok");
  for (const std::string& l : v.completion) {
    out += fmt::format("<p class=\"db-note\">{}</p>\n", html_escape(l));
  }

  out += "<h2>Config</h2>\n";
  for (const LabelledReport& lr : reports) {
    out += fmt::format("<details><summary>config{}</summary><pre>{}</pre></details>\n",
                       reports.size() > 1 ? " of " + html_escape(lr.label) : "",
                       html_escape(lr.report->config.dump(2)));
  }
  return out + "</body>\n</html>\n";
}

}  // namespace decodebench
