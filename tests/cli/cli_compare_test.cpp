// `decodebench compare` as the perf gate runs it: exit codes (0 pass, 1 SLOWER / wrong /
// missing, 2 mismatched setups or bad flags), the formats, --out. The reports are fabricated
// with seeded samples (tests/support/compare_fixtures.h) and written with the report library.
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli/cli_run.h"
#include "results/report.h"
#include "support/compare_fixtures.h"

namespace decodebench::testing {
namespace {

using nlohmann::json;

// Two points of 40 samples; the batch-8 point's median is scaled by `change`.
Report gate_report(std::uint64_t seed, double change = 1.0) {
  std::mt19937_64 rng(seed);
  return test::cpu_report(
      {test::timed_point(0, 1, test::lognormal_samples(rng, 1e-3, 0.03, 40)),
       test::timed_point(1, 8, test::lognormal_samples(rng, 4e-3 * change, 0.03, 40))});
}

std::string write(const TempDir& dir, const std::string& name, const Report& r) {
  const std::filesystem::path p = dir / name;
  write_report_atomic(p, r);
  return p.string();
}

std::string last_line(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  const std::size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

TEST(CliCompare, SameRunsPassAPlantedSlowdownFails) {
  TempDir dir;
  const std::string base = write(dir, "base.json", gate_report(1));
  const std::string same = write(dir, "same.json", gate_report(2));
  const std::string slow = write(dir, "slow.json", gate_report(2, 1.2));

  const CliResult pass = run_cli(fmt::format("compare '{}' '{}'", base, same), dir.path());
  EXPECT_EQ(pass.code, 0) << pass.out << pass.err;
  EXPECT_EQ(last_line(pass.out), "result: pass") << pass.out;
  EXPECT_NE(pass.out.find("alpha 0.05, threshold 5%"), std::string::npos) << pass.out;

  const CliResult fail = run_cli(fmt::format("compare '{}' '{}'", base, slow), dir.path());
  EXPECT_EQ(fail.code, 1) << fail.out << fail.err;
  EXPECT_EQ(last_line(fail.out), "result: fail") << fail.out;
  EXPECT_NE(fail.out.find("\nSLOWER "), std::string::npos) << fail.out;
  // The threshold is the gate's knob: 20 % is within 30 %.
  const CliResult loose =
      run_cli(fmt::format("compare '{}' '{}' --threshold 0.3", base, slow), dir.path());
  EXPECT_EQ(loose.code, 0) << loose.out << loose.err;
}

TEST(CliCompare, FormatsAndOut) {
  TempDir dir;
  const std::string base = write(dir, "base.json", gate_report(1));
  const std::string slow = write(dir, "slow.json", gate_report(2, 1.2));
  const std::string out = (dir / "cmp.json").string();
  const CliResult j = run_cli(
      fmt::format("compare '{}' '{}' --format json --out '{}'", base, slow, out), dir.path());
  EXPECT_EQ(j.code, 1) << j.err;
  const json parsed = json::parse(j.out);
  EXPECT_EQ(parsed, read_json(out)) << "--out writes what stdout shows";
  EXPECT_EQ(parsed.at("kind"), "decodebench-compare");
  EXPECT_EQ(parsed.at("result"), "fail");
  EXPECT_EQ(parsed.at("baseline").at("path"), base);
  EXPECT_EQ(parsed.at("current").at("path"), slow);
  EXPECT_EQ(parsed.at("counts").at("SLOWER"), 1);

  const CliResult md =
      run_cli(fmt::format("compare '{}' '{}' --format md", base, slow), dir.path());
  EXPECT_EQ(md.code, 1) << md.err;
  EXPECT_EQ(md.out.rfind("### decodebench compare", 0), 0u) << md.out;
  EXPECT_NE(md.out.find("| **SLOWER** |"), std::string::npos) << md.out;
  EXPECT_EQ(last_line(md.out), "result: fail") << md.out;
}

// A point whose rank test rejects (p 0.019, ratio 1.126) while the 95 % interval of the median
// ratio is [0.982, 1.327]: the line once read SLOWER beside that interval. Verdict and interval
// now agree: AMBIGUOUS, the gate passes, and any SLOWER line's interval lies above 1.
TEST(CliCompare, VerdictAgreesWithThePrintedInterval) {
  TempDir dir;
  const std::vector<double> base_samples = {1.04e-3, 1.10e-3, 1.03e-3, 1.02e-3, 1.00e-3,
                                            1.01e-3, 1.00e-3, 1.08e-3, 1.10e-3};
  const std::vector<double> cur_samples = {1.08e-3, 1.36e-3, 1.06e-3, 1.16e-3,
                                           1.34e-3, 1.34e-3, 1.04e-3};
  const std::string base =
      write(dir, "base.json", test::cpu_report({test::timed_point(0, 1, base_samples)}));
  const std::string cur =
      write(dir, "cur.json", test::cpu_report({test::timed_point(0, 1, cur_samples)}));
  const CliResult r = run_cli(fmt::format("compare '{}' '{}'", base, cur), dir.path());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("\nAMBIGUOUS  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1.126  [0.982, 1.327]"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\nSLOWER "), std::string::npos) << r.out;

  const CliResult j =
      run_cli(fmt::format("compare '{}' '{}' --format json", base, cur), dir.path());
  const json point = json::parse(j.out).at("points").at(0);
  EXPECT_EQ(point.at("verdict"), "AMBIGUOUS") << point.dump();

  // The planted 20 % slowdown stays SLOWER, its interval above 1.
  const CliResult slow =
      run_cli(fmt::format("compare '{}' '{}' --format json", write(dir, "b.json", gate_report(1)),
                          write(dir, "s.json", gate_report(2, 1.2))),
              dir.path());
  for (const json& p : json::parse(slow.out).at("points")) {
    if (p.at("verdict") != "SLOWER") continue;
    EXPECT_GT(p.at("raw").at("ci").at(0).get<double>(), 1) << p.dump();
  }
  EXPECT_EQ(json::parse(slow.out).at("counts").at("SLOWER"), 1);
}

TEST(CliCompare, MismatchedSetupsExitTwoUnlessAllowed) {
  TempDir dir;
  const std::string base = write(dir, "base.json", gate_report(1));
  Report other_device = gate_report(2);
  other_device.devices[0].name = "Other CPU 1000";
  const std::string dev = write(dir, "device.json", other_device);
  Report other_host = gate_report(2);
  other_host.host.cpu_threads = 96;
  const std::string host = write(dir, "host.json", other_host);

  const CliResult d = run_cli(fmt::format("compare '{}' '{}'", base, dev), dir.path());
  EXPECT_EQ(d.code, 2) << d.out << d.err;
  for (const char* m : {"devices", "cpu Test CPU 9000", "cpu Other CPU 1000", "--allow-mismatch"}) {
    EXPECT_NE(d.err.find(m), std::string::npos) << m << "\n" << d.err;
  }
  const CliResult h = run_cli(fmt::format("compare '{}' '{}'", base, host), dir.path());
  EXPECT_EQ(h.code, 2) << h.out << h.err;
  for (const char* m : {"host class", "2 threads", "96 threads", "--allow-mismatch"}) {
    EXPECT_NE(h.err.find(m), std::string::npos) << m << "\n" << h.err;
  }
  const CliResult allowed =
      run_cli(fmt::format("compare '{}' '{}' --allow-mismatch", base, dev), dir.path());
  EXPECT_EQ(allowed.code, 0) << allowed.out << allowed.err;
  EXPECT_NE(allowed.out.find("MISMATCH (allowed) devices"), std::string::npos) << allowed.out;
}

TEST(CliCompare, BadFlagsAndAmbiguity) {
  TempDir dir;
  const std::string base = write(dir, "base.json", gate_report(1));
  Report few = gate_report(2);
  few.results[1].samples.resize(1);
  const std::string cur = write(dir, "few.json", few);
  const CliResult ok = run_cli(fmt::format("compare '{}' '{}'", base, cur), dir.path());
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("AMBIGUOUS"), std::string::npos) << ok.out;
  const CliResult strict =
      run_cli(fmt::format("compare '{}' '{}' --fail-on-ambiguous", base, cur), dir.path());
  EXPECT_EQ(strict.code, 1) << strict.out << strict.err;

  struct Bad {
    std::string flags;
    std::vector<std::string> message;
  };
  for (const Bad& b : std::vector<Bad>{
           {"--format csv", {"'csv'", "table, md, json"}},
           {"--threshold -1", {"threshold", ">= 0", "-1"}},
           {"--alpha 1.5", {"alpha", "(0, 1)", "1.5"}},
           {"--max-slowdown 0.1", {"--max-slowdown"}},  // gone: --threshold replaced it
       }) {
    const CliResult r =
        run_cli(fmt::format("compare '{}' '{}' {}", base, base, b.flags), dir.path());
    EXPECT_EQ(r.code, 2) << b.flags << "\n" << r.out << r.err;
    for (const std::string& m : b.message) {
      EXPECT_NE(r.err.find(m), std::string::npos) << b.flags << ": lacks '" << m << "'\n" << r.err;
    }
  }
}

}  // namespace
}  // namespace decodebench::testing
