// The printers of saved reports: marks (noisy, stopped at the timeout), hidden empty columns,
// both GB/s columns, knees after the table, several reports side by side, the knees definition
// once in the JSON, and the HTML page (figures, escaping, self-contained).
#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/errors.h"
#include "harness/measure.h"
#include "harness/stats.h"
#include "report/format.h"
#include "report/format_html.h"
#include "report/table.h"
#include "results/knees.h"
#include "results/merge.h"
#include "results/report.h"
#include "support/host_test_util.h"
#include "support/report_fixtures.h"

namespace decodebench {
namespace {

using test::sample_report;
using test::TempDir;

bool has(const std::string& text, std::string_view what) {
  return text.find(what) != std::string::npos;
}

// The table's header line (the line after the device lines).
std::string header_line(const std::string& table) {
  std::istringstream in(table);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("kernel", 0) == 0) return line;
  }
  return {};
}

// The row of the point with this batch (the table's rows start with the kernel).
std::string row_of_batch(const std::string& table, int batch) {
  std::istringstream in(table);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("auto→gqa", 0) == 0 && has(line, fmt::format(" {} ", batch))) return line;
  }
  return {};
}

// ------------------------------------------------------------------------------- marks

TEST(FormatMarks, NoMarkWhenNoneIsDue) {
  const Report r = sample_report();
  for (OutputFormat f : {OutputFormat::table, OutputFormat::md}) {
    const std::string t = format_results(r, f);
    EXPECT_FALSE(has(t, "ok*")) << t;
    EXPECT_FALSE(has(t, "ok~")) << t;
    EXPECT_FALSE(has(t, "stopped at the timeout")) << t;
    EXPECT_FALSE(has(t, "noise above")) << t;
  }
  const std::string csv = format_results(r, OutputFormat::csv);
  EXPECT_TRUE(has(csv, ",noise_exceeded,stopped_at_timeout,reason\n")) << csv;
  EXPECT_FALSE(has(csv, ",1,0,")) << csv;
  EXPECT_FALSE(has(csv, ",0,1,")) << csv;
}

TEST(FormatMarks, NoisyAndTimedOutPointsAreMarkedWithALegend) {
  Report r = sample_report();
  r.results[1].time_s.rel_noise = 0.02;  // above the config's 0.5 %: it cannot have converged
  r.results[2].samples.pop_back();       // 2 samples, the config asks for 3: the timeout hit
  r.results[2].time_s.samples = 2;
  const std::string t = format_results(r, OutputFormat::table);
  EXPECT_TRUE(has(row_of_batch(t, 8), " ok*~ ")) << t;
  EXPECT_TRUE(has(row_of_batch(t, 64), " ok* ")) << t;
  EXPECT_TRUE(has(row_of_batch(t, 1), " ok ")) << t;
  EXPECT_TRUE(has(t, "ok~: noise above the max noise (0.50%)")) << t;
  EXPECT_TRUE(has(t, "ok*: stopped at the timeout")) << t;
  const std::string md = format_results(r, OutputFormat::md);
  EXPECT_TRUE(has(md, "| ok*~ |")) << md;
  EXPECT_TRUE(has(md, "| ok* |")) << md;
  EXPECT_TRUE(has(md, "ok*: stopped at the timeout")) << md;
  const std::string csv = format_results(r, OutputFormat::csv);
  EXPECT_TRUE(has(csv, ",1,1,\n")) << csv;  // point 1: noisy, stopped at the timeout
  EXPECT_TRUE(has(csv, ",0,1,\n")) << csv;  // point 2: stopped at the timeout

  // A max noise below what the config asked: noisy by that measure, yet converged by its own
  // rule. The timeout mark follows the config the point ran with, never --max-noise.
  FormatOptions strict;
  strict.max_noise = 0.001;
  const std::string t2 = format_results(r, OutputFormat::table, strict);
  EXPECT_TRUE(has(row_of_batch(t2, 1), " ok~ ")) << t2;
  EXPECT_TRUE(has(t2, "ok~: noise above the max noise (0.10%)")) << t2;
  EXPECT_TRUE(has(format_results(r, OutputFormat::csv, strict), ",1,0,\n"));
  FormatOptions loose;
  loose.max_noise = 0.05;
  const std::string t3 = format_results(r, OutputFormat::table, loose);
  EXPECT_FALSE(has(t3, "~")) << t3;
  EXPECT_TRUE(has(row_of_batch(t3, 8), " ok* ")) << t3;
}

TEST(FormatMarks, MaxNoiseDefaultsToTheReportsConfig) {
  Report r = sample_report();
  EXPECT_EQ(max_noise_for(r, {}), 0.005);
  r.config["measure"]["max_noise"] = 0.02;
  EXPECT_EQ(max_noise_for(r, {}), 0.02);
  FormatOptions o;
  o.max_noise = 0.1;
  EXPECT_EQ(max_noise_for(r, o), 0.1);
  r.config = nlohmann::json::object();
  EXPECT_EQ(max_noise_for(r, {}), kDefaultMaxNoise);
}

// stopped_at_timeout recomputes the harness' stopping rule from the stored samples; the two must
// agree on every case, including the edges (exactly min_samples, exactly min_time_s, one sample).
TEST(FormatMarks, TimeoutMarkAgreesWithTheHarnessStoppingRule) {
  struct Case {
    std::vector<double> samples;
    MeasureOptions opt;
  };
  std::vector<Case> cases;
  const std::vector<std::vector<double>> sample_sets = {
      {1.0}, {1.0, 1.0}, {1.0, 1.1}, {1.0, 1.0, 1.0}, {1.0, 1.2, 0.9, 1.1, 1.05}, {0.1, 0.1, 0.1}};
  for (const auto& s : sample_sets) {
    for (int min_samples : {1, 2, 3, 5}) {
      for (double min_time : {0.0, 0.3, 1.0, 3.0}) {
        for (double max_noise : {0.0, 0.005, 0.05, 1.0}) {
          MeasureOptions o;
          o.min_samples = min_samples;
          o.min_time_s = min_time;
          o.max_noise = max_noise;
          cases.push_back({s, o});
        }
      }
    }
  }
  // A rule that forgets min_time_s: the grid must tell it apart (so it can catch a drift).
  auto forgets_min_time = [](const Case& c) {
    const SampleStats st = summarize(c.samples);
    const int n = static_cast<int>(c.samples.size());
    const bool quiet = n == 1 ? c.opt.min_samples == 1 : st.rel_noise <= c.opt.max_noise;
    return !(n >= c.opt.min_samples && quiet);
  };
  int stopped = 0, converged = 0, told_apart = 0;
  for (const Case& c : cases) {
    PointResult p = test::ok_point(0, 8, 1, 1);
    p.samples = c.samples;
    p.time_s = summarize(c.samples);
    SweepConfig cfg;
    cfg.measure = c.opt;
    const bool mark = stopped_at_timeout(p, to_json(cfg));
    const bool harness =
        stop_reason(c.samples, c.opt, /*wall_elapsed_s=*/0) != StopReason::converged;
    EXPECT_EQ(mark, harness) << c.samples.size() << " samples, min_samples " << c.opt.min_samples
                             << ", min_time " << c.opt.min_time_s << ", max_noise "
                             << c.opt.max_noise;
    (harness ? stopped : converged) += 1;
    told_apart += forgets_min_time(c) != harness;
  }
  EXPECT_GT(stopped, 0);
  EXPECT_GT(converged, 0);
  EXPECT_GT(told_apart, 0);
}

TEST(FormatMarks, WithoutAMeasureConfigAnOkPointWithAReasonStoppedAtTheTimeout) {
  PointResult p = test::ok_point(0, 8, 1e-4, 1e12);
  EXPECT_FALSE(stopped_at_timeout(p, nlohmann::json::object()));
  p.reason = "stopped at the 10 s timeout after 3 samples";
  EXPECT_TRUE(stopped_at_timeout(p, nlohmann::json::object()));
  p.status = PointStatus::skipped;
  EXPECT_FALSE(stopped_at_timeout(p, nlohmann::json::object()));
}

// ------------------------------------------------------------------------------- columns

TEST(FormatColumns, BothBandwidthsAndEmptyOptionalColumnsHidden) {
  Report r = sample_report();  // no point has a paired fraction
  std::string t = format_results(r, OutputFormat::table);
  std::string head = header_line(t);
  EXPECT_TRUE(has(head, "GB/s unique")) << head;
  EXPECT_TRUE(has(head, "GB/s logical")) << head;
  EXPECT_TRUE(has(row_of_batch(t, 64), "6400.0")) << t;  // logical = 1.6 x the 4 TB/s unique
  EXPECT_TRUE(has(head, "% datasheet")) << head;
  EXPECT_FALSE(has(head, "% paired")) << head;
  EXPECT_FALSE(has(t, "% paired:")) << t;  // nor its legend
  std::string md = format_results(r, OutputFormat::md);
  EXPECT_FALSE(has(md, "% paired")) << md;
  EXPECT_TRUE(has(md, "| GB/s unique | GB/s logical |")) << md;
  // csv keeps every column.
  const std::string csv = format_results(r, OutputFormat::csv);
  EXPECT_TRUE(has(csv, ",fraction_paired,")) << csv;
  EXPECT_TRUE(has(csv, ",fraction_datasheet,")) << csv;

  // One row with a value shows the column; no row with a datasheet fraction hides that one.
  r.results[1].roofline.fraction_paired = 0.75;
  for (auto& p : r.results) p.roofline.fraction_datasheet = kNotAvailable;
  t = format_results(r, OutputFormat::table);
  head = header_line(t);
  EXPECT_TRUE(has(head, "% paired")) << head;
  EXPECT_FALSE(has(head, "% datasheet")) << head;
  EXPECT_TRUE(has(t, "75.0%")) << t;
  EXPECT_TRUE(has(t, "% paired:")) << t;
  md = format_results(r, OutputFormat::md);
  EXPECT_TRUE(has(md, "% paired")) << md;
  EXPECT_FALSE(has(md, "% datasheet |")) << md;
  // Markdown rows have as many cells as the header.
  std::istringstream in(md);
  std::string line;
  std::vector<long> cells;
  while (std::getline(in, line)) {
    if (line.rfind("| ", 0) == 0 && !has(line, "series")) {
      cells.push_back(std::count(line.begin(), line.end(), '|'));
    }
  }
  ASSERT_FALSE(cells.empty());
  for (long c : cells) EXPECT_EQ(c, cells[0]) << md;
}

// The bound column names the roof that binds: mem, or the compute roof of the kernel's units
// (fma, tc); a report that predates the ceiling says "compute". CSV carries the ceiling whole.
TEST(FormatColumns, BoundNamesItsComputeCeiling) {
  Report r = sample_report();  // points 0..2 ok, memory-bound on an fp32 FMA ceiling
  r.results[1].roofline.bound = Bound::compute;
  r.results[2].roofline.bound = Bound::compute;
  r.results[2].roofline.compute_ceiling =
      ComputeCeiling{ComputeUnit::tensor_core, "tensor-core f16/bf16 (datasheet)", 989.4e12};
  std::string t = format_results(r, OutputFormat::table);
  EXPECT_TRUE(has(header_line(t), " bound ")) << t;
  EXPECT_TRUE(has(row_of_batch(t, 1), " mem ")) << t;
  EXPECT_TRUE(has(row_of_batch(t, 8), " fma ")) << t;
  EXPECT_TRUE(has(row_of_batch(t, 64), " tc ")) << t;
  EXPECT_TRUE(has(t, "bound: the lower roof")) << t;  // its legend
  // The device line lists the datasheet's compute roofs next to the bandwidths.
  EXPECT_TRUE(has(t, "fp32 67.0 TFLOP/s, tensor f16 989 TFLOP/s")) << t;
  const std::string md = format_results(r, OutputFormat::md);
  EXPECT_TRUE(has(md, "| bound |")) << md;
  EXPECT_TRUE(has(md, "| tc |")) << md;
  const std::string csv = format_results(r, OutputFormat::csv);
  EXPECT_TRUE(has(csv, ",bound,compute_unit,compute_ceiling,compute_ceiling_flops,t_roof_s,"))
      << csv;
  EXPECT_TRUE(has(csv, ",compute,tensor_core,tensor-core f16/bf16 (datasheet),989400000000000,"))
      << csv;
  EXPECT_TRUE(has(csv, ",memory,fma,fp32 FMA (datasheet),67000000000000,")) << csv;

  r.results[1].roofline.compute_ceiling.reset();  // an older report: which roof is unknown
  t = format_results(r, OutputFormat::table);
  EXPECT_TRUE(has(row_of_batch(t, 8), " compute ")) << t;
}

// ------------------------------------------------------------------------------- legend

// A sample report whose points timed scope layer (the layer step split into weights and KV).
Report layer_report() {
  Report r = sample_report();
  for (PointResult& p : r.results) {
    p.scope = Scope::layer;
    LayerRecord l;
    l.weight_bytes = 4.36e8;
    l.kv_bytes = 1e9 * p.batch;
    if (p.status == PointStatus::ok) {
      l.time_weights_s = 0.6 * p.time_s.median;
      l.time_kv_s = 0.4 * p.time_s.median;
      l.tokens_per_s_with_lm_head = 0.9 * p.tokens_per_s;
    }
    p.layer = l;
  }
  return r;
}

bool any_legend_line(const std::string& text, std::string_view prefix, std::string_view what) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0 && has(line, what)) return true;
  }
  return false;
}

// The tok/s legend names what was timed: the layer's step at scope layer, attention only at
// scope attention, both when a table mixes them; alone, side by side, in every format.
TEST(FormatLegend, TokensPerSecondSaysWhatWasMeasured) {
  const Report attention = sample_report();
  const Report layer = layer_report();
  Report mixed = sample_report();
  mixed.results[1] = layer.results[1];
  const Report layer_b = layer_report();
  const std::vector<LabelledReport> layer_pair{{"a", &layer}, {"b", &layer_b}};
  const std::vector<LabelledReport> attention_pair{{"a", &attention}, {"b", &attention}};

  for (OutputFormat f : {OutputFormat::table, OutputFormat::md}) {
    for (const std::string& t : {format_results(layer, f), format_reports(layer_pair, f)}) {
      EXPECT_TRUE(has(t, "one layer's whole decode step (GEMMs and attention)")) << t;
      EXPECT_FALSE(has(t, "attention only")) << t;
    }
    for (const std::string& t : {format_results(attention, f), format_reports(attention_pair, f)}) {
      EXPECT_TRUE(has(t, "tok/s counts attention only")) << t;
      EXPECT_FALSE(has(t, "whole step")) << t;
    }
    const std::string m = format_results(mixed, f);
    EXPECT_TRUE(has(m,
                    "the layer's whole step (GEMMs and attention) at scope layer, attention "
                    "only at scope attention"))
        << m;
  }
  // +lm_head is explained only where its column is shown.
  EXPECT_TRUE(any_legend_line(format_results(layer, OutputFormat::table), "tok/s:", "+lm_head"));
  EXPECT_FALSE(
      any_legend_line(format_reports(layer_pair, OutputFormat::table), "tok/s:", "+lm_head"));
  // The page shows the same legend.
  const std::string page = format_html(layer_pair, {});
  EXPECT_TRUE(has(page, "one layer&#39;s whole decode step") ||
              has(page, "one layer's whole decode step"))
      << page;
  EXPECT_FALSE(has(page, "attention only")) << page;
}

TEST(FormatKnees, ListedAfterTheTable) {
  Report r = sample_report();
  r.knees = compute_knees(r.results);  // batches 1, 8, 64 at 1, 3, 4 TB/s: knee 64 (>= 3.6)
  const std::string t = format_results(r, OutputFormat::table);
  const std::size_t at = t.find("knees (");
  ASSERT_NE(at, std::string::npos) << t;
  EXPECT_GT(at, t.find("GB/s logical"));
  const std::string knees = t.substr(at);
  EXPECT_TRUE(has(knees, "series")) << knees;
  EXPECT_TRUE(has(knees, "knee batch")) << knees;
  EXPECT_TRUE(has(knees, "auto llama-3.1-8b kv=f16 q=f16 P=16 ctx=8192 h=0.5 G=1")) << knees;
  EXPECT_TRUE(has(knees, "4000.0")) << knees;
  const std::string md = format_results(r, OutputFormat::md);
  EXPECT_TRUE(has(md, "| series | knee batch | knee GB/s | max GB/s | at batch |")) << md;
  r.knees = nlohmann::json::array();
  EXPECT_FALSE(has(format_results(r, OutputFormat::table), "knees (")) << "no knees, no list";
}

// ------------------------------------------------------------------------------- side by side

struct TwoReports {
  Report a = sample_report();
  Report b = sample_report();
  TwoReports() {
    b.results.erase(b.results.begin() + 2);  // batch 64 only in a
    b.results[1].time_s.median *= 2;         // batch 8 twice as slow in b
  }
  std::vector<LabelledReport> labelled() const { return {{"a", &a}, {"b", &b}}; }
};

TEST(FormatSideBySide, MatchedPointsOnceWithRatiosAndTheRestBelow) {
  const TwoReports two;
  const auto reports = two.labelled();
  const std::string t = format_reports(reports, OutputFormat::table);
  const std::string head = header_line(t);
  for (const char* col :
       {"a median", "a GB/s", "a tok/s", "b median", "b GB/s", "b tok/s", "b/a"}) {
    EXPECT_TRUE(has(head, col)) << col << ": " << head;
  }
  EXPECT_FALSE(has(head, "P ")) << "equal in every row: hidden: " << head;
  EXPECT_TRUE(has(row_of_batch(t, 8), "2.000x")) << t;
  EXPECT_TRUE(has(row_of_batch(t, 1), "1.000x")) << t;
  EXPECT_TRUE(row_of_batch(t, 64).empty()) << "not in b: not in the table\n" << t;
  EXPECT_TRUE(has(t,
                  "points in only some reports:\n  cuda/auto llama-3.1-8b kv=f16 q=f16 P=16 "
                  "b=64 ctx=8192 h=0.5 G=1: only in a\n"))
      << t;
  EXPECT_TRUE(has(t, "a: device: cuda")) << t;
  EXPECT_TRUE(has(t, "b: point 3")) << "not-ok notes name their report: " << t;

  const std::string md = format_reports(reports, OutputFormat::md);
  EXPECT_TRUE(has(md, "| a median | a GB/s | a tok/s | b median | b GB/s | b tok/s | b/a |")) << md;
  EXPECT_TRUE(has(md, "only in a")) << md;

  // csv: every point of either report, empty cells where b lacks it.
  const std::string csv = format_reports(reports, OutputFormat::csv);
  std::istringstream in(csv);
  std::string header, line;
  std::getline(in, header);
  EXPECT_TRUE(has(header, ",a_median_s,")) << header;
  EXPECT_TRUE(has(header, ",b_median_over_a")) << header;
  int rows = 0, only_a = 0;
  while (std::getline(in, line)) {
    ++rows;
    only_a += has(line, "b=64") && has(line, ",,,,,,,,,,");
  }
  EXPECT_EQ(rows, 5);
  EXPECT_EQ(only_a, 1) << csv;
  EXPECT_THROW(format_reports(reports, OutputFormat::json), InputError);
}

TEST(FormatSideBySide, MarksFollowEachReportsOwnConfig) {
  TwoReports two;
  two.b.results[0].time_s.rel_noise = 0.01;
  const auto reports = two.labelled();
  std::string t = format_reports(reports, OutputFormat::table);
  EXPECT_TRUE(has(row_of_batch(t, 1), "~")) << t;
  EXPECT_TRUE(has(t, "~ after a median: noise above")) << t;
  two.b.config["measure"]["max_noise"] = 0.02;
  t = format_reports(reports, OutputFormat::table);
  EXPECT_FALSE(has(row_of_batch(t, 1), "~")) << t;
}

// ------------------------------------------------------------------------------- knees in JSON

TEST(KneesJson, DefinitionOnceAtTheTopAndOldReportsStillRead) {
  Report r = sample_report();
  r.knees = compute_knees(r.results);
  ASSERT_FALSE(r.knees.empty());
  nlohmann::json j = to_json(r);
  EXPECT_EQ(j.at("knees_definition"), kKneesDefinition);
  for (const auto& k : j.at("knees")) EXPECT_FALSE(k.contains("definition")) << k.dump();

  // A report written when every knee carried the definition, and no top-level one.
  j.erase("knees_definition");
  for (auto& k : j["knees"]) k["definition"] = kKneesDefinition;
  const Report old = report_from_json(j);
  EXPECT_EQ(old.knees.size(), r.knees.size());
  EXPECT_EQ(old.knees[0].at("knee_batch"), r.knees[0].at("knee_batch"));
  const nlohmann::json rewritten = to_json(old);
  EXPECT_EQ(rewritten.at("knees_definition"), kKneesDefinition);
  for (const auto& k : rewritten.at("knees")) EXPECT_FALSE(k.contains("definition"));
  EXPECT_TRUE(has(format_results(old, OutputFormat::table), "knees ("));
}

TEST(KneesJson, MergeRecomputesThem) {
  Report a = sample_report();
  Report b = sample_report();
  a.config["shard"] = "0/2";
  b.config["shard"] = "1/2";
  // Shard 0 holds batches 1 and 64, shard 1 batch 8: neither alone has the series' knee at 64
  // with 3 batches; the merge must recompute.
  a.results = {a.results[0], a.results[2]};
  b.results = {b.results[1]};
  a.knees = compute_knees(a.results);
  b.knees = nlohmann::json::array();
  const std::vector<Report> shards{a, b};
  const Report merged = merge_reports(shards);
  ASSERT_EQ(merged.knees.size(), 1u);
  EXPECT_EQ(merged.knees[0].at("batches"), nlohmann::json::array({1, 8, 64}));
  EXPECT_FALSE(merged.knees[0].contains("definition"));
}

// ------------------------------------------------------------------------------- html

constexpr const char* kMatplotlibLikeSvg =
    "<?xml version=\"1.0\" encoding=\"utf-8\" standalone=\"no\"?>\n"
    "<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\"\n"
    "  \"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">\n"
    "<svg xmlns:xlink=\"http://www.w3.org/1999/xlink\" width=\"460pt\" height=\"345pt\" "
    "viewBox=\"0 0 460 345\" xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\">\n"
    " <metadata>\n  <rdf:RDF xmlns:dc=\"http://purl.org/dc/elements/1.1/\" "
    "xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">\n"
    "   <cc:Work><dc:creator><cc:Agent><dc:title>Matplotlib v3.11, https://matplotlib.org/"
    "</dc:title></cc:Agent></dc:creator></cc:Work>\n  </rdf:RDF>\n </metadata>\n"
    " <defs><clipPath id=\"p1\"><rect x=\"0\" y=\"0\" width=\"10\" height=\"10\"/></clipPath>"
    "</defs>\n"
    " <g clip-path=\"url(#p1)\"><use xlink:href=\"#DejaVuSans-30\" x=\"1\"/>"
    "<image xlink:href=\"data:image/png;base64,iVBORw0KGgo=\"/></g>\n"
    "</svg>\n";

TEST(FormatHtml, ReadSvgStripsThePrologAndRefusesWhatIsNotASelfContainedSvg) {
  TempDir dir;
  const HtmlFigure f = read_svg_figure(dir.write("bandwidth_vs_batch.svg", kMatplotlibLikeSvg));
  EXPECT_EQ(f.stem, "bandwidth_vs_batch");
  EXPECT_EQ(f.svg.rfind("<svg ", 0), 0u) << f.svg;
  EXPECT_EQ(f.svg.substr(f.svg.size() - 6), "</svg>");
  EXPECT_FALSE(has(f.svg, "<?xml"));
  EXPECT_FALSE(has(f.svg, "DOCTYPE"));
  EXPECT_FALSE(has(f.svg, "http")) << f.svg;
  EXPECT_FALSE(has(f.svg, "metadata")) << f.svg;
  EXPECT_TRUE(has(f.svg, "\n <defs>")) << f.svg;
  EXPECT_TRUE(has(f.svg, "xlink:href=\"#DejaVuSans-30\"")) << "local references stay";

  auto message = [&](const std::string& name, const std::string& text) {
    try {
      read_svg_figure(text.empty() ? dir.path() / name : dir.write(name, text));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string m = message("missing.svg", "");
  EXPECT_TRUE(has(m, "missing.svg")) << m;
  EXPECT_TRUE(has(m, "cannot open")) << m;
  m = message("plot.png", "\x89PNG\r\n\x1a\n binary");
  EXPECT_TRUE(has(m, "plot.png: not an SVG file")) << m;
  m = message("page.svg", "<html><svg></svg></html>");
  EXPECT_TRUE(has(m, "not an SVG file")) << m;
  m = message("cut.svg", "<svg width=\"1\"><g>");
  EXPECT_TRUE(has(m, "not an SVG file")) << m;
  m = message("remote.svg", "<svg><image href=\"https://example.com/x.png\"/></svg>");
  EXPECT_TRUE(has(m, "remote.svg: refers to something outside the file")) << m;
  m = message("font.svg", "<svg><style>@import url('fonts.css');</style></svg>");
  EXPECT_TRUE(has(m, "outside the file")) << m;
  m = message("script.svg", "<svg><script>alert(1)</script></svg>");
  EXPECT_TRUE(has(m, "<script")) << m;
}

TEST(FormatHtml, OneSelfContainedPage) {
  TempDir dir;
  Report r = sample_report();
  r.results[0].model = "llama<8b>&\"q\"";  // escaped everywhere it appears
  r.results[1].time_s.rel_noise = 0.02;
  r.knees = compute_knees(r.results);
  r.tool.git_sha = "0123456789ab";
  r.created = "2026-01-02T03:04:05Z";
  const std::vector<HtmlFigure> figures{
      read_svg_figure(dir.write("bandwidth_vs_batch.svg", kMatplotlibLikeSvg)),
      read_svg_figure(dir.write("roofline.svg", "<svg viewBox=\"0 0 1 1\"><g/></svg>"))};
  const LabelledReport one{"r", &r};
  const std::string page = format_html({&one, 1}, figures);

  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  const std::size_t title = page.find("<title>");
  ASSERT_NE(title, std::string::npos);
  const std::string title_text = page.substr(title, page.find("</title>") - title);
  for (const char* part : {"NVIDIA H200", "0123456789ab", "2026-01-02"}) {
    EXPECT_TRUE(has(title_text, part)) << part << ": " << title_text;
  }
  // Device and ceilings.
  for (const char* part : {"4.10 TB/s", "3.90 TB/s", "4.00 TB/s", "67.0 TFLOP/s", "4.80 TB/s"}) {
    EXPECT_TRUE(has(page, part)) << part;
  }
  // The tensor-core peaks among the ceilings, said to be dense.
  for (const char* part : {">tensor f16 peak</th>", ">tensor fp8 peak</th>", "989 TFLOP/s",
                           "1979 TFLOP/s", "dense figures (no sparsity)"}) {
    EXPECT_TRUE(has(page, part)) << part;
  }
  // Every figure inlined, with the class names and ids scripts rely on.
  EXPECT_TRUE(has(page, "<figure class=\"db-figure\" id=\"fig-bandwidth_vs_batch\">\n<svg "))
      << page;
  EXPECT_TRUE(has(page, "<figure class=\"db-figure\" id=\"fig-roofline\">\n<svg viewBox"));
  EXPECT_TRUE(has(page, "<figcaption>bandwidth_vs_batch</figcaption>"));
  EXPECT_TRUE(has(page, "<figcaption>roofline</figcaption>"));
  EXPECT_FALSE(has(page, "<?xml"));
  // The results table with the table format's columns, in its order.
  const std::size_t table = page.find("<table class=\"db-results\">");
  ASSERT_NE(table, std::string::npos);
  const std::string head = page.substr(table, page.find("</thead>", table) - table);
  std::size_t at = 0;
  const ResultsView v = results_view({&one, 1}, {});
  for (const auto& c : v.results.columns) {
    const std::size_t next = head.find(">" + html_escape(c.title) + "</th>", at);
    EXPECT_NE(next, std::string::npos) << c.title << " in " << head;
    at = next == std::string::npos ? at : next;
  }
  EXPECT_EQ(static_cast<std::size_t>(std::count(head.begin(), head.end(), '<') / 2 - 2),
            v.results.columns.size() + 0)
      << head;
  EXPECT_TRUE(has(page, "ok~")) << "the marks too";
  EXPECT_TRUE(has(page, "<table class=\"db-knees\">"));
  EXPECT_TRUE(has(page, "needs 90.1 GB")) << "not-ok notes";
  EXPECT_TRUE(has(page, "<details><summary>config</summary><pre>{\n  &quot;backend&quot;")) << page;
  // Escaping: the model name never appears raw.
  EXPECT_FALSE(has(page, "llama<8b>")) << page;
  EXPECT_TRUE(has(page, "llama&lt;8b&gt;&amp;&quot;q&quot;")) << page;
  // Self-contained: nothing fetched, nothing run.
  for (const char* bad : {"http", "src=", "<script", "<link", "@import"}) {
    EXPECT_FALSE(has(page, bad)) << bad;
  }
}

TEST(FormatHtml, SeveralReportsAndClashingFigureNames) {
  TempDir dir;
  const TwoReports two;
  const auto reports = two.labelled();
  const std::string page = format_html(reports, {});
  EXPECT_TRUE(has(page, "<th class=\"num\">b/a</th>")) << page;
  EXPECT_TRUE(has(page, "only in a")) << page;
  EXPECT_TRUE(has(page, "<summary>config of b</summary>")) << page;
  // No figure given: none inlined, and the page says where figures come from.
  EXPECT_FALSE(has(page, "<figure")) << page;
  EXPECT_TRUE(has(page, "No figures: decodebench inlines only the SVGs given with --figure"))
      << page;
  EXPECT_TRUE(has(page, "scripts/plot.py REPORT --html PAGE")) << page;
  const HtmlFigure f = read_svg_figure(dir.write("x.svg", "<svg></svg>"));
  const std::vector<HtmlFigure> twice{f, f};
  EXPECT_THROW(format_html(reports, twice), InputError);
}

}  // namespace
}  // namespace decodebench
