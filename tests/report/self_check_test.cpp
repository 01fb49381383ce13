// The rows that check themselves (results/self_check.h), on synthetic records: a bandwidth above
// the datasheet or well above the measured read, and a cold flush under 2x the cache, each
// planted and caught with both figures named; warm points and unknown figures left alone; a
// flagged row kept with its figures, marked in the table, CSV and JSON, and left out of the
// knees and of compare.
#include <string>

#include <gtest/gtest.h>

#include "report/compare.h"
#include "report/format.h"
#include "results/knees.h"
#include "results/report.h"
#include "results/self_check.h"
#include "support/report_fixtures.h"

namespace decodebench {
namespace {

using test::ok_point;
using test::sample_report;

bool has(const std::string& text, std::string_view what) {
  return text.find(what) != std::string::npos;
}

DeviceInfo h200() { return sample_report().devices[0]; }  // datasheet 4.8 TB/s, read 4.1 TB/s

constexpr double kMiB = 1024.0 * 1024.0;

TEST(SelfCheck, AboveTheDatasheetIsFlaggedNamingBothFigures) {
  PointResult p = ok_point(0, 64, 1e-3, 5.2e12);
  const auto f = check_above_peak(p, h200());
  ASSERT_TRUE(f);
  EXPECT_EQ(f->name, kFlagAboveDatasheet);
  EXPECT_EQ(f->reason,
            "achieved 5.20 TB/s exceeds the NVIDIA H200 datasheet 4.80 TB/s (by more than 5 %): "
            "not a result");
  EXPECT_EQ(self_check(p, h200()).size(), 1u);
}

TEST(SelfCheck, WithinTheTolerancesNothingIsFlagged) {
  // 2 % over the datasheet (its rounding) and under 1.25x the measured read.
  EXPECT_FALSE(check_above_peak(ok_point(0, 64, 1e-3, 4.9e12), h200()));
  EXPECT_FALSE(check_above_peak(ok_point(0, 64, 1e-3, 4.0e12), h200()));
}

TEST(SelfCheck, WarmOrUntimedPointsAreNotHeldToThePeak) {
  PointResult warm = ok_point(0, 1, 1e-6, 20e12);
  warm.timing->warm_l2 = true;  // read from L2: above HBM is no fault
  EXPECT_TRUE(self_check(warm, h200()).empty());
  PointResult wrong = test::wrong_point(1);
  wrong.bandwidth.achieved = 20e12;
  EXPECT_TRUE(self_check(wrong, h200()).empty());
  DeviceInfo unknown;  // no datasheet, no ceilings: nothing to compare with
  EXPECT_TRUE(self_check(ok_point(0, 1, 1e-6, 20e12), unknown).empty());
}

TEST(SelfCheck, AboveTheMeasuredReadWithoutADatasheet) {
  // A CPU: no datasheet bandwidth, a measured read of 20 GB/s.
  DeviceInfo cpu;
  cpu.backend = "cpu";
  cpu.name = "Some CPU";
  cpu.measured.read = 20e9;
  PointResult p = ok_point(0, 1, 1e-3, 30e9);
  p.backend = "cpu";
  p.timing = TimingRecord{TimingMethod::host_clock_per_step, 1, false};
  const auto f = check_above_peak(p, cpu);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->name, kFlagAboveReadCeiling);
  EXPECT_TRUE(has(f->reason,
                  "achieved 30.0 GB/s exceeds the Some CPU measured read ceiling "
                  "20.0 GB/s"))
      << f->reason;
  // The read measured right before the samples was higher: 30 is within 1.25x of it.
  p.roofline.paired_read_Bps = 28e9;
  EXPECT_FALSE(check_above_peak(p, cpu));
}

TEST(SelfCheck, AColdFlushUnderTwiceTheCacheIsFlagged) {
  PointResult p = ok_point(0, 1, 1e-4, 1e12);
  p.flush = FlushRecord{48 * kMiB, 50 * kMiB};
  const auto f = check_flush(p);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->name, kFlagSmallFlush);
  EXPECT_TRUE(has(f->reason, "touched 48.0 MiB, under 2x the 50.0 MiB cache (100.0 MiB)"))
      << f->reason;
  p.flush = FlushRecord{100 * kMiB, 50 * kMiB};  // exactly 2x: enough
  EXPECT_FALSE(check_flush(p));
  p.flush = FlushRecord{0, 0};  // no cache reported: nothing to beat
  EXPECT_FALSE(check_flush(p));
  p.flush.reset();  // not recorded (an older report, a backend without one)
  EXPECT_FALSE(check_flush(p));
  p.flush = FlushRecord{1 * kMiB, 50 * kMiB};
  p.timing->warm_l2 = true;  // a warm point flushes nothing on purpose
  EXPECT_FALSE(check_flush(p));
}

// A report whose point 1 (batch 8) claims 5.2 TB/s on an H200 and flushed too little.
Report flagged_report() {
  Report r = sample_report();
  PointResult& p = r.results[1];
  p.bandwidth.achieved = 5.2e12;
  p.flush = FlushRecord{48 * kMiB, 50 * kMiB};
  p.flags = self_check(p, r.devices[0]);
  r.knees = compute_knees(r.results);
  return r;
}

TEST(SelfCheck, AFlaggedRowIsKeptAndMarkedInEveryFormat) {
  const Report r = flagged_report();
  ASSERT_EQ(r.results[1].flags.size(), 2u);
  const std::string t = format_results(r, OutputFormat::table);
  EXPECT_TRUE(has(t, " ok! ")) << t;
  EXPECT_TRUE(has(t, "5200.0")) << t;  // the figure is kept, as measured
  EXPECT_TRUE(has(t, "ok!: a self-check flagged it")) << t;
  EXPECT_TRUE(has(t, "flagged above_datasheet: achieved 5.20 TB/s exceeds")) << t;
  EXPECT_TRUE(has(t, "flagged small_flush: the cold flush touched 48.0 MiB")) << t;
  const std::string csv = format_results(r, OutputFormat::csv);
  EXPECT_TRUE(has(csv, ",flags,flag_reasons,flush_bytes,cache_bytes,")) << csv;
  EXPECT_TRUE(has(csv, ",above_datasheet;small_flush,")) << csv;
  // JSON: written, and read back as written.
  const Report back = report_from_json(to_json(r));
  EXPECT_EQ(back.results[1].flags, r.results[1].flags);
  ASSERT_TRUE(back.results[1].flush);
  EXPECT_EQ(back.results[1].flush->flush_bytes, 48 * kMiB);
  EXPECT_EQ(back.results[1].flush->cache_bytes, 50 * kMiB);
  EXPECT_TRUE(back.results[0].flags.empty());
  EXPECT_FALSE(back.results[0].flush);
  // A report from before the fields: absent keys, nothing flagged.
  nlohmann::json old = to_json(sample_report());
  for (auto& p : old["results"]) {
    EXPECT_FALSE(p.contains("flags"));
    EXPECT_FALSE(p.contains("flush"));
  }
  EXPECT_TRUE(report_from_json(old).results[1].flags.empty());
}

TEST(SelfCheck, AFlaggedRowIsLeftOutOfTheKneesAndOfCompare) {
  const Report r = flagged_report();
  ASSERT_FALSE(r.knees.empty());
  for (const auto& k : r.knees) {
    for (const auto& b : k.at("batches")) EXPECT_NE(b.get<int>(), 8) << k.dump();
  }
  EXPECT_FALSE(counts_as_result(r.results[1]));
  EXPECT_TRUE(counts_as_result(r.results[0]));
  // Against a clean baseline the flagged point is not compared but listed, with its reason.
  const ReportComparison c = compare_reports(sample_report(), r, CompareOptions{});
  bool listed = false;
  for (const auto& m : c.missing) listed |= has(m.why, "flagged now: achieved 5.20 TB/s");
  EXPECT_TRUE(listed);
  EXPECT_EQ(c.points.size(), 2u);  // points 0 and 2; 3 is wrong, 4 skipped
}

}  // namespace
}  // namespace decodebench
