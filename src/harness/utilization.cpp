#include "harness/utilization.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace decodebench {
namespace {

bool positive(double x) { return std::isfinite(x) && x > 0; }

void add_note(std::string& note, const std::string& line) {
  if (line.empty() || note.find(line) != std::string::npos) return;
  if (!note.empty()) note += "; ";
  note += line;
}

}  // namespace

void finish_utilization(UtilizationRecord& u, double median_s, double tokens_per_s) {
  u.energy_J_per_step = UtilizationRecord::kNotAvailable;
  u.energy_J_per_token = UtilizationRecord::kNotAvailable;
  if (positive(u.power_W)) {
    if (positive(median_s)) u.energy_J_per_step = u.power_W * median_s;
    if (positive(tokens_per_s)) u.energy_J_per_token = u.power_W / tokens_per_s;
  }
  if (!std::isnan(u.busy) && u.busy > 1 + kBusyTolerance) {
    add_note(u.note,
             u.source == BusySource::cpu_threads
                 ? fmt::format("busy {:.1f} % is above 100 %: the process's threads spent more CPU "
                               "time in the windows than the {} threads of the step can, so "
                               "threads outside its team were on a core too (a second thread "
                               "pool?)",
                               100 * u.busy, u.threads)
                 : fmt::format("busy {:.1f} % is above 100 %: not a share of time", 100 * u.busy));
  }
}

UtilizationRecord combine_utilization(std::span<const UtilizationRecord> kinds) {
  if (kinds.empty()) throw std::invalid_argument("combine_utilization: no record");
  UtilizationRecord out = kinds[0];
  for (const UtilizationRecord& k : kinds) {
    if (k.source != out.source)
      throw std::invalid_argument("combine_utilization: records of different sources");
  }
  if (out.source != BusySource::cpu_threads) return out;
  out.note.clear();
  double cpu = 0, window = 0;
  for (const UtilizationRecord& k : kinds) {
    add_note(out.note, k.note);
    cpu += k.cpu_time_s;  // NaN in any kind: NaN in the sum
    window += k.window_s;
  }
  out.cpu_time_s = cpu;
  out.window_s = window;
  out.busy = positive(window) && !std::isnan(cpu) && out.threads > 0
                 ? cpu / (window * out.threads)
                 : UtilizationRecord::kNotAvailable;
  return out;
}

}  // namespace decodebench
