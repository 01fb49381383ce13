// The one table printer: every view's alignment, escaping and quoting is decided here, so each
// form is pinned on a small table with the awkward cells (a '|', a comma, a quote, "µ", "<").
#include "report/table.h"

#include <stdexcept>

#include <gtest/gtest.h>

namespace decodebench {
namespace {

Table sample() {
  Table t;
  t.columns = {{"name"}, {"GB/s", true}, {"note"}};
  t.add_row({"a|b", "1.5", "µs, \"quoted\""});
  t.add_row({"<tag>", "12.25", ""});
  return t;
}

TEST(Table, RowWithTheWrongCellCountIsALogicError) {
  Table t = sample();
  EXPECT_THROW(t.add_row({"only one"}), std::logic_error);
}

TEST(Table, TextAlignsByCodePointsAndTrimsTrailingBlanks) {
  Table t = sample();
  t.rule = true;
  EXPECT_EQ(render_text(t, "  "),
            "  name    GB/s  note\n"
            "  --------------------------\n"
            "  a|b      1.5  µs, \"quoted\"\n"
            "  <tag>  12.25\n");
}

TEST(Table, TextMinWidthWidensAColumn) {
  Table t;
  t.columns = {{"x", true, 4}, {"y"}};
  t.add_row({"1", "2"});
  EXPECT_EQ(render_text(t), "   x  y\n   1  2\n");
}

TEST(Table, MarkdownPaddedEscapesPipesAndMarksRightColumns) {
  EXPECT_EQ(render_md(sample()),
            "| name | GB/s | note |\n"
            "|---|---:|---|\n"
            "| a\\|b | 1.5 | µs, \"quoted\" |\n"
            "| <tag> | 12.25 |  |\n");
}

TEST(Table, MarkdownCompactHasNoPadding) {
  EXPECT_EQ(render_md(sample(), MdStyle::compact),
            "|name|GB/s|note|\n"
            "|-|-|-|\n"
            "|a\\|b|1.5|µs, \"quoted\"|\n"
            "|<tag>|12.25||\n");
}

TEST(Table, CsvQuotesCommasAndQuotes) {
  EXPECT_EQ(render_csv(sample()),
            "name,GB/s,note\n"
            "a|b,1.5,\"µs, \"\"quoted\"\"\"\n"
            "<tag>,12.25,\n");
}

// The one escaper, which the report's wide CSV and the calculator's CSV also write their text
// cells with (a model or device name may hold a comma).
TEST(Table, CsvCellQuotesWhatWouldSplitARow) {
  EXPECT_EQ(csv_cell("llama-3.1-8b"), "llama-3.1-8b");
  EXPECT_EQ(csv_cell("Xeon, 2 vCPU"), "\"Xeon, 2 vCPU\"");
  EXPECT_EQ(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_cell("a\nb"), "\"a\nb\"");
  EXPECT_EQ(csv_cell("a\rb"), "\"a\rb\"");
}

TEST(Table, HtmlEscapesTextAndClassesNumbers) {
  const std::string html = render_html(sample(), "points");
  EXPECT_NE(html.find("<table class=\"points\">"), std::string::npos) << html;
  EXPECT_NE(html.find("&lt;tag&gt;"), std::string::npos) << html;
  EXPECT_NE(html.find("&quot;quoted&quot;"), std::string::npos) << html;
  EXPECT_NE(html.find("class=\"num\">12.25<"), std::string::npos) << html;
  EXPECT_EQ(html.find("<tag>"), std::string::npos) << html;
}

}  // namespace
}  // namespace decodebench
