// The operator's table of a replay report (docs/report-schema.md "replay"): one row per setting
// and kernel, the prefix cache's trade (hit rate, evictions, prefill saved) next to the decode
// steps it produced (bytes per step, sharing) and their tokens/s, modeled and measured.
#pragma once

#include <string>

#include "report/format.h"
#include "results/report.h"

namespace decodebench {

// table, md, csv: the rows; json: the report's `replay` section. A report without one (a
// sweep's) gives InputError saying so.
std::string format_replay(const Report& r, OutputFormat fmt);

}  // namespace decodebench
