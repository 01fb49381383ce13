// The point record's reader, for the report's (report.cpp reads each of results[] with it, so an
// error names the point's path: "results[3].time_s.median: ...").
#pragma once

#include "common/json_in.h"
#include "results/point_result.h"

namespace decodebench {

// Throws InputError naming the key's path where a key is missing or a value is not valid.
PointResult point_from(const JsonIn& in);

// ContextSpec's one codec, for points and knees: {"kind": "fixed", "values": [n]} or
// {"kind": "ragged", "values": [lo, hi]}.
nlohmann::json context_to_json(const ContextSpec& c);
ContextSpec context_from(const JsonIn& in);

}  // namespace decodebench
