// Sweeps that survive (docs/design.md "Sweeps that survive"), through the binary: SIGINT and
// SIGTERM during the ceilings and during sampling, the `running` checkpoint a SIGKILL leaves,
// --resume after kills at random moments, up-front output checks, failing writes (the
// DECODEBENCH_TEST_WRITE_FAIL hook), and merge of whole and incomplete shard sets.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli/cli_run.h"

extern char** environ;

namespace decodebench::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The binary running in the background, its output in files; `wait()` gives the exit code as a
// shell reports it (128 + signal when a signal ended it).
class Running {
 public:
  Running(const std::string& args, const TempDir& dir, const std::string& env = "") {
    const std::string cmd = fmt::format("{} exec '{}' {} >'{}' 2>'{}'", env, DECODEBENCH_BIN, args,
                                        (dir / "bg.out").string(), (dir / "bg.err").string());
    const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
    EXPECT_EQ(::posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ),
              0);
    out_ = dir / "bg.out";
    err_ = dir / "bg.err";
  }
  ~Running() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  void signal(int sig) const { ::kill(pid_, sig); }
  bool alive() const { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string out() const { return read_file(out_); }
  std::string err() const { return read_file(err_); }

 private:
  pid_t pid_ = -1;
  std::filesystem::path out_, err_;
};

// How long a test waits for the sweep to reach a state before it fails: generous, since the
// wait ends as soon as the state is reached, and a loaded CI machine can be 10x slower.
constexpr double kPatience = 300;

// Polls until `pred` holds (true) or `timeout_s` passes (false).
bool wait_until(const std::function<bool()>& pred, double timeout_s = kPatience) {
  const auto start = Clock::now();
  while (seconds_since(start) < timeout_s) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// The report at `path` if it exists and parses (a reader may race the atomic rename: never a
// torn file, but possibly none yet).
json try_read(const std::filesystem::path& path) {
  try {
    return std::filesystem::exists(path) ? read_json(path) : json();
  } catch (const json::exception&) {
    ADD_FAILURE() << path << " is not valid JSON: an atomic write was torn";
    return json();
  }
}

int finished_in(const json& report) {
  int n = 0;
  for (const json& p : report.at("results")) n += p.at("status") != "not_run";
  return n;
}

// What must be equal between an uninterrupted run and a resumed one, per point.
std::string identity(const json& p) {
  return fmt::format("{} {} {} {} {} b={} ctx={} h={} {}", p.at("index").get<int>(),
                     p.at("kernel_requested").get<std::string>(), p.at("model").get<std::string>(),
                     p.at("kv_dtype").get<std::string>(), p.at("q_dtype").get<std::string>(),
                     p.at("batch").get<int>(), p.at("context").dump(), p.at("hit_rate").dump(),
                     p.at("status").get<std::string>());
}

std::vector<std::string> identities(const json& report) {
  std::vector<std::string> out;
  for (const json& p : report.at("results")) out.push_back(identity(p));
  return out;
}

class Survive : public ::testing::Test {
 protected:
  void SetUp() override { ceilings_ = fake_cpu_ceilings(dir_).string(); }
  // 8 points, each sampling >= min_time_s. Warm: what these tests stop, resume and merge does
  // not depend on how a sample is made cold, and cold by rotation allocates and copies ~2x the
  // LLC per point (a second per point on a VM that reports a large L3).
  std::string sweep(const std::filesystem::path& out, double min_time_s = 0.02,
                    const std::string& more = "", const std::string& batch = "1,2") const {
    return fmt::format(
        "sweep --backend cpu --batch {} --context 17,33 --kv-dtype f16,bf16 --min-samples 2 "
        "--min-time {} --max-noise 1 --timeout 20 --warm --ceilings '{}' --out '{}' -q {}",
        batch, min_time_s, ceilings_, out.string(), more);
  }
  TempDir dir_;
  std::string ceilings_;
};

// ------------------------------------------------------------------------------- signals

TEST_F(Survive, SigintDuringTheLastPointsSamplingStopsAtOnce) {
  const auto out = dir_ / "r.json";
  // One point that would sample for 30 s.
  Running run(fmt::format("sweep --backend cpu --batch 1 --context 17 --min-samples 2 --min-time "
                          "30 --max-noise 1 --timeout 60 --warm --ceilings '{}' --out '{}'",
                          ceilings_, out.string()),
              dir_);
  ASSERT_TRUE(wait_until([&] { return !try_read(out).is_null(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // well into the sampling
  ASSERT_TRUE(run.alive());
  const auto signalled = Clock::now();
  run.signal(SIGINT);
  EXPECT_EQ(run.wait(), 130) << run.err();
  EXPECT_LT(seconds_since(signalled), 3.0);
  const json r = read_json(out);
  EXPECT_EQ(r.at("completion").at("state"), "interrupted") << r.at("completion").dump();
  ASSERT_EQ(r.at("results").size(), 1u);
  EXPECT_EQ(r.at("results")[0].at("status"), "not_run");
  EXPECT_NE(run.out().find("not_run"), std::string::npos) << "the table is printed:\n" << run.out();
  EXPECT_NE(run.err().find("interrupted (SIGINT): 0 of 1 points finished"), std::string::npos)
      << run.err();
}

TEST_F(Survive, SigtermKeepsFinishedPointsPrintsTheTableAndExits143) {
  const auto out = dir_ / "r.json";
  Running run(sweep(out, 0.3), dir_);
  ASSERT_TRUE(wait_until([&] {
    const json r = try_read(out);
    return !r.is_null() && finished_in(r) >= 2;
  }));
  run.signal(SIGTERM);
  EXPECT_EQ(run.wait(), 143) << run.err();
  const json r = read_json(out);
  EXPECT_EQ(r.at("completion").at("state"), "interrupted");
  ASSERT_EQ(r.at("results").size(), 8u);  // every planned point, the unfinished ones not_run
  const int done = finished_in(r);
  EXPECT_GE(done, 2);
  EXPECT_LT(done, 8);
  EXPECT_EQ(r.at("completion").at("points_finished"), done);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(r.at("results")[i].at("index"), i);
    EXPECT_EQ(r.at("results")[i].at("status"), i < done ? "ok" : "not_run") << i;
  }
  EXPECT_NE(run.out().find("not_run"), std::string::npos) << run.out();
  EXPECT_NE(run.err().find("--resume"), std::string::npos) << run.err();
}

TEST_F(Survive, SignalsDuringTheCeilingsStopWithinAboutASecond) {
  for (const int sig : {SIGINT, SIGTERM}) {
    const auto out = dir_ / fmt::format("c{}.json", sig);
    // No --ceilings: the real measurement runs, tens of seconds on this CPU.
    Running run(
        fmt::format("sweep --backend cpu --batch 1 --context 17 --out '{}' -q", out.string()),
        dir_);
    ASSERT_TRUE(wait_until([&] { return !try_read(out).is_null(); }));
    const json running = read_json(out);
    EXPECT_EQ(running.at("completion").at("state"), "running");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_TRUE(run.alive()) << "the ceilings were expected to take longer";
    const auto signalled = Clock::now();
    run.signal(sig);
    EXPECT_EQ(run.wait(), 128 + sig) << run.err();
    EXPECT_LT(seconds_since(signalled), 3.0);
    const json r = read_json(out);
    EXPECT_EQ(r.at("completion").at("state"), "interrupted");
    EXPECT_NE(r.at("completion").at("reason").get<std::string>().find("ceilings"),
              std::string::npos)
        << r.at("completion").dump();
    EXPECT_EQ(r.at("results")[0].at("status"), "not_run");
  }
}

TEST_F(Survive, ASecondSignalKillsAtOnce) {
  const auto out = dir_ / "r.json";
  Running run(fmt::format("sweep --backend cpu --batch 1 --context 17 --out '{}' -q", out.string()),
              dir_);
  ASSERT_TRUE(wait_until([&] { return !try_read(out).is_null(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into the ceilings
  run.signal(SIGTERM);
  // Two signals sent at once may merge into one: the second comes a moment later, well within
  // the second the first one waits for the ceilings.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  run.signal(SIGTERM);
  EXPECT_EQ(run.wait(), 128 + SIGTERM);
  // Killed by the default action before anything was written: the checkpoint says running.
  EXPECT_EQ(read_json(out).at("completion").at("state"), "running");
}

TEST_F(Survive, TheCheckpointSaysRunningAndAKilledSweepLeavesItSo) {
  const auto out = dir_ / "r.json";
  Running run(sweep(out, 0.2), dir_);
  ASSERT_TRUE(wait_until([&] {
    const json r = try_read(out);
    return !r.is_null() && finished_in(r) >= 1;
  }));
  const json during = read_json(out);
  EXPECT_EQ(during.at("completion").at("state"), "running");
  EXPECT_EQ(during.at("completion").at("points_finished"), finished_in(during));
  run.signal(SIGKILL);
  EXPECT_EQ(run.wait(), 128 + SIGKILL);
  const json left = read_json(out);
  EXPECT_EQ(left.at("completion").at("state"), "running");
  EXPECT_LT(finished_in(left), 8);

  // The readers say it is partial.
  const CliResult rep = run_cli(fmt::format("report '{}'", out.string()), dir_.path());
  EXPECT_EQ(rep.code, 0) << rep.err;
  EXPECT_NE(rep.err.find("is partial: running"), std::string::npos) << rep.err;
  EXPECT_NE(rep.out.find("sweep running"), std::string::npos) << rep.out;
}

// ------------------------------------------------------------------------------- resume

TEST_F(Survive, ResumeAfterKillsAtRandomMomentsGivesTheUninterruptedPointSet) {
  const auto full = dir_ / "full.json";
  const auto start = Clock::now();
  const CliResult r = run_cli(sweep(full), dir_.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const double full_s = seconds_since(start);
  const json want = read_json(full);
  ASSERT_EQ(want.at("results").size(), 8u);
  EXPECT_EQ(want.at("completion").at("state"), "complete");

  std::mt19937 rng(20240611);
  std::uniform_real_distribution<double> moment(0.0, full_s);
  for (int trial = 0; trial < 5; ++trial) {
    const auto out = dir_ / fmt::format("k{}.json", trial);
    {
      Running run(sweep(out), dir_);
      ASSERT_TRUE(wait_until([&] { return !try_read(out).is_null(); }));
      const double at = moment(rng);
      std::this_thread::sleep_for(std::chrono::duration<double>(at));
      run.signal(SIGKILL);
      run.wait();
    }
    const json killed = read_json(out);
    const int kept = finished_in(killed);
    SCOPED_TRACE(fmt::format("trial {}: {} points finished before the kill", trial, kept));
    if (kept < 8) {
      EXPECT_EQ(killed.at("completion").at("state"), "running");
    }

    // Resume with the report alone: its config, its path as --out.
    const CliResult res = run_cli(
        fmt::format("sweep --resume '{}' --ceilings '{}'", out.string(), ceilings_), dir_.path());
    ASSERT_EQ(res.code, 0) << res.err;
    const json got = read_json(out);
    EXPECT_EQ(identities(got), identities(want));
    EXPECT_EQ(got.at("completion").at("state"), "complete");
    EXPECT_EQ(got.at("completion").at("points_finished"), 8);
    // The finished points were kept as they were, samples and all.
    for (std::size_t i = 0; i < 8; ++i) {
      if (killed.at("results")[i].at("status") != "not_run") {
        EXPECT_EQ(got.at("results")[i], killed.at("results")[i]) << i;
      }
    }
    // Only the missing points ran.
    int progress_lines = 0;
    for (std::size_t p = res.err.find("] elapsed"); p != std::string::npos;
         p = res.err.find("] elapsed", p + 1))
      ++progress_lines;
    EXPECT_EQ(progress_lines, 8 - kept) << res.err;
  }
}

TEST_F(Survive, ResumeAfterSigintAndSigtermWithTheSameFlags) {
  const auto full = dir_ / "full.json";
  ASSERT_EQ(run_cli(sweep(full), dir_.path()).code, 0);
  for (const int sig : {SIGINT, SIGTERM}) {
    const auto out = dir_ / fmt::format("s{}.json", sig);
    Running run(sweep(out, 0.2), dir_);
    ASSERT_TRUE(wait_until([&] {
      const json r = try_read(out);
      return !r.is_null() && finished_in(r) >= 1;
    }));
    run.signal(sig);
    ASSERT_EQ(run.wait(), 128 + sig);
    ASSERT_EQ(read_json(out).at("completion").at("state"), "interrupted");
    const CliResult res =
        run_cli(sweep(out, 0.2, fmt::format("--resume '{}'", out.string())), dir_.path());
    ASSERT_EQ(res.code, 0) << res.err;
    EXPECT_EQ(identities(read_json(out)), identities(read_json(full)));
  }
}

TEST_F(Survive, ResumeRefusesAReportOfAnotherSweepNamingWhatDiffers) {
  const auto out = dir_ / "r.json";
  ASSERT_EQ(run_cli(sweep(out), dir_.path()).code, 0);
  const std::string before = read_file(out);
  struct Case {
    std::string args;
    std::function<void(json&)> tamper;
    std::string names;
  };
  const auto path = dir_ / "t.json";
  const std::string resume = fmt::format("--resume '{}'", path.string());
  const std::vector<Case> cases = {
      {sweep(path, 0.02, resume, "1,2,3"), nullptr, "config.batch (report [1,2], now [1,2,3])"},
      {sweep(path, 0.05, resume), nullptr, "config.measure.min_time_s (report 0.02, now 0.05)"},
      {"", [](json& j) { j["tool"]["git_sha"] = "0123456789ab"; }, "tool (report"},
      {"", [](json& j) { j["devices"][0]["name"] = "Another CPU"; }, "device (report cpu"},
      {"", [](json& j) { j["results"][3]["batch"] = 5; }, "the report's point 3 is"},
  };
  for (const Case& c : cases) {
    json j = json::parse(before);
    if (c.tamper) c.tamper(j);
    write_file(path, j.dump());
    const std::string args =
        c.args.empty() ? fmt::format("sweep --ceilings '{}' -q {}", ceilings_, resume) : c.args;
    const CliResult r = run_cli(args, dir_.path());
    EXPECT_EQ(r.code, 2) << c.names << "\n" << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << r.err;
    EXPECT_EQ(read_json(path), j) << "a refused resume leaves the report as it was";
  }
}

// ------------------------------------------------------------------------------- outputs

TEST_F(Survive, OutputsAreCheckedBeforeAnythingIsMeasured) {
  write_file(dir_ / "plain", "x");
  struct Case {
    std::string flags;
    std::string names;
  };
  for (const Case& c : std::vector<Case>{
           {"--out /proc/r.json", "--out /proc/r.json: cannot create a file in /proc"},
           {fmt::format("--out '{}'", dir_.path().string()), "is a directory"},
           {fmt::format("--out '{}/sub/r.json'", (dir_ / "plain").string()), "cannot create"},
           {"--out '' --dump /proc/d", "--dump /proc/d: cannot create"},
       }) {
    // No --ceilings: were the check after the ceilings, this would take tens of seconds.
    const auto start = Clock::now();
    const CliResult r =
        run_cli("sweep --backend cpu --batch 1 --context 17 -q " + c.flags, dir_.path());
    EXPECT_EQ(r.code, 2) << c.flags << "\n" << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << r.err;
    EXPECT_LT(seconds_since(start), 5.0) << c.flags;
  }
}

TEST_F(Survive, AFailingWriteKeepsThePreviousReportAndExits3) {
  // The third write (the checkpoint after point 2) fails with ENOSPC: the file on disk is the
  // second, whole, and no temporary file is left.
  const auto out = dir_ / "r.json";
  const std::string cmd =
      fmt::format("DECODEBENCH_TEST_WRITE_FAIL=ENOSPC@3 '{}' {} >'{}' 2>'{}'", DECODEBENCH_BIN,
                  sweep(out), (dir_ / "o").string(), (dir_ / "e").string());
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  const std::string err = read_file(dir_ / "e");
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
  EXPECT_NE(err.find(out.string()), std::string::npos) << err;
  const json kept = read_json(out);
  EXPECT_EQ(kept.at("completion").at("state"), "running");
  EXPECT_EQ(finished_in(kept), 1);
  EXPECT_NE(read_file(dir_ / "o").find("ok"), std::string::npos) << "the table is printed";
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_EQ(e.path().filename().string().find(".r.json.tmp"), std::string::npos) << e.path();
  }

  // EIO on the very first write: a previous report is left byte for byte.
  const auto prev = dir_ / "prev.json";
  write_file(prev, "{\"previous\": true}\n");
  const std::string cmd2 = fmt::format("DECODEBENCH_TEST_WRITE_FAIL=EIO '{}' {} >/dev/null 2>'{}'",
                                       DECODEBENCH_BIN, sweep(prev), (dir_ / "e2").string());
  const int status2 = std::system(cmd2.c_str());
  ASSERT_TRUE(WIFEXITED(status2));
  EXPECT_EQ(WEXITSTATUS(status2), 3);
  EXPECT_NE(read_file(dir_ / "e2").find("Input/output error"), std::string::npos)
      << read_file(dir_ / "e2");
  EXPECT_EQ(read_file(prev), "{\"previous\": true}\n");
}

// ------------------------------------------------------------------------------- merge

TEST_F(Survive, ThreeShardsMergeToTheUnshardedPointSet) {
  const auto full = dir_ / "full.json";
  ASSERT_EQ(run_cli(sweep(full, 0), dir_.path()).code, 0);
  std::vector<std::string> shard;
  for (int i = 0; i < 3; ++i) {
    shard.push_back((dir_ / fmt::format("s{}.json", i)).string());
    const CliResult r =
        run_cli(sweep(shard.back(), 0, fmt::format("--shard {}/3", i)), dir_.path());
    ASSERT_EQ(r.code, 0) << r.err;
  }
  const auto merged = dir_ / "m.json";
  const CliResult m = run_cli(
      fmt::format("merge --out '{}' '{}' '{}' '{}'", merged.string(), shard[2], shard[0], shard[1]),
      dir_.path());
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_EQ(identities(read_json(merged)), identities(read_json(full)));
  EXPECT_EQ(read_json(merged).at("completion").at("state"), "complete");
}

TEST_F(Survive, MergeRefusesAnIncompleteOrMixedShardSet) {
  const auto s = [&](const std::string& name) { return (dir_ / name).string(); };
  for (const auto& [name, shard] : std::vector<std::pair<std::string, std::string>>{
           {"a0.json", "0/3"}, {"a1.json", "1/3"}, {"b0.json", "0/2"}, {"b1.json", "1/2"}}) {
    const CliResult r = run_cli(sweep(s(name), 0, "--shard " + shard), dir_.path());
    ASSERT_EQ(r.code, 0) << r.err;
  }
  // A partial shard: shard 2/3 interrupted after its first point (planted from a whole run).
  ASSERT_EQ(run_cli(sweep(s("a2.json"), 0, "--shard 2/3"), dir_.path()).code, 0);
  json partial = read_json(s("a2.json"));
  for (std::size_t i = 1; i < partial.at("results").size(); ++i)
    partial["results"][i]["status"] = "not_run";
  partial["completion"]["state"] = "interrupted";
  partial["completion"]["reason"] = "planted";
  write_file(s("p2.json"), partial.dump());

  struct Case {
    std::vector<std::string> inputs;
    std::string names;
  };
  const auto out = s("m.json");
  for (const Case& c : std::vector<Case>{
           {{"a0.json"}, "missing shards 1/3, 2/3 of 3"},
           {{"a0.json", "a1.json"}, "missing shard 2/3 of 3"},
           {{"b0.json", "a1.json"}, "is shard 1/3 but"},
           {{"a0.json", "a0.json", "a1.json"}, "shard 0/3 is given twice"},
           {{"a0.json", "a1.json", "p2.json"}, "p2.json) is interrupted: planted"},
       }) {
    std::string args = fmt::format("merge --out '{}'", out);
    for (const auto& in : c.inputs) args += " '" + s(in) + "'";
    const CliResult r = run_cli(args, dir_.path());
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out));
  }

  // --allow-partial: the merged report lists what is missing.
  const CliResult r = run_cli(
      fmt::format("merge --allow-partial --out '{}' '{}' '{}'", out, s("a0.json"), s("a1.json")),
      dir_.path());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("is partial"), std::string::npos) << r.err;
  const json m = read_json(out);
  EXPECT_EQ(m.at("completion").at("state"), "partial");
  EXPECT_NE(m.at("completion").at("reason").get<std::string>().find("missing shard 2/3"),
            std::string::npos);
  ASSERT_EQ(m.at("results").size(), 8u);
  EXPECT_EQ(m.at("completion").at("points_planned"), 8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(m.at("results")[i].at("index"), i);
    EXPECT_EQ(m.at("results")[i].at("status"), i % 3 == 2 ? "not_run" : "ok") << i;
  }
}

TEST_F(Survive, CompareOnAPartialReportComparesTheCommonPoints) {
  const auto full = dir_ / "full.json";
  ASSERT_EQ(run_cli(sweep(full, 0), dir_.path()).code, 0);
  json cut = read_json(full);
  for (int i = 3; i < 8; ++i) cut["results"][i]["status"] = "not_run";
  cut["completion"]["state"] = "interrupted";
  cut["completion"]["reason"] = "planted";
  write_file(dir_ / "cut.json", cut.dump());
  const CliResult c = run_cli(
      fmt::format("compare '{}' '{}'", full.string(), (dir_ / "cut.json").string()), dir_.path());
  EXPECT_EQ(c.code, 1) << "unfinished points are MISSING: " << c.out << c.err;
  EXPECT_NE(c.err.find("cut.json is partial: interrupted: planted (3 of 8 points finished)"),
            std::string::npos)
      << c.err;
  EXPECT_NE(c.out.find("3 points:"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("not run (the current report is interrupted)"), std::string::npos) << c.out;
}

}  // namespace
}  // namespace decodebench::testing
