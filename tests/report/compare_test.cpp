// merge_reports (shards -> one) and compare_reports (the CI gate): planted faults are caught.
#include <gtest/gtest.h>

#include "common/errors.h"
#include "report/compare.h"
#include "report/report.h"
#include "report/report_fixtures.h"

namespace decodebench {
namespace {

using test::sample_report;

// Splits a report the way `--shard i/n` would have produced it.
std::vector<Report> shard(const Report& full, int n) {
  std::vector<Report> out;
  for (int i = 0; i < n; ++i) {
    Report s = full;
    s.results.clear();
    s.config["shard"] = std::to_string(i) + "/" + std::to_string(n);
    s.completion.points_planned = 0;
    for (const auto& p : full.results) {
      if (p.index % n == i) {
        s.results.push_back(p);
        ++s.completion.points_planned;
      }
    }
    out.push_back(s);
  }
  return out;
}

TEST(Merge, ShardsMergeBackToTheFullReport) {
  const Report full = sample_report();
  std::vector<Report> shards = shard(full, 3);
  std::swap(shards[0], shards[2]);  // order of the inputs does not matter
  const Report merged = merge_reports(shards);
  ASSERT_EQ(merged.results.size(), full.results.size());
  for (std::size_t i = 0; i < full.results.size(); ++i) {
    EXPECT_EQ(to_json(merged.results[i]), to_json(full.results[i]));
  }
  EXPECT_EQ(merged.config["shard"], "0/1");
  EXPECT_EQ(merged.completion.points_planned, 5);
  EXPECT_EQ(merged.completion.state, Completion::State::complete);
  EXPECT_FALSE(merged.knees.empty());
}

TEST(Merge, RejectsMismatchedOrDuplicatedShards) {
  const Report full = sample_report();
  std::vector<Report> shards = shard(full, 2);
  std::vector<Report> dup = {shards[0], shards[0]};
  EXPECT_THROW(merge_reports(dup), InputError);
  std::vector<Report> other_config = shards;
  other_config[1].config["batch"] = {1, 2};
  EXPECT_THROW(merge_reports(other_config), InputError);
  std::vector<Report> other_device = shards;
  other_device[1].devices[0].name = "NVIDIA H100 80GB HBM3";
  EXPECT_THROW(merge_reports(other_device), InputError);
  EXPECT_THROW(merge_reports({}), InputError);
}

TEST(Merge, KeepsTheWorstCompletion) {
  std::vector<Report> shards = shard(sample_report(), 2);
  shards[1].completion.state = Completion::State::device_failure;
  shards[1].completion.reason = "Xid 79";
  const Report merged = merge_reports(shards);
  EXPECT_EQ(merged.completion.state, Completion::State::device_failure);
  EXPECT_NE(merged.completion.reason.find("Xid 79"), std::string::npos);
}

TEST(Compare, IdenticalReportsPass) {
  const Report r = sample_report();
  Report clean = r;
  clean.results.erase(clean.results.begin() + 3);  // drop the wrong point
  const ReportComparison c = compare_reports(clean, clean, 0.1);
  EXPECT_EQ(c.points.size(), 3u);
  EXPECT_TRUE(c.regressions.empty());
  EXPECT_FALSE(c.failed());
  for (const auto& p : c.points) EXPECT_DOUBLE_EQ(p.ratio, 1.0);
}

TEST(Compare, APlantedTwentyPercentSlowdownIsFlagged) {
  Report base = sample_report();
  base.results.erase(base.results.begin() + 3);
  Report cur = base;
  cur.results[1].time_s.median *= 1.2;
  const ReportComparison c = compare_reports(base, cur, 0.1);
  ASSERT_EQ(c.regressions.size(), 1u);
  EXPECT_NE(c.regressions[0].find("B=8"), std::string::npos) << c.regressions[0];
  EXPECT_NE(c.regressions[0].find("20.0% slower"), std::string::npos) << c.regressions[0];
  EXPECT_TRUE(c.failed());
  EXPECT_NE(format_comparison(c).find("REGRESSION"), std::string::npos);
  // Within the threshold (and faster) is not a regression.
  EXPECT_FALSE(compare_reports(base, cur, 0.25).failed());
  cur.results[1].time_s.median = base.results[1].time_s.median * 0.5;
  EXPECT_FALSE(compare_reports(base, cur, 0.1).failed());
}

TEST(Compare, WrongAndMissingPointsFailTheGate) {
  Report base = sample_report();
  base.results.erase(base.results.begin() + 3);
  Report cur = sample_report();  // has the wrong point 3
  ReportComparison c = compare_reports(base, cur, 0.1);
  EXPECT_EQ(c.wrong.size(), 1u);
  EXPECT_TRUE(c.failed());
  Report fewer = base;
  fewer.results.erase(fewer.results.begin());
  c = compare_reports(base, fewer, 0.1);
  EXPECT_EQ(c.missing.size(), 1u);
  EXPECT_TRUE(c.failed());
  // A point only in the current report is listed, not a failure.
  c = compare_reports(fewer, base, 0.1);
  EXPECT_EQ(c.added.size(), 1u);
  EXPECT_FALSE(c.failed());
  EXPECT_THROW(compare_reports(base, base, -0.1), InputError);
}

}  // namespace
}  // namespace decodebench
