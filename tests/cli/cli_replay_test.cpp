// `decodebench replay` run as a subprocess (cli_run.h) on the committed Mooncake slice, small:
// a few requests, attention scope, short timing. The table and the report's replay section,
// --config taking option values with the command line winning, and bad input (exit 2 naming the
// option) before anything is measured.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "cli/cli_run.h"

namespace decodebench::testing {
namespace {

using nlohmann::json;

const std::string kSlice = std::string(DECODEBENCH_TRACES) + "/mooncake-conversation-2k.jsonl";
// Small and quick: 12 requests, the attention alone, two samples per step.
const std::string kSmall =
    " --backend cpu --max-requests 12 --scope attention --sample-steps 2"
    " --min-samples 2 --min-time 0 --timeout 1 --warm --kv-pool 4e9 -q";

// The measured steps' roofline against made-up ceilings: skips their ~10 s measurement.
std::string ceilings(const TempDir& dir) {
  return " --ceilings '" + fake_cpu_ceilings(dir).string() + "'";
}

TEST(CliReplay, TableAndReportOnTheCommittedSlice) {
  TempDir dir;
  const std::string out = (dir / "replay.json").string();
  const CliResult r =
      run_cli("replay --trace '" + kSlice + "'" + kSmall + ceilings(dir) +
                  " --kernel cpu,cascade --policy lru,ttl --ttl 60 --out '" + out + "'",
              dir.path());
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  for (const char* col : {"kv pool GB", "policy", "hit rate", "evicted", "PFLOP saved",
                          "KV MB/step p50", "shareable", "tok/s modeled", "tok/s measured"}) {
    EXPECT_NE(r.out.find(col), std::string::npos) << col << "\n" << r.out;
  }
  const json report = json::parse(read_file(out));
  EXPECT_EQ(report.at("completion").at("state"), "complete");
  const json& settings = report.at("replay").at("settings");
  ASSERT_EQ(settings.size(), 2u);  // lru, ttl 60
  EXPECT_EQ(settings[1].at("setting").at("ttl_s").get<double>(), 60);
  EXPECT_EQ(report.at("results").size(), 2u * 2u * 2u);  // settings x kernels x steps
  for (const json& p : report.at("results")) EXPECT_EQ(p.at("status"), "ok") << p.dump();
  for (const json& cell : settings) {
    for (const json& k : cell.at("kernels")) {
      EXPECT_GT(k.at("measured").at("tokens_per_s").get<double>(), 0) << k.dump();
    }
  }
  // `decodebench report` reads it back like any report.
  const CliResult back = run_cli("report '" + out + "'", dir.path());
  EXPECT_EQ(back.code, 0) << back.err;
  EXPECT_NE(back.out.find("tok/s measured"), std::string::npos) << back.out;  // its table too
}

TEST(CliReplay, ConfigFileTakesOptionsAndTheCommandLineWins) {
  TempDir dir;
  const std::string config = (dir / "replay.json").string();
  {
    std::ofstream f(config);
    f << json{{"trace", kSlice},    {"kv_pool", json::array({2e9, 4e9})},
              {"kernel", "cpu"},    {"policy", "lru"},
              {"max-requests", 12}, {"out", (dir / "from-config.json").string()}}
             .dump();
  }
  const CliResult r = run_cli(
      "replay --config '" + config + "'" + kSmall + ceilings(dir) + " --format json", dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const json replay = json::parse(r.out);
  // --kv-pool 4e9 on the command line wins over the file's two pools.
  ASSERT_EQ(replay.at("settings").size(), 1u);
  EXPECT_EQ(replay.at("settings")[0].at("setting").at("kv_pool_bytes").get<double>(), 4e9);
  EXPECT_TRUE(std::filesystem::exists(dir / "from-config.json"));

  {
    std::ofstream f(config);
    f << json{{"trace", kSlice}, {"kv_pol", 4e9}}.dump();
  }
  const CliResult bad = run_cli("replay --config '" + config + "'" + kSmall, dir.path());
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("unknown key 'kv_pol'"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("kv-pool"), std::string::npos) << bad.err;  // the valid keys listed
}

// Replay has no --q-dtype: the activations are the weights' 16-bit type (bf16 with fp8 weights),
// so f16 weights get f16 activations, which their layer step takes, not bf16.
TEST(CliReplay, ActivationsFollowSixteenBitWeights) {
  TempDir dir;
  const std::string out = (dir / "replay.json").string();
  for (const auto& [weights, q] : {std::pair<std::string, std::string>{"f16", "f16"},
                                   {"bf16", "bf16"},
                                   {"fp8_e4m3", "bf16"}}) {
    const CliResult r =
        run_cli("replay --trace '" + kSlice + "'" + kSmall + ceilings(dir) +
                    " --kernel cpu --weights-dtype " + weights + " --out '" + out + "'",
                dir.path());
    ASSERT_EQ(r.code, 0) << weights << "\n" << r.err;
    const json report = json::parse(read_file(out));
    EXPECT_EQ(report.at("config").at("q_dtype"), q) << weights;
    for (const json& p : report.at("results")) EXPECT_EQ(p.at("q_dtype"), q) << weights;
  }
}

// Each measured step is reported as the sweep reports a point: "[k/N] elapsed ..., ETA ..." and
// its status with the sweep's marks (here ok*: the stopping rule's timeout cut it short).
TEST(CliReplay, ProgressIsTheSweepsLineWithItsMarks) {
  TempDir dir;
  const CliResult r = run_cli(
      "replay --trace '" + kSlice +
          "' --backend cpu --kernel cpu --max-requests 12 --scope attention --sample-steps 2 "
          "--min-samples 1000000 --min-time 0 --timeout 0.2 --warm --kv-pool 4e9 --out ''" +
          ceilings(dir),
      dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("[1/2] elapsed "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[2/2] elapsed "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" b=1 ctx="), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": ok*"), std::string::npos) << r.err;
}

// A host tier behind a small pool, priced on a PCIe link with both reload policies, and the
// prompts' KV arriving from a prefill node: the first 200 requests of the slice put blocks in the
// host tier and find some of them again.
TEST(CliReplay, HostTierAndPrefillLink) {
  TempDir dir;
  const std::string out = (dir / "tiers.json").string();
  const CliResult r =
      run_cli("replay --trace '" + kSlice +
                  "' --backend cpu --max-requests 200 --scope attention"
                  " --sample-steps 1 --min-samples 2 --min-time 0 --timeout 1 --warm"
                  " --kv-pool 4e9 -q --kernel cpu"
                  " --host-capacity 1e6 --link pcie-gen5-x16"
                  " --reload-policy always,never --prefill-link rdma-400g"
                  " --link-overhead 1e-5" +
                  ceilings(dir) + " --out '" + out + "'",
              dir.path());
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  for (const char* col : {"host tokens", "HBM hits", "host hits", "to HBM GB", "busy to host",
                          "prefill link", "binds", "link wait p99 s", "TTFT p50 s"}) {
    EXPECT_NE(r.out.find(col), std::string::npos) << col << "\n" << r.out;
  }
  const json report = json::parse(read_file(out));
  EXPECT_EQ(report.at("config").at("prefill_link"), "rdma-400g");
  const json& settings = report.at("replay").at("settings");
  ASSERT_EQ(settings.size(), 2u);  // always, never
  for (const json& cell : settings) {
    const json& set = cell.at("setting");
    const json& s = cell.at("schedule");
    EXPECT_EQ(set.at("link"), "pcie-gen5-x16");
    const json& t = s.at("tiers");
    EXPECT_EQ(t.at("host_capacity_tokens").get<double>(), 1e6 - static_cast<int>(1e6) % 512);
    const double hbm = t.at("hit_rate_by_tier").at("hbm").get<double>();
    const double host = t.at("hit_rate_by_tier").at("host").get<double>();
    EXPECT_GT(host, 0) << t.dump();
    EXPECT_NEAR(hbm + host, s.at("hit_rate").get<double>(), 1e-12);
    EXPECT_GT(t.at("blocks").at("demoted").get<double>(), 0);
    EXPECT_GT(t.at("link_bytes").at("to_host").get<double>(), 0);
    if (set.at("reload_policy") == "always") {
      EXPECT_GT(t.at("reloads").get<double>(), 0);
      EXPECT_EQ(t.at("recomputed_tokens").get<double>(), 0);
      EXPECT_GT(t.at("link_bytes").at("to_hbm").get<double>(), 0);
    } else {
      EXPECT_EQ(t.at("reloads").get<double>(), 0);
      EXPECT_GT(t.at("recomputed_tokens").get<double>(), 0);
      EXPECT_EQ(t.at("link_bytes").at("to_hbm").get<double>(), 0);
    }
    const json& pl = s.at("prefill_link");
    EXPECT_GT(pl.at("bytes").get<double>(), 0);
    EXPECT_TRUE(pl.at("binds") == "link" || pl.at("binds") == "hbm") << pl.dump();
    EXPECT_EQ(s.at("modeled").at("prefill_s").get<double>(), 0);  // all on the prefill node
    EXPECT_GT(s.at("link_wait_s").at("p50").get<double>(), 0);
    EXPECT_GE(s.at("ttft_s").at("p50").get<double>(), s.at("link_wait_s").at("p50").get<double>());
  }
}

TEST(CliReplay, BadInputExitsTwoNamingTheOption) {
  TempDir dir;
  const std::string trace = " --trace '" + kSlice + "'";
  struct Case {
    std::string args, says;
  };
  const Case cases[] = {
      {"replay --backend cpu", "--trace"},
      {"replay --trace '" + (dir / "missing.jsonl").string() + "'", "missing.jsonl"},
      {"replay" + trace + kSmall + " --kv-pool lots", "--kv-pool"},
      {"replay" + trace + kSmall + " --policy mru", "mru"},
      {"replay" + trace + kSmall + " --ttl -5 --policy ttl", "--ttl"},
      {"replay" + trace + kSmall + " --kv-dtype f64", "f64"},
      {"replay" + trace + kSmall + " --kernel flash", "flash"},
      {"replay" + trace + kSmall + " --schedule-device tpu", "tpu"},
      {"replay" + trace + kSmall + " --rate-scale 0", "--rate-scale"},
      {"replay" + trace + kSmall + " --block-size 24", "--block-size"},
      {"replay" + trace + kSmall + " --sample-steps 0", "--sample-steps"},
      {"replay" + trace + kSmall + " --format yaml", "yaml"},
      {"replay" + trace + kSmall + " --model no-such-model", "no-such-model"},
      {"replay" + trace + kSmall + " --host-capacity -1", "--host-capacity"},
      {"replay" + trace + kSmall + " --link pcie-gen5-x16", "add --host-capacity"},
      {"replay" + trace + kSmall + " --host-capacity 1e6 --reload-policy never", "needs a --link"},
      {"replay" + trace + kSmall + " --host-capacity 1e6 --link pcie-gen9", "pcie-gen9"},
      {"replay" + trace + kSmall +
           " --host-capacity 1e6 --link pcie-gen5-x16 --reload-policy maybe",
       "maybe"},
      {"replay" + trace + kSmall + " --prefill-link carrier-pigeon", "--prefill-link"},
      {"replay" + trace + kSmall + " --link-overhead -1", "--link-overhead"},
  };
  for (const Case& c : cases) {
    const CliResult r = run_cli(c.args, dir.path());
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
  }
}

// Numeric options once checked only after the ceilings were measured (10 s), or never: each is
// refused up front, exit 2 with the option named, nothing measured (no "measuring" line on
// stderr) and no report left behind (a --host-capacity of 1e30 once left one in state running).
TEST(CliReplay, NumericOptionsAreRangeCheckedBeforeAnythingIsMeasured) {
  TempDir dir;
  const std::string out = (dir / "r.json").string();
  // kSmall without -q (the progress lines show whether anything was measured), less the option
  // a case plants its value in: a run the check misses stays short.
  const auto command = [&](const std::string& planted) {
    std::string args = "replay --trace '" + kSlice + "' --backend cpu --scope attention --out '" +
                       out + "'" + planted;
    for (const char* option : {" --max-requests 12", " --sample-steps 2", " --min-samples 2",
                               " --min-time 0", " --timeout 1", " --kv-pool 4e9"}) {
      const std::string flag = std::string(option).substr(0, std::string(option).find(' ', 1));
      if (planted.find(flag + " ") == std::string::npos) args += option;
    }
    return args;
  };
  struct Case {
    std::string args, says;
  };
  const Case cases[] = {
      {" --host-capacity 1e30", "--host-capacity: '1e30'"},
      {" --kv-pool 1e30", "--kv-pool: '1e30'"},
      {" --prefill-rate -5", "--prefill-rate -5"},
      {" --prefill-rate 0", "--prefill-rate 0"},
      {" --prefill-rate inf", "--prefill-rate inf"},
      {" --decode-read-rate nan", "--decode-read-rate nan"},
      {" --decode-read-rate -1e9", "--decode-read-rate -"},
      {" --min-time inf", "--min-time inf"},
      {" --max-noise nan", "--max-noise nan"},
      {" --timeout inf", "--timeout inf"},
      {" --timeout 0", "--timeout 0"},
      {" --min-samples 0", "--min-samples 0"},
      {" --validate-max-rows 0", "--validate-max-rows 0"},
      {" --policy ttl --ttl inf", "--ttl"},
      {" --rate-scale inf", "--rate-scale"},
      {" --max-steps -1", "--max-steps"},
      {" --max-batch 0", "--max-batch"},
      {" --max-requests -1", "max requests"},
      {" --trace-block-tokens 0", "block tokens"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const CliResult r = run_cli(command(c.args), dir.path());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("decodebench: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("measuring"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out));
  }
}

// The shipped operator tables (configs/sweeps/trace*.json, tiers*.json, prefill-link*.json) parse
// and run: their own pools, policies, TTLs, KV dtypes and rate, shrunk by the command line to a
// few requests, one step per setting and the attention alone on the CPU (trace.json names the
// cuda backend and its rungs), of a two-layer model: the configs are under test, not the
// steps, and an 8B model's 1.8 GB of KV per step made this the suite's slowest test.
TEST(CliReplay, ShippedTraceConfigsRun) {
  TempDir dir;
  // The runs read a copy of configs/ that adds the small model (this test process alone; the
  // runs inherit it), and small ceiling buffers instead of GiBs per replay.
  const std::filesystem::path configs = dir / "configs";
  std::filesystem::copy(DECODEBENCH_CONFIGS, configs, std::filesystem::copy_options::recursive);
  json small =
      json::parse(read_file(std::string(DECODEBENCH_CONFIGS) + "/models/llama-3.1-8b.json"));
  small["name"] = "two-layer-test";
  small["num_layers"] = 2;
  small["num_q_heads"] = 8;
  small["num_kv_heads"] = 2;
  small["head_dim"] = 64;
  small["hidden_size"] = 512;
  small["intermediate_size"] = 1024;
  small["vocab_size"] = 1000;
  small["num_params"] = 10000000;
  write_file((configs / "models" / "two-layer-test.json").string(), small.dump());
  ::setenv("DECODEBENCH_CONFIGS", configs.c_str(), 1);
  ::setenv("DECODEBENCH_CEILING_BYTES", "16777216", 1);
  int n = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(DECODEBENCH_CONFIGS) + "/sweeps")) {
    const std::string name = e.path().filename().string();
    const bool replay_config = name.rfind("trace", 0) == 0 || name.rfind("tiers", 0) == 0 ||
                               name.rfind("prefill-link", 0) == 0;
    if (!replay_config || e.path().extension() != ".json") continue;
    ++n;
    const std::string out = (dir / (name + ".out.json")).string();
    // Its trace path is relative to the file: found from the scratch directory too.
    // The configs' settings are parsed and validated whole; the measured steps are cut to the
    // least that still runs every setting (the first steps, one row checked, warm samples).
    const CliResult r = run_cli("replay --config '" + e.path().string() +
                                    "' --model two-layer-test --backend cpu --kernel cpu "
                                    "--max-requests 2 "
                                    "--max-steps 16 --sample-steps 1 --scope attention "
                                    "--validate-max-rows 1 --min-samples 1 --min-time 0 "
                                    "--timeout 0.2 --warm -q" +
                                    ceilings(dir) + " --out '" + out + "'",
                                dir.path());
    ASSERT_EQ(r.code, 0) << name << "\n" << r.err;
    const json report = json::parse(read_file(out));
    EXPECT_GT(report.at("replay").at("settings").size(), 1u) << name;
  }
  EXPECT_GE(n, 5);  // trace, trace-cpu, tiers, tiers-cpu, prefill-link-cpu
}
}  // namespace
}  // namespace decodebench::testing
