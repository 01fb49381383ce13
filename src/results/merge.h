// Shard reports -> one report (docs/design.md "Scale-out"), for `decodebench merge` and the
// sweep's --shard workflow.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "results/report.h"

namespace decodebench {

// Shard reports -> one report (docs/design.md "Scale-out"). All inputs must have the same
// config except its shard keys and the same devices by backend+name (else InputError naming the
// difference); results are concatenated, sorted by index, duplicates rejected; knees
// recomputed; the merged config's shard becomes 0/1.
// The shard set must be whole: one count n, each of 0..n-1 exactly once, every shard complete
// (no not_run point). Otherwise InputError naming what is missing, unless allow_partial: then
// the merge goes on, completion.state is partial, the reason names what is missing, and the
// points of missing shards are listed as not_run (from planned_points, when given).
struct MergeOptions {
  bool allow_partial = false;
  std::vector<std::string> names;  // names[i] for inputs[i] in messages ("report i" otherwise)
  // Every point of the full sweep (shard 0/1) as a not_run entry; empty function: the points of
  // a missing shard are named by the shard only.
  std::function<std::vector<PointResult>()> planned_points;
};
Report merge_reports(std::span<const Report> shards, const MergeOptions& options = {});

}  // namespace decodebench
