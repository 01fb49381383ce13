// `decodebench cache-sim` run as a subprocess (cli_run.h) on the committed Mooncake slice and on
// small traces written here: the table's and the JSON's shape, one setting per combination, the
// --out file, a CSV trace without prefix information, and bad
// input (exit 2 naming the flag).
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/cli_run.h"

namespace decodebench::testing {
namespace {

using nlohmann::json;

const std::string kSlice = std::string(DECODEBENCH_TRACES) + "/mooncake-conversation-2k.jsonl";

TEST(CliCacheSim, TableOnTheCommittedSlice) {
  TempDir dir;
  const CliResult r = run_cli("cache-sim --trace '" + kSlice + "' --policy lru,lfu", dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  // The header names the trace, the model, the KV dtype and the definition.
  EXPECT_NE(r.out.find("mooncake-conversation-2k.jsonl"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2000 requests"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("llama-3.1-8b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("KV bf16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("definition:"), std::string::npos) << r.out;
  for (const char* col :
       {"capacity tokens", "policy", "ttl", "hit rate", "ceiling", "inserted", "evicted", "expired",
        "prefill computed", "saved", "PFLOP saved", "cache GB"}) {
    EXPECT_NE(r.out.find(col), std::string::npos) << col;
  }
  // The default capacities, once per policy: 10 rows, capacities first.
  std::vector<std::string> capacities;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string capacity, policy;
    words >> capacity >> policy;
    if (policy == "lru" || policy == "lfu") capacities.push_back(capacity);
  }
  const std::vector<std::string> defaults = {"100000", "1000000", "3000000", "10000000", "inf"};
  std::vector<std::string> expected = defaults;
  expected.insert(expected.end(), defaults.begin(), defaults.end());
  EXPECT_EQ(capacities, expected) << r.out;
}

// A host tier behind HBM: the slice's hits split by tier, the link bytes each way, and the JSON's
// tier keys only where a setting has the tier; the quantized KV moves fewer bytes.
TEST(CliCacheSim, HostTier) {
  TempDir dir;
  const auto run_json = [&](const std::string& kv) {
    const CliResult r = run_cli("cache-sim --trace '" + kSlice +
                                    "' --capacity 1e5 --host-capacity 0,1e6 --format json "
                                    "--kv-dtype " +
                                    kv,
                                dir.path());
    EXPECT_EQ(r.code, 0) << r.err;
    return json::parse(r.out).at("cache_sim");
  };
  const json j = run_json("bf16");
  const json& settings = j.at("settings");
  ASSERT_EQ(settings.size(), 2u);
  EXPECT_FALSE(settings[0].contains("hit_rate_by_tier"));  // host 0: the single cache
  const json& two = settings[1];
  EXPECT_EQ(two.at("host_capacity_tokens"), 1e6);
  const double hbm = two.at("hit_rate_by_tier").at("hbm").get<double>();
  const double host = two.at("hit_rate_by_tier").at("host").get<double>();
  EXPECT_DOUBLE_EQ(hbm, settings[0].at("hit_rate").get<double>());  // HBM sees the same traffic
  EXPECT_GT(host, 0);
  EXPECT_NEAR(hbm + host, two.at("hit_rate").get<double>(), 1e-12);
  const double block_bytes = 512 * j.at("model").at("kv_bytes_per_token").get<double>();
  EXPECT_DOUBLE_EQ(two.at("link_bytes").at("host_to_hbm").get<double>(),
                   two.at("tier_blocks").at("promoted").get<double>() * block_bytes);
  EXPECT_TRUE(j.at("definitions").contains("tiers"));
  // int4 KV: the same blocks move, at about a third of bf16's bytes.
  const json q = run_json("int4");
  const double ratio = q.at("settings")[1].at("link_bytes").at("host_to_hbm").get<double>() /
                       two.at("link_bytes").at("host_to_hbm").get<double>();
  EXPECT_NEAR(ratio, (96.0 + 80) / 512, 1e-9);  // int4 K + V bytes per token-head at P = 16
  // The table gains the tier columns.
  const CliResult table =
      run_cli("cache-sim --trace '" + kSlice + "' --capacity 1e5 --host-capacity 1e6", dir.path());
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("host hits"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("to HBM GB"), std::string::npos) << table.out;
}

// A link prices each host hit: reload over it or recompute. `never` recomputes every host hit (no
// link bytes to HBM, the tokens computed), `always` reloads them all; `cheaper` picks per request,
// so its prefill saved lies between; the break-even follows from the per-token costs.
TEST(CliCacheSim, LinkPricesReloadAgainstRecompute) {
  TempDir dir;
  const CliResult r = run_cli("cache-sim --trace '" + kSlice +
                                  "' --capacity 1e5 --host-capacity 1e6 --link rdma-200g "
                                  "--reload-policy always,never,cheaper --link-overhead 1e-5 "
                                  "--model llama-2-7b --format json",
                              dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const json settings = json::parse(r.out).at("cache_sim").at("settings");
  ASSERT_EQ(settings.size(), 3u);
  const json &always = settings[0], &never = settings[1], &cheaper = settings[2];
  EXPECT_EQ(always.at("reload_policy"), "always");
  EXPECT_EQ(always.at("recomputed_tokens"), 0);
  EXPECT_GT(always.at("link_bytes").at("host_to_hbm").get<double>(), 0);
  EXPECT_EQ(never.at("link_bytes").at("host_to_hbm").get<double>(), 0.0);
  EXPECT_EQ(never.at("recomputed_tokens"), never.at("hit_tokens_by_tier").at("host"));
  EXPECT_EQ(never.at("prefill_tokens_saved"), never.at("hit_tokens_by_tier").at("hbm"));
  const auto saved = [](const json& s) { return s.at("prefill_tokens_saved").get<double>(); };
  EXPECT_LE(saved(never), saved(cheaper));
  EXPECT_LE(saved(cheaper), saved(always));
  // Per token: llama-2-7b's bf16 KV (524288 B over 32 layers) at 25 GB/s, against 2 x params
  // at the h200's 989.4 TFLOP/s; at 200 Gb/s the reload never pays (21 us > 13.6 us per token).
  const json& trade = always.at("trade");
  EXPECT_NEAR(trade.at("load_per_token_s").get<double>(), 524288.0 / 25e9, 1e-12);
  EXPECT_EQ(trade.at("break_even_tokens"), "inf");
  EXPECT_GT(always.at("link").at("busy_fraction").at("to_hbm").get<double>(), 0);
  // A faster link: reload pays from overhead / (recompute - load) tokens on.
  const CliResult fast = run_cli("cache-sim --trace '" + kSlice +
                                     "' --capacity 1e5 --host-capacity 1e6 --link nvlink-c2c "
                                     "--link-overhead 1e-5 --model llama-2-7b",
                                 dir.path());
  ASSERT_EQ(fast.code, 0) << fast.err;
  EXPECT_NE(fast.out.find("reloading is cheaper from"), std::string::npos) << fast.out;
  EXPECT_NE(fast.out.find("busy to HBM"), std::string::npos) << fast.out;
}

TEST(CliCacheSim, JsonShape) {
  TempDir dir;
  const std::string file = (dir / "sub/cache.json").string();
  const CliResult r = run_cli("cache-sim --trace '" + kSlice +
                                  "' --capacity 1e6,inf --policy lru,ttl --ttl 60,600 "
                                  "--kv-dtype fp8_e4m3 --max-requests 500 --format json --out '" +
                                  file + "'",
                              dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const json out = json::parse(r.out);
  const json j = read_json(file);
  EXPECT_EQ(j.at("cache_sim"), out.at("cache_sim"));
  EXPECT_EQ(j.at("schema_version"), 1);
  EXPECT_EQ(j.at("tool").at("name"), "decodebench");
  EXPECT_TRUE(j.at("created").is_string());
  EXPECT_TRUE(j.at("host").at("cpu").is_string());
  const json& c = j.at("cache_sim");
  EXPECT_EQ(c.at("kv_dtype"), "fp8_e4m3");
  EXPECT_EQ(c.at("model").at("name"), "llama-3.1-8b");
  EXPECT_EQ(c.at("model").at("kv_bytes_per_token"), 65536.0);  // 2 x 8 x 128 x 1 B x 32
  EXPECT_EQ(c.at("trace").at("requests"), 500);
  EXPECT_EQ(c.at("trace").at("block_tokens"), 512);
  EXPECT_EQ(c.at("trace").at("format"), "mooncake");
  EXPECT_EQ(c.at("trace").at("has_prefix_info"), true);
  EXPECT_TRUE(c.at("definitions").is_object());
  // lru x 2 capacities, ttl x 2 ttls x 2 capacities.
  const json& s = c.at("settings");
  ASSERT_EQ(s.size(), 6u);
  std::set<std::string> seen;
  for (const json& x : s) {
    seen.insert(x.at("policy").get<std::string>() + "/" + x.at("ttl_s").dump() + "/" +
                x.at("capacity_tokens").dump());
    EXPECT_LE(x.at("hit_rate").get<double>(), x.at("hit_rate_ceiling").get<double>());
    EXPECT_EQ(x.at("requests"), 500);
    EXPECT_EQ(x.at("prefill_tokens_computed").get<std::int64_t>() +
                  x.at("prefill_tokens_saved").get<std::int64_t>(),
              x.at("input_tokens").get<std::int64_t>());
  }
  EXPECT_EQ(seen, (std::set<std::string>{"lru/null/1000000.0", "lru/null/\"inf\"",
                                         "ttl/60.0/1000000.0", "ttl/60.0/\"inf\"",
                                         "ttl/600.0/1000000.0", "ttl/600.0/\"inf\""}));
  EXPECT_EQ(s[1].at("capacity_blocks"), "inf");
  EXPECT_EQ(s[0].at("capacity_blocks"), 1953);  // floor(1e6 / 512)
  EXPECT_GT(s[1].at("hit_rate").get<double>(), 0);
  EXPECT_DOUBLE_EQ(s[1].at("hit_rate").get<double>(), s[1].at("hit_rate_ceiling").get<double>());
}

// --out names the JSON file as sweep and replay do; the old --json spelling is gone (no
// committed script used it) and is refused as an unknown option.
TEST(CliCacheSim, OutWritesTheJson) {
  TempDir dir;
  const std::string t = "cache-sim --trace '" + kSlice + "' --capacity 1e6 --max-requests 100 ";
  const CliResult out = run_cli(t + "--out '" + (dir / "out.json").string() + "'", dir.path());
  ASSERT_EQ(out.code, 0) << out.err;
  const json settings = read_json(dir / "out.json").at("cache_sim").at("settings");
  ASSERT_EQ(settings.size(), 1u);
  EXPECT_EQ(settings[0].at("capacity_tokens").get<double>(), 1e6);
  const CliResult old = run_cli(t + "--json '" + (dir / "old.json").string() + "'", dir.path());
  EXPECT_EQ(old.code, 2) << old.err;
  EXPECT_NE(old.err.find("--json"), std::string::npos) << old.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "old.json"));
}

TEST(CliCacheSim, CsvOutputAndHandMadeTrace) {
  TempDir dir;
  // Blocks of 4 tokens: a shared first block, then each request's own.
  write_file(dir / "t.jsonl",
             "{\"timestamp\": 0, \"input_length\": 8, \"output_length\": 1, \"hash_ids\": [1, 2]}\n"
             "{\"timestamp\": 1000, \"input_length\": 7, \"output_length\": 1, \"hash_ids\": [1, "
             "3]}\n");
  const CliResult r = run_cli("cache-sim --trace " + (dir / "t.jsonl").string() +
                                  " --trace-block-tokens 4 --capacity inf --format csv",
                              dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')).rfind("policy,capacity_tokens,", 0), 0u) << r.out;
  const std::string row = r.out.substr(r.out.find('\n') + 1);
  // 15 input tokens, 4 of them hit (the second request's first block).
  EXPECT_EQ(row.rfind("lru,inf,inf,,2,15,4,", 0), 0u) << row;
  // A CSV trace has no prefix information: every request misses, and the table says why.
  const CliResult csv = run_cli(
      "cache-sim --trace '" + std::string(DECODEBENCH_TRACES) + "/example-azure-format.csv'",
      dir.path());
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_NE(csv.out.find("no prefix information"), std::string::npos) << csv.out;
}

TEST(CliCacheSim, BadInputNamesTheOption) {
  TempDir dir;
  const std::string t = "--trace '" + kSlice + "' ";
  const std::string out = " --out '" + (dir / "c.json").string() + "'";  // never written
  const std::vector<std::pair<std::string, std::vector<std::string>>> bad = {
      {t + "--capacity 0", {"--capacity", "'0'", "inf"}},
      {t + "--capacity -1e6", {"--capacity", "'-1e6'"}},
      {t + "--capacity lots", {"--capacity", "'lots'"}},
      {t + "--capacity nan", {"--capacity", "'nan'"}},
      {t + "--capacity 1e6,,inf", {"--capacity", "empty item"}},
      {t + "--policy fifo", {"--policy", "'fifo'", "lru, lfu, ttl"}},
      {t + "--policy ttl --ttl 0", {"--ttl", "'0'", "> 0"}},
      {t + "--policy ttl --ttl ''", {"--ttl", "empty item"}},
      {t + "--policy ttl --ttl 60,", {"--ttl", "empty item"}},
      {t + "--policy lru --ttl 60", {"--ttl", "ttl policy only"}},
      {t + "--format md", {"--format", "'md'", "table, csv, json"}},
      {t + "--trace-format parquet", {"--trace-format", "'parquet'", "auto, mooncake, csv"}},
      {t + "--trace-block-tokens 0", {"--trace-block-tokens"}},
      {t + "--max-requests -1", {"--max-requests"}},
      {t + "--kv-dtype int2", {"--kv-dtype", "'int2'"}},
      {t + "--host-capacity -1", {"--host-capacity", "'-1'", ">= 0"}},
      {t + "--host-capacity inf", {"--host-capacity", "'inf'"}},
      // Beyond int64 blocks: once cast to -2^63 blocks.
      {t + "--capacity 1e5 --host-capacity 1e30" + out,
       {"--host-capacity", "'1e30'", "<= 9.0072e+15"}},
      {t + "--policy ttl --ttl inf" + out, {"--ttl", "'inf'", "finite"}},
      {t + "--policy ttl --ttl nan" + out, {"--ttl", "'nan'"}},
      {t + "--capacity inf --host-capacity 1e6", {"--host-capacity", "finite HBM capacity"}},
      {t + "--capacity 1e5 --host-capacity 1e6 --link pcie-gen9",
       {"--link", "'pcie-gen9'", "pcie-gen5-x16"}},
      {t + "--capacity 1e5 --host-capacity 1e6 --link pcie-gen5-x16 --reload-policy sometimes",
       {"--reload-policy", "'sometimes'", "always, never, cheaper"}},
      {t + "--link pcie-gen5-x16", {"--link", "--host-capacity"}},
      {t + "--capacity 1e5 --host-capacity 1e6 --reload-policy cheaper",
       {"--reload-policy", "--link"}},
      {t + "--capacity 1e5 --host-capacity 1e6 --link pcie-gen5-x16 --link-overhead -1",
       {"--link-overhead", ">= 0"}},
      {t + "--capacity 1e5 --host-capacity 1e6 --link pcie-gen5-x16 --device tpu",
       {"--device", "'tpu'"}},
      {t + "--model no-such-model", {"--model", "no-such-model"}},
      {"--trace /nonexistent/trace.jsonl", {"--trace", "/nonexistent/trace.jsonl"}},
      {"--trace '" + kSlice + "' --trace-block-tokens 256", {"--trace", "hash_ids"}},
      {t + "--out /", {"--out", "directory"}},
  };
  for (const auto& [args, messages] : bad) {
    const CliResult r = run_cli("cache-sim " + args, dir.path());
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    for (const std::string& m : messages) {
      EXPECT_NE(r.err.find(m), std::string::npos) << args << ": stderr lacks '" << m << "'\n"
                                                  << r.err;
    }
    EXPECT_EQ(r.err.rfind("decodebench: error: ", 0), 0u) << args << "\n" << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "c.json"));
  // --trace is required.
  const CliResult none = run_cli("cache-sim", dir.path());
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("--trace"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace decodebench::testing
