// Report JSON (schema_version 1), atomic writes and shard merging.
#include "results/report.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "common/json_in.h"
#include "common/json_text.h"
#include "results/knees.h"
#include "results/point_json.h"

namespace decodebench {

using nlohmann::json;

BusySource parse_busy_source(std::string_view s) {
  for (BusySource b : {BusySource::cpu_threads, BusySource::nvml}) {
    if (busy_source_name(b) == s) return b;
  }
  throw InputError(fmt::format("unknown busy source '{}'; valid: cpu_threads, nvml", s));
}

std::string_view bound_name(Bound b) { return b == Bound::memory ? "memory" : "compute"; }

std::string_view compute_unit_name(ComputeUnit u) {
  return u == ComputeUnit::tensor_core ? "tensor_core" : "fma";
}

ComputeUnit parse_compute_unit(std::string_view s) {
  for (ComputeUnit u : {ComputeUnit::fma, ComputeUnit::tensor_core}) {
    if (compute_unit_name(u) == s) return u;
  }
  throw InputError(fmt::format("unknown compute unit '{}'; valid: fma, tensor_core", s));
}

std::string_view bound_label(const RooflineRecord& r) {
  if (r.bound == Bound::memory) return "mem";
  if (!r.compute_ceiling) return "compute";
  return r.compute_ceiling->unit == ComputeUnit::tensor_core ? "tc" : "fma";
}

std::string_view status_name(PointStatus s) {
  switch (s) {
    case PointStatus::ok: return "ok";
    case PointStatus::wrong: return "wrong";
    case PointStatus::skipped: return "skipped";
    case PointStatus::error: return "error";
    case PointStatus::not_run: return "not_run";
  }
  return "?";
}

PointStatus parse_status(std::string_view s) {
  for (PointStatus p : {PointStatus::ok, PointStatus::wrong, PointStatus::skipped,
                        PointStatus::error, PointStatus::not_run}) {
    if (status_name(p) == s) return p;
  }
  throw InputError(
      fmt::format("unknown point status '{}'; valid: ok, wrong, skipped, error, not_run", s));
}

TimingMethod parse_timing_method(std::string_view s) {
  for (TimingMethod m : {TimingMethod::events_per_step, TimingMethod::events_back_to_back,
                         TimingMethod::graph_replay, TimingMethod::host_clock_per_step}) {
    if (timing_method_name(m) == s) return m;
  }
  throw InputError(fmt::format(
      "unknown timing method '{}'; valid: events_per_step, events_back_to_back, graph_replay, "
      "host_clock_per_step",
      s));
}

std::string_view completion_state_name(Completion::State s) {
  switch (s) {
    case Completion::State::complete: return "complete";
    case Completion::State::running: return "running";
    case Completion::State::interrupted: return "interrupted";
    case Completion::State::device_failure: return "device_failure";
    case Completion::State::failed: return "failed";
    case Completion::State::partial: return "partial";
  }
  return "?";
}

void record_failure(Report& report, const std::exception& error,
                    const std::function<void(const Report&)>& checkpoint) {
  report.completion.state = Completion::State::failed;
  report.completion.reason = std::string("stopped by an error: ") + error.what();
  if (!checkpoint) return;
  try {
    checkpoint(report);
  } catch (const std::exception&) {
  }
}

int points_finished(const Report& r) {
  return static_cast<int>(std::count_if(r.results.begin(), r.results.end(), [](const auto& p) {
    return p.status != PointStatus::not_run;
  }));
}

std::string partial_note(const Report& r) {
  const int done = points_finished(r);
  const bool all_run = done == static_cast<int>(r.results.size());
  if (r.completion.state == Completion::State::complete && all_run) return "";
  const int planned = std::max(r.completion.points_planned, static_cast<int>(r.results.size()));
  return fmt::format("{}{}{} ({} of {} points finished)", completion_state_name(r.completion.state),
                     r.completion.reason.empty() ? "" : ": ", r.completion.reason, done, planned);
}

namespace {

Completion::State parse_completion_state(const JsonIn& in) {
  const std::string s = in.string();
  for (auto st :
       {Completion::State::complete, Completion::State::running, Completion::State::interrupted,
        Completion::State::device_failure, Completion::State::failed, Completion::State::partial}) {
    if (completion_state_name(st) == s) return st;
  }
  in.fail(
      fmt::format("'{}' is not a completion state; valid: complete, running, interrupted, "
                  "device_failure, failed, partial",
                  s));
}

DeviceRecord device_from(const JsonIn& in) {
  DeviceRecord d;
  d.backend = in.at("backend").string();
  d.name = in.at("name").string();
  d.sm_count = in.at("sm_count").int32();
  d.l2_bytes = in.at("l2_bytes").integer();
  d.mem_bytes = in.at("mem_bytes").integer();
  const JsonIn bw = in.at("bandwidth");
  d.bandwidth_datasheet = bw.at("datasheet").number_or_zero();
  d.bandwidth_theoretical = bw.at("theoretical").number_or_zero();
  const JsonIn m = bw.at("measured");
  d.measured.read = m.at("read").number_or_zero();
  d.measured.copy = m.at("copy").number_or_zero();
  d.measured.triad = m.at("triad").number_or_zero();
  d.measured.buffer_bytes = m.at("buffer_bytes").integer();
  if (m.has("note")) d.measured.note = m.at("note").string();
  if (m.has("shapes")) d.measured.shapes = m.at("shapes").string();  // added later
  d.flops_peak = in.at("flops_peak").number_or_zero();
  // Added later: absent means not recorded.
  if (in.has("flops_peak_tensor_f16"))
    d.flops_peak_tensor_f16 = in.at("flops_peak_tensor_f16").number_or_zero();
  if (in.has("flops_peak_tensor_fp8"))
    d.flops_peak_tensor_fp8 = in.at("flops_peak_tensor_fp8").number_or_zero();
  d.measured.fma_flops = in.at("flops_measured").number_or_zero();
  // Added with layer scope: absent or null means no layer point.
  if (in.has("gemm_ceiling") && !in.at("gemm_ceiling").json().is_null()) {
    const JsonIn g = in.at("gemm_ceiling");
    d.measured.gemm_flops = g.at("flops").number_or_zero();
    d.measured.gemm_ceiling_name = g.at("name").string();
  }
  return d;
}

}  // namespace

PointResult point_result_from_json(const json& j) { return point_from(JsonIn(j, "result")); }

json to_json(const DeviceRecord& d) {
  return {
      {"backend", d.backend},
      {"name", d.name},
      {"sm_count", d.sm_count},
      {"l2_bytes", d.l2_bytes},
      {"mem_bytes", d.mem_bytes},
      {"bandwidth",
       {{"datasheet", positive_or_null(d.bandwidth_datasheet)},
        {"theoretical", positive_or_null(d.bandwidth_theoretical)},
        {"measured",
         {{"read", positive_or_null(d.measured.read)},
          {"copy", positive_or_null(d.measured.copy)},
          {"triad", positive_or_null(d.measured.triad)},
          {"buffer_bytes", d.measured.buffer_bytes},
          {"note", d.measured.note},
          {"shapes", d.measured.shapes}}}}},
      {"flops_peak", positive_or_null(d.flops_peak)},
      {"flops_peak_tensor_f16", positive_or_null(d.flops_peak_tensor_f16)},
      {"flops_peak_tensor_fp8", positive_or_null(d.flops_peak_tensor_fp8)},
      {"flops_measured", positive_or_null(d.measured.fma_flops)},
      {"gemm_ceiling", d.measured.gemm_ceiling_name.empty()
                           ? json(nullptr)
                           : json{{"flops", positive_or_null(d.measured.gemm_flops)},
                                  {"name", d.measured.gemm_ceiling_name}}},
  };
}

DeviceRecord device_record_from_json(const json& j, const std::string& source) {
  return device_from(JsonIn(j, source));
}

json to_json(const Report& r) {
  json devices = json::array();
  for (const auto& d : r.devices) devices.push_back(to_json(d));
  json results = json::array();
  for (const auto& p : r.results) results.push_back(to_json(p));
  json out = {
      {"schema_version", r.schema_version},
      {"tool", {{"name", r.tool.name}, {"version", r.tool.version}, {"git_sha", r.tool.git_sha}}},
      {"created", r.created},
      {"host",
       {{"hostname", r.host.hostname},
        {"os", r.host.os},
        {"cpu", r.host.cpu},
        {"cpu_threads", r.host.cpu_threads},
        {"compiler", r.host.compiler},
        {"build_type", r.host.build_type}}},
      {"devices", devices},
      {"config", r.config},
      {"results", results},
      {"knees", r.knees},
      {"knees_definition", kKneesDefinition},
      {"completion",
       {{"state", completion_state_name(r.completion.state)},
        {"reason", r.completion.reason},
        {"points_planned", r.completion.points_planned},
        {"points_finished", points_finished(r)}}},
  };
  if (!r.replay.is_null()) out["replay"] = r.replay;
  return out;
}

namespace {

// Knees are kept as read (the printers take absent keys as defaults), so the keys that are
// present must have the types the printers read them as: a string where one is printed, an
// int for a batch, a number for a bandwidth.
void check_knees(const JsonIn& knees) {
  for (std::size_t i = 0; i < knees.size(); ++i) {
    const JsonIn k = knees.at(i);
    if (!k.json().is_object())
      k.fail(fmt::format("expected an object, got {}", k.json().type_name()));
    for (const char* key : {"model", "kernel", "kv_dtype", "q_dtype"}) {
      if (k.has(key)) (void)k.at(key).string();
    }
    for (const char* key : {"block_size", "prefix_groups", "knee_batch", "max_batch"}) {
      if (k.has(key)) (void)k.at(key).int32();
    }
    for (const char* key : {"hit_rate", "knee_bandwidth", "max_bandwidth"}) {
      if (k.has(key)) (void)k.at(key).number();
    }
    // The points' codec: a knee's context reads as a point's does.
    if (k.has("context")) (void)context_from(k.at("context"));
  }
}

Report report_from(const JsonIn& in) {
  Report r;
  if (!in.has("schema_version")) in.fail("not a decodebench report: no schema_version");
  const JsonIn ver = in.at("schema_version");
  r.schema_version = ver.int32();
  if (r.schema_version != kSchemaVersion) {
    ver.fail(fmt::format("schema_version {} is not supported; this build reads {}",
                         r.schema_version, kSchemaVersion));
  }
  const JsonIn tool = in.at("tool");
  r.tool.name = tool.at("name").string();
  r.tool.version = tool.at("version").string();
  r.tool.git_sha = tool.at("git_sha").string();
  r.created = in.at("created").string();
  const JsonIn host = in.at("host");
  r.host.hostname = host.at("hostname").string();
  r.host.os = host.at("os").string();
  r.host.cpu = host.at("cpu").string();
  r.host.cpu_threads = host.at("cpu_threads").int32();
  r.host.compiler = host.at("compiler").string();
  r.host.build_type = host.at("build_type").string();
  const JsonIn devices = in.at("devices");
  for (std::size_t i = 0; i < devices.size(); ++i) r.devices.push_back(device_from(devices.at(i)));
  r.config = in.at("config").json();
  const JsonIn results = in.at("results");
  for (std::size_t i = 0; i < results.size(); ++i) r.results.push_back(point_from(results.at(i)));
  check_knees(in.at("knees"));
  r.knees = in.at("knees").json();
  // Older reports repeat the definition in every knee; it is written once now (knees_definition).
  for (json& k : r.knees) {
    if (k.is_object()) k.erase("definition");
  }
  // completion was added to the schema later; a report without it is taken as complete.
  if (in.has("completion")) {
    const JsonIn c = in.at("completion");
    r.completion.state = parse_completion_state(c.at("state"));
    r.completion.reason = c.at("reason").string();
    r.completion.points_planned = c.at("points_planned").int32();
  } else {
    r.completion.points_planned = static_cast<int>(r.results.size());
  }
  if (in.has("replay")) {
    const JsonIn replay = in.at("replay");
    if (!replay.json().is_object())
      replay.fail(fmt::format("expected an object, got {}", replay.json().type_name()));
    r.replay = replay.json();
  }
  return r;
}

}  // namespace

Report report_from_json(const json& j) { return report_from(JsonIn(j, "report")); }

void write_report_atomic(const std::filesystem::path& path, const Report& r) {
  // Serialize first: an exception here leaves nothing on disk at all.
  const std::string text = to_json(r).dump(2) + "\n";
  write_text_atomic(path, text);
}

Report parse_report(std::string_view text, std::string_view source) {
  const json j = parse_json_text(text, source);
  try {
    return report_from_json(j);
  } catch (const InputError& e) {
    // Replace the generic source name with the file.
    std::string msg = e.what();
    if (msg.rfind("report: ", 0) == 0) msg = msg.substr(8);
    throw InputError(fmt::format("{}: {}", source, msg));
  }
}

Report read_report(const std::filesystem::path& path) {
  std::ifstream f(path);
  if (!f) throw InputError(fmt::format("{}: cannot open the report", path.string()));
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_report(ss.view(), path.string());
}

Report new_report() {
  Report r;
  r.tool = this_tool();
  r.host = this_host();
  r.created = iso8601_utc_now();
  return r;
}

}  // namespace decodebench
