// cache-sim on hand-made traces: a shared system prompt (the partial last block's rule), a
// multi-turn conversation, eviction and expiry through the replay, the ceiling over settings,
// bad settings, a trace without prefix information, FLOPs, bytes and the JSON's shape.
#include "trace/cache_sim.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/errors.h"
#include "workload/layer_model.h"

namespace decodebench {
namespace {

using Ids = std::vector<std::uint64_t>;

TraceRequest req(double t, int input, Ids ids, int output = 1) {
  TraceRequest r;
  r.arrival_s = t;
  r.input_tokens = input;
  r.output_tokens = output;
  r.hash_ids = std::move(ids);
  return r;
}

Trace make_trace(int block_tokens, std::vector<TraceRequest> requests) {
  Trace t;
  t.source = "hand-made";
  t.format = TraceFormat::mooncake;
  t.block_tokens = block_tokens;
  t.has_prefix_info = true;
  t.requests = std::move(requests);
  return t;
}

// llama-3.1-8b's attention shape and published parameter count.
ModelShape llama8b() {
  ModelShape m;
  m.name = "llama-3.1-8b";
  m.num_q_heads = 32;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.num_layers = 32;
  m.hidden_size = 4096;
  m.intermediate_size = 14336;
  m.vocab_size = 128256;
  m.num_params = 8'030'261'248;
  return m;
}

CacheSimSetting setting(EvictionPolicy p, double tokens, double ttl = 0) {
  CacheSimSetting s;
  s.policy = p;
  s.capacity_tokens = tokens;
  s.ttl_s = ttl;
  return s;
}

CacheSimResult run(const Trace& t, const CacheSimSetting& s) {
  return simulate_cache(t, s, llama8b(), DType::bf16);
}

// Blocks of 4 tokens; a 3-block system prompt (ids 1..3, 12 tokens) then each user's own block.
Trace system_prompt_trace() {
  return make_trace(4, {req(0, 14, {1, 2, 3, 10}),  // last block: 2 tokens
                        req(1, 15, {1, 2, 3, 20}), req(2, 13, {1, 2, 3, 30}),
                        req(3, 14, {1, 2, 3, 10})});  // r0 again: every block hits
}

TEST(CacheSim, SharedSystemPrompt) {
  const Trace t = system_prompt_trace();
  const CacheSimResult r = run(t, setting(EvictionPolicy::lru, kUnboundedTokens));
  EXPECT_EQ(r.requests, 4);
  EXPECT_EQ(r.input_tokens, 14 + 15 + 13 + 14);
  // 0, 12, 12, then min(4 blocks x 4, 14) = 14: the partial last block counts its own tokens.
  EXPECT_EQ(r.hit_tokens, 0 + 12 + 12 + 14);
  EXPECT_DOUBLE_EQ(r.hit_rate, 38.0 / 56.0);
  EXPECT_DOUBLE_EQ(r.hit_rate_ceiling, r.hit_rate);
  EXPECT_EQ(r.capacity_blocks, kUnboundedBlocks);
  EXPECT_EQ(r.blocks.inserted, 6);  // 1, 2, 3, 10, 20, 30
  EXPECT_EQ(r.blocks.evicted, 0);
  EXPECT_EQ(r.blocks.peak_blocks, 6);
  EXPECT_EQ(r.prefill_tokens_saved, 38);
  EXPECT_EQ(r.prefill_tokens_computed, 56 - 38);
}

TEST(CacheSim, MultiTurnConversation) {
  // Turn k's prompt is turn k-1's prompt and answer plus the new message: its ids extend.
  const Trace t = make_trace(
      4, {req(0, 8, {1, 2}, 3), req(10, 15, {1, 2, 3, 4}, 5), req(20, 22, {1, 2, 3, 4, 5, 6}, 2)});
  const CacheSimResult r = run(t, setting(EvictionPolicy::lru, kUnboundedTokens));
  EXPECT_EQ(r.hit_tokens, 0 + 8 + 16);
  EXPECT_EQ(r.input_tokens, 45);
  EXPECT_EQ(r.blocks.inserted, 6);
  // Two blocks of capacity keep the conversation's head: each later turn hits 8 tokens.
  const CacheSimResult small = run(t, setting(EvictionPolicy::lru, 8));
  EXPECT_EQ(small.capacity_blocks, 2);
  EXPECT_EQ(small.hit_tokens, 8 + 8);
  EXPECT_DOUBLE_EQ(small.hit_rate_ceiling, 24.0 / 45.0);
  // A ttl shorter than the gap between turns loses everything (expired, not evicted).
  const CacheSimResult ttl = run(t, setting(EvictionPolicy::ttl, kUnboundedTokens, 5));
  EXPECT_EQ(ttl.hit_tokens, 0);
  EXPECT_EQ(ttl.blocks.expired, 2 + 4);
  EXPECT_EQ(ttl.blocks.evicted, 0);
  // One longer than it keeps all of it.
  EXPECT_EQ(run(t, setting(EvictionPolicy::ttl, kUnboundedTokens, 10.5)).hit_tokens, 24);
}

TEST(CacheSim, CapacityInBlocks) {
  const Trace t = system_prompt_trace();
  // floor(11 / 4) = 2 blocks: the system prompt's first two, 8 tokens per later request.
  const CacheSimResult two = run(t, setting(EvictionPolicy::lru, 11));
  EXPECT_EQ(two.capacity_blocks, 2);
  EXPECT_EQ(two.hit_tokens, 3 * 8);
  EXPECT_EQ(two.cache_bytes, 2 * 4 * kv_bytes_per_token_all_layers(llama8b(), DType::bf16));
  // Under one block: nothing cached.
  const CacheSimResult none = run(t, setting(EvictionPolicy::lru, 3));
  EXPECT_EQ(none.capacity_blocks, 0);
  EXPECT_EQ(none.hit_tokens, 0);
  EXPECT_EQ(none.blocks.inserted, 0);
  // A capacity too large to count is unbounded.
  EXPECT_EQ(run(t, setting(EvictionPolicy::lru, 1e300)).capacity_blocks, kUnboundedBlocks);
}

// Smaller than one request: the request's head survives, its tail goes.
TEST(CacheSim, CapacitySmallerThanARequest) {
  const Trace t = make_trace(4, {req(0, 24, {1, 2, 3, 4, 5, 6}), req(1, 24, {1, 2, 3, 4, 5, 6})});
  const CacheSimResult r = run(t, setting(EvictionPolicy::lru, 12));
  EXPECT_EQ(r.hit_tokens, 12);
  EXPECT_EQ(r.blocks.inserted, 6);
  EXPECT_EQ(r.blocks.evicted, 3);
  EXPECT_EQ(r.blocks.peak_blocks, 3);
}

// lru and lfu part ways when a popular old prefix competes with a recent one-off.
TEST(CacheSim, PoliciesDiffer) {
  std::vector<TraceRequest> q;
  for (int i = 0; i < 4; ++i) q.push_back(req(i, 8, {1, 2}));  // popular, uses 4
  q.push_back(req(10, 8, {7, 8}));                             // one-off, most recent
  q.push_back(req(11, 4, {9}));                                // needs a block
  q.push_back(req(12, 8, {1, 2}));                             // the popular prefix again
  const Trace t = make_trace(4, q);
  const CacheSimResult lru = run(t, setting(EvictionPolicy::lru, 16));
  const CacheSimResult lfu = run(t, setting(EvictionPolicy::lfu, 16));
  // lru: inserting 9 evicts 2 (the least recent, a tail), the last request hits one block (and
  // evicts 8 to put 2 back).
  EXPECT_EQ(lru.hit_tokens, 3 * 8 + 4);
  // lfu: it evicts 8 (one use, the tail of the one-off), the popular prefix hits whole.
  EXPECT_EQ(lfu.hit_tokens, 3 * 8 + 8);
  EXPECT_EQ(lru.blocks.evicted, 2);
  EXPECT_EQ(lfu.blocks.evicted, 1);
}

// A pseudo-random trace of conversations: no setting beats the ceiling; lru at infinity is it.
TEST(CacheSim, CeilingBoundsEverySetting) {
  std::mt19937_64 rng(3);
  std::vector<TraceRequest> q;
  std::vector<int> turns(50, 0);
  for (int i = 0; i < 2000; ++i) {
    const int conv = static_cast<int>(rng() % 50);
    const int blocks = 1 + std::min(++turns[conv], 20);
    Ids ids;
    for (int b = 0; b < blocks; ++b) ids.push_back(std::uint64_t(conv) * 1000 + b);
    q.push_back(req(i * 0.5, blocks * 16 - int(rng() % 16), ids));
  }
  const Trace t = make_trace(16, q);
  std::vector<CacheSimSetting> settings;
  for (double cap : {16.0, 160.0, 1600.0, 16000.0, kUnboundedTokens}) {
    settings.push_back(setting(EvictionPolicy::lru, cap));
    settings.push_back(setting(EvictionPolicy::lfu, cap));
    settings.push_back(setting(EvictionPolicy::ttl, cap, 30));
  }
  const auto results = simulate_cache(t, settings, llama8b(), DType::bf16);
  ASSERT_EQ(results.size(), settings.size());
  const double ceiling = results.front().hit_rate_ceiling;
  EXPECT_GT(ceiling, 0.5);
  for (const CacheSimResult& r : results) {
    EXPECT_DOUBLE_EQ(r.hit_rate_ceiling, ceiling);
    EXPECT_LE(r.hit_rate, ceiling)
        << policy_name(r.setting.policy) << " " << r.setting.capacity_tokens;
    // Nothing is left behind unaccounted: what is cached fits the capacity.
    const std::int64_t cached = r.blocks.inserted - r.blocks.evicted - r.blocks.expired;
    EXPECT_GE(cached, 0);
    EXPECT_LE(cached, r.capacity_blocks);
    EXPECT_LE(r.blocks.peak_blocks, r.capacity_blocks);
    if (r.capacity_blocks == kUnboundedBlocks) {
      EXPECT_EQ(r.blocks.evicted, 0);
    }
    if (r.setting.policy != EvictionPolicy::ttl) {
      EXPECT_EQ(r.blocks.expired, 0);
    }
  }
  EXPECT_DOUBLE_EQ(results[12].hit_rate, ceiling);      // lru, inf
  EXPECT_DOUBLE_EQ(results[13].hit_rate, ceiling);      // lfu, inf: nothing ever evicted
  EXPECT_LT(results[0].hit_rate, results[9].hit_rate);  // capacity helps
  // The single-setting overload computes the same ceiling.
  EXPECT_DOUBLE_EQ(run(t, settings[4]).hit_rate_ceiling, ceiling);
}

TEST(CacheSim, RejectsBadSettings) {
  const Trace t = system_prompt_trace();
  for (double cap : {0.0, -1.0, std::nan("")}) {
    try {
      run(t, setting(EvictionPolicy::lru, cap));
      FAIL() << "capacity " << cap << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("capacity"), std::string::npos) << e.what();
    }
  }
  try {
    run(t, setting(EvictionPolicy::ttl, 100, 0));
    FAIL() << "ttl without ttl_s accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ttl"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run(t, setting(EvictionPolicy::ttl, 100, std::nan(""))), InputError);
  EXPECT_THROW(run(t, setting(EvictionPolicy::ttl, 100, std::numeric_limits<double>::infinity())),
               InputError);
  // A host tier beyond int64 blocks once became -2^63 blocks (undefined behaviour of the cast).
  CacheSimSetting huge_host = setting(EvictionPolicy::lru, 100);
  huge_host.host_capacity_tokens = 1e30;
  try {
    run(t, huge_host);
    FAIL() << "host capacity 1e30 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("host capacity 1e+30 tokens"), std::string::npos)
        << e.what();
  }
  huge_host.host_capacity_tokens = kMaxHostCapacityTokens;
  EXPECT_NO_THROW(run(t, huge_host));
  // One bad setting among good ones fails the whole call.
  EXPECT_THROW(simulate_cache(t, {setting(EvictionPolicy::lru, 8), setting(EvictionPolicy::lfu, 0)},
                              llama8b(), DType::bf16),
               InputError);
  // lru and lfu ignore ttl_s.
  EXPECT_NO_THROW(run(t, setting(EvictionPolicy::lfu, 100, -1)));
}

TEST(CacheSim, TraceWithoutPrefixInformation) {
  Trace t = make_trace(4, {req(0, 10, {}), req(1, 10, {})});
  t.format = TraceFormat::csv;
  t.has_prefix_info = false;
  const CacheSimResult r = run(t, setting(EvictionPolicy::lru, kUnboundedTokens));
  EXPECT_EQ(r.hit_tokens, 0);
  EXPECT_EQ(r.hit_rate, 0);
  EXPECT_EQ(r.hit_rate_ceiling, 0);
  EXPECT_EQ(r.prefill_tokens_computed, 20);
  const nlohmann::json j = cache_sim_json(t, llama8b(), DType::bf16, {r});
  EXPECT_EQ(j["trace"]["has_prefix_info"], false);
  ASSERT_TRUE(j.contains("note"));
  EXPECT_NE(j["note"].get<std::string>().find("no prefix information"), std::string::npos);
  EXPECT_FALSE(cache_sim_json(system_prompt_trace(), llama8b(), DType::bf16, {r}).contains("note"));
}

TEST(CacheSim, FlopsAndBytes) {
  const Trace t = system_prompt_trace();
  ModelShape m = llama8b();
  // 2 x Hkv x d x sizeof(bf16) x layers = 2 x 8 x 128 x 2 x 32.
  EXPECT_EQ(kv_bytes_per_token_all_layers(m, DType::bf16), 131072.0);
  EXPECT_EQ(kv_bytes_per_token_all_layers(m, DType::fp8_e4m3), 65536.0);
  const auto inf = setting(EvictionPolicy::lru, kUnboundedTokens);
  CacheSimResult r = simulate_cache(t, inf, m, DType::bf16);
  EXPECT_DOUBLE_EQ(r.prefill_flops_saved, 2.0 * 8'030'261'248 * 38);
  EXPECT_DOUBLE_EQ(r.cache_bytes, 6 * 4 * 131072.0);  // peak blocks at infinite capacity
  // Without num_params: from the layer shape.
  m.num_params = 0;
  r = simulate_cache(t, inf, m, DType::bf16);
  EXPECT_GT(params_from_shape(m), 0);
  EXPECT_DOUBLE_EQ(r.prefill_flops_saved, 2.0 * params_from_shape(m) * 38);
  // Attention only: no FLOPs to count.
  m.hidden_size = 0;
  r = simulate_cache(t, inf, m, DType::bf16);
  EXPECT_EQ(r.prefill_flops_saved, 0);
  EXPECT_EQ(cache_sim_json(t, m, DType::bf16, {r})["model"]["params_source"], "none");
}

TEST(CacheSim, JsonShape) {
  const Trace t = system_prompt_trace();
  const auto results =
      simulate_cache(t,
                     {setting(EvictionPolicy::lru, 11), setting(EvictionPolicy::ttl, 1e3, 300),
                      setting(EvictionPolicy::lfu, kUnboundedTokens)},
                     llama8b(), DType::fp8_e4m3);
  const nlohmann::json j = cache_sim_json(t, llama8b(), DType::fp8_e4m3, results);
  EXPECT_EQ(j["kv_dtype"], "fp8_e4m3");
  EXPECT_EQ(j["model"]["name"], "llama-3.1-8b");
  EXPECT_EQ(j["model"]["params"], 8'030'261'248);
  EXPECT_EQ(j["model"]["params_source"], "num_params");
  EXPECT_EQ(j["model"]["kv_bytes_per_token"], 65536.0);
  const nlohmann::json& tr = j["trace"];
  EXPECT_EQ(tr["source"], "hand-made");
  EXPECT_EQ(tr["format"], "mooncake");
  EXPECT_EQ(tr["block_tokens"], 4);
  EXPECT_EQ(tr["requests"], 4);
  EXPECT_EQ(tr["span_s"], 3.0);
  EXPECT_EQ(tr["input_tokens"], 56);
  EXPECT_EQ(tr["output_tokens"], 4);
  EXPECT_EQ(tr["has_prefix_info"], true);
  for (const char* k : {"replay", "hit_tokens", "hit_rate", "hit_rate_ceiling", "capacity_blocks",
                        "policies", "prefill_flops_saved", "cache_bytes"}) {
    EXPECT_TRUE(j["definitions"][k].is_string()) << k;
  }
  ASSERT_EQ(j["settings"].size(), 3u);
  const nlohmann::json& s0 = j["settings"][0];
  EXPECT_EQ(s0["policy"], "lru");
  EXPECT_TRUE(s0["capacity_tokens"].is_number());
  EXPECT_EQ(s0["capacity_tokens"], 11.0);
  EXPECT_EQ(s0["capacity_blocks"], 2);
  EXPECT_TRUE(s0["ttl_s"].is_null());
  EXPECT_EQ(s0["hit_tokens"], 24);
  for (const char* k : {"requests", "input_tokens", "hit_tokens", "hit_rate", "hit_rate_ceiling",
                        "prefill_tokens_computed", "prefill_tokens_saved", "prefill_flops_saved",
                        "cache_bytes", "elapsed_s"}) {
    EXPECT_TRUE(s0[k].is_number()) << k;
  }
  for (const char* k : {"inserted", "evicted", "expired", "peak"}) {
    EXPECT_TRUE(s0["blocks"][k].is_number_integer()) << k;
  }
  EXPECT_EQ(j["settings"][1]["policy"], "ttl");
  EXPECT_EQ(j["settings"][1]["ttl_s"], 300.0);
  EXPECT_EQ(j["settings"][2]["capacity_tokens"], "inf");
  EXPECT_EQ(j["settings"][2]["capacity_blocks"], "inf");
  // Round trip through text: nothing a JSON reader would reject (no NaN, no infinity).
  EXPECT_EQ(nlohmann::json::parse(j.dump()), j);
}

}  // namespace
}  // namespace decodebench
