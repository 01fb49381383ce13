// How a point's samples were timed (docs/report-schema.md: results[].timing; docs/design.md
// "Timing"). Backends say it (PreparedPoint::timing), the harness records it, the report layer
// writes and reads it; it lives with the report, which includes nothing from src/backends.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace decodebench {

enum class TimingMethod {
  events_per_step,      // cuda, cold L2: CUDA events around one step; the flush before the start
  events_back_to_back,  // cuda, warm L2: events around N steps launched back to back, / N
  graph_replay,         // cuda, warm L2: events around one replay of a graph of N steps, / N
  host_clock_per_step,  // cpu, emu: a steady host clock around one step
};
constexpr std::string_view timing_method_name(TimingMethod m) {
  switch (m) {
    case TimingMethod::events_per_step: return "events_per_step";
    case TimingMethod::events_back_to_back: return "events_back_to_back";
    case TimingMethod::graph_replay: return "graph_replay";
    case TimingMethod::host_clock_per_step: return "host_clock_per_step";
  }
  return "?";
}
TimingMethod parse_timing_method(std::string_view s);  // throws InputError listing the valid names

// What made the samples cold (JSON "cold"): a cache flush before each sample, a rotation over
// copies of the step's buffers (cpu, docs/design.md "Cold caches on the CPU"), or nothing (warm).
enum class ColdMethod { warm, flush, rotation };
constexpr std::string_view cold_method_name(ColdMethod m) {
  switch (m) {
    case ColdMethod::warm: return "warm";
    case ColdMethod::flush: return "flush";
    case ColdMethod::rotation: return "rotation";
  }
  return "?";
}

struct TimingRecord {
  TimingRecord() = default;
  // The three fields every backend sets; the cold method's stay at a flush with no reason.
  TimingRecord(TimingMethod m, int steps, bool warm)
      : method(m), steps_per_sample(steps), warm_l2(warm) {}

  TimingMethod method = TimingMethod::host_clock_per_step;
  int steps_per_sample = 1;  // steps between the two clock reads of a sample; sample = time / N
  bool warm_l2 = false;      // JSON "l2": "warm" (no cache flush before samples) or "cold"
  // Cold samples: > 0 when each ran on the next of this many copies of the step's buffers
  // (rotation_bytes: the copies together), no flush; 0: a flush before each sample.
  int rotation_copies = 0;
  std::int64_t rotation_bytes = 0;
  // A flush: why rotation was not used; "" where the backend has no rotation (cuda), and in a
  // report from before the field.
  std::string flush_reason;
};

constexpr ColdMethod cold_method(const TimingRecord& t) {
  if (t.warm_l2) return ColdMethod::warm;
  return t.rotation_copies > 0 ? ColdMethod::rotation : ColdMethod::flush;
}

}  // namespace decodebench
