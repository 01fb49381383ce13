// `decodebench` as a user runs it: exit codes and messages, reports, formats, dump, merge,
// compare, Ctrl-C. The binary runs as a subprocess (cli_run.h). CPU backend only; kept fast by
// giving the sweeps precomputed ceilings (--ceilings) instead of measuring them.
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli/cli_run.h"
#include "cli/command_language.h"
#include "cli/dump_check.h"

namespace decodebench::testing {
namespace {

using nlohmann::json;

// Stops after two samples; the timeout is only a guard, long enough for a loaded machine so the
// sample count never depends on load. Warm: cold by rotation allocates and copies ~2x the LLC per
// point, seconds on a VM that reports a large L3; the cold tests below ask for cold themselves.
constexpr const char* kFastMeasure =
    "--min-samples 2 --min-time 0 --max-noise 1 --timeout 5 --warm";

// ------------------------------------------------------------------------------- bad input

struct BadInput {
  std::string args;
  std::vector<std::string> message;  // substrings of stderr
  int code = 2;
};

TEST(CliBadInput, ExitCodeAndMessageNameTheProblem) {
  TempDir dir;
  write_file(
      dir / "gqa.json",
      R"({"name":"bad-gqa","num_q_heads":6,"num_kv_heads":4,"head_dim":128,"num_layers":1})");
  write_file(dir / "d96.json",
             R"({"name":"bad-d","num_q_heads":8,"num_kv_heads":4,"head_dim":96,"num_layers":1})");
  write_file(dir / "unknown_key.json", R"({"batch": [1], "bogus": 1})");
  write_file(dir / "bad_value.json", R"({"batch": [1, -2]})");
  const std::string d = dir.path().string();
  const std::vector<BadInput> cases = {
      {"sweep --batch 0", {"batch", ">= 1", "got 0"}},
      {"sweep --batch 1,abc", {"--batch", "'abc'", "not an integer"}},
      {"sweep --batch 1,,2", {"--batch", "empty item"}},
      {"sweep --context 0", {"context", "got 0"}},
      {"sweep --context 5-2", {"context", "lo <= hi"}},
      {"sweep --hit-rate 1.5", {"hit rate", "[0, 1]", "1.5"}},
      {"sweep --block-size 24", {"block size", "power of two", "24"}},
      {"sweep --model nope", {"unknown model 'nope'", "llama-3.1-8b", "mistral-7b"}},
      {"sweep --kv-dtype fp4", {"--kv-dtype", "'fp4'", "f16", "bf16", "fp8_e4m3", "fp8_e5m2"}},
      {"sweep --q-dtype fp8_e4m3", {"q", "f16", "bf16"}},
      {"sweep --backend cpu --kernel nope", {"--kernel", "'nope'", "valid: auto, all"}},
      {"sweep --backend nope", {"unknown backend 'nope'", "auto", "cpu", "emu"}},
      {"sweep --format xml", {"'xml'", "table", "json", "csv", "md"}},
      {"sweep --model " + d + "/gqa.json", {"num_kv_heads", "must divide num_q_heads"}},
      {"sweep --model " + d + "/d96.json", {"head_dim 96", "64, 128, 256"}},
      {"sweep --config " + d + "/unknown_key.json",
       {d + "/unknown_key.json", "'bogus'", "valid keys"}},
      {"sweep --config " + d + "/bad_value.json", {d + "/bad_value.json", "batch[1]", "-2"}},
      {"sweep --config " + d + "/missing.json", {d + "/missing.json"}},
      {"sweep --backend cpu --batch 1,8 --dump " + d + "/dump",
       {"--dump", "one point", "2 points"}},
      {"sweep --shard 2/2", {"shard"}},
      {"sweep --bogus-flag", {"--bogus-flag"}},
      {"model --device nope", {"unknown device 'nope'", "devices.json", "h100-sxm", "h200"}},
      {"model --batch 0", {"batch"}},
      {"model --kernel-kind simd",
       {"--kernel-kind", "unknown kernel kind 'simd'", "cuda-core, tensor-core, cascade"}},
      {"compare " + d + "/none.json " + d + "/none2.json", {d + "/none.json"}},
      {"frobnicate", {"frobnicate"}},
      {"", {"subcommand"}},
  };
  for (const BadInput& c : cases) {
    const CliResult r = run_cli(c.args, dir.path());
    EXPECT_EQ(r.code, c.code) << c.args << "\nstderr: " << r.err;
    for (const std::string& m : c.message) {
      EXPECT_NE(r.err.find(m), std::string::npos)
          << c.args << ": stderr lacks '" << m << "'\nstderr: " << r.err;
    }
  }
  // Bad input writes no report.
  EXPECT_FALSE(std::filesystem::exists(dir / "dump"));
}

TEST(CliBadInput, CudaNotCompiledOrNoDeviceIsARuntimeFailure) {
  TempDir dir;
  const CliResult r = run_cli("sweep --backend cuda --out ''", dir.path());
  // Without a GPU (every CI machine) the cuda backend cannot run: exit 3, saying why.
  if (r.code == 3) {
    EXPECT_NE(r.err.find("cuda"), std::string::npos) << r.err;
  } else {
    GTEST_SKIP() << "a CUDA device is present here";
  }
}

TEST(CliBadInput, CeilingsFileOfAnotherDeviceIsRejected) {
  TempDir dir;
  const std::filesystem::path ceilings = fake_cpu_ceilings(dir);
  json j = read_json(ceilings);
  j["name"] = "Some Other CPU";
  write_file(dir / "other.json", j.dump());
  const CliResult r = run_cli(
      fmt::format("sweep --backend cpu --ceilings '{}' --out ''", (dir / "other.json").string()),
      dir.path());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("Some Other CPU"), std::string::npos) << r.err;
}

TEST(CliHelp, EverySubcommandHasHelp) {
  TempDir dir;
  for (const char* cmd : {"sweep", "check", "ceilings", "devices", "kernels", "model", "compare",
                          "merge", "report"}) {
    const CliResult r = run_cli(std::string(cmd) + " --help", dir.path());
    EXPECT_EQ(r.code, 0) << cmd << ": " << r.err;
    EXPECT_NE(r.out.find("--help"), std::string::npos) << cmd << ": " << r.out;
  }
  const CliResult v = run_cli("--version", dir.path());
  EXPECT_EQ(v.code, 0) << v.err;
  EXPECT_NE(v.out.find("decodebench "), std::string::npos) << v.out;
  const CliResult r = run_cli("sweep --help", dir.path());
  for (const char* flag :
       {"--batch",       "--context", "--hit-rate", "--prefix-groups", "--kv-dtype", "--q-dtype",
        "--block-size",  "--kernel",  "--backend",  "--device",        "--model",    "--config",
        "--format",      "--out",     "--seed",     "--dump",          "--min-time", "--max-noise",
        "--min-samples", "--timeout", "--warm",     "--shard",         "--ceilings"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
}

// README.md's "Commands" block stays true: every subcommand is listed, and every flag a
// command's lines name (outside `quoted` cross-references) is in that command's --help.
TEST(CliHelp, ReadmeCommandsNameOnlyFlagsTheCommandsHave) {
  TempDir dir;
  const std::string readme = read_file(DECODEBENCH_README);
  const std::size_t start = readme.find("## Commands\n\n```\n");
  ASSERT_NE(start, std::string::npos);
  const std::size_t body = readme.find('\n', readme.find("```", start)) + 1;
  const std::string block = readme.substr(body, readme.find("```", body) - body);
  std::map<std::string, std::string> text;  // command -> its lines
  std::string command;
  std::istringstream lines(block);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("decodebench ", 0) == 0) {
      std::istringstream words(line.substr(12));
      words >> command;
    }
    text[command] += line + "\n";
  }
  const CliResult top = run_cli("--help", dir.path());
  const std::vector<std::string> commands = subcommands_in_help(top.out);
  ASSERT_GE(commands.size(), 13u) << top.out;
  for (const std::string& cmd : commands) {
    ASSERT_TRUE(text.count(cmd)) << "README.md Commands lacks " << cmd;
    std::string t = text[cmd];
    for (std::size_t q; (q = t.find('`')) != std::string::npos;) {
      t.erase(q, t.find('`', q + 1) - q + 1);
    }
    const CliResult help = run_cli(std::string(cmd) + " --help", dir.path());
    ASSERT_EQ(help.code, 0) << cmd;
    for (std::size_t i = t.find("--"); i != std::string::npos; i = t.find("--", i + 2)) {
      std::size_t j = i + 2;
      while (j < t.size() && (std::isalnum(static_cast<unsigned char>(t[j])) || t[j] == '-')) ++j;
      const std::string flag = t.substr(i, j - i);
      EXPECT_NE(help.out.find(flag + " "), std::string::npos)
          << "README.md: " << cmd << " " << flag << " is not in its --help";
    }
  }
}

// The one command language, in every command's --help: --out is the JSON document, --format
// what stdout prints, KV formats are --kv-dtype; README.md says so where it lists them.
TEST(CliLanguage, EveryCommandSpeaksIt) {
  TempDir dir;
  const std::string readme = read_file(DECODEBENCH_README);
  const std::string commands_section = readme.substr(readme.find("## Commands"));
  for (const char* says : {"`--out FILE` is always the JSON document", "`--format` what stdout",
                           "`--kv-dtype` the KV formats"}) {
    EXPECT_NE(commands_section.find(says), std::string::npos) << "README.md Commands: " << says;
  }
  const std::vector<std::string> commands = subcommands_in_help(run_cli("--help", dir.path()).out);
  ASSERT_GE(commands.size(), 13u);
  const std::string sweep_help = run_cli("sweep --help", dir.path()).out;
  int measuring = 0;
  for (const std::string& cmd : commands) {
    const CliResult help = run_cli(cmd + " --help", dir.path());
    ASSERT_EQ(help.code, 0) << cmd;
    for (const std::string& problem : language_problems(cmd, help.out)) ADD_FAILURE() << problem;
    for (const std::string& problem : measurement_problems(cmd, help.out, sweep_help))
      ADD_FAILURE() << problem;
    measuring += !option_help(help.out, "--min-samples").empty();
  }
  EXPECT_GE(measuring, 3) << "sweep, replay and quant-error take the measurement options";
}

// A measurement option out of range is refused by every measuring command in the same words,
// naming the flag as given, before anything is measured.
TEST(CliLanguage, MeasurementOptionsAreCheckedAlikeNamingTheFlag) {
  TempDir dir;
  const std::string trace = std::string(DECODEBENCH_TRACES) + "/mooncake-conversation-2k.jsonl";
  for (const std::string& command :
       {std::string("sweep --backend cpu --plan"), std::string("quant-error --data gaussian"),
        "replay --backend cpu --out '' --trace '" + trace + "'"}) {
    for (const char* bad :
         {"--min-samples 0", "--min-time -1", "--max-noise nan", "--timeout inf"}) {
      SCOPED_TRACE(command + " " + bad);
      const CliResult r = run_cli(command + " " + bad, dir.path());
      EXPECT_EQ(r.code, 2) << r.err;
      EXPECT_EQ(r.err.rfind(std::string("decodebench: error: ") + bad + ": measure.", 0), 0u)
          << r.err;
      EXPECT_EQ(r.err.find("measuring"), std::string::npos) << r.err;
    }
  }
}

// A mistyped option is named with the one meant; one far from every option is named alone.
TEST(CliLanguage, UnknownOptionNamesTheNearest) {
  TempDir dir;
  const CliResult typo = run_cli("sweep --kv-dtypes f16 --plan", dir.path());
  EXPECT_EQ(typo.code, 2);
  EXPECT_EQ(typo.err.rfind("decodebench: error: sweep: unknown option --kv-dtypes; did you mean "
                           "--kv-dtype?",
                           0),
            0u)
      << typo.err;
  const CliResult prefix = run_cli("cache-sim --trac x", dir.path());
  EXPECT_NE(prefix.err.find("unknown option --trac; did you mean --trace?"), std::string::npos)
      << prefix.err;
  // An old spelling kept for one release is known but never suggested.
  const CliResult hidden = run_cli("quant-error --data gaussian --formatz f16", dir.path());
  EXPECT_NE(hidden.err.find("unknown option --formatz; did you mean --format?"), std::string::npos)
      << hidden.err;
  const CliResult far = run_cli("model --zzzzzzzz 1", dir.path());
  EXPECT_EQ(far.code, 2);
  EXPECT_NE(far.err.find("model: unknown option --zzzzzzzz ("), std::string::npos) << far.err;
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
}

// The checks above catch each planted break of the language.
TEST(CliLanguage, PlantedBreaksAreCaught) {
  const std::string good =
      "Usage: decodebench x [OPTIONS]\n\nOPTIONS:\n"
      "  -h,--help                   Print this help message and exit\n"
      "  --format TEXT [table]       What stdout prints: table or json\n"
      "  --out TEXT                  The JSON document: the results (written atomically)\n"
      "  --kv-dtype TEXT             KV formats (list)\n";
  EXPECT_TRUE(language_problems("x", good).empty());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    return s.replace(s.find(from), from.size(), to);
  };
  EXPECT_EQ(language_problems("x", replaced("The JSON document: the results",
                                            "Write the output instead of stdout"))
                .size(),
            1u);
  EXPECT_EQ(language_problems("x", replaced("What stdout prints:", "Output:")).size(), 1u);
  EXPECT_EQ(language_problems("x", replaced("--kv-dtype TEXT  ", "--formats TEXT   ")).size(), 1u);
  EXPECT_EQ(language_problems("x", good + "  --json TEXT                 Also write JSON\n").size(),
            1u);
  // A measuring command whose options differ from the sweep's, or lack one of them.
  const std::string sweep =
      "  --min-samples INT           Stop rule: at least this many samples\n"
      "  --min-time FLOAT            Stop rule: seconds\n  --max-noise FLOAT  Stop rule: noise\n"
      "  --timeout FLOAT             Per-point time limit\n  --warm  Do not flush\n"
      "  --ceilings TEXT             Reuse the ceilings\n";
  EXPECT_TRUE(measurement_problems("x", sweep, sweep).empty());
  EXPECT_TRUE(measurement_problems("x", good, sweep).empty());  // measures nothing
  std::string other = sweep;
  other.replace(other.find("Stop rule: seconds"), 18, "Seconds per step");
  EXPECT_EQ(measurement_problems("x", other, sweep).size(), 1u);
  std::string lacking = sweep;
  lacking.erase(lacking.find("  --ceilings"));
  EXPECT_EQ(measurement_problems("x", lacking, sweep).size(), 1u);
  // Without the stopping rule a command measures nothing: its --max-noise may mean another thing.
  std::string reader = other;
  reader.erase(0, reader.find("  --min-time"));
  EXPECT_TRUE(measurement_problems("x", reader, sweep).empty());
  // A description CLI11 moved to the next line is read there.
  EXPECT_EQ(
      option_help("  --out VERY_LONG_TYPE_NAME_THAT_FILLS_THE_COLUMN\n      Write it\n", "--out"),
      "Write it");
  // The command list comes from the SUBCOMMANDS section only.
  EXPECT_EQ(subcommands_in_help("x\nOPTIONS:\n  -h,--help  Help\nSUBCOMMANDS:\n  sweep  A sweep\n"
                                "  check  Checks\n"),
            (std::vector<std::string>{"sweep", "check"}));
}

// README.md is what a first-time user reads: short (16 KiB); long logs belong in results/ and
// the design in docs/.
TEST(CliHelp, ReadmeStaysShort) { EXPECT_LE(read_file(DECODEBENCH_README).size(), 16u * 1024u); }

// ------------------------------------------------------------------------------- sweeps

TEST(CliSweep, TinyCpuSweepWritesAValidReport) {
  TempDir dir;
  const std::filesystem::path ceilings = fake_cpu_ceilings(dir);
  const std::filesystem::path out = dir / "sub" / "report.json";  // parent created on demand
  const CliResult r = run_cli(
      fmt::format("sweep --backend cpu --batch 1,3 --context 17,9-40 --hit-rate 0,0.5 --seed 7 "
                  "{} --ceilings '{}' --out '{}' --format json",
                  kFastMeasure, ceilings.string(), out.string()),
      dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  // One progress line per point on stderr.
  EXPECT_NE(r.err.find("[1/8] elapsed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[8/8] elapsed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ETA"), std::string::npos) << r.err;

  const json report = read_json(out);
  EXPECT_EQ(json::parse(r.out), report);  // --format json prints the report itself
  EXPECT_EQ(report.at("schema_version"), 1);
  EXPECT_EQ(report.at("tool").at("name"), "decodebench");
  EXPECT_EQ(report.at("config").at("backend"), "cpu");  // "auto" never reaches the report
  EXPECT_EQ(report.at("config").at("seed"), 7);
  ASSERT_EQ(report.at("devices").size(), 1u);
  const json& device = report.at("devices")[0];
  EXPECT_EQ(device.at("backend"), "cpu");
  EXPECT_EQ(device.at("bandwidth").at("measured").at("read"), 1.0e10);  // from --ceilings
  const json& results = report.at("results");
  ASSERT_EQ(results.size(), 8u);
  bool saw_ragged = false, saw_shared = false;
  for (const json& p : results) {
    EXPECT_EQ(p.at("status"), "ok") << p.dump();
    EXPECT_EQ(p.at("backend"), "cpu");
    EXPECT_EQ(p.at("model"), "llama-3.1-8b");
    EXPECT_EQ(p.at("kv_dtype"), "f16");
    EXPECT_GT(p.at("time_s").at("median").get<double>(), 0);
    EXPECT_GE(p.at("time_s").at("samples").get<int>(), 2);
    EXPECT_GT(p.at("bytes").at("min").get<double>(), 0);
    EXPECT_GT(p.at("tokens_per_s").get<double>(), 0);
    // The busy figure beside the roof: the threads' share, consistent with its parts.
    const json& u = p.at("utilization");
    EXPECT_EQ(u.at("source"), "cpu_threads");
    EXPECT_EQ(u.at("threads"), device.at("sm_count"));
    const double busy = u.at("busy").get<double>();
    EXPECT_GT(busy, 0);
    EXPECT_LE(busy, 1.05);
    EXPECT_DOUBLE_EQ(busy, u.at("cpu_time_s").get<double>() /
                               (u.at("window_s").get<double>() * u.at("threads").get<int>()));
    EXPECT_TRUE(u.at("energy_J_per_token").is_null());
    saw_ragged |= p.at("context").at("kind") == "ragged";
    saw_shared |= p.at("hit_rate_actual").get<double>() > 0;
  }
  EXPECT_TRUE(saw_ragged);
  EXPECT_TRUE(saw_shared);
  // Nothing half-written is left next to the report.
  for (const auto& entry : std::filesystem::directory_iterator(out.parent_path())) {
    EXPECT_EQ(entry.path().filename(), "report.json") << entry.path();
  }
}

TEST(CliSweep, OutputFormats) {
  TempDir dir;
  const std::filesystem::path ceilings = fake_cpu_ceilings(dir);
  const std::string base =
      fmt::format("sweep --backend cpu --batch 2 --context 17 {} --ceilings '{}' -q", kFastMeasure,
                  ceilings.string());
  const CliResult csv = run_cli(base + " --out '' --format csv", dir.path());
  ASSERT_EQ(csv.code, 0) << csv.err;
  const std::string header = csv.out.substr(0, csv.out.find('\n'));
  EXPECT_NE(header.find("kernel"), std::string::npos) << csv.out;
  EXPECT_NE(header.find(','), std::string::npos) << csv.out;
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 2) << csv.out;  // header + 1 point
  EXPECT_TRUE(csv.err.empty()) << "-q prints nothing on stderr: " << csv.err;

  const CliResult md = run_cli(base + " --out '' --format md", dir.path());
  ASSERT_EQ(md.code, 0) << md.err;
  EXPECT_NE(md.out.find("| "), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("---"), std::string::npos) << md.out;

  const CliResult table = run_cli(base + " --out '' --format table", dir.path());
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("llama-3.1-8b"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("attn only"), std::string::npos) << table.out;

  const CliResult js = run_cli(base + " --out '' --format json", dir.path());
  ASSERT_EQ(js.code, 0) << js.err;
  EXPECT_EQ(json::parse(js.out).at("results").size(), 1u);
}

// The progress line's status is the table's: a point that stopped at the timeout with its noise
// above --max-noise reads "ok*~" in both, never a bare "ok" on stderr.
TEST(CliSweep, ProgressLineShowsTheTablesStatus) {
  TempDir dir;
  const std::filesystem::path ceilings = fake_cpu_ceilings(dir);
  // More samples than the timeout allows and no noise is low enough: the point stops at the
  // timeout, noisy.
  const CliResult r = run_cli(
      fmt::format("sweep --backend cpu --batch 2 --context 17 --min-samples 1000000 --min-time 0 "
                  "--max-noise 0 --timeout 0.3 --ceilings '{}' --out ''",
                  ceilings.string()),
      dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  std::string status;
  std::istringstream rows(r.out);
  for (std::string line; std::getline(rows, line);) {
    if (line.find("llama-3.1-8b") == std::string::npos) continue;
    std::istringstream words(line);
    for (std::string w; words >> w;) {
      if (w.rfind("ok", 0) == 0) status = w;
    }
  }
  EXPECT_EQ(status.rfind("ok*", 0), 0u) << "stopped at the timeout: " << r.out;
  EXPECT_NE(r.err.find("[1/1] elapsed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": " + status + " "), std::string::npos)
      << "progress line lacks '" << status << "':\n"
      << r.err;
}

// --plan runs nothing and writes nothing: the points, each axis' values and an ETA from the
// measure settings, min(timeout, max(min samples, min time / step) x step) per point, step =
// bytes / bandwidth. The fake ceilings' read (1e10 B/s) and --warm (nothing per sample to make
// it cold) make the estimate exact here.
TEST(CliSweep, PlanPrintsPointsAxesAndAnEtaWithoutRunning) {
  TempDir dir;
  const std::filesystem::path ceilings = fake_cpu_ceilings(dir);
  const std::filesystem::path out = dir / "sub" / "never.json";
  const std::string base =
      fmt::format("sweep --backend cpu --plan --warm --ceilings '{}' --out '{}' ",
                  ceilings.string(), out.string());
  const CliResult r = run_cli(
      base +
          "--batch 1,8,64 --context 1k,4k --kv-dtype f16,bf16 --min-samples 10 --min-time 2 "
          "--timeout 10",
      dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("plan: 12 points on cpu"), std::string::npos) << r.out;
  for (const auto& [flag, values] :
       std::vector<std::pair<std::string, std::string>>{{"--batch", "1, 8, 64"},
                                                        {"--context", "1024, 4096"},
                                                        {"--kv-dtype", "f16, bf16"},
                                                        {"--model", "llama-3.1-8b"},
                                                        {"--kernel", "auto"},
                                                        {"--hit-rate", "0"}}) {
    const std::string line = fmt::format("  {:<16} {}\n", flag, values);
    EXPECT_NE(r.out.find(line), std::string::npos) << line << r.out;
  }
  EXPECT_NE(r.out.find("ETA: about "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("an estimate"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nothing was run"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("elapsed"), std::string::npos) << "no point ran: " << r.err;
  EXPECT_FALSE(std::filesystem::exists(out.parent_path())) << "nothing created";

  // Each term of the estimate in turn, one point each.
  struct Case {
    std::string args, eta;
  };
  for (const Case& c : std::vector<Case>{
           // 4 MB of KV: 0.4 ms a sample, 10 of them, below the min time: 2 s x 2 points
           {"--batch 1,2 --context 1024 --min-samples 10 --min-time 2 --timeout 10",
            "ETA: about 4.00 s "},
           // a million samples would take 400 s: the timeout caps it
           {"--batch 1 --context 1024 --min-samples 1000000 --min-time 0 --timeout 3",
            "ETA: about 3.00 s "},
           // 1074856192 bytes (KV, q, out, tables) per step: 0.107 s a sample, 10 of them
           {"--batch 64 --context 4096 --min-samples 10 --min-time 0 --timeout 100",
            "ETA: about 1.07 s "},
           // 3 points at their 100 s timeout
           {"--batch 1,2,3 --context 1024 --min-samples 1000000 --min-time 0 --timeout 100",
            "ETA: about 5 min 0 s "},
       }) {
    const CliResult p = run_cli(base + c.args, dir.path());
    ASSERT_EQ(p.code, 0) << c.args << "\n" << p.err;
    EXPECT_NE(p.out.find(c.eta), std::string::npos) << c.args << "\n" << p.out;
  }
  // Bad input is still bad input.
  EXPECT_EQ(run_cli(base + "--batch 0", dir.path()).code, 2);
  // The help says the ETA is an estimate.
  const CliResult help = run_cli("sweep --help", dir.path());
  EXPECT_NE(help.out.find("--plan"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("estimate"), std::string::npos) << help.out;
}

// The ETA's samples: max(min samples, min time / step) (the stopping rule's min time counts
// measured step time only), each costing the step and what makes it cold: a rotation point's
// paired read of one copy, a flush point's read of >= 2x the last-level cache (>= 64 MiB). With
// 100 samples of a 4.2 MB step at the fake 1e10 B/s the flush's read dominates.
TEST(CliSweep, PlanEtaCountsWhatMakesSamplesCold) {
  TempDir dir;
  const std::filesystem::path ceilings = fake_cpu_ceilings(dir);
  const std::string args = fmt::format(
      "sweep --backend cpu --plan --ceilings '{}' --out '' --batch 1 --context 1024 "
      "--min-samples 100 --min-time 0 --timeout 1000",
      ceilings.string());
  const auto eta_s = [](const std::string& out) {
    const std::size_t at = out.find("ETA: about ");
    if (at == std::string::npos) return -1.0;
    std::istringstream in(out.substr(at + 11));
    double v = 0;
    std::string unit;
    in >> v >> unit;
    return unit == "ms" ? v / 1e3 : unit == "s" ? v : -1.0;
  };
  const auto run_with_cap = [&](const char* cap) {
    ::setenv("DECODEBENCH_CPU_ROTATION_CAP_BYTES", cap, 1);
    const CliResult r = run_cli(args, dir.path());
    ::unsetenv("DECODEBENCH_CPU_ROTATION_CAP_BYTES");
    return r;
  };
  // Rotation (a cap no point reaches): 100 x (4210948 step bytes + 4203012 of one copy) / 1e10.
  const CliResult rotation = run_with_cap("1125899906842624");
  ASSERT_EQ(rotation.code, 0) << rotation.err;
  EXPECT_NE(rotation.out.find("cold samples: 1 by rotation"), std::string::npos) << rotation.out;
  EXPECT_NE(rotation.out.find("ETA: about 84.1 ms "), std::string::npos) << rotation.out;
  // The flush (cap 0): each sample also reads >= 64 MiB.
  const CliResult flush = run_with_cap("0");
  ASSERT_EQ(flush.code, 0) << flush.err;
  EXPECT_NE(flush.out.find("cold samples: 1 by a cache flush"), std::string::npos) << flush.out;
  EXPECT_GE(eta_s(flush.out), 100 * (4210948.0 + 67108864.0) / 1e10 * 0.999) << flush.out;
  // min time, not min samples x sample: 0.2 s of 0.42 ms steps is 475 samples.
  const CliResult long_min =
      run_cli(fmt::format("sweep --backend cpu --plan --warm --ceilings '{}' --out '' --batch 1 "
                          "--context 1024 --min-samples 10 --min-time 0.2 --timeout 1000",
                          ceilings.string()),
              dir.path());
  ASSERT_EQ(long_min.code, 0) << long_min.err;
  EXPECT_NE(long_min.out.find("ETA: about 200 ms "), std::string::npos) << long_min.out;
}

TEST(CliSweep, ConfigFileThenFlagsOverrideItsAxes) {
  TempDir dir;
  const std::filesystem::path ceilings = fake_cpu_ceilings(dir);
  write_file(dir / "sweep.json", R"({"batch": [1, 2, 3], "context": [20], "seed": 5,
                                     "measure": {"min_samples": 2, "min_time_s": 0, "timeout_s": 0.2}})");
  const std::filesystem::path out = dir / "r.json";
  const CliResult r = run_cli(
      fmt::format("sweep --backend cpu --config '{}' --batch 4 --ceilings '{}' --out '{}' -q",
                  (dir / "sweep.json").string(), ceilings.string(), out.string()),
      dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const json report = read_json(out);
  ASSERT_EQ(report.at("results").size(), 1u);  // --batch 4 replaced [1, 2, 3]
  EXPECT_EQ(report.at("results")[0].at("batch"), 4);
  EXPECT_EQ(report.at("config").at("seed"), 5);  // the rest from the file
  EXPECT_EQ(report.at("config").at("context")[0], 20);
}

// `--scope attention,layer` with the q dtype left out runs both scopes: the layer with its bf16
// weights' activations, the attention with f16 (before, the layer point was skipped for f16
// activations). A q dtype given is kept, and the layer that cannot take it is skipped with why.
TEST(CliSweep, LayerScopeRunsWithTheDefaultQDtype) {
  TempDir dir;
  const std::filesystem::path ceilings = fake_cpu_ceilings(dir);
  write_file(dir / "tiny-layer.json",
             R"({"name": "tiny-layer", "num_q_heads": 4, "num_kv_heads": 2, "head_dim": 64,
                 "num_layers": 2, "hidden_size": 128, "intermediate_size": 192,
                 "vocab_size": 300})");
  const std::string base = fmt::format(
      "sweep --backend cpu --scope attention,layer --model '{}' --batch 2 "
      "--context 20 {} --ceilings '{}' --out '' --format json -q",
      (dir / "tiny-layer.json").string(), kFastMeasure, ceilings.string());

  const CliResult r = run_cli(base, dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const json report = json::parse(r.out);
  EXPECT_EQ(report.at("config").at("q_dtype"), json::array({"auto"}));
  const json& results = report.at("results");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].at("scope"), "attention");
  EXPECT_EQ(results[0].at("q_dtype"), "f16");
  EXPECT_EQ(results[0].at("status"), "ok") << results[0].dump();
  EXPECT_EQ(results[1].at("scope"), "layer");
  EXPECT_EQ(results[1].at("q_dtype"), "bf16");
  // A CPU without a bf16 GEMM skips the layer for that, never for its activations.
  if (results[1].at("status") != "ok") {
    EXPECT_EQ(results[1].at("status"), "skipped") << results[1].dump();
    EXPECT_EQ(results[1].at("reason").get<std::string>().find("--q-dtype"), std::string::npos)
        << results[1].dump();
  }

  const CliResult named = run_cli(base + " --q-dtype f16", dir.path());
  ASSERT_EQ(named.code, 0) << named.err;
  const json n = json::parse(named.out);
  EXPECT_EQ(n.at("config").at("q_dtype"), json::array({"f16"}));
  ASSERT_EQ(n.at("results").size(), 2u);
  const json& layer = n.at("results")[1];
  EXPECT_EQ(layer.at("q_dtype"), "f16");
  EXPECT_EQ(layer.at("status"), "skipped");
  EXPECT_NE(layer.at("reason").get<std::string>().find("bf16 weights need bf16 activations"),
            std::string::npos)
      << layer.dump();
  EXPECT_NE(layer.at("reason").get<std::string>().find("--q-dtype bf16"), std::string::npos);
}

TEST(CliSweep, ShardsMergeAndCompare) {
  TempDir dir;
  const std::filesystem::path ceilings = fake_cpu_ceilings(dir);
  const std::string base =
      fmt::format("sweep --backend cpu --batch 1,2 --context 17,33 {} --ceilings '{}' -q",
                  kFastMeasure, ceilings.string());
  for (int i = 0; i < 2; ++i) {
    const CliResult r = run_cli(fmt::format("{} --shard {}/2 --out '{}'", base, i,
                                            (dir / fmt::format("s{}.json", i)).string()),
                                dir.path());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(read_json(dir / fmt::format("s{}.json", i)).at("results").size(), 2u);
  }
  const std::string shards =
      fmt::format("'{}' '{}'", (dir / "s0.json").string(), (dir / "s1.json").string());
  const CliResult m =
      run_cli(fmt::format("merge --out '{}' {}", (dir / "all.json").string(), shards), dir.path());
  ASSERT_EQ(m.code, 0) << m.err;
  const json merged = read_json(dir / "all.json");
  ASSERT_EQ(merged.at("results").size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(merged.at("results")[i].at("index"), i);
  // The output named as every other command names it (--out); the form before it, OUT first,
  // still merges the same points; one file alone names the missing --out.
  const CliResult old =
      run_cli(fmt::format("merge '{}' {}", (dir / "old.json").string(), shards), dir.path());
  ASSERT_EQ(old.code, 0) << old.err;
  EXPECT_EQ(read_json(dir / "old.json").at("results"), merged.at("results"));
  const CliResult lone =
      run_cli(fmt::format("merge {}", shards.substr(0, shards.find(' '))), dir.path());
  EXPECT_EQ(lone.code, 2) << lone.err;
  EXPECT_NE(lone.err.find("--out"), std::string::npos) << lone.err;

  // Against itself: no regression.
  const std::string all = (dir / "all.json").string();
  const CliResult same = run_cli(fmt::format("compare '{}' '{}'", all, all), dir.path());
  EXPECT_EQ(same.code, 0) << same.out << same.err;

  // (Two samples a point cannot show a slowdown significant: cli_compare_test.cpp plants one
  // in fabricated samples.)
  // Planted wrong result: fails the gate too.
  json wrong = merged;
  wrong["results"][1]["status"] = "wrong";
  wrong["results"][1]["reason"] = "planted";
  write_file(dir / "wrong.json", wrong.dump());
  const CliResult w =
      run_cli(fmt::format("compare '{}' '{}'", all, (dir / "wrong.json").string()), dir.path());
  EXPECT_EQ(w.code, 1) << w.out << w.err;
}

TEST(CliSweep, CtrlCKeepsFinishedPoints) {
  TempDir dir;
  const std::filesystem::path ceilings = fake_cpu_ceilings(dir);
  const std::filesystem::path out = dir / "r.json";
  // Every point samples for >= 0.3 s, so after the first point is checkpointed there is time to
  // interrupt before the sixth point ends.
  const std::string sweep = fmt::format(
      "'{}' sweep --backend cpu --batch 1,2,3,4,5,6 --context 17 --min-samples 2 --min-time 0.3 "
      "--max-noise 1 --timeout 5 --warm --ceilings '{}' --out '{}' -q",
      DECODEBENCH_BIN, ceilings.string(), out.string());
  // A script file, so that $pid and $? belong to the shell that runs it.
  write_file(dir / "ctrl_c.sh",
             fmt::format("{} & pid=$!\n"
                         "while ! grep -qs '\"points_finished\": [1-9]' '{}' && kill -0 $pid "
                         "2>/dev/null; do sleep 0.02; done\n"
                         "kill -INT $pid\nwait $pid\necho $? > '{}'\n",
                         sweep, out.string(), (dir / "rc").string()));
  ASSERT_EQ(
      std::system(fmt::format("sh '{}' >/dev/null 2>&1", (dir / "ctrl_c.sh").string()).c_str()), 0);
  EXPECT_EQ(std::stoi(read_file(dir / "rc")), 130);
  const json report = read_json(out);
  const int done = report.at("completion").at("points_finished");
  EXPECT_GE(done, 1);
  EXPECT_LT(done, 6);
  EXPECT_EQ(report.at("completion").at("state"), "interrupted") << report.at("completion").dump();
  ASSERT_EQ(report.at("results").size(), 6u);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(report.at("results")[i].at("status"), i < done ? "ok" : "not_run") << i;
}

// ------------------------------------------------------------------------------- info commands

TEST(CliInfo, KernelsListsTheLadder) {
  TempDir dir;
  const CliResult r = run_cli("kernels", dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s :
       {"naive", "idea:", "head_dim:", "kv dtypes:", "block sizes:", "GQA group:", "cpu", "emu"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  const CliResult j = run_cli("kernels --format json", dir.path());
  ASSERT_EQ(j.code, 0) << j.err;
  const json k = json::parse(j.out);
  ASSERT_FALSE(k.at("ladder").empty());
  EXPECT_EQ(k.at("ladder")[0].at("name"), "naive");
  EXPECT_FALSE(k.at("backends").at("emu").empty());
}

TEST(CliInfo, DevicesListsBackendsAndDatasheets) {
  TempDir dir;
  const CliResult r = run_cli("devices", dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s :
       {"cpu", "emu", "h100-sxm", "h200", "4.80 TB/s", "3.35 TB/s", "H100 80GB HBM3"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
}

// ------------------------------------------------------------------------------- dump

TEST(CliDump, CpuDumpRecomputesWithNumpySemantics) {
  TempDir dir;
  const std::filesystem::path ceilings = fake_cpu_ceilings(dir);
  // fp8 KV so the scales matter: stored values are dumped unscaled, meta carries the scales.
  write_file(dir / "tiny.json",
             R"({"name":"tiny","num_q_heads":4,"num_kv_heads":2,"head_dim":64,"num_layers":1})");
  const CliResult r = run_cli(
      fmt::format("sweep --backend cpu --model '{}' --batch 3 --context 20-45 --hit-rate 0.5 "
                  "--block-size 8 --kv-dtype fp8_e4m3 --seed 11 {} --ceilings '{}' --out '' "
                  "--dump '{}' -q",
                  (dir / "tiny.json").string(), kFastMeasure, ceilings.string(),
                  (dir / "dump").string()),
      dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const json meta = read_json(dir / "dump" / "meta.json");
  EXPECT_EQ(meta.at("kv_dtype"), "fp8_e4m3");
  EXPECT_NE(meta.at("k_scale").get<double>(), 1.0);
  EXPECT_EQ(meta.at("seed"), 11);
  EXPECT_EQ(meta.at("hit_rate"), 0.5);
  EXPECT_GT(meta.at("hit_rate_actual").get<double>(), 0);
  expect_valid_dump(dir / "dump", "cpu", 3, 2e-2);
}

// An MLA point (the deepseek-v2-lite preset: 16 heads over one 576-wide latent) dumps no
// v_cache, an output kv_lora_rank wide and the model's own softmax scale, and recomputes from the
// files alone with V as the first kv_lora_rank values of each K row.
TEST(CliDump, MlaDumpHasTheLatentCacheAndTheModelsScale) {
  TempDir dir;
  const std::filesystem::path ceilings = fake_cpu_ceilings(dir);
  const CliResult r = run_cli(
      fmt::format("sweep --backend cpu --model deepseek-v2-lite --batch 2 --context 40-90 "
                  "--hit-rate 0.5 --block-size 16 --kv-dtype bf16 --seed 5 {} --ceilings '{}' "
                  "--out '' --dump '{}' -q",
                  kFastMeasure, ceilings.string(), (dir / "dump").string()),
      dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const json meta = read_json(dir / "dump" / "meta.json");
  EXPECT_EQ(meta.at("attention"), "mla");
  EXPECT_EQ(meta.at("kv_lora_rank"), 512);
  EXPECT_EQ(meta.at("qk_rope_head_dim"), 64);
  EXPECT_EQ(meta.at("num_kv_heads"), 1);
  EXPECT_EQ(meta.at("head_dim"), 576);
  // DeepSeek's scale (YaRN mscale^2 / sqrt(192)), not 1 / sqrt(576).
  EXPECT_NEAR(meta.at("softmax_scale").get<double>(), 0.1147214, 1e-6);
  expect_valid_dump(dir / "dump", "cpu", 2, 2e-2);
}

// The links a KV cache's tiers cross, from configs/devices.json, each direction named and
// labelled as datasheet (this build measures no link).
TEST(Cli, CeilingsListTheLinksAsDatasheetRows) {
  TempDir dir;
  const CliResult table = run_cli("ceilings --backend emu", dir.path());
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("link        pcie-gen5-x16 (PCIe 5.0 x16): to device 63.0 GB/s"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("(datasheet, not measured)"), std::string::npos) << table.out;
  const CliResult j = run_cli("ceilings --backend emu --format json", dir.path());
  ASSERT_EQ(j.code, 0) << j.err;
  const json links = json::parse(j.out).at("links");
  ASSERT_GE(links.size(), 5u);
  for (const json& l : links) {
    EXPECT_EQ(l.at("kind"), "datasheet");
    EXPECT_GT(l.at("to_device_Bps").get<double>(), 0);
    EXPECT_GT(l.at("to_host_Bps").get<double>(), 0);
  }
}

}  // namespace
}  // namespace decodebench::testing
