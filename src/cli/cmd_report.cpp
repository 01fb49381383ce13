// `decodebench report FILE...`: print saved reports again (several side by side), as a table,
// Markdown, CSV or one self-contained HTML page, and a saved quant-error document as
// quant-error printed it. Reads documents only, never runs a kernel.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/errors.h"
#include "common/json_in.h"
#include "report/cache_sim_view.h"
#include "report/ceilings_view.h"
#include "report/format.h"
#include "report/format_html.h"
#include "report/quant_error_view.h"
#include "report/replay_table.h"
#include "results/report.h"
#include "static_model/static_report.h"

namespace decodebench::cli {
namespace {

struct ReportOptions {
  std::vector<std::string> files;
  std::string format = "table";
  std::string out;
  double max_noise = kNotAvailable;
  std::vector<std::string> figures;
  std::vector<std::string> labels;
};

// Column labels: --label names, else the file stems (the path where two stems are equal).
std::vector<std::string> labels_for(const ReportOptions& o) {
  if (!o.labels.empty()) {
    if (o.labels.size() != o.files.size()) {
      throw InputError(fmt::format("--label: {} labels for {} report files; give one per file",
                                   o.labels.size(), o.files.size()));
    }
    return o.labels;
  }
  std::vector<std::string> labels;
  for (const std::string& f : o.files) labels.push_back(std::filesystem::path(f).stem().string());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    for (std::size_t j = 0; j < labels.size(); ++j) {
      if (i != j && labels[i] == std::filesystem::path(o.files[j]).stem().string()) {
        labels[i] = o.files[i];
      }
    }
  }
  return labels;
}

// A file that is another command's document: quant-error's ("kind": "quant-error"), cache-sim's
// (a "cache_sim" section), ceilings' (a device record with its links) or the static model's
// (assumptions, devices and instances); nullopt for anything else,
// which read_report then reads or refuses by name.
std::optional<nlohmann::json> other_document(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  if (j.contains("kind") && j["kind"] == "quant-error") return j;
  if (j.contains("cache_sim") && !j.contains("results")) return j;
  if (is_ceilings_document(j)) return j;
  if (static_model::is_static_document(j)) return j;
  return std::nullopt;
}

// `kernels --static`'s own views of its JSON document: the table (with what was read) and the
// Markdown table.
int reprint_static(const ReportOptions& o, const nlohmann::json& j) {
  const static_model::StaticDocument d = static_model::static_from_json(j, o.files.front());
  if (o.format == "table") {
    std::string text = static_model::static_table(d.instances, d.settings);
    if (!d.binary.empty()) text += fmt::format("  read from {} by {}\n", d.binary, d.cuobjdump);
    emit(text, o.out);
  } else if (o.format == "md") {
    emit(static_model::static_markdown(d.instances, d.settings), o.out);
  } else {
    throw InputError(fmt::format(
        "--format {}: a static-model document (kernels --static) prints as table or md", o.format));
  }
  return kExitOk;
}

// ceilings' own view of its document, in the formats both commands print.
int reprint_ceilings(const ReportOptions& o, const nlohmann::json& j) {
  const CeilingsDocument d = ceilings_from_json(j, o.files.front());
  if (o.format == "table") {
    emit(ceilings_text(d), o.out);
  } else if (o.format == "csv" || o.format == "md") {
    emit(ceilings_rows(d, o.format == "md"), o.out);
  } else {
    throw InputError(
        fmt::format("--format {}: a ceilings document prints as table, md or csv", o.format));
  }
  return kExitOk;
}

// cache-sim's own view of its document, in the formats both commands print.
int reprint_cache_sim(const ReportOptions& o, const nlohmann::json& j) {
  const std::string& file = o.files.front();
  const JsonIn in(j, file);
  in.reject_unknown_keys({"schema_version", "tool", "created", "host", "cache_sim"});
  const CacheSimDocument d = cache_sim_from_json(j.at("cache_sim"), file);
  if (o.format == "csv") {
    emit(cache_sim_csv_text(d.settings), o.out);
  } else if (o.format == "table" || o.format == "md") {
    emit(cache_sim_table_text(d, o.format == "md"), o.out);
  } else {
    throw InputError(
        fmt::format("--format {}: a cache-sim document prints as table, md or csv", o.format));
  }
  return kExitOk;
}

// quant-error's own view of its document, in the formats both commands print.
int reprint_quant_error(const ReportOptions& o, const nlohmann::json& j) {
  const QuantErrorResult r = quant_error_from_json(j, o.files.front());
  const bool per_layer = r.layers.size() > 1;
  std::string text;
  if (o.format == "csv") {
    text = render_csv(quant_error_table(r, per_layer));
  } else if (o.format == "md") {
    text = quant_error_header(r) + "\n" + render_md(quant_error_table(r, per_layer)) + "\n" +
           quant_error_footer(r);
  } else if (o.format == "table") {
    text = quant_error_header(r) + render_text(quant_error_table(r, per_layer)) +
           quant_error_footer(r);
  } else {
    throw InputError(
        fmt::format("--format {}: a quant-error document prints as table, md or csv", o.format));
  }
  emit(text, o.out);
  return kExitOk;
}

int run(const ReportOptions& o) {
  const bool html = o.format == "html";
  OutputFormat format = OutputFormat::table;
  if (!html) {
    if (o.format != "table" && o.format != "md" && o.format != "csv") {
      throw InputError(
          fmt::format("--format: unknown format '{}'; valid: table, md, csv, html", o.format));
    }
    format = parse_output_format(o.format);
    if (!o.figures.empty()) {
      throw InputError(
          fmt::format("--figure is for --format html only (the format is {})", o.format));
    }
  }
  if (available(o.max_noise) && o.max_noise < 0) {
    throw InputError(fmt::format("--max-noise must be >= 0 (0.005 = 0.5 %), got {}", o.max_noise));
  }
  if (const auto doc = other_document(o.files.front())) {
    if (o.files.size() != 1) {
      throw InputError(fmt::format(
          "{}: a quant-error, cache-sim, ceilings or static-model document is printed alone "
          "(got {} files)",
          o.files.front(), o.files.size()));
    }
    if (doc->contains("cache_sim")) return reprint_cache_sim(o, *doc);
    if (is_ceilings_document(*doc)) return reprint_ceilings(o, *doc);
    if (static_model::is_static_document(*doc)) return reprint_static(o, *doc);
    return reprint_quant_error(o, *doc);
  }
  // Every input is checked before anything is written.
  std::vector<Report> reports;
  for (const std::string& f : o.files) {
    reports.push_back(read_report(f));
    // The output says so too (its completion line); stderr tells a script that only checks it.
    if (const std::string note = partial_note(reports.back()); !note.empty())
      std::cerr << fmt::format("note: {} is partial: {}\n", f, note);
  }
  std::vector<HtmlFigure> figures;
  for (const std::string& f : o.figures) figures.push_back(read_svg_figure(f));
  const std::vector<std::string> labels = labels_for(o);
  std::vector<LabelledReport> labelled;
  for (std::size_t i = 0; i < reports.size(); ++i) labelled.push_back({labels[i], &reports[i]});

  FormatOptions fo;
  fo.max_noise = o.max_noise;
  std::string text =
      html ? format_html(labelled, figures, fo) : format_reports(labelled, format, fo);
  // A replay's report: its steps above, the operator's table of its settings below.
  if (!html && format != OutputFormat::json && reports.size() == 1 && reports[0].replay.is_object())
    text += "\n" + format_replay(reports[0], format);
  emit(text, o.out);
  return kExitOk;
}

}  // namespace

void add_report_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Print saved reports again: one as the sweep prints it, several side by side where their "
      "points match (by identity, not index), with each later report's median over the "
      "first's. --format html writes one self-contained page with the devices, results, knees "
      "and config, and the SVG figures given with --figure: this command draws none "
      "(scripts/plot.py REPORT draws them; scripts/plot.py REPORT --html PAGE draws them and "
      "writes the page with all of them).");
  cmd->add_option("files", o->files,
                  "Reports (JSON) written by sweep, replay, check or merge; or one document of "
                  "quant-error, cache-sim, ceilings or kernels --static, printed as its command "
                  "prints it")
      ->required();
  add_format_option(*cmd, o->format, "table, md, csv or html");
  // report writes no JSON document of its own, so --out has no meaning here; the spelling that
  // wrote stdout to a file is answered for one release.
  cmd->add_option_function<std::string>(
         "--out",
         [o](const std::string& path) {
           std::cerr << "decodebench: note: report --out: --out is the JSON document in every "
                        "command and report writes none; redirect stdout instead (> FILE). This "
                        "spelling goes in a later release.\n";
           o->out = path;
         })
      ->group("");
  cmd->add_option("--max-noise", o->max_noise,
                  "Mark points whose noise is above this fraction (default: each report's "
                  "measure.max_noise, else 0.005)");
  cmd->add_option("--figure", o->figures,
                  "An SVG figure to inline in the page, e.g. one scripts/plot.py drew "
                  "(repeatable; --format html only; without it the page has no figures)")
      ->allow_extra_args(false);
  cmd->add_option("--label", o->labels,
                  "Column label per report, in file order (repeatable; default: file stems)")
      ->allow_extra_args(false);
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace decodebench::cli
