// cache-sim for models with windowed layers (hybrid_cache.h): the window span against the byte
// model, a hand-made trace's stays, peak and bytes worked out by hand, no hit lost against the
// model without windows (random traces, every policy, the presets on the committed slice), every
// block kept being read, and planted faults in the keep plan (a window a block short, a block
// freed one request early, windowed layers kept like full ones) each caught.
#include "trace/hybrid_cache.h"

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "trace/cache_sim.h"
#include "workload/byte_model.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

using Ids = std::vector<std::uint64_t>;

TraceRequest req(double t, int input, Ids ids) {
  TraceRequest r;
  r.arrival_s = t;
  r.input_tokens = input;
  r.output_tokens = 1;
  r.hash_ids = std::move(ids);
  return r;
}

Trace make_trace(int block_tokens, std::vector<TraceRequest> requests) {
  Trace t;
  t.source = "hand-made";
  t.block_tokens = block_tokens;
  t.has_prefix_info = true;
  t.requests = std::move(requests);
  return t;
}

// 4 layers, the even ones windowed; f16 K and V of one head of 8: 32 B per token and layer.
ModelShape tiny(int window) {
  ModelShape m;
  m.name = "tiny";
  m.num_q_heads = 1;
  m.num_kv_heads = 1;
  m.head_dim = 8;
  m.num_layers = 4;
  m.sliding_window = window;
  m.window_local = window > 0 ? 1 : 0;
  m.window_every = window > 0 ? 2 : 0;
  return m;
}
constexpr double kLayerToken = 32;  // B per token and layer

CacheSimSetting setting(EvictionPolicy p, double tokens, double ttl = 0) {
  CacheSimSetting s;
  s.policy = p;
  s.capacity_tokens = tokens;
  s.ttl_s = ttl;
  return s;
}

// Blocks of 4 tokens. r1 repeats r0 (its hit ends at r0's end); r2 diverges from it after two
// blocks (a hit ending at no request's end); r3 repeats r2, whose last block holds 2 tokens, so
// its 10-token hit's window of 4 starts inside block 1 and reads blocks 1 and 2.
Trace hand_trace() {
  return make_trace(4, {req(0, 16, {1, 2, 3, 4}), req(1, 16, {1, 2, 3, 4}), req(2, 10, {1, 2, 5}),
                        req(3, 10, {1, 2, 5})});
}

TEST(WindowSpan, IsTheByteModelsFirstBlockToTheHitsLast) {
  EXPECT_TRUE(window_span(0, 4, 4).empty());
  const auto span = [](std::int64_t n, int w, int b) {
    const WindowSpan s = window_span(n, w, b);
    return fmt::format("{}..{}", s.first, s.last);
  };
  EXPECT_EQ(span(16, 4, 4), "3..3");        // a window ending at a block's end: W / B blocks
  EXPECT_EQ(span(10, 4, 4), "1..2");        // one starting inside a block: one more
  EXPECT_EQ(span(3, 4, 4), "0..0");         // a hit shorter than the window: all of it
  EXPECT_EQ(span(1100, 128, 512), "1..2");  // gpt-oss
  EXPECT_EQ(span(1024, 128, 512), "1..1");
  EXPECT_EQ(span(8192, 4096, 512), "8..15");  // mistral
  EXPECT_EQ(span(8000, 4096, 512), "7..15");
  // What the windowed layers keep for a hit of n tokens is what kv_held holds for a sequence of
  // n tokens in blocks of B: the byte model and cache-sim agree.
  const ModelShape m = tiny(6);
  for (int n = 1; n <= 40; ++n) {
    const KvHeld held = kv_held(m, n, 4, kLayerToken);
    EXPECT_EQ(window_span(n, 6, 4).blocks() * 4 * 2 * kLayerToken, held.windowed_bytes_per_seq)
        << n;
  }
}

TEST(HybridCache, StaysAndNeedsOfAHandTrace) {
  const Trace t = hand_trace();
  const WindowKeepPlan plan = plan_window_keep(t, EvictionPolicy::lru, kUnboundedBlocks, 0, 4);
  // Hits: r1 16 tokens (block 3 read), r2 8 (block 1: id 2), r3 10 (blocks 1, 2: ids 2, 5).
  ASSERT_EQ(plan.stays.size(), 5u);
  const std::vector<std::pair<std::uint64_t, std::int64_t>> needs = {
      {1, -1}, {2, 3}, {3, -1}, {4, 1}, {5, 3}};
  for (std::size_t s = 0; s < needs.size(); ++s) {
    EXPECT_EQ(plan.stays[s].id, needs[s].first) << s;
    EXPECT_EQ(plan.stays[s].last_need, needs[s].second) << s;
  }
  const HybridReplay h = replay_hybrid(t, EvictionPolicy::lru, kUnboundedBlocks, 0, 4, plan);
  EXPECT_EQ(h.full_hit_tokens, 16 + 8 + 10);
  EXPECT_EQ(h.hit_tokens, h.full_hit_tokens);
  // Held between requests: {2, 4}, {2}, {2, 5}, {}.
  EXPECT_EQ(h.windowed_peak, 2);
  EXPECT_EQ(h.windowed_kept, 3);
}

// What cache-sim must print for the hand trace with window 4, worked out by hand ("" if so).
struct Expected {
  std::int64_t hits, held_blocks, peak, kept;
};
std::string hand_mismatch(const CacheSimResult& r, const Expected& e) {
  const double full = static_cast<double>(e.held_blocks) * 4 * 2 * kLayerToken;
  const double windowed = static_cast<double>(e.peak) * 4 * 2 * kLayerToken;
  std::string why;
  const auto check = [&why](const char* what, double got, double want) {
    if (got != want) why += fmt::format("{} {} (want {}); ", what, got, want);
  };
  check("hit tokens", static_cast<double>(r.hit_tokens), static_cast<double>(e.hits));
  check("windowed peak", static_cast<double>(r.windowed.peak_blocks), static_cast<double>(e.peak));
  check("kept", static_cast<double>(r.windowed.kept_blocks), static_cast<double>(e.kept));
  check("full layers' bytes", r.windowed.full_layers_bytes, full);
  check("windowed layers' bytes", r.windowed.windowed_layers_bytes, windowed);
  check("cache bytes", r.cache_bytes, full + windowed);
  check("all layers' bytes", r.windowed.all_layers_bytes, 2 * full);
  return why;
}

TEST(HybridCache, HandTraceBytesAreWhatTheRuleSays) {
  const Trace t = hand_trace();
  // Unbounded: 5 blocks in the full layers, at most 2 in the windowed ones.
  const CacheSimResult inf =
      simulate_cache(t, setting(EvictionPolicy::lru, kUnboundedTokens), tiny(4), DType::f16);
  EXPECT_TRUE(inf.windowed.modeled);
  EXPECT_EQ(hand_mismatch(inf, {34, 5, 2, 3}), "");
  EXPECT_EQ(inf.cache_bytes, 1792.0);  // 5 x 4 x 64 + 2 x 4 x 64
  const CacheSimResult plain =
      simulate_cache(t, setting(EvictionPolicy::lru, kUnboundedTokens), tiny(0), DType::f16);
  EXPECT_FALSE(plain.windowed.modeled);
  EXPECT_EQ(plain.hit_tokens, inf.hit_tokens);
  EXPECT_EQ(plain.cache_bytes, 2560.0);  // every layer holds every block
  EXPECT_EQ(plain.cache_bytes - inf.cache_bytes, 3 * 4 * 2 * kLayerToken);

  // 3 blocks: r0 leaves {1, 2, 3}, r1 finds 12 tokens (reads id 3), r2 evicts 3 for 5; the
  // windowed layers hold {2, 3}, {2}, {2, 5}, {}.
  const CacheSimResult three =
      simulate_cache(t, setting(EvictionPolicy::lru, 12), tiny(4), DType::f16);
  EXPECT_EQ(hand_mismatch(three, {12 + 8 + 10, 3, 2, 3}), "");
  EXPECT_EQ(three.cache_bytes, 1280.0);
  EXPECT_EQ(simulate_cache(t, setting(EvictionPolicy::lru, 12), tiny(0), DType::f16).cache_bytes,
            1536.0);
}

// Planted faults in the keep plan, through the hybrid replay: each is caught.
TEST(HybridCache, PlantedFaultsAreCaught) {
  const Trace t = hand_trace();
  const WindowKeepPlan good = plan_window_keep(t, EvictionPolicy::lru, kUnboundedBlocks, 0, 4);
  const auto replay = [&t](const WindowKeepPlan& plan, int window) {
    return replay_hybrid(t, EvictionPolicy::lru, kUnboundedBlocks, 0, window, plan);
  };
  ASSERT_EQ(replay(good, 4).hit_tokens, 34);

  // One block too many dropped: id 2 freed after r2's lookup, one request before r3 reads it.
  // r3 then finds no run whose window the windowed layers hold: its 10 tokens are lost.
  WindowKeepPlan early = good;
  early.stays[1].last_need = 2;
  EXPECT_EQ(replay(early, 4).hit_tokens, 34 - 10);

  // A window one block short: the plan for 4 tokens replayed by layers of window 8 (r1 reads ids
  // 3 and 4, r3 ids 1, 2 and 5; id 3 and id 1 were freed).
  const WindowKeepPlan wide = plan_window_keep(t, EvictionPolicy::lru, kUnboundedBlocks, 0, 8);
  EXPECT_EQ(replay(wide, 8).hit_tokens, 34);
  const HybridReplay short_window = replay(good, 8);
  EXPECT_LT(short_window.hit_tokens, short_window.full_hit_tokens);

  // Windowed layers counted as full: every block kept until it leaves the cache. Hits are kept,
  // but the bytes are the all-layer bound, not the rule's: the hand check refuses them.
  WindowKeepPlan as_full = good;
  for (BlockStay& s : as_full.stays) s.last_need = 1000;
  const HybridReplay h = replay(as_full, 4);
  EXPECT_EQ(h.hit_tokens, 34);
  CacheSimResult r =
      simulate_cache(t, setting(EvictionPolicy::lru, kUnboundedTokens), tiny(4), DType::f16);
  r.windowed.peak_blocks = h.windowed_peak;
  r.windowed.kept_blocks = h.windowed_kept;
  r.windowed.windowed_layers_bytes = static_cast<double>(h.windowed_peak) * 4 * 2 * kLayerToken;
  r.cache_bytes = r.windowed.full_layers_bytes + r.windowed.windowed_layers_bytes;
  EXPECT_EQ(r.cache_bytes, r.windowed.all_layers_bytes);
  EXPECT_NE(hand_mismatch(r, {34, 5, 2, 3}), "");

  // A plan of another replay is refused, not misread.
  const WindowKeepPlan other = plan_window_keep(t, EvictionPolicy::lru, 3, 0, 4);
  EXPECT_THROW(replay(other, 4), std::logic_error);
}

// Conversations that grow turn by turn, some on a shared system prompt they diverge from.
Trace random_trace(std::uint64_t seed, int block_tokens) {
  std::mt19937_64 rng(seed);
  std::vector<TraceRequest> q;
  std::vector<int> turns(30, 0);
  for (int i = 0; i < 600; ++i) {
    const int conv = static_cast<int>(rng() % 30);
    const int blocks = 1 + std::min(++turns[conv], 12);
    Ids ids;
    const int shared = conv % 3 == 0 ? 3 : 0;  // every third on the system prompt 900..902
    for (int b = 0; b < blocks; ++b) {
      ids.push_back(b < shared ? 900 + b : std::uint64_t(conv) * 1000 + b);
    }
    q.push_back(req(i * 0.5, blocks * block_tokens - int(rng() % block_tokens), ids));
  }
  return make_trace(block_tokens, q);
}

TEST(HybridCache, NoHitIsLostAgainstTheModelWithoutWindows) {
  for (std::uint64_t seed : {1, 2}) {
    const Trace t = random_trace(seed, 4);
    std::vector<CacheSimSetting> settings;
    for (double cap : {8.0, 40.0, 160.0, 640.0, kUnboundedTokens}) {
      settings.push_back(setting(EvictionPolicy::lru, cap));
      settings.push_back(setting(EvictionPolicy::lfu, cap));
      settings.push_back(setting(EvictionPolicy::ttl, cap, 20));
    }
    const std::vector<CacheSimResult> plain = simulate_cache(t, settings, tiny(0), DType::f16);
    for (int window : {1, 3, 4, 5, 8, 13, 64}) {
      const std::vector<CacheSimResult> w = simulate_cache(t, settings, tiny(window), DType::f16);
      for (std::size_t i = 0; i < settings.size(); ++i) {
        SCOPED_TRACE(fmt::format("seed {} window {} {} capacity {}", seed, window,
                                 policy_name(settings[i].policy), settings[i].capacity_tokens));
        EXPECT_EQ(w[i].hit_tokens, plain[i].hit_tokens);
        EXPECT_EQ(w[i].blocks.inserted, plain[i].blocks.inserted);
        EXPECT_EQ(w[i].blocks.evicted, plain[i].blocks.evicted);
        EXPECT_EQ(w[i].windowed.all_layers_bytes, plain[i].cache_bytes);
        EXPECT_LE(w[i].cache_bytes, plain[i].cache_bytes);
        EXPECT_LE(w[i].windowed.peak_blocks, w[i].blocks.peak_blocks);
        EXPECT_EQ(w[i].cache_bytes,
                  w[i].windowed.full_layers_bytes + w[i].windowed.windowed_layers_bytes);
      }
      // A small window keeps strictly less than every block once the cache holds some.
      if (window <= 4) {
        EXPECT_LT(w.back().cache_bytes, plain.back().cache_bytes);
      }
    }
  }
}

// Minimal: freeing any kept block right after its insertion loses a hit.
TEST(HybridCache, EveryKeptBlockIsRead) {
  const Trace t = random_trace(5, 4);
  const WindowKeepPlan plan = plan_window_keep(t, EvictionPolicy::lru, 200, 0, 5);
  const std::int64_t hits = replay_hybrid(t, EvictionPolicy::lru, 200, 0, 5, plan).hit_tokens;
  int checked = 0;
  for (std::size_t s = 0; s < plan.stays.size() && checked < 60; s += 7) {
    if (plan.stays[s].last_need < 0) continue;
    WindowKeepPlan fault = plan;
    fault.stays[s].last_need = -1;
    EXPECT_LT(replay_hybrid(t, EvictionPolicy::lru, 200, 0, 5, fault).hit_tokens, hits) << s;
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

// The presets on the committed conversation slice: same hits, fewer bytes, and the JSON's split.
TEST(HybridCache, PresetsOnTheCommittedSlice) {
  const std::filesystem::path slice = configs_dir() / "traces" / "mooncake-conversation-2k.jsonl";
  const Trace t = load_trace(slice.string(), "auto", 512, 0);
  const std::vector<CacheSimSetting> settings = {setting(EvictionPolicy::lru, 1e5),
                                                 setting(EvictionPolicy::lru, kUnboundedTokens)};
  for (const char* name : {"gpt-oss-20b", "mistral-7b", "gemma-2-9b", "gemma-3-27b"}) {
    SCOPED_TRACE(name);
    const ModelShape m = load_model(name);
    ModelShape full = m;
    full.sliding_window = full.window_local = full.window_every = 0;
    const auto w = simulate_cache(t, settings, m, DType::bf16);
    const auto f = simulate_cache(t, settings, full, DType::bf16);
    for (std::size_t i = 0; i < settings.size(); ++i) {
      EXPECT_EQ(w[i].hit_tokens, f[i].hit_tokens);
      EXPECT_LT(w[i].cache_bytes, f[i].cache_bytes);
      EXPECT_EQ(w[i].windowed.all_layers_bytes, f[i].cache_bytes);
    }
    const nlohmann::json j = cache_sim_json(t, m, DType::bf16, w);
    const nlohmann::json& s = j["settings"][0];
    EXPECT_EQ(s["cache_bytes_by_layer"]["full"].get<double>() +
                  s["cache_bytes_by_layer"]["windowed"].get<double>(),
              s["cache_bytes"].get<double>());
    EXPECT_TRUE(s["windowed_blocks"]["peak"].is_number_integer());
    EXPECT_EQ(j["model"]["sliding_window"], m.sliding_window);
    EXPECT_EQ(j["model"]["windowed_layers"], m.windowed_layers());
    EXPECT_EQ(j["model"]["kv_bytes_per_token_by_layer"]["full"].get<double>() +
                  j["model"]["kv_bytes_per_token_by_layer"]["windowed"].get<double>(),
              j["model"]["kv_bytes_per_token"].get<double>());
    EXPECT_TRUE(j["definitions"]["windowed_layers"].is_string());
    // The model without windows writes none of it.
    const nlohmann::json plain = cache_sim_json(t, full, DType::bf16, f);
    EXPECT_FALSE(plain["model"].contains("sliding_window"));
    EXPECT_FALSE(plain["settings"][0].contains("cache_bytes_by_layer"));
    EXPECT_FALSE(plain["definitions"].contains("windowed_layers"));
  }
}

// With a host tier the windowed layers are not modeled: every layer is counted, as before.
TEST(HybridCache, HostTierCountsEveryLayer) {
  const Trace t = hand_trace();
  CacheSimSetting s = setting(EvictionPolicy::lru, 8);
  s.host_capacity_tokens = 8;
  const CacheSimResult w = simulate_cache(t, s, tiny(4), DType::f16);
  const CacheSimResult f = simulate_cache(t, s, tiny(0), DType::f16);
  EXPECT_FALSE(w.windowed.modeled);
  EXPECT_EQ(w.cache_bytes, f.cache_bytes);
  EXPECT_EQ(w.hit_tokens, f.hit_tokens);
  EXPECT_FALSE(to_json(w).contains("cache_bytes_by_layer"));
}

}  // namespace
}  // namespace decodebench
