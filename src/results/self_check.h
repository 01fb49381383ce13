// The self-checks of a timed point (docs/design.md "Rows that check themselves"): figures that
// cannot be physical are flagged on the row rather than printed as results. A GPU number can be
// wrong without anyone noticing (a cache that stayed warm, a wrong byte count, a timer around
// nothing); each check here names both figures it compared.
#pragma once

#include <optional>
#include <vector>

#include "results/point_result.h"

namespace decodebench {

inline constexpr const char* kFlagAboveDatasheet = "above_datasheet";
inline constexpr const char* kFlagAboveReadCeiling = "above_read_ceiling";
inline constexpr const char* kFlagSmallFlush = "small_flush";

// Datasheet bandwidths are rounded figures ("4.8 TB/s") and the byte model counts a few small
// arrays (block tables, lengths) a kernel may read from cache; 5 % over the datasheet is past
// both, so what remains is impossible for DRAM.
inline constexpr double kDatasheetTolerance = 0.05;
// A decode kernel may beat the read-ceiling kernel somewhat (the ceiling is one simple loop at
// the best of a few launch shapes, and a shared CPU host's bandwidth drifts between the
// ceilings and the point), so only a clear margin over it is impossible.
inline constexpr double kReadCeilingTolerance = 0.25;
// The flush must touch at least this many times the cache it evicts.
inline constexpr double kMinFlushOverCache = 2.0;

// Achieved bandwidth (bandwidth.achieved) above the device's datasheet by more than
// kDatasheetTolerance, or above the larger of its measured read ceiling and the point's paired
// read (roofline.paired_read_Bps) by more than kReadCeilingTolerance. Only for cold points that
// are ok: a warm point (--warm) may legitimately read from the cache faster than from memory.
// Empty where the figures are missing (0 or NaN).
std::optional<PointFlag> check_above_peak(const PointResult& p, const DeviceInfo& device);

// A cold point whose flush (p.flush) touched less than kMinFlushOverCache x the cache. Empty
// where no flush was recorded or the cache size is unknown (0).
std::optional<PointFlag> check_flush(const PointResult& p);

// Every check above, in order (what the runner stores in p.flags).
std::vector<PointFlag> self_check(const PointResult& p, const DeviceInfo& device);

// An ok point that no check flagged: what knees, compare and summaries count as a result.
inline bool counts_as_result(const PointResult& p) {
  return p.status == PointStatus::ok && p.flags.empty();
}

}  // namespace decodebench
