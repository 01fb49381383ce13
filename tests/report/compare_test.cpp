// merge_reports (shards -> one) and compare_reports (the perf gate) on fabricated samples:
// planted slowdowns, bandwidth swings, mismatched setups, missing and wrong points; the output
// formats.
#include <cmath>
#include <functional>
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/errors.h"
#include "report/compare.h"
#include "results/merge.h"
#include "results/report.h"
#include "support/compare_fixtures.h"
#include "support/report_fixtures.h"

namespace decodebench {
namespace {

using nlohmann::json;
using test::cpu_report;
using test::lognormal_samples;
using test::sample_report;
using test::shared_host_samples;
using test::timed_point;

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

TEST(Merge, APartialShardIsRefusedUnlessAllowed) {
  std::vector<Report> shards = shard(sample_report(), 2);
  shards[1].completion.state = Completion::State::device_failure;
  shards[1].completion.reason = "Xid 79";
  MergeOptions o;
  o.names = {"a.json", "b.json"};
  try {
    merge_reports(shards, o);
    ADD_FAILURE() << "a partial shard was merged";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("shard 1/2 (b.json) is device_failure: Xid 79"),
              std::string::npos)
        << e.what();
  }
  o.allow_partial = true;
  const Report merged = merge_reports(shards, o);
  EXPECT_EQ(merged.completion.state, Completion::State::partial);
  EXPECT_NE(merged.completion.reason.find("Xid 79"), std::string::npos);
}

TEST(Merge, MissingShardsAreNamedAndListedWhenAllowed) {
  const Report full = sample_report();
  std::vector<Report> shards = shard(full, 3);
  const std::vector<Report> two = {shards[0], shards[2]};
  try {
    merge_reports(two);
    ADD_FAILURE() << "an incomplete set was merged";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("missing shard 1/3 of 3"), std::string::npos) << e.what();
  }
  MergeOptions o;
  o.allow_partial = true;
  o.planned_points = [&] {
    std::vector<PointResult> all = full.results;
    for (auto& p : all) p.status = PointStatus::not_run;
    return all;
  };
  const Report merged = merge_reports(two, o);
  ASSERT_EQ(merged.results.size(), full.results.size());
  for (std::size_t i = 0; i < full.results.size(); ++i) {
    EXPECT_EQ(merged.results[i].index, full.results[i].index);
    EXPECT_EQ(merged.results[i].status,
              full.results[i].index % 3 == 1 ? PointStatus::not_run : full.results[i].status);
  }
  EXPECT_EQ(merged.completion.state, Completion::State::partial);
  EXPECT_EQ(merged.completion.points_planned, static_cast<int>(full.results.size()));
  // Shards of different counts never merge, not even partially.
  std::vector<Report> mixed = {shard(full, 2)[0], shards[1]};
  EXPECT_THROW(merge_reports(mixed, o), InputError);
}

// Three points (batch 1, 2, 4) of `n` lognormal samples each; point i's median is scaled by
// change[i].
Report noisy_report(std::uint64_t seed, std::vector<double> change = {1, 1, 1}, int n = 60,
                    double sigma = 0.03) {
  std::mt19937_64 rng(seed);
  std::vector<PointResult> points;
  const int batches[] = {1, 2, 4};
  for (int i = 0; i < 3; ++i) {
    points.push_back(timed_point(i, batches[i],
                                 lognormal_samples(rng, 1e-3 * batches[i] * change[i], sigma, n)));
  }
  return cpu_report(points);
}

const PointComparison& point_with_batch(const ReportComparison& c, int batch) {
  for (const auto& p : c.points) {
    if (p.point.batch == batch) return p;
  }
  throw std::runtime_error("no compared point of batch " + std::to_string(batch));
}

TEST(Compare, SameDistributionPasses) {
  const ReportComparison c = compare_reports(noisy_report(1), noisy_report(2), {});
  ASSERT_EQ(c.points.size(), 3u);
  EXPECT_EQ(c.count(Verdict::same), 3) << format_comparison(c, CompareFormat::table);
  EXPECT_FALSE(c.failed());
  for (const auto& p : c.points) {
    EXPECT_EQ(p.decided_by, "raw");  // no paired bandwidths
    EXPECT_FALSE(p.normalized);
  }
  EXPECT_NEAR(c.geomean_all.ratio, 1.0, 0.02);
  EXPECT_EQ(c.geomean_all.points, 3);
}

TEST(Compare, APlantedTwentyPercentSlowdownIsSlower) {
  const ReportComparison c = compare_reports(noisy_report(1), noisy_report(2, {1, 1.2, 1}), {});
  const PointComparison& p = point_with_batch(c, 2);
  EXPECT_EQ(p.verdict, Verdict::slower);
  EXPECT_LT(p.raw.p_value, 1e-6);
  EXPECT_NEAR(p.raw.ratio, 1.2, 0.03);
  EXPECT_LT(p.raw.ci.lo, p.raw.ratio);
  EXPECT_GT(p.raw.ci.hi, p.raw.ratio);
  EXPECT_EQ(c.count(Verdict::slower), 1);
  EXPECT_EQ(c.count(Verdict::same), 2);
  EXPECT_TRUE(c.failed());
  EXPECT_NEAR(c.geomean_all.ratio, std::cbrt(1.2), 0.02);
  const std::string table = format_comparison(c, CompareFormat::table);
  const std::size_t line = table.rfind('\n', table.find(" b=2 ")) + 1;
  EXPECT_EQ(table.compare(line, 7, "SLOWER "), 0) << "verdict first\n" << table;
  EXPECT_NE(table.find("result: fail\n"), std::string::npos) << table;
  // A 20 % speed-up is FASTER and does not fail the gate.
  const ReportComparison f = compare_reports(noisy_report(1), noisy_report(2, {1, 1 / 1.2, 1}), {});
  EXPECT_EQ(point_with_batch(f, 2).verdict, Verdict::faster);
  EXPECT_FALSE(f.failed());
  // A threshold above the change: the 20 % is not a gap worth flagging.
  CompareOptions loose;
  loose.threshold = 0.3;
  EXPECT_NE(
      point_with_batch(compare_reports(noisy_report(1), noisy_report(2, {1, 1.2, 1}), loose), 2)
          .verdict,
      Verdict::slower);
}

TEST(Compare, TwoPercentIsNeverSlower) {
  for (std::uint64_t s = 0; s < 20; ++s) {
    const ReportComparison c =
        compare_reports(noisy_report(10 + s), noisy_report(100 + s, {1.02, 1.02, 1.02}, 120), {});
    EXPECT_EQ(c.count(Verdict::slower), 0) << format_comparison(c, CompareFormat::table);
    EXPECT_FALSE(c.failed());
  }
}

// One point on a shared host (15 % swings between samples' moments), current vs baseline scaled
// by `time_change` and `bandwidth_change`.
ReportComparison compare_on_shared_host(double time_change, double bandwidth_change) {
  std::mt19937_64 rng(7);
  const auto b = shared_host_samples(rng, 1e-3, 50e9, /*swing=*/0.03, /*jitter=*/0.005, 60);
  const auto c =
      shared_host_samples(rng, 1e-3 * time_change, 50e9 * bandwidth_change, 0.03, 0.005, 60);
  return compare_reports(cpu_report({timed_point(0, 8, b.seconds, b.read_Bps)}),
                         cpu_report({timed_point(0, 8, c.seconds, c.read_Bps)}), {});
}

TEST(Compare, NormalizedSpaceExplainsABandwidthSwing) {
  // The host's memory got 15 % slower and the step 15 % slower with it: raw sees a gap,
  // time x bandwidth sees none, so the swing explains the gap.
  ReportComparison c = compare_on_shared_host(1.15, 0.85);
  ASSERT_EQ(c.points.size(), 1u);
  const PointComparison& swing = c.points[0];
  ASSERT_TRUE(swing.normalized);
  EXPECT_EQ(swing.raw.verdict, Verdict::slower);
  EXPECT_EQ(swing.normalized->verdict, Verdict::same);
  EXPECT_EQ(swing.verdict, Verdict::same);
  EXPECT_EQ(swing.decided_by, "normalized");
  EXPECT_NEAR(swing.normalized->ratio, 1.15 * 0.85, 0.01);
  EXPECT_FALSE(c.failed());
  // The same 15 % at an unchanged bandwidth is the kernel's: SLOWER in both spaces.
  c = compare_on_shared_host(1.15, 1.0);
  const PointComparison& real = c.points[0];
  EXPECT_EQ(real.raw.verdict, Verdict::slower);
  EXPECT_EQ(real.verdict, Verdict::slower);
  EXPECT_EQ(real.decided_by, "both");
  EXPECT_TRUE(c.failed());
}

TEST(Compare, NormalizedOnlyWhenBothReportsHavePairedSamples) {
  std::mt19937_64 rng(3);
  const auto h = shared_host_samples(rng, 1e-3, 50e9, 0.03, 0.005, 30);
  const Report with = cpu_report({timed_point(0, 8, h.seconds, h.read_Bps)});
  const Report without = cpu_report({timed_point(0, 8, h.seconds)});
  for (const auto& [b, c] : {std::pair{&with, &without}, std::pair{&without, &with}}) {
    const ReportComparison r = compare_reports(*b, *c, {});
    ASSERT_EQ(r.points.size(), 1u);
    EXPECT_FALSE(r.points[0].normalized);
    EXPECT_EQ(r.points[0].decided_by, "raw");
    EXPECT_TRUE(to_json(r)["points"][0]["normalized"].is_null());
  }
  EXPECT_TRUE(compare_reports(with, with, {}).points[0].normalized);
}

TEST(Compare, TooFewSamplesIsAmbiguousAndFailsOnlyWhenAsked) {
  Report base = noisy_report(1);
  Report cur = noisy_report(2);
  cur.results[0].samples.resize(1);
  cur.results[2].samples.clear();
  ReportComparison c = compare_reports(base, cur, {});
  EXPECT_EQ(c.count(Verdict::ambiguous), 2);
  EXPECT_NE(point_with_batch(c, 1).reason.find("too few samples"), std::string::npos);
  EXPECT_EQ(point_with_batch(c, 4).reason, "no samples");
  // Without samples the ratio falls back to the recorded medians (still in the geomean).
  EXPECT_NEAR(point_with_batch(c, 4).raw.ratio, 1.0, 0.03);
  EXPECT_EQ(c.geomean_all.points, 3);
  EXPECT_FALSE(c.failed());
  CompareOptions strict;
  strict.fail_on_ambiguous = true;
  EXPECT_TRUE(compare_reports(base, cur, strict).failed());
}

TEST(Compare, MissingAddedAndWrongPoints) {
  const Report base = noisy_report(1);
  Report cur = noisy_report(2);
  cur.results.erase(cur.results.begin());        // batch 1 gone
  cur.results[0].status = PointStatus::skipped;  // batch 2 skipped now
  cur.results[0].reason = "planted skip";
  cur.results[1].status = PointStatus::wrong;  // batch 4 wrong
  cur.results[1].reason = "planted mismatch";
  std::mt19937_64 rng(5);
  cur.results.push_back(timed_point(9, 64, lognormal_samples(rng, 1e-2, 0.03, 20)));
  const ReportComparison c = compare_reports(base, cur, {});
  EXPECT_TRUE(c.points.empty());
  ASSERT_EQ(c.missing.size(), 2u);
  EXPECT_NE(c.missing[0].key.find("b=1 "), std::string::npos);
  EXPECT_EQ(c.missing[0].why, "not in the current report");
  EXPECT_EQ(c.missing[1].why, "skipped now: planted skip");
  ASSERT_EQ(c.wrong.size(), 1u);
  EXPECT_EQ(c.wrong[0].status, "wrong");
  EXPECT_EQ(c.wrong[0].reason, "planted mismatch");
  ASSERT_EQ(c.added.size(), 1u);
  EXPECT_NE(c.added[0].find("b=64"), std::string::npos);
  EXPECT_TRUE(c.failed());
  const std::string table = format_comparison(c, CompareFormat::table);
  for (const char* s : {"MISSING", "WRONG", "ADDED", "planted skip", "result: fail"}) {
    EXPECT_NE(table.find(s), std::string::npos) << s << "\n" << table;
  }
  // Only added points: listed, not a failure.
  const ReportComparison more = compare_reports(
      noisy_report(3),
      [] {
        Report r = noisy_report(4);
        std::mt19937_64 g(6);
        r.results.push_back(timed_point(9, 64, lognormal_samples(g, 1e-2, 0.03, 20)));
        return r;
      }(),
      {});
  EXPECT_EQ(more.added.size(), 1u);
  EXPECT_FALSE(more.failed());
}

TEST(Compare, MismatchedSetupsAreRefusedUnlessAllowed) {
  const Report base = noisy_report(1);
  struct Case {
    const char* what;
    std::function<void(Report&)> plant;
  };
  const std::vector<Case> cases = {
      {"devices", [](Report& r) { r.devices[0].name = "Other CPU"; }},
      {"devices", [](Report& r) { r.devices[0].backend = "emu"; }},
      {"host class", [](Report& r) { r.host.cpu_threads = 64; }},
      {"host class", [](Report& r) { r.host.cpu = "Other CPU"; }},
      {"schema version", [](Report& r) { r.schema_version = 2; }},
  };
  for (const Case& k : cases) {
    Report cur = noisy_report(2);
    k.plant(cur);
    try {
      compare_reports(base, cur, {});
      ADD_FAILURE() << k.what << ": compared without --allow-mismatch";
    } catch (const InputError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(k.what), std::string::npos) << m;
      EXPECT_NE(m.find("--allow-mismatch"), std::string::npos) << m;
    }
    CompareOptions allow;
    allow.allow_mismatch = true;
    const ReportComparison c = compare_reports(base, cur, allow);
    ASSERT_EQ(c.mismatches.size(), 1u) << k.what;
    EXPECT_NE(c.mismatches[0].find(k.what), std::string::npos) << c.mismatches[0];
    EXPECT_EQ(c.points.size(), 3u);
    EXPECT_NE(format_comparison(c, CompareFormat::table).find("MISMATCH"), std::string::npos);
    EXPECT_EQ(to_json(c)["mismatches"].size(), 1u);
  }
  EXPECT_TRUE(report_mismatches(base, noisy_report(2)).empty());
}

TEST(Compare, BadOptionsAndDuplicatedPointsAreRefused) {
  const Report r = noisy_report(1);
  for (const auto& [threshold, alpha] : {std::pair{-0.1, 0.05}, std::pair{0.05, 0.0},
                                         std::pair{0.05, 1.0}, std::pair{std::nan(""), 0.05}}) {
    CompareOptions o;
    o.threshold = threshold;
    o.alpha = alpha;
    EXPECT_THROW(compare_reports(r, r, o), InputError) << threshold << " " << alpha;
  }
  Report dup = r;
  dup.results.push_back(dup.results[0]);
  dup.results.back().index = 7;
  EXPECT_THROW(compare_reports(r, dup, {}), InputError);
  EXPECT_THROW(parse_compare_format("csv"), InputError);
}

TEST(Compare, GeomeanPerKernel) {
  std::mt19937_64 rng(8);
  std::vector<PointResult> base, cur;
  // kernel a: 1.1 and 1.1; kernel b: 1 / 1.1. Exact scaling of the same samples.
  const double change[] = {1.1, 1.1, 1 / 1.1};
  const char* kernel[] = {"a", "a", "b"};
  for (int i = 0; i < 3; ++i) {
    const auto s = lognormal_samples(rng, 1e-3, 0.02, 20);
    std::vector<double> scaled;
    for (double x : s) scaled.push_back(x * change[i]);
    base.push_back(timed_point(i, 1 + i, s, {}, kernel[i]));
    cur.push_back(timed_point(i, 1 + i, scaled, {}, kernel[i]));
  }
  const ReportComparison c = compare_reports(cpu_report(base), cpu_report(cur), {});
  EXPECT_NEAR(c.geomean_all.ratio, std::cbrt(1.1 * 1.1 / 1.1), 1e-9);
  ASSERT_EQ(c.geomean_by_kernel.size(), 2u);
  EXPECT_EQ(c.geomean_by_kernel[0].kernel, "a");
  EXPECT_NEAR(c.geomean_by_kernel[0].ratio, 1.1, 1e-9);
  EXPECT_EQ(c.geomean_by_kernel[0].points, 2);
  EXPECT_NEAR(c.geomean_by_kernel[1].ratio, 1 / 1.1, 1e-9);
}

TEST(Compare, JsonCarriesTheAgreedKeys) {
  std::mt19937_64 rng(9);
  const auto hb = shared_host_samples(rng, 1e-3, 50e9, 0.03, 0.005, 30);
  const auto hc = shared_host_samples(rng, 1.2e-3, 50e9, 0.03, 0.005, 30);
  Report base = cpu_report({timed_point(0, 8, hb.seconds, hb.read_Bps),
                            timed_point(1, 16, hb.seconds), timed_point(2, 32, hb.seconds)});
  Report cur = cpu_report({timed_point(0, 8, hc.seconds, hc.read_Bps),
                           timed_point(1, 16, hb.seconds), timed_point(3, 64, hb.seconds)});
  cur.results[1].status = PointStatus::error;
  cur.results[1].reason = "planted";
  const ReportComparison c = compare_reports(base, cur, {});
  const json j = json::parse(format_comparison(c, CompareFormat::json));
  EXPECT_EQ(j, to_json(c));
  // /work/wt/prompts/compare-json.md, the format scripts read (docs/report-schema.md).
  for (const char* k :
       {"kind", "version", "alpha", "threshold", "test", "baseline", "current", "mismatches",
        "points", "geomean", "counts", "added", "missing", "wrong", "result"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["kind"], "decodebench-compare");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["alpha"], 0.05);
  EXPECT_EQ(j["threshold"], 0.05);
  EXPECT_NE(j["test"].get<std::string>().find("95% percentile interval"), std::string::npos);
  for (const char* k : {"path", "git_sha", "created", "devices", "host_cpu", "cpu_threads"}) {
    EXPECT_TRUE(j["baseline"].contains(k)) << k;
    EXPECT_TRUE(j["current"].contains(k)) << k;
  }
  EXPECT_EQ(j["baseline"]["devices"][0], "cpu Test CPU 9000");
  EXPECT_EQ(j["baseline"]["cpu_threads"], 2);
  ASSERT_EQ(j["points"].size(), 1u);
  const json& p = j["points"][0];
  for (const char* k :
       {"key", "kernel", "kernel_requested", "backend", "model", "kv_dtype", "q_dtype",
        "block_size", "batch", "context", "hit_rate", "prefix_groups", "baseline_median_s",
        "current_median_s", "verdict", "decided_by", "raw", "normalized"}) {
    EXPECT_TRUE(p.contains(k)) << k;
  }
  EXPECT_EQ(p["key"], "cpu/auto llama-3.1-8b kv=f16 q=f16 P=16 b=8 ctx=1024 h=0.5 G=1");
  EXPECT_EQ(p["context"], json({{"kind", "fixed"}, {"values", {1024}}}));
  EXPECT_EQ(p["verdict"], "SLOWER");
  EXPECT_EQ(p["decided_by"], "both");
  for (const char* space : {"raw", "normalized"}) {
    for (const char* k : {"ratio", "ci", "p_value", "verdict", "samples"}) {
      EXPECT_TRUE(p[space].contains(k)) << space << "." << k;
    }
    EXPECT_EQ(p[space]["ci"].size(), 2u);
    EXPECT_EQ(p[space]["samples"], json({30, 30}));
  }
  EXPECT_EQ(j["geomean"]["all"]["points"], 1);
  EXPECT_EQ(j["geomean"]["by_kernel"][0]["kernel"], "cpu");
  EXPECT_EQ(j["counts"], json({{"SAME", 0}, {"SLOWER", 1}, {"FASTER", 0}, {"AMBIGUOUS", 0}}));
  EXPECT_EQ(j["added"], json({"cpu/auto llama-3.1-8b kv=f16 q=f16 P=16 b=64 ctx=1024 h=0.5 G=1"}));
  ASSERT_EQ(j["missing"].size(), 1u);
  EXPECT_EQ(j["missing"][0]["why"], "not in the current report");
  ASSERT_EQ(j["wrong"].size(), 1u);
  EXPECT_EQ(j["wrong"][0]["status"], "error");
  EXPECT_EQ(j["wrong"][0]["reason"], "planted");
  EXPECT_EQ(j["result"], "fail");
  EXPECT_EQ(to_json(compare_reports(base, base, {}))["result"], "pass");
}

TEST(Compare, MarkdownHasTheSummaryAndATableRowPerPoint) {
  const ReportComparison c = compare_reports(noisy_report(1), noisy_report(2, {1, 1.2, 1}), {});
  const std::string md = format_comparison(c, CompareFormat::md);
  EXPECT_EQ(md.rfind("### decodebench compare: **fail**", 0), 0u) << md;
  EXPECT_NE(md.find("| verdict | point | ratio | 95% interval | p | decided by | raw | "
                    "normalized |"),
            std::string::npos)
      << md;
  int rows = 0;
  std::size_t first_row = std::string::npos;
  for (std::size_t at = md.find("\n| "); at != std::string::npos; at = md.find("\n| ", at + 1)) {
    if (md.compare(at, 11, "\n| verdict ") == 0) continue;
    if (first_row == std::string::npos) first_row = at;
    ++rows;
  }
  EXPECT_EQ(rows, 3) << md;
  EXPECT_EQ(md.compare(first_row, 13, "\n| **SLOWER**"), 0) << "not-SAME points first\n" << md;
  EXPECT_NE(md.find("alpha 0.05, threshold 5%"), std::string::npos) << md;
  EXPECT_TRUE(md.ends_with("result: fail\n")) << md;
}

}  // namespace
}  // namespace decodebench
