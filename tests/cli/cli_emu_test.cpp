// `decodebench check` and `sweep --dump` with --backend emu: the real CUDA kernel source through
// the SIMT emulator, on tiny shapes.
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli/cli_run.h"
#include "cli/dump_check.h"
#include "kernels.h"

namespace decodebench::testing {
namespace {

// head_dim 128: the one every build compiles (DECODEBENCH_HEAD_DIMS narrows the others away).
constexpr const char* kTinyModel =
    R"({"name":"tiny-gqa4","num_q_heads":8,"num_kv_heads":2,"head_dim":128,"num_layers":1})";

TEST(CliEmu, CheckRunsEveryKernelAndTheCeilingKernels) {
  TempDir dir;
  write_file(dir / "tiny.json", kTinyModel);
  const CliResult r =
      run_cli(fmt::format("check --backend emu --model '{}' --batch 2 --context 17 --hit-rate 0.5",
                          (dir / "tiny.json").string()),
              dir.path());
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("emulator"), std::string::npos) << "the slow/correctness note";
  for (const char* kernel : {"naive", "gqa", "pipelined", "split_kv"}) {
    if (kernels::find_kernel(kernel) == nullptr) continue;  // narrowed out of this build
    EXPECT_NE(r.out.find(fmt::format("ok     {}", kernel)), std::string::npos) << kernel << "\n"
                                                                               << r.out;
  }
  for (const char* check : {"bandwidth.read", "bandwidth.copy", "bandwidth.triad"}) {
    EXPECT_NE(r.out.find(fmt::format("ok     {}", check)), std::string::npos) << check << "\n"
                                                                              << r.out;
  }
  EXPECT_EQ(r.out.find("WRONG"), std::string::npos) << r.out;
}

TEST(CliEmu, CheckReportsUnsupportedShapesAsSkipped) {
  if (kernels::find_kernel("gqa") == nullptr) GTEST_SKIP() << "gqa is narrowed out of this build";
  TempDir dir;
  // GQA 16 is beyond every rung but naive (max group 8): skipped with the reason, never dropped.
  write_file(dir / "g16.json",
             R"({"name":"g16","num_q_heads":16,"num_kv_heads":1,"head_dim":128,"num_layers":1})");
  const CliResult r =
      run_cli(fmt::format("check --backend emu --model '{}' --batch 1 --context 9 --kernel gqa",
                          (dir / "g16.json").string()),
              dir.path());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("skip"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GQA groups up to 8"), std::string::npos) << r.out;
}

// split_kv with contexts long enough that the planner (4 emulated SMs) cuts them in 2: the dump
// shows the merged output of a real split.
TEST(CliEmu, SweepDumpWithTheEmulator) {
  TempDir dir;
  write_file(dir / "tiny.json", kTinyModel);
  const CliResult r = run_cli(
      fmt::format("sweep --backend emu --kernel split_kv --model '{}' --batch 2 --context 600-1100 "
                  "--hit-rate 0.5 --block-size 16 --min-samples 1 --min-time 0 --max-noise 1 "
                  "--timeout 0.1 --out '{}' --dump '{}' -q",
                  (dir / "tiny.json").string(), (dir / "r.json").string(), (dir / "dump").string()),
      dir.path());
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("correctness only"), std::string::npos) << r.err;
  const json meta = read_json(dir / "dump" / "meta.json");
  EXPECT_EQ(meta.at("kernel"), "split_kv");
  expect_valid_dump(dir / "dump", "emu", 2, 2e-2);
  const json report = read_json(dir / "r.json");
  EXPECT_EQ(report.at("results")[0].at("status"), "ok");
  EXPECT_EQ(report.at("devices")[0].at("backend"), "emu");
}

TEST(CliEmu, TooLargeForTheEmulatorIsSkippedWithAReason) {
  TempDir dir;
  const CliResult r = run_cli(
      "sweep --backend emu --kernel naive --batch 4 --context 8192 --min-samples 1 --min-time 0 "
      "--timeout 0.1 --out '' --format csv -q",
      dir.path());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("skipped"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("too large for the emulator"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace decodebench::testing
