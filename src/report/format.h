// Human- and script-facing renderings of a report's results.
#pragma once

#include <string>
#include <string_view>

#include "report/report.h"

namespace decodebench {

enum class OutputFormat { table, json, csv, md };
OutputFormat parse_output_format(std::string_view s);  // InputError listing table|json|csv|md
std::string_view output_format_name(OutputFormat f);

// table: a header line per device with its ceilings, then one aligned row per point (kernel,
//        model, kv dtype, batch, context, h req/actual, status, median time, achieved GB/s,
//        % of measured roof, % of datasheet, attention-only tokens/s, noise) and the reasons of
//        points that are not ok below the table. SI units (GB = 1e9 B).
// json:  to_json(report), indented.
// csv:   one header row and one row per point, plain numbers in SI base units (s, B/s), empty
//        cells for values that are not available.
// md:    the table's columns as a GitHub Markdown table.
std::string format_results(const Report& r, OutputFormat fmt);

// SI formatting helpers used by the table (and the CLI): "3.35 TB/s", "812 µs", "1.2 Mtok/s".
std::string format_bandwidth(double bytes_per_s);
std::string format_seconds(double s);
std::string format_bytes(double bytes);

}  // namespace decodebench
