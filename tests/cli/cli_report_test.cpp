// `decodebench report FILE...` as a user runs it: formats, --out, side by side with labels, the
// HTML page with figures, and exit 2 with a message naming the problem for each kind of bad
// input. The reports are the report tests' fixtures written to disk (no sweep runs).
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli/cli_run.h"
#include "results/report.h"
#include "support/report_fixtures.h"

namespace decodebench::testing {
namespace {

bool has(const std::string& text, std::string_view what) {
  return text.find(what) != std::string::npos;
}

struct Files {
  TempDir dir;
  std::string a, b;
  Files() {
    Report ra = test::sample_report();
    Report rb = test::sample_report();
    rb.results.erase(rb.results.begin() + 2);
    rb.results[1].time_s.median *= 2;
    a = (dir / "base.json").string();
    b = (dir / "new.json").string();
    write_report_atomic(a, ra);
    write_report_atomic(b, rb);
  }
};

TEST(CliReport, PrintsOneReportAsTheSweepDoes) {
  Files f;
  const CliResult t = run_cli(fmt::format("report '{}'", f.a), f.dir.path());
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_TRUE(has(t.out, "device: cuda \"NVIDIA H200\"")) << t.out;
  EXPECT_TRUE(has(t.out, "GB/s unique")) << t.out;
  EXPECT_TRUE(has(t.out, "not ok:")) << t.out;
  for (const char* fmt_name : {"md", "csv"}) {
    const CliResult r =
        run_cli(fmt::format("report '{}' --format {}", f.a, fmt_name), f.dir.path());
    EXPECT_EQ(r.code, 0) << fmt_name << ": " << r.err;
    EXPECT_TRUE(has(r.out, fmt_name == std::string("md") ? "| kernel |" : "index,kernel,"))
        << r.out;
  }
  // --max-noise below every point's noise marks them all.
  const CliResult noisy = run_cli(fmt::format("report '{}' --max-noise 0.0001", f.a), f.dir.path());
  ASSERT_EQ(noisy.code, 0) << noisy.err;
  EXPECT_TRUE(has(noisy.out, "ok~: noise above the max noise (0.01%)")) << noisy.out;
  // The old --out (stdout to a file) still writes there, atomically, for one release, and says
  // that --out is the JSON document everywhere else.
  const std::filesystem::path out = f.dir / "table.txt";
  const CliResult o =
      run_cli(fmt::format("report '{}' --out '{}'", f.a, out.string()), f.dir.path());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(o.out.empty()) << o.out;
  EXPECT_EQ(read_file(out), t.out);
  EXPECT_TRUE(has(o.err, "note: report --out: --out is the JSON document")) << o.err;
}

TEST(CliReport, SideBySideLabelledByStemOrLabel) {
  Files f;
  const CliResult r = run_cli(fmt::format("report '{}' '{}'", f.a, f.b), f.dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "base median")) << r.out;
  EXPECT_TRUE(has(r.out, "new/base")) << r.out;
  EXPECT_TRUE(has(r.out, "2.000x")) << r.out;
  EXPECT_TRUE(has(r.out, "only in base")) << r.out;
  const CliResult l = run_cli(
      fmt::format("report '{}' '{}' --label h200-old --label h200-new", f.a, f.b), f.dir.path());
  ASSERT_EQ(l.code, 0) << l.err;
  EXPECT_TRUE(has(l.out, "h200-new/h200-old")) << l.out;
}

TEST(CliReport, HtmlPageWithFigures) {
  Files f;
  write_file(f.dir / "roofline.svg",
             "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"><g/></svg>\n");
  write_file(f.dir / "batch.svg", "<svg viewBox=\"0 0 1 1\"></svg>");
  const std::filesystem::path page = f.dir / "page.html";
  // --figure takes one file per occurrence: the report after it stays positional.
  const CliResult r = run_cli(fmt::format("report --format html --figure '{}' --figure '{}' '{}' "
                                          "--out '{}'",
                                          (f.dir / "roofline.svg").string(),
                                          (f.dir / "batch.svg").string(), f.a, page.string()),
                              f.dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = read_file(page);
  EXPECT_TRUE(has(html, "<figure class=\"db-figure\" id=\"fig-roofline\">")) << html;
  EXPECT_TRUE(has(html, "<figure class=\"db-figure\" id=\"fig-batch\">")) << html;
  EXPECT_TRUE(has(html, "<table class=\"db-results\">")) << html;
  EXPECT_FALSE(has(html, "http")) << html;
  EXPECT_FALSE(has(html, "No figures")) << html;
}

// The page draws no figure itself: the help says where they come from (--figure, plot.py) rather
// than promising figures, and a page made without --figure says so in place of them.
TEST(CliReport, HtmlWithoutFiguresSaysWhereTheyComeFrom) {
  Files f;
  const CliResult help = run_cli("report --help", f.dir.path());
  ASSERT_EQ(help.code, 0) << help.err;
  // CLI11 wraps the description: compare it with its whitespace squeezed.
  std::string text;
  for (char c : help.out) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!text.empty() && text.back() != ' ') text += ' ';
    } else {
      text += c;
    }
  }
  EXPECT_FALSE(has(text, "devices, figures")) << text;
  EXPECT_TRUE(has(text, "the SVG figures given with --figure: this command draws none")) << text;
  EXPECT_TRUE(has(text, "scripts/plot.py REPORT --html PAGE")) << text;
  const std::filesystem::path page = f.dir / "page.html";
  const CliResult r = run_cli(
      fmt::format("report --format html '{}' --out '{}'", f.a, page.string()), f.dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = read_file(page);
  EXPECT_FALSE(has(html, "<figure")) << html;
  EXPECT_TRUE(has(html, "No figures: decodebench inlines only the SVGs given with --figure"))
      << html;
}

TEST(CliReport, BadInputExitsTwoNamingTheProblem) {
  Files f;
  write_file(f.dir / "not_a_report.json", R"({"results": []})");
  write_file(f.dir / "broken.json", "{\"schema_version\": 1,");
  write_file(f.dir / "plot.svg", "PNG, not svg");
  write_file(f.dir / "ok.svg", "<svg></svg>");
  struct Case {
    std::string args;
    std::vector<std::string> message;
  };
  const std::string ok_svg = (f.dir / "ok.svg").string();
  const std::vector<Case> cases{
      {"report", {"files is required"}},
      {fmt::format("report '{}'", (f.dir / "missing.json").string()),
       {"missing.json", "cannot open the report"}},
      {fmt::format("report '{}'", (f.dir / "not_a_report.json").string()),
       {"not_a_report.json", "not a decodebench report"}},
      {fmt::format("report '{}'", (f.dir / "broken.json").string()),
       {"broken.json", "not valid JSON"}},
      {fmt::format("report '{}' --format xml", f.a),
       {"unknown format 'xml'", "table, md, csv, html"}},
      {fmt::format("report '{}' --format json", f.a), {"unknown format 'json'"}},
      {fmt::format("report '{}' --figure '{}'", f.a, ok_svg),
       {"--figure is for --format html only"}},
      {fmt::format("report '{}' --format md --figure '{}'", f.a, ok_svg),
       {"--figure is for --format html only"}},
      {fmt::format("report '{}' --format html --figure '{}'", f.a, (f.dir / "gone.svg").string()),
       {"gone.svg", "cannot open"}},
      {fmt::format("report '{}' --format html --figure '{}'", f.a, (f.dir / "plot.svg").string()),
       {"plot.svg", "not an SVG file"}},
      {fmt::format("report '{}' '{}' --label one", f.a, f.b), {"--label", "1 labels for 2"}},
      {fmt::format("report '{}' --max-noise -1", f.a), {"--max-noise must be >= 0"}},
  };
  for (const Case& c : cases) {
    const CliResult r = run_cli(c.args, f.dir.path());
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    for (const std::string& m : c.message) EXPECT_TRUE(has(r.err, m)) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << "\n" << r.out;
  }
  // A failed run leaves no --out file behind.
  const std::filesystem::path out = f.dir / "never.html";
  run_cli(fmt::format("report '{}' --format html --figure '{}' --out '{}'", f.a,
                      (f.dir / "plot.svg").string(), out.string()),
          f.dir.path());
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(CliReport, HasHelp) {
  TempDir dir;
  const CliResult r = run_cli("report --help", dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* flag : {"--format", "--max-noise", "--figure", "--label"}) {
    EXPECT_TRUE(has(r.out, flag)) << flag << ": " << r.out;
  }
  EXPECT_FALSE(has(r.out, "--out")) << "report writes no JSON document: " << r.out;
}

}  // namespace
}  // namespace decodebench::testing
