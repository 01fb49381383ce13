// The one table model and its printers. Every table decodebench prints (sweep, report, compare,
// model, cache-sim, replay, devices, kernels) is a Table of text cells rendered here, so column
// alignment, Markdown escaping and HTML escaping are written once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace decodebench {

struct Table {
  struct Column {
    std::string title;
    bool right = false;         // numbers right-aligned
    std::size_t min_width = 0;  // a fixed-layout table's width (the widest cell still wins)
  };
  std::vector<Column> columns;
  std::vector<std::vector<std::string>> rows;  // one cell per column
  bool rule = false;  // text: a line of '-' under the header, the table's width

  // Appends a row; its cell count must equal the column count (std::logic_error otherwise).
  void add_row(std::vector<std::string> cells);
};

// Aligned columns separated by `gap`, each line starting with `indent`, its trailing blanks
// trimmed. Widths count code points (cells hold "µ" and "→").
std::string render_text(const Table& t, std::string_view indent = "", std::string_view gap = "  ");
enum class MdStyle {
  padded,   // "| a | b |" and "---:" for right-aligned columns
  compact,  // "|a|b|" and "-" rules: for a summary pasted into a README, where bytes are lines
};
// GitHub Markdown; '|' in a cell is escaped.
std::string render_md(const Table& t, MdStyle style = MdStyle::padded);
// RFC 4180: a header row, then one row per row; cells with a comma, quote or newline are quoted.
std::string render_csv(const Table& t);
// One cell as render_csv writes it: the one CSV escaper, for the report's wide CSV too.
std::string csv_cell(std::string_view s);
// <table class="css_class"> with a <thead>; right-aligned cells get class "num"; text escaped.
std::string render_html(const Table& t, std::string_view css_class);

// Display width in code points (all our text is ASCII apart from "µ" and "→").
std::size_t display_width(std::string_view s);
// '|' escaped for a Markdown table cell or list item.
std::string md_escape(std::string_view s);
// &, <, >, " and ' escaped for HTML text and attributes.
std::string html_escape(std::string_view s);

}  // namespace decodebench
