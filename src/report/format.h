// Human- and script-facing renderings of a report's results (and of several side by side).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "common/units.h"
#include "report/results_view.h"
#include "results/report.h"

namespace decodebench {

enum class OutputFormat { table, json, csv, md };
OutputFormat parse_output_format(std::string_view s);  // InputError listing table|json|csv|md
std::string_view output_format_name(OutputFormat f);

// table: a header line per device with its ceilings, then one aligned row per point (kernel,
//        model, kv dtype, batch, context, h req/act, status, median time, GB/s of unique and of
//        logical bytes, % of measured roof, % of datasheet, % paired, bound (mem, fma or tc:
//        the roof that binds, compute roofs per the kernel's units), attention-only tokens/s,
//        noise, samples; the % columns only where some point has a value), a legend, the knees
//        and the reasons of points that are not ok. Status "ok*": stopped at the timeout;
//        "ok~": noise above the max noise (results_view.h). SI units (GB = 1e9 B).
// json:  to_json(report), indented.
// csv:   one header row and one row per point, plain numbers in SI base units (s, B/s), empty
//        cells for values that are not available; every column, marks as 0/1 columns.
// md:    the table's columns, knees and notes as GitHub Markdown.
std::string format_results(const Report& r, OutputFormat fmt, const FormatOptions& o = {});

// Several reports side by side (results_view.h); one report prints as format_results. table,
// md and csv (csv: a row for every point of any report, empty cells where a report lacks it);
// json is one report only (InputError).
std::string format_reports(std::span<const LabelledReport> reports, OutputFormat fmt,
                           const FormatOptions& o = {});

}  // namespace decodebench
