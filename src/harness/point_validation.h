// A point's output checked against the CPU reference before it is timed (docs/design.md
// "Validation"): the rows checked, the tolerance of its formats, and a cache of reference outputs
// shared by the kernels of one sweep.
#pragma once

#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "results/point_result.h"
#include "workload/workload.h"

namespace decodebench {

// Reference outputs by workload identity: a sweep over several kernels validates each of them
// against the same workload, and the reference (double loops) is the slowest part of a GPU
// sweep. Bounded; cleared when full.
struct ReferenceCache {
  struct Entry {
    std::vector<float> ref;
    double quant_rel = kNotAvailable;
  };
  static constexpr std::size_t kMaxFloats = std::size_t{128} << 20;  // 512 MB
  std::map<std::string, Entry> entries;
  std::size_t floats = 0;
};

// Runs the point once and compares rows `rows` of its output with the reference on `checked`
// (the full workload when every row is validated, else the subset workload of those rows);
// fills r.error, and r.status and r.reason when it is wrong. True when correct. `cache` may be
// null.
bool validate_point(PreparedPoint& prepared, const Workload& checked, std::span<const int> rows,
                    ReferenceCache* cache, PointResult& r);

}  // namespace decodebench
