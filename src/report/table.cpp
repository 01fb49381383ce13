#include "report/table.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace decodebench {

void Table::add_row(std::vector<std::string> cells) {
  if (cells.size() != columns.size()) {
    throw std::logic_error(
        fmt::format("Table::add_row: {} cells for {} columns", cells.size(), columns.size()));
  }
  rows.push_back(std::move(cells));
}

std::size_t display_width(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

namespace {

std::string pad(std::string_view s, std::size_t width, bool right) {
  const std::size_t w = display_width(s);
  const std::string fill(width > w ? width - w : 0, ' ');
  return right ? fill + std::string(s) : std::string(s) + fill;
}

}  // namespace

std::string render_text(const Table& t, std::string_view indent, std::string_view gap) {
  std::vector<std::size_t> width(t.columns.size());
  for (std::size_t c = 0; c < t.columns.size(); ++c) {
    width[c] = std::max(t.columns[c].min_width, display_width(t.columns[c].title));
    for (const auto& row : t.rows) width[c] = std::max(width[c], display_width(row[c]));
  }
  auto line = [&](auto cell_of) {
    std::string s(indent);
    for (std::size_t c = 0; c < t.columns.size(); ++c) {
      s += pad(cell_of(c), width[c], t.columns[c].right);
      if (c + 1 < t.columns.size()) s += gap;
    }
    // Empty last cells (a note column) leave no padding behind either.
    while (s.size() > indent.size() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out = line([&](std::size_t c) { return t.columns[c].title; });
  if (t.rule && !width.empty()) {
    std::size_t total = display_width(gap) * (width.size() - 1);
    for (std::size_t w : width) total += w;
    out += std::string(indent) + std::string(total, '-') + "\n";
  }
  for (const auto& row : t.rows) out += line([&](std::size_t c) { return row[c]; });
  return out;
}

std::string md_escape(std::string_view s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string render_md(const Table& t, MdStyle style) {
  const bool padded = style == MdStyle::padded;
  auto cell = [&](std::string_view text) {
    return padded ? fmt::format(" {} |", md_escape(text)) : md_escape(text) + "|";
  };
  std::string out = "|";
  for (const auto& c : t.columns) out += cell(c.title);
  out += "\n|";
  for (const auto& c : t.columns) out += !padded ? "-|" : c.right ? "---:|" : "---|";
  out += "\n";
  for (const auto& row : t.rows) {
    out += "|";
    for (const auto& text : row) out += cell(text);
    out += "\n";
  }
  return out;
}

std::string csv_cell(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string render_csv(const Table& t) {
  auto line = [](auto begin, auto end, auto text_of) {
    std::string s;
    for (auto it = begin; it != end; ++it) s += (it == begin ? "" : ",") + csv_cell(text_of(*it));
    return s + "\n";
  };
  std::string out = line(t.columns.begin(), t.columns.end(),
                         [](const Table::Column& c) -> std::string_view { return c.title; });
  for (const auto& row : t.rows) {
    out += line(row.begin(), row.end(), [](const std::string& s) -> std::string_view { return s; });
  }
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string render_html(const Table& t, std::string_view css_class) {
  std::string out = fmt::format("<table class=\"{}\">\n<thead><tr>", css_class);
  for (const auto& c : t.columns) {
    out += fmt::format("<th{}>{}</th>", c.right ? " class=\"num\"" : "", html_escape(c.title));
  }
  out += "</tr></thead>\n<tbody>\n";
  for (const auto& row : t.rows) {
    out += "<tr>";
    for (std::size_t c = 0; c < row.size(); ++c) {
      out += fmt::format("<td{}>{}</td>", t.columns[c].right ? " class=\"num\"" : "",
                         html_escape(row[c]));
    }
    out += "</tr>\n";
  }
  return out + "</tbody>\n</table>\n";
}

}  // namespace decodebench
