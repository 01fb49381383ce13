// `decodebench kernels --static` on compiled code (label cuda-build: nvcc and cuobjdump, no GPU):
//   a planted kernel nvcc compiles here, whose loop the model must read exactly, and a planted
//   change (twice the arithmetic) it must see;
//   the real kernels of this binary: pipelined f16 / 128 / cap 4 in a plausible band;
//   README.md's summary between its static-model markers, equal to the tool's output.
#include <cstdlib>
#include <iostream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/cuda/hopper_split_instances.h"
#include "cli/cli_run.h"
#include "common/dtype.h"

namespace decodebench::testing {
namespace {

// The instance of `kernel` (and, when given, dtype / head_dim / cap) in the tool's JSON.
nlohmann::json find_instance(const nlohmann::json& j, const std::string& kernel,
                             const std::string& dtype = "", int head_dim = 0, int cap = 0) {
  for (const nlohmann::json& i : j.at("instances")) {
    if (i.at("kernel") != kernel) continue;
    if (!dtype.empty() &&
        (i.at("kv_dtype") != dtype || i.at("head_dim") != head_dim || i.at("group_cap") != cap)) {
      continue;
    }
    return i;
  }
  return nullptr;
}

nlohmann::json static_json(const std::string& args, const TempDir& dir) {
  const CliResult r = run_cli("kernels --static --format json " + args, dir.path());
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

// Compiles tests/static_model/planted_kernel.cu with PLANT_FMAS=fmas into dir/planted<fmas>.o.
std::string compile_planted(const TempDir& dir, int fmas) {
  const std::string obj = (dir / ("planted" + std::to_string(fmas) + ".o")).string();
  const std::string cmd = std::string("'") + DECODEBENCH_NVCC + "' -arch=" + DECODEBENCH_ARCH +
                          " -c -DPLANT_FMAS=" + std::to_string(fmas) + " -o '" + obj + "' '" +
                          DECODEBENCH_PLANTED_SOURCE + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return obj;
}

// The loop nvcc 13.0 makes of planted_kernel<PLANT_FMAS 4> for sm_90a (cuobjdump -sass):
//   /*00e0*/  LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;
//   /*00f0*/  IADD3 R0, R0, 0x1, RZ ;
//   /*0100*/  ISETP.GE.AND P0, PT, R0, UR6, PT ;
//   /*0110*/  IMAD.WIDE.U32 R2, R11, 0x10, R2 ;
//   /*0120*/  FFMA R4, R4, UR7, R9 ;
//   /*0130*/  FFMA R5, R5, UR7, R4 ;
//   /*0140*/  FFMA R6, R6, UR7, R5 ;
//   /*0150*/  FFMA R9, R7, UR7, R6 ;
//   /*0160*/  @!P0 BRA 0xe0 ;
// 9 warp-instructions and one 16-byte load per lane (512 B per warp), all of it in flight before
// the first FFMA reads R4. PLANT_FMAS 8 adds four FFMAs: 13. (Another nvcc may schedule the
// loop differently: read the new loop off `cuobjdump -sass` and update these counts.)
constexpr long kPlantedInstructions = 9;
constexpr long kPlantedBytes = 512;

TEST(StaticModelBuild, PlantedKernelIsReadExactly) {
  TempDir dir;
  const nlohmann::json base = static_json("--binary '" + compile_planted(dir, 4) + "'", dir);
  const nlohmann::json k = find_instance(base, "planted_kernel");
  ASSERT_FALSE(k.is_null()) << base.dump(2);
  EXPECT_EQ(k["rung"], "planted_rung");
  const nlohmann::json& m = k.at("main_loop");
  ASSERT_FALSE(m.is_null()) << k.dump(2);
  EXPECT_EQ(m["kv_bytes_per_warp"], kPlantedBytes);
  EXPECT_EQ(m["kv_loads"], 1);
  EXPECT_EQ(m["instructions"], kPlantedInstructions) << k.dump(2);
  EXPECT_EQ(m["in_flight_per_warp"], kPlantedBytes);
  EXPECT_EQ(m["barriers"], 0);
  EXPECT_DOUBLE_EQ(m["instructions_per_byte"].get<double>(),
                   static_cast<double>(kPlantedInstructions) / kPlantedBytes);

  // The planted change: twice the arithmetic, four more FFMAs per iteration, same bytes.
  const nlohmann::json twice = static_json("--binary '" + compile_planted(dir, 8) + "'", dir);
  const nlohmann::json k2 = find_instance(twice, "planted_kernel");
  ASSERT_FALSE(k2.is_null()) << twice.dump(2);
  const nlohmann::json& m2 = k2.at("main_loop");
  EXPECT_EQ(m2["kv_bytes_per_warp"], kPlantedBytes);
  EXPECT_EQ(m2["instructions"], kPlantedInstructions + 4) << k2.dump(2);
  EXPECT_DOUBLE_EQ(m2["instructions_per_byte"].get<double>(),
                   static_cast<double>(kPlantedInstructions + 4) / kPlantedBytes);
  EXPECT_LT(m2["issue_bound_bandwidth"]["h200"].get<double>(),
            m["issue_bound_bandwidth"]["h200"].get<double>());
}

// This build's own kernels, read once (the analysis of every instance is the slow part):
// pipelined f16 in a plausible band, and the planner tests' literal register counts current.
TEST(StaticModelBuild, ThisBuildsKernels) {
  TempDir dir;
  const nlohmann::json j = static_json("", dir);  // this build's own binary
  const nlohmann::json k = find_instance(j, "pipelined_kernel", "f16", 128, 4);
  if (k.is_null()) {
    std::cout << "this build has no pipelined f16 / head_dim 128 instance: band not checked\n";
  } else {
    const double ipb = k.at("main_loop").at("instructions_per_byte").get<double>();
    std::cout << "pipelined f16/128/cap 4: " << ipb
              << " warp-instructions per KV byte, issue bound "
              << k["main_loop"]["issue_bound_bandwidth"]["h200"].get<double>() / 1e12
              << " TB/s on H200, " << k["ctas_per_sm"] << " CTAs/SM\n";
    EXPECT_GE(ipb, 0.1);
    EXPECT_LE(ipb, 0.4);
    EXPECT_EQ(k["main_loop"]["kv_bytes_per_warp"], 4096);       // 8 LDGSTS.128 per thread per tile
    EXPECT_EQ(k["main_loop"]["in_flight_per_cta"], 32 * 1024);  // kBytesInFlight
    EXPECT_EQ(k["main_loop"]["barriers"], 3);
    EXPECT_GT(k["ctas_per_sm"].get<int>(), 0);
  }

  // The planner's H100/H200 tests feed the occupancy calculator literal register counts
  // (hopper_split_instances.h); they must be what this compiler allocated.
  int checked = 0;
  for (const testing::SplitInstance& inst : testing::kHopperSplitInstances) {
    const std::string kv(dtype_name(inst.kv));
    const nlohmann::json split = find_instance(j, "split_kernel", kv, 128, inst.group);
    if (split.is_null()) continue;  // not compiled in this build
    ++checked;
    EXPECT_EQ(split.at("registers").get<int>(), inst.registers)
        << "split_kernel<" << kv << ", 128, " << inst.group
        << ">: update tests/backends/cuda/hopper_split_instances.h";
  }
  if (checked == 0 && k.is_null())
    GTEST_SKIP() << "this build has neither pipelined f16 / 128 nor the planner's split instances";
}

constexpr const char* kBegin = "<!-- static-model:begin -->\n";
constexpr const char* kEnd = "<!-- static-model:end -->";

// README.md's block against the tool's summary; the text between the markers, begin line
// excluded.
::testing::AssertionResult readme_matches(const std::string& readme, const std::string& printed) {
  const std::size_t begin = readme.find(kBegin);
  if (begin == std::string::npos) return ::testing::AssertionFailure() << "no line " << kBegin;
  const std::size_t start = begin + std::string(kBegin).size();
  const std::size_t end = readme.find(kEnd, start);
  if (end == std::string::npos) return ::testing::AssertionFailure() << "no " << kEnd;
  const std::string block = readme.substr(start, end - start);
  if (block == printed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "README.md's static-model summary differs from `decodebench kernels --static "
            "--format md --summary`; paste the command's output between the markers.\n"
            "README.md has:\n"
         << block << "\nthe binary prints:\n"
         << printed;
}

std::string printed_summary(const TempDir& dir) {
  const CliResult r = run_cli("kernels --static --format md --summary", dir.path());
  EXPECT_EQ(r.code, 0) << r.err;
  return r.out;
}

TEST(StaticModelBuild, ReadmeSummaryEqualsTheTool) {
  if (!DECODEBENCH_SUMMARY_BUILT) {
    GTEST_SKIP() << "this build lacks instances the README summary shows (it needs every rung, "
                    "head_dim 128 and KV f16 and fp8_e4m3); the summary is checked in such a build";
  }
  TempDir dir;
  const std::string printed = printed_summary(dir);
  ASSERT_FALSE(printed.empty());
  EXPECT_TRUE(readme_matches(read_file(DECODEBENCH_README), printed));

  // The check must be able to fail: one character off, a row lost, no markers.
  const std::string good = std::string("# x\n") + kBegin + printed + kEnd + "\n";
  EXPECT_TRUE(readme_matches(good, printed));
  std::string one_char = good;
  const std::size_t digit = one_char.find_first_of("0123456789", one_char.find("|pipelined"));
  ASSERT_NE(digit, std::string::npos);
  one_char[digit] = one_char[digit] == '9' ? '8' : '9';
  EXPECT_FALSE(readme_matches(one_char, printed));
  std::string lost_row = good;
  const std::size_t row = lost_row.find("\n|pipelined");
  lost_row.erase(row + 1, lost_row.find('\n', row + 1) - row);
  EXPECT_FALSE(readme_matches(lost_row, printed));
  EXPECT_FALSE(readme_matches("# x\nno markers\n", printed));
}

}  // namespace
}  // namespace decodebench::testing
