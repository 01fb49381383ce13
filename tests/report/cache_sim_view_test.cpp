// cache-sim's document: its reader gives back what the writer wrote (every setting kind: ttl,
// an unbounded cache, a host tier priced on a link), and refuses each way a saved document can
// be wrong, naming the key (what `decodebench report` relies on).
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/datasheet.h"
#include "common/errors.h"
#include "report/cache_sim_view.h"
#include "trace/trace.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

struct SimRun {
  Trace trace;
  ModelShape model;
  std::vector<CacheSimResult> results;
  nlohmann::json doc() const { return cache_sim_json(trace, model, DType::bf16, results); }
};

SimRun every_kind_of_setting() {
  SimRun r;
  r.trace = load_trace((configs_dir() / "traces" / "mooncake-conversation-2k.jsonl").string(),
                       "auto", 512, 300);
  r.model = load_model("llama-3.1-8b");
  std::vector<CacheSimSetting> settings(4);
  settings[0].capacity_tokens = 1e5;
  settings[1].policy = EvictionPolicy::ttl;
  settings[1].capacity_tokens = 1e5;
  settings[1].ttl_s = 60;
  settings[2].capacity_tokens = INFINITY;
  settings[3].capacity_tokens = 1e5;
  settings[3].host_capacity_tokens = 1e6;
  const LinkDatasheet link = link_by_key("pcie-gen5-x16");
  settings[3].link = link.key;
  settings[3].link_to_device = link.to_device;
  settings[3].link_to_host = link.to_host;
  settings[3].link_overhead_s = 1e-5;
  settings[3].prefill_flops = 989e12;
  settings[3].reload = ReloadPolicy::cheaper;
  CacheSimSetting unpriced = settings[3];
  unpriced.link.clear();
  unpriced.reload = ReloadPolicy::always;
  settings.push_back(unpriced);
  r.results = simulate_cache(r.trace, settings, r.model, DType::bf16);
  return r;
}

TEST(CacheSimDocument, ReadsBackWhatWasWritten) {
  const SimRun run = every_kind_of_setting();
  const nlohmann::json j = run.doc();
  const CacheSimDocument d = cache_sim_from_json(j, "c.json");
  ASSERT_EQ(d.settings.size(), run.results.size());
  for (std::size_t i = 0; i < d.settings.size(); ++i) {
    EXPECT_EQ(to_json(d.settings[i]), j.at("settings")[i]) << i;
  }
  EXPECT_EQ(d.trace_source, run.trace.source);
  EXPECT_EQ(d.requests, 300);
  EXPECT_EQ(d.model, "llama-3.1-8b");
  EXPECT_EQ(d.num_layers, 32);
  EXPECT_EQ(d.kv_dtype, "bf16");
  // The views print the same from the document read back as from the run.
  EXPECT_EQ(cache_sim_table_text(d), cache_sim_table_text(cache_sim_document(
                                         run.trace, run.model, DType::bf16, run.results)));
  EXPECT_EQ(cache_sim_csv_text(d.settings), cache_sim_csv_text(run.results));
  const std::string table = cache_sim_table_text(d);
  EXPECT_NE(table.find("over 32 layers"), std::string::npos) << table;
  EXPECT_NE(table.find("pcie-gen5-x16: reloading a host prefix costs"), std::string::npos) << table;
  // A document written before the layer count was recorded still prints, without it.
  nlohmann::json old = j;
  old["model"].erase("num_layers");
  const std::string old_table = cache_sim_table_text(cache_sim_from_json(old, "old.json"));
  EXPECT_EQ(old_table.find("layers"), std::string::npos) << old_table;
}

// A model with windowed layers: the split of the bytes reads back and is printed; a setting with
// a host tier beside it has none.
TEST(CacheSimDocument, WindowedLayersReadBack) {
  SimRun run;
  run.trace = load_trace((configs_dir() / "traces" / "mooncake-conversation-2k.jsonl").string(),
                         "auto", 512, 300);
  run.model = load_model("gpt-oss-20b");
  std::vector<CacheSimSetting> settings(2);
  settings[0].capacity_tokens = 1e5;
  settings[1].capacity_tokens = 1e5;
  settings[1].host_capacity_tokens = 1e6;
  run.results = simulate_cache(run.trace, settings, run.model, DType::bf16);
  const nlohmann::json j = run.doc();
  const CacheSimDocument d = cache_sim_from_json(j, "w.json");
  ASSERT_EQ(d.settings.size(), 2u);
  EXPECT_TRUE(d.settings[0].windowed.modeled);
  EXPECT_FALSE(d.settings[1].windowed.modeled);
  for (std::size_t i = 0; i < d.settings.size(); ++i) {
    EXPECT_EQ(to_json(d.settings[i]), j.at("settings")[i]) << i;
  }
  EXPECT_EQ(d.sliding_window, 128);
  EXPECT_EQ(d.windowed_layers, 12);
  EXPECT_EQ(d.kv_bytes_per_token_full + d.kv_bytes_per_token_windowed, d.kv_bytes_per_token);
  const std::string table = cache_sim_table_text(d);
  EXPECT_NE(table.find("windowed layers: window 128 on 12 of 24"), std::string::npos) << table;
  EXPECT_NE(table.find("windowed GB"), std::string::npos) << table;
  EXPECT_EQ(cache_sim_csv_text(d.settings), cache_sim_csv_text(run.results));
  nlohmann::json bad = j;
  bad["settings"][0]["cache_bytes_by_layer"].erase("windowed");
  try {
    (void)cache_sim_from_json(bad, "w.json");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("settings[0].cache_bytes_by_layer.windowed"),
              std::string::npos)
        << e.what();
  }
}

TEST(CacheSimDocument, EachPlantedFaultIsRefusedByKey) {
  const nlohmann::json good = every_kind_of_setting().doc();
  struct Case {
    const char* name;
    nlohmann::json doc;
    const char* says;
  };
  std::vector<Case> cases;
  const auto planted = [&](const char* name, auto plant, const char* says) {
    nlohmann::json d = good;
    plant(d);
    cases.push_back({name, d, says});
  };
  planted(
      "unknown key", [](auto& d) { d["hit_rates"] = 1; }, "hit_rates");
  planted(
      "no settings", [](auto& d) { d.erase("settings"); }, "settings");
  planted(
      "policy", [](auto& d) { d["settings"][0]["policy"] = "mru"; }, "settings[0].policy");
  planted(
      "capacity", [](auto& d) { d["settings"][0]["capacity_tokens"] = "lots"; },
      "settings[0].capacity_tokens");
  planted(
      "ttl of lru", [](auto& d) { d["settings"][0]["ttl_s"] = 5; }, "settings[0].ttl_s");
  planted(
      "ttl missing", [](auto& d) { d["settings"][1].erase("ttl_s"); }, "settings[1].ttl_s");
  planted(
      "hits", [](auto& d) { d["settings"][2]["hit_tokens"] = 2.5; }, "settings[2].hit_tokens");
  planted(
      "tier", [](auto& d) { d["settings"][3]["tier_blocks"].erase("dropped"); },
      "settings[3].tier_blocks.dropped");
  planted(
      "reload", [](auto& d) { d["settings"][3]["reload_policy"] = "sometimes"; },
      "settings[3].reload_policy");
  planted(
      "link", [](auto& d) { d["settings"][3]["link"]["busy_s"] = 1; }, "settings[3].link.busy_s");
  planted(
      "trade", [](auto& d) { d["settings"][3].erase("trade"); }, "settings[3].trade");
  planted(
      "block tokens", [](auto& d) { d["trace"]["block_tokens"] = 0; }, "trace.block_tokens");
  planted(
      "kv dtype", [](auto& d) { d["kv_dtype"] = "f64"; }, "kv_dtype");
  planted(
      "layers", [](auto& d) { d["model"]["num_layers"] = "32"; }, "model.num_layers");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    try {
      (void)cache_sim_from_json(c.doc, "c.json");
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("c.json"), std::string::npos) << what;
      EXPECT_NE(what.find(c.says), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace decodebench
