// What a point's self-checks record (docs/design.md "Rows that check themselves";
// docs/report-schema.md: results[].flags, results[].flush): the size of the cold flush set beside
// the cache it had to beat, and the flags a check raised. Plain structs, like timing_record.h:
// the backends fill FlushRecord, the harness the flags, the report layer writes and reads both.
#pragma once

#include <string>

namespace decodebench {

// The cache flush before each cold sample: the bytes it touched against the cache it had to
// evict. A flush evicts reliably only at >= 2x the cache, since replacement is not exact LRU.
struct FlushRecord {
  double flush_bytes = 0;  // cuda: the smaller of the flush's two passes (memset, read); cpu: read
  double cache_bytes = 0;  // cuda: the L2; cpu: the last-level cache (0: unknown)
};

// A check the point failed. The row is kept as measured, but it is no result: the views mark it
// and the knees, compare and the GPU check's summary leave it out.
struct PointFlag {
  std::string name;    // kFlagAboveDatasheet, ...
  std::string reason;  // both figures, e.g. "achieved 5.20 TB/s exceeds the ... datasheet ..."
  friend bool operator==(const PointFlag&, const PointFlag&) = default;
};

}  // namespace decodebench
