#include "results/self_check.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/units.h"

namespace decodebench {

namespace {

bool positive(double x) { return available(x) && x > 0; }

// A cold point that was timed and is ok: the only kind whose bandwidth claims DRAM.
bool cold_and_ok(const PointResult& p) {
  return p.status == PointStatus::ok && p.timing && !p.timing->warm_l2;
}

std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0)); }

}  // namespace

std::optional<PointFlag> check_above_peak(const PointResult& p, const DeviceInfo& device) {
  const double achieved = p.bandwidth.achieved;
  if (!cold_and_ok(p) || !positive(achieved)) return std::nullopt;
  const std::string name = device.name.empty() ? device.backend : device.name;
  if (positive(device.bandwidth_datasheet) &&
      achieved > device.bandwidth_datasheet * (1 + kDatasheetTolerance)) {
    return PointFlag{
        kFlagAboveDatasheet,
        fmt::format("achieved {} exceeds the {} datasheet {} (by more than {:.0f} %): "
                    "not a result",
                    format_bandwidth(achieved), name, format_bandwidth(device.bandwidth_datasheet),
                    100 * kDatasheetTolerance)};
  }
  // The larger of the two measured reads: the flag must not hinge on which one was low.
  const double paired = p.roofline.paired_read_Bps;
  const double read = std::max(device.measured.read, positive(paired) ? paired : 0.0);
  if (positive(read) && achieved > read * (1 + kReadCeilingTolerance)) {
    return PointFlag{kFlagAboveReadCeiling,
                     fmt::format("achieved {} exceeds the {} measured read ceiling {} (by more "
                                 "than {:.0f} %): not a result",
                                 format_bandwidth(achieved), name, format_bandwidth(read),
                                 100 * kReadCeilingTolerance)};
  }
  return std::nullopt;
}

std::optional<PointFlag> check_flush(const PointResult& p) {
  if (!cold_and_ok(p) || !p.flush || !positive(p.flush->cache_bytes)) return std::nullopt;
  const double need = kMinFlushOverCache * p.flush->cache_bytes;
  if (p.flush->flush_bytes >= need) return std::nullopt;
  return PointFlag{kFlagSmallFlush,
                   fmt::format("the cold flush touched {}, under {:g}x the {} cache ({}): the "
                               "step may have found its data still cached; not a result",
                               mib(p.flush->flush_bytes), kMinFlushOverCache,
                               mib(p.flush->cache_bytes), mib(need))};
}

std::vector<PointFlag> self_check(const PointResult& p, const DeviceInfo& device) {
  std::vector<PointFlag> flags;
  if (auto f = check_above_peak(p, device)) flags.push_back(std::move(*f));
  if (auto f = check_flush(p)) flags.push_back(std::move(*f));
  return flags;
}

}  // namespace decodebench
