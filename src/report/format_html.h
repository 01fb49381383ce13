// One self-contained HTML page for one or several reports: no external resource, no script, no
// network. Its class names are an interface: scripts that post-process the page find the
// figures as <figure class="db-figure" id="fig-STEM"> and the results as
// <table class="db-results">.
#pragma once

#include <filesystem>
#include <span>
#include <string>

#include "report/results_view.h"

namespace decodebench {

struct HtmlFigure {
  std::string stem;  // the file name without its extension: the id "fig-<stem>" and the caption
  // The <svg ...>...</svg> element: without the prolog, doctype and comments before it, the root's
  // SVG/XLink namespace declarations (the HTML parser implies them) and <metadata> (not drawn).
  std::string svg;
};

// Reads an SVG file for inlining. InputError naming the file when it cannot be read, is not an
// SVG (after the XML prolog, doctype and comments the text must be one <svg> element) or refers
// to anything outside itself (an href or url() that is not "#..." or "data:", a <script>).
HtmlFigure read_svg_figure(const std::filesystem::path& path);

// The page: a title naming the device(s), git sha(s) and date(s); each device with its
// ceilings; the figures in order; the results table (results_view.h, the table format's
// columns) with its legend; the knees; the notes of points that are not ok; each config as
// pretty JSON in <details><pre>. Every text is HTML-escaped. InputError on two figures with one
// stem (their ids would clash).
std::string format_html(std::span<const LabelledReport> reports,
                        std::span<const HtmlFigure> figures, const FormatOptions& o = {});

}  // namespace decodebench
