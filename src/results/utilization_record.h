// How busy the device was while a point's samples were timed: the figure a utilization dashboard
// shows, set beside the point's % of roof (docs/design.md "Busy beside the roof";
// docs/report-schema.md: results[].utilization). Backends measure it (PreparedPoint::
// utilization), the harness adds what needs the point's times (src/harness/utilization.h), the
// report layer writes and reads it; it lives with the report, which includes nothing from
// src/backends.
#pragma once

#include <limits>
#include <string>
#include <string_view>

namespace decodebench {

enum class BusySource {
  cpu_threads,  // cpu: CPU time of the process's threads / (wall time x the threads it ran)
  nvml,         // cuda: NVML's GPU utilization, the board's energy counter and power reading
};
constexpr std::string_view busy_source_name(BusySource s) {
  switch (s) {
    case BusySource::cpu_threads: return "cpu_threads";
    case BusySource::nvml: return "nvml";
  }
  return "?";
}
BusySource parse_busy_source(std::string_view s);  // throws InputError listing the valid names

// A figure that is not available is NaN here and null in the JSON (never 0); `note` says why.
struct UtilizationRecord {
  static constexpr double kNotAvailable = std::numeric_limits<double>::quiet_NaN();
  BusySource source = BusySource::cpu_threads;
  // The busy fraction: cpu_threads: cpu_time_s / (window_s * threads); nvml: utilization.gpu /
  // 100, the share of NVML's last sampling period in which a kernel ran. Not clamped: a CPU
  // figure above 1 means threads outside the team were busy too, and says so in `note`.
  double busy = kNotAvailable;
  int threads = 0;                    // cpu_threads: the threads the point ran (OpenMP team)
  double cpu_time_s = kNotAvailable;  // cpu_threads: the threads' CPU time in the windows
  // cpu_threads: the wall time of the windows around the timed steps, summed over the samples;
  // nvml: the wall time between the two readings of the energy counter.
  double window_s = kNotAvailable;
  double energy_J = kNotAvailable;            // nvml: the energy counter's advance over window_s
  double power_W = kNotAvailable;             // nvml: energy_J / window_s
  double power_reading_W = kNotAvailable;     // nvml: nvmlDeviceGetPowerUsage after the samples
  double energy_J_per_step = kNotAvailable;   // power_W * time_s.median
  double energy_J_per_token = kNotAvailable;  // power_W / tokens_per_s
  // Empty when every figure of the source is there; else what is missing and why, or a caution
  // about a figure that is there (a CPU busy above 1, an NVML period longer than the samples).
  std::string note;
};

}  // namespace decodebench
