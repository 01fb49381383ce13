// How a point's samples were timed (docs/report-schema.md: results[].timing; docs/design.md
// "Timing"). Backends say it (PreparedPoint::timing), the harness records it, the report layer
// writes and reads it; it lives with the report, which includes nothing from src/backends.
#pragma once

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

struct TimingRecord {
  TimingMethod method = TimingMethod::host_clock_per_step;
  int steps_per_sample = 1;  // steps between the two clock reads of a sample; sample = time / N
  bool warm_l2 = false;      // JSON "l2": "warm" (no cache flush before samples) or "cold"
};

}  // namespace decodebench
