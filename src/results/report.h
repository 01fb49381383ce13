// The JSON report (docs/report-schema.md, schema_version 1): building, reading, writing atomically,
// merging shard reports and comparing a run against a baseline. Scripts read only this file.
#pragma once

#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_write.h"
#include "results/point_result.h"

namespace decodebench {

inline constexpr int kSchemaVersion = 1;

struct ToolInfo {
  std::string name = "decodebench";
  std::string version;  // project version
  std::string git_sha;  // short sha of the build, "unknown" outside a checkout
};

struct HostInfo {
  std::string hostname;
  std::string os;        // uname: sysname release machine
  std::string cpu;       // /proc/cpuinfo model name
  int cpu_threads = 0;   // hardware threads
  std::string compiler;  // "GCC 12.2.0", ...
  std::string build_type;
};

// How the run that produced the report ended (docs/report-schema.md "completion"). Every
// planned point is in results[]; those not run have status not_run.
//   running:        a checkpoint written while the sweep runs; a file left in this state was
//                   written by a process that was killed (or is still running)
//   interrupted:    SIGINT/SIGTERM; the finished points are kept
//   device_failure: a device failure stopped the sweep
//   failed:         another error stopped the run (a ceilings measurement, a checkpoint that
//                   could not be written, a bug); the reason is its message
//   partial:        `merge --allow-partial` of an incomplete shard set
struct Completion {
  enum class State { complete, running, interrupted, device_failure, failed, partial };
  State state = State::complete;
  std::string reason;      // empty when complete
  int points_planned = 0;  // points of this shard's expansion
};
std::string_view completion_state_name(Completion::State s);

struct Report {
  int schema_version = kSchemaVersion;
  ToolInfo tool;
  std::string created;  // ISO-8601 UTC, "2025-01-31T12:00:00Z"
  HostInfo host;
  std::vector<DeviceRecord> devices;
  nlohmann::json config = nlohmann::json::object();  // the resolved sweep (harness to_json)
  std::vector<PointResult> results;
  nlohmann::json knees = nlohmann::json::array();  // compute_knees(results), see knees.h
  Completion completion;
  // `decodebench replay` only (docs/report-schema.md "replay"): the trace, the modeled schedule
  // of each setting and its tokens/s from the measured steps, which are results[]. Null in a
  // sweep's report (and not written).
  nlohmann::json replay;
};

// Marks `report` failed with `error`'s message and writes it through `checkpoint` (when set),
// for a run leaving by an exception: a file left behind never says running once its process has
// stopped. A checkpoint that fails again is ignored: the error being reported is the first one.
void record_failure(Report& report, const std::exception& error,
                    const std::function<void(const Report&)>& checkpoint);

// Results whose status is not not_run.
int points_finished(const Report& r);
// "" for a complete report with no not_run point; else one line saying what it is, e.g.
// "interrupted: interrupted during point 4 of 8 (3 of 8 points finished)", for the readers
// (report, compare, merge) to tell the user the report is partial.
std::string partial_note(const Report& r);

// A report stamped with this tool, this host and the current time; devices/config/results empty.
Report new_report();
ToolInfo this_tool();
HostInfo this_host();
std::string iso8601_utc_now();

nlohmann::json to_json(const PointResult& r);
PointResult point_result_from_json(const nlohmann::json& j);  // throws InputError naming the key
nlohmann::json to_json(const DeviceRecord& d);
DeviceRecord device_record_from_json(const nlohmann::json& j, const std::string& source = "device");
nlohmann::json to_json(const Report& r);
// Throws InputError when schema_version is missing or not kSchemaVersion, or a key is missing
// or of the wrong type (the message names the key path, e.g. "results[3].time_s.median").
Report report_from_json(const nlohmann::json& j);

// Writes the report as indented JSON with write_text_atomic (common/atomic_write.h): on any
// failure `path` is left as it was.
void write_report_atomic(const std::filesystem::path& path, const Report& r);
// Throws InputError (missing file, bad JSON with the parser's position, wrong schema).
Report read_report(const std::filesystem::path& path);
// The same from the file's text; `source` is what error messages start with.
Report parse_report(std::string_view text, std::string_view source);

}  // namespace decodebench
