// The static model on canned SASS (tests/static_model/*.sass, written in cuobjdump's layout; each
// file's header comment gives the figures its functions must yield): the parser, loop finding,
// the main-loop rules, the report, and bad input. No nvcc needed.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <gtest/gtest.h>

#include "common/errors.h"
#include "static_model/cuobjdump.h"
#include "static_model/sass_parse.h"
#include "static_model/static_model.h"
#include "static_model/static_report.h"

namespace decodebench::static_model {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(DECODEBENCH_STATIC_FIXTURES) + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << name;
  return ss.str();
}

const Function& by_name(const std::vector<Function>& fs, const std::string& name) {
  for (const Function& f : fs) {
    if (f.name == name) return f;
  }
  ADD_FAILURE() << "no function " << name;
  static const Function none;
  return none;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(SassParse, InstructionsOperandsAndTargets) {
  const std::vector<Function> fs = parse_sass(fixture("loop.sass"), "loop.sass");
  ASSERT_EQ(fs.size(), 1u);
  const Function& f = fs[0];
  EXPECT_EQ(f.name, "_Z12loop_fixturev");
  EXPECT_EQ(f.arch, "sm_90a");
  ASSERT_EQ(f.instructions.size(), 25u);
  const Instruction& ldg = f.instructions[6];
  EXPECT_EQ(ldg.address, 0x60u);
  EXPECT_EQ(ldg.opcode, "LDG.E.128");
  EXPECT_EQ(ldg.base(), "LDG");
  EXPECT_TRUE(ldg.has_modifier("128"));
  EXPECT_FALSE(ldg.has_modifier("12"));
  ASSERT_EQ(ldg.operands.size(), 2u);
  EXPECT_EQ(ldg.operands[0], "R16");
  EXPECT_EQ(ldg.operands[1], "desc[UR4][R8.64]");
  const Instruction& br = f.instructions[19];
  EXPECT_EQ(br.guard, "@!P0");
  EXPECT_EQ(br.opcode, "BRA");
  ASSERT_TRUE(br.target.has_value());
  EXPECT_EQ(*br.target, 0x50u);
  EXPECT_EQ(f.instructions.back().opcode, "NOP");
  // "BRA !P3, 0x4fe0": the target is the last operand.
  const std::string two_operand =
      "\t\tFunction : f\n        /*0000*/  @!P1 BRA !P3, 0x0 ;\n\t\t..........\n";
  EXPECT_EQ(*parse_sass(two_operand, "x").at(0).instructions[0].target, 0u);
}

TEST(SassParse, ADuplicateFunctionIsKeptOnce) {
  const std::string one = fixture("misc.sass");
  const std::vector<Function> fs = parse_sass(one + one, "twice");
  EXPECT_EQ(fs.size(), 2u);
}

TEST(SassParse, MalformedTextIsAClearError) {
  const std::string fn = "\t\tFunction : f\n";
  const std::string end = "\t\t..........\n";
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {fn + "        /*0000*/  MOV R1, RZ\n" + end, "without its ';'"},
      {"        /*0000*/  MOV R1, RZ ;\n", "outside a function"},
      {fn + "        /*0010*/  MOV R1, RZ ;\n        /*0000*/  EXIT ;\n" + end,
       "addresses must increase"},
      {fn + "        /*0000*/  BRA `(.L_x_1) ;\n" + end, "is not an address"},
      {fn + end, "has no instructions"},
      {"some text that is not SASS\n", "no function found"},
      {"", "no function found"},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of([&] { parse_sass(c.text, "bad.sass"); });
    EXPECT_NE(msg.find("bad.sass:"), std::string::npos) << c.text;
    EXPECT_NE(msg.find(c.message), std::string::npos) << msg;
  }
}

TEST(SassParse, ResourceUsage) {
  const std::string text =
      "Resource usage:\n Common:\n  GLOBAL:0\n"
      "Fatbin elf code:\n================\narch = sm_90a\n"
      " Function _Z1fv:\n  REG:122 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:640 TEXTURE:0\n"
      " Function _Z1gv:\n  REG:40 STACK:16 SHARED:6400 LOCAL:8 CONSTANT[0]:640\n";
  const std::vector<ResourceUsage> r = parse_resource_usage(text, "res");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].name, "_Z1fv");
  EXPECT_EQ(r[0].arch, "sm_90a");
  EXPECT_EQ(r[0].registers, 122);
  EXPECT_EQ(r[0].shared, 1024);
  EXPECT_EQ(r[1].stack, 16);
  EXPECT_EQ(r[1].local, 8);
  const std::string msg =
      error_of([] { parse_resource_usage(" Function _Z1fv:\n Function _Z1gv:\n", "res"); });
  EXPECT_NE(msg.find("res:1: function _Z1fv has no REG: line"), std::string::npos) << msg;
}

// loop.sass: 15 instructions, 3 x LDG.E.128 + 1 x LDG.E.64 = 56 B per lane = 1792 B per warp,
// the 32-bit block-table load excluded, 2 barriers; three loads (40 B per lane) are issued
// before 0xa0 reads R16.
TEST(StaticModel, OneLoopExactFigures) {
  const Function f = parse_sass(fixture("loop.sass"), "loop.sass").at(0);
  const std::vector<Loop> loops = find_loops(f);
  ASSERT_EQ(loops.size(), 1u);  // BRA 0x160 to itself after EXIT is no loop
  const MainLoop m = analyze_main_loop(f);
  ASSERT_TRUE(m.found);
  EXPECT_EQ(m.head, 0x50u);
  EXPECT_EQ(m.tail, 0x130u);
  EXPECT_EQ(m.kv_loops, 1);
  EXPECT_EQ(m.instructions, 15);
  EXPECT_EQ(m.kv_loads, 4);
  EXPECT_EQ(m.kv_bytes_per_warp, 56 * 32);
  EXPECT_EQ(m.barriers, 2);
  EXPECT_FALSE(m.async_copies);
  EXPECT_FALSE(m.nested_unknown);
  EXPECT_EQ(m.in_flight_per_warp, 40 * 32);
  EXPECT_DOUBLE_EQ(m.instructions_per_byte(), 15.0 / 1792.0);
  const FunctionTotals t = function_totals(f);
  EXPECT_EQ(t.instructions, 22);  // up to EXIT
  EXPECT_EQ(t.loops, 1);
  EXPECT_EQ(t.barriers, 2);
}

TEST(StaticModel, NestedLoopOfKnownTripCountIsCountedTimesItsTrips) {
  const std::vector<Function> fs = parse_sass(fixture("nested.sass"), "nested.sass");
  const Function& f = by_name(fs, "_Z12known_innerv");
  const std::vector<Loop> loops = find_loops(f);
  ASSERT_EQ(loops.size(), 2u);
  EXPECT_EQ(loops[1].parent, 0);
  ASSERT_TRUE(loops[1].trip_count.has_value());
  EXPECT_EQ(*loops[1].trip_count, 4);
  EXPECT_FALSE(loops[0].trip_count.has_value());  // compared against c[0x0][0x210]
  const MainLoop m = analyze_main_loop(f);
  ASSERT_TRUE(m.found);
  EXPECT_EQ(m.head, 0x20u);
  EXPECT_FALSE(m.nested_unknown);
  EXPECT_EQ(m.instructions, 11 - 5 + 5 * 4);
  EXPECT_EQ(m.nested_known, 15);
  EXPECT_EQ(m.kv_bytes_per_warp, 512);
  EXPECT_EQ(m.barriers, 1);
}

TEST(StaticModel, NestedLoopOfUnknownTripCountIsReportedNotCounted) {
  const std::vector<Function> fs = parse_sass(fixture("nested.sass"), "nested.sass");
  const MainLoop m = analyze_main_loop(by_name(fs, "_Z14unknown_innerv"));
  ASSERT_TRUE(m.found);
  EXPECT_TRUE(m.nested_unknown);
  EXPECT_EQ(m.inner_instructions, 5);
  EXPECT_EQ(m.instructions, 11 - 5);
  EXPECT_EQ(m.kv_bytes_per_warp, 512);
}

TEST(StaticModel, TheInnermostLoopWithKvLoadsIsTheMainLoop) {
  const std::vector<Function> fs = parse_sass(fixture("nested.sass"), "nested.sass");
  const Function& f = by_name(fs, "_Z11inner_loadsv");
  const MainLoop m = analyze_main_loop(f);
  ASSERT_TRUE(m.found);
  EXPECT_EQ(m.head, 0x30u);
  EXPECT_EQ(m.tail, 0x70u);
  EXPECT_EQ(m.instructions, 5);
  EXPECT_EQ(m.kv_bytes_per_warp, 8 * 32);
  EXPECT_EQ(m.kv_loops, 1);
  EXPECT_EQ(*find_loops(f)[1].trip_count, 8);  // VIADD, ISETP.LT: R9 = 0 .. 7
}

TEST(StaticModel, CpAsyncInFlightIsTheOutstandingGroups) {
  const std::vector<Function> fs = parse_sass(fixture("misc.sass"), "misc.sass");
  const MainLoop m = analyze_main_loop(by_name(fs, "_Z12async_copiesv"));
  ASSERT_TRUE(m.found);
  EXPECT_TRUE(m.async_copies);
  EXPECT_EQ(m.instructions, 11);
  EXPECT_EQ(m.kv_bytes_per_warp, 32 * 32);
  EXPECT_EQ(m.scale_loads, 1);
  EXPECT_EQ(m.commit_groups, 1);
  EXPECT_EQ(m.wait_depth, 2);
  EXPECT_EQ(m.in_flight_per_warp, 3 * 32 * 32);
  EXPECT_EQ(m.barriers, 2);
}

// An integer format's loop stages its scales through L1 and may read more directly (32-bit LDG):
// both are counted as loads and instructions, and the iteration's bytes are the format's for the
// tokens its codes bring: int4 at d = 128, P = 16 is 176 B per token and head against 128 B of
// codes. A model that took the staged scales for codes (their width x 32 lanes: 512 B, though
// the kernel's lanes copy less) or left the format's scales out (1024 B) would say otherwise.
TEST(StaticModel, ScaleLoadsAreCountedAndTheirBytesAreTheFormats) {
  std::vector<Function> fs = parse_sass(fixture("misc.sass"), "misc.sass");
  Function f = by_name(fs, "_Z12async_copiesv");
  // Plant a 32-bit scale load read directly in the loop (in place of the LDS).
  for (Instruction& in : f.instructions) {
    if (in.address == 0x70) {
      in.opcode = "LDG.E";
      in.operands = {"R12", "desc[UR4][R10.64]"};
    }
  }
  MainLoop m = analyze_main_loop(f);
  ASSERT_TRUE(m.found);
  EXPECT_EQ(m.kv_bytes_per_warp, 1024);
  EXPECT_EQ(m.scale_loads, 1);
  EXPECT_EQ(m.narrow_loads, 1);
  EXPECT_EQ(m.instructions, 11);
  add_format_bytes(m, DType::int4, 128);
  EXPECT_EQ(m.scale_bytes_per_warp, 1024 * 48 / 128);
  EXPECT_EQ(m.bytes_per_warp(), 1024 + 384);
  EXPECT_DOUBLE_EQ(m.instructions_per_byte(), 11.0 / 1408);
  add_format_bytes(m, DType::int8, 128);  // 130 + 130 B against 256 of codes
  EXPECT_EQ(m.scale_bytes_per_warp, 1024 * 4 / 256);
  add_format_bytes(m, DType::f16, 128);
  EXPECT_EQ(m.scale_bytes_per_warp, 0);
}

TEST(StaticModel, NoLoop) {
  const std::vector<Function> fs = parse_sass(fixture("misc.sass"), "misc.sass");
  const Function& f = by_name(fs, "_Z7no_loopv");
  EXPECT_TRUE(find_loops(f).empty());
  EXPECT_FALSE(analyze_main_loop(f).found);
  const FunctionTotals t = function_totals(f);
  EXPECT_EQ(t.instructions, 7);
  EXPECT_EQ(t.loops, 0);
  EXPECT_EQ(t.barriers, 1);
}

TEST(StaticModel, KernelNames) {
  const KernelName p = parse_kernel_name(
      "void decodebench::kernels::cuda::paged_decode::pipelined_detail::pipelined_kernel<"
      "(decodebench::DType)3, 128, 4>(decodebench::kernels::PagedDecodeParams)");
  EXPECT_TRUE(p.decode);
  EXPECT_EQ(p.rung, "pipelined");
  EXPECT_EQ(p.kernel, "pipelined_kernel");
  ASSERT_TRUE(p.kv_dtype.has_value());
  EXPECT_EQ(*p.kv_dtype, DType::fp8_e4m3);
  EXPECT_EQ(p.head_dim, 128);
  EXPECT_EQ(p.group_cap, 4);
  const KernelName m = parse_kernel_name(
      "void decodebench::kernels::cuda::paged_decode::split_kv_detail::merge_kernel<256>("
      "decodebench::kernels::PagedDecodeParams)");
  EXPECT_EQ(m.rung, "split_kv");
  EXPECT_FALSE(m.kv_dtype.has_value());
  EXPECT_EQ(m.head_dim, 256);
  EXPECT_EQ(m.group_cap, 0);
  const KernelName planted = parse_kernel_name(
      "decodebench::kernels::cuda::paged_decode::planted_rung::planted_kernel(uint4 const*)");
  EXPECT_TRUE(planted.decode);
  EXPECT_EQ(planted.rung, "planted_rung");
  EXPECT_FALSE(parse_kernel_name("void decodebench::kernels::cuda::fill_detail::fill_kernel("
                                 "decodebench::kernels::FillParams)")
                   .decode);
  EXPECT_EQ(demangle("_Z7no_loopv"), "no_loop()");
  EXPECT_EQ(demangle("not mangled"), "not mangled");
}

TEST(StaticModel, IssueBoundAndLittlesLaw) {
  const DeviceFigures h200{"h200", "H200", 132, 1.98e9, 4.8e12};
  // 4 x 132 x 1.98e9 = 1.04544e12 warp-instructions per second; at 0.21 per byte ~ 4.98 TB/s.
  EXPECT_NEAR(issue_bound_bandwidth(0.21, h200), 4.978e12, 1e9);
  EXPECT_EQ(issue_bound_bandwidth(0, h200), 0);
  EXPECT_NEAR(littles_law_bytes_per_sm(h200, 600e-9), 4.8e12 * 600e-9 / 132, 1e-6);
}

// A library with one decode instance per dtype, the real names, through the report.
std::vector<Instance> fixture_instances(int cap_for_fp8) {
  const Function loop = parse_sass(fixture("loop.sass"), "loop.sass").at(0);
  const Function noloop = by_name(parse_sass(fixture("misc.sass"), "misc.sass"), "_Z7no_loopv");
  auto named = [](Function f, const std::string& mangled) {
    f.name = mangled;
    return f;
  };
  const std::string ns = "_ZN11decodebench7kernels4cuda12paged_decode";
  const std::vector<Function> fs = {
      named(noloop, ns + "15split_kv_detail12merge_kernelILi128EEEvNS0_17PagedDecodeParamsE"),
      named(loop, ns + "16pipelined_detail16pipelined_kernelILNS_5DTypeE3ELi128ELi" +
                      std::to_string(cap_for_fp8) + "EEEvNS0_17PagedDecodeParamsE"),
      named(loop, ns + "16pipelined_detail16pipelined_kernelILNS_5DTypeE1ELi128ELi4EEEvNS0_"
                       "17PagedDecodeParamsE"),
      named(loop, "_ZN11decodebench7kernels4cuda11fill_detail11fill_kernelEv"),
  };
  std::vector<ResourceUsage> res;
  for (const Function& f : fs) res.push_back({f.name, "sm_90a", 100, 0, 1024, 0});
  Hooks hooks;
  hooks.launch_shape = [](const KernelName& k) -> std::optional<LaunchShape> {
    if (k.kernel == "merge_kernel") return LaunchShape{64, 0};
    return LaunchShape{128, 4096};
  };
  hooks.occupancy = [](int, std::size_t static_smem, const LaunchShape&) {
    EXPECT_EQ(static_smem, 0u);  // SHARED 1024 is the reserve alone
    return OccupancyFigure{3, "registers", ""};
  };
  return analyze_instances(fs, res, hooks, {"naive", "pipelined", "split_kv"});
}

ModelSettings settings() {
  ModelSettings s;
  s.devices = {{"h100-sxm", "H100", 132, 1.98e9, 3.35e12}, {"h200", "H200", 132, 1.98e9, 4.8e12}};
  return s;
}

TEST(StaticReport, InstancesOrderedAndFigured) {
  const std::vector<Instance> is = fixture_instances(4);
  ASSERT_EQ(is.size(), 3u);  // the fill kernel is no decode kernel
  EXPECT_EQ(is[0].name.kv_dtype, DType::f16);
  EXPECT_EQ(is[1].name.kv_dtype, DType::fp8_e4m3);
  EXPECT_EQ(is[2].name.kernel, "merge_kernel");
  EXPECT_EQ(is[0].occupancy.ctas_per_sm, 3);
  EXPECT_EQ(is[0].in_flight_per_cta(), 40 * 32 * 4);
  EXPECT_EQ(is[0].in_flight_per_sm(), 40 * 32 * 4 * 3);
  const nlohmann::json j = static_json(is, settings());
  EXPECT_EQ(j["instances"][0]["main_loop"]["instructions"], 15);
  EXPECT_EQ(j["instances"][0]["main_loop"]["kv_bytes_per_warp"], 1792);
  EXPECT_TRUE(j["instances"][2]["main_loop"].is_null());
  const std::string md = static_markdown(is, settings());
  EXPECT_NE(
      md.find("| pipelined | `pipelined_kernel` | f16 | 128 | 4 | 100 | 0 | 4096 | 128 | 3 |"),
      std::string::npos)
      << md;
  EXPECT_NE(md.find("no KV loop"), std::string::npos) << md;
  EXPECT_NE(static_table(is, settings()).find("15 warp-instructions, 1792 KV B per warp"),
            std::string::npos);
}

TEST(StaticReport, SummaryAndWhatItLacks) {
  const std::vector<Instance> is = fixture_instances(4);
  const std::string s = static_summary_markdown(is, settings(), "h200");
  // 15 / 1792 = 0.0084 instr/B; 1.04544e12 / that = 124.9 TB/s; 5 KiB x 3 CTAs = 15 KiB.
  EXPECT_NE(s.find("|pipelined|4|.01/.01|124.9/124.9|3/3|15/15|"), std::string::npos) << s;
  EXPECT_NE(s.find("need 21"), std::string::npos) << s;
  EXPECT_TRUE(summary_missing(is, {"pipelined"}).empty());
  const std::vector<std::string> lacks = summary_missing(fixture_instances(8), {"pipelined"});
  ASSERT_EQ(lacks.size(), 2u);
  EXPECT_EQ(lacks[0], "pipelined fp8_e4m3 cap 4");
  EXPECT_EQ(lacks[1], "pipelined f16 cap 8");
  EXPECT_NE(static_summary_markdown(fixture_instances(8), settings(), "h200").find("n/a"),
            std::string::npos);
}

// An executable script at `path` with `body`.
void script(const std::filesystem::path& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  ::chmod(path.c_str(), 0755);
}

TEST(Cuobjdump, SearchOrderAndErrors) {
  const auto dir = std::filesystem::temp_directory_path() / "decodebench_static_cuobjdump";
  std::filesystem::create_directories(dir);
  const auto fake = dir / "cuobjdump";
  script(fake, "echo \"args: $*\"");
  EXPECT_EQ(find_cuobjdump(fake.string()), fake.string());
  EXPECT_NE(error_of([&] { find_cuobjdump((dir / "none").string()); }).find("--cuobjdump"),
            std::string::npos);

  ::setenv("DECODEBENCH_CUOBJDUMP", (dir / "none").c_str(), 1);
  EXPECT_NE(error_of([] { find_cuobjdump(""); }).find("$DECODEBENCH_CUOBJDUMP"), std::string::npos);
  ::setenv("DECODEBENCH_CUOBJDUMP", fake.c_str(), 1);
  EXPECT_EQ(find_cuobjdump(""), fake.string());
  ::unsetenv("DECODEBENCH_CUOBJDUMP");

  // Nothing on PATH, no $CUOBJDUMP or $CUDA_HOME, no python3 to ask for the wheel: only the
  // toolkit's default location is left.
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  const char* cuda_home = std::getenv("CUDA_HOME");
  const std::string saved_home = cuda_home ? cuda_home : "";
  ::setenv("PATH", (dir / "empty").c_str(), 1);
  ::unsetenv("CUOBJDUMP");
  ::unsetenv("CUDA_HOME");
  if (!std::filesystem::exists("/usr/local/cuda/bin/cuobjdump")) {
    const std::string msg = error_of([] { find_cuobjdump(""); });
    for (const char* where : {"no cuobjdump found", "$CUOBJDUMP", "PATH", "$CUDA_HOME/bin",
                              "beside nvcc", "/usr/local/cuda/bin/cuobjdump", "wheel"}) {
      EXPECT_NE(msg.find(where), std::string::npos) << where << ": " << msg;
    }
  }
  ::setenv("PATH", path.c_str(), 1);
  if (cuda_home) ::setenv("CUDA_HOME", saved_home.c_str(), 1);

  EXPECT_EQ(run_cuobjdump(fake.string(), {"-sass", "it's"}), "args: -sass it's\n");
  const auto failing = dir / "failing";
  script(failing,
         "echo \"cuobjdump fatal   : Could not find executable file 'nvdisasm'\" >&2; exit 1");
  const std::string msg = error_of([&] { run_cuobjdump(failing.string(), {"-sass", "x"}); });
  EXPECT_NE(msg.find("exit 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nvidia-cuda-nvdisasm"), std::string::npos) << msg;
  std::filesystem::remove_all(dir);
}

// `kernels --static --out` read back for `decodebench report`: the reader rebuilds the instances
// the writer wrote (the committed golden input, written by this build's kernels), writing them
// again gives the same document, and each kind of edit is refused naming the key.
TEST(StaticDocument, ReadsBackWhatTheWriterWroteAndRefusesEdits) {
  const nlohmann::json doc = nlohmann::json::parse(fixture("../golden/inputs/static-sm90a.json"));
  ASSERT_TRUE(is_static_document(doc));
  const StaticDocument d = static_from_json(doc, "static.json");
  ASSERT_EQ(d.instances.size(), doc.at("instances").size());
  nlohmann::json again = static_json(d.instances, d.settings);
  again["binary"] = d.binary;
  again["cuobjdump"] = d.cuobjdump;
  EXPECT_EQ(again, doc);
  EXPECT_FALSE(is_static_document(nlohmann::json{{"instances", nlohmann::json::array()}}));

  struct Edit {
    std::string what, key;
    std::function<void(nlohmann::json&)> apply;
  };
  const auto first_loop = [](nlohmann::json& j) -> nlohmann::json& {
    return j["instances"][0]["main_loop"];
  };
  const std::vector<Edit> edits = {
      {"an unknown key", "colour", [](nlohmann::json& j) { j["instances"][0]["colour"] = 1; }},
      {"a rung that is not the name's", "rung",
       [](nlohmann::json& j) { j["instances"][0]["rung"] = "tc"; }},
      {"a head_dim that is not the name's", "head_dim",
       [](nlohmann::json& j) { j["instances"][0]["head_dim"] = 64; }},
      {"a derived figure edited", "instructions_per_byte",
       [&](nlohmann::json& j) { first_loop(j)["instructions_per_byte"] = 0.01; }},
      {"bytes in flight edited", "in_flight_per_sm",
       [&](nlohmann::json& j) { first_loop(j)["in_flight_per_sm"] = 1; }},
      {"a negative count", "kv_loads", [&](nlohmann::json& j) { first_loop(j)["kv_loads"] = -1; }},
      {"an address that is not hex", "head",
       [&](nlohmann::json& j) { first_loop(j)["head"] = "12g"; }},
      {"half a launch shape", "threads",
       [](nlohmann::json& j) { j["instances"][0]["threads"] = nullptr; }},
      {"another issue rule", "warp_instructions_per_clock_per_sm",
       [](nlohmann::json& j) { j["assumptions"]["warp_instructions_per_clock_per_sm"] = 2; }},
      {"no device", "devices", [](nlohmann::json& j) { j["devices"] = nlohmann::json::array(); }},
      {"not a decode kernel", "demangled",
       [](nlohmann::json& j) { j["instances"][0]["demangled"] = "void other_kernel()"; }},
  };
  for (const Edit& e : edits) {
    nlohmann::json bad = doc;
    e.apply(bad);
    const std::string msg = error_of([&] { (void)static_from_json(bad, "static.json"); });
    EXPECT_NE(msg.find("static.json"), std::string::npos) << e.what << ": " << msg;
    EXPECT_NE(msg.find(e.key), std::string::npos) << e.what << ": " << msg;
  }
}

}  // namespace
}  // namespace decodebench::static_model
