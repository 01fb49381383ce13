// The two-tier prefix cache (src/trace/tiered_cache.h) on hand-made traces: promotion, demotion
// and drop order, a prefix split across tiers with its tokens by tier, ttl's expired blocks
// demoted, lfu's victims demoted; the property that total hits equal one LRU of the summed
// capacity (on random traces and the committed conversation slice); cache-sim's tier fields and
// link bytes; bad host capacities.
#include "trace/tiered_cache.h"

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/errors.h"
#include "trace/cache_sim.h"
#include "workload/workload.h"  // configs_dir

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
  t.format = TraceFormat::mooncake;
  t.block_tokens = block_tokens;
  t.has_prefix_info = true;
  t.requests = std::move(requests);
  return t;
}

ModelShape tiny() {
  ModelShape m;
  m.name = "tiny";
  m.num_q_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 64;
  m.num_layers = 2;
  m.num_params = 1000;
  return m;
}

CacheSimSetting tiered(double hbm_tokens, double host_tokens,
                       EvictionPolicy p = EvictionPolicy::lru, double ttl = 0) {
  CacheSimSetting s;
  s.policy = p;
  s.capacity_tokens = hbm_tokens;
  s.host_capacity_tokens = host_tokens;
  s.ttl_s = ttl;
  return s;
}

std::vector<CacheTier> tiers_of(const TieredPrefixCache& c, const Ids& ids) {
  std::vector<CacheTier> t;
  c.lookup(ids, &t);
  return t;
}

// HBM holds 2 blocks, the host 2. Touching 1, 2, 3, 4, 5 one at a time: 1 and 2 are demoted as
// 3 and 4 arrive (1 first, so 2 is the host's most recent), and 5 pushes 3 out of HBM, which
// drops 1, the host's least recent.
TEST(TieredCache, DemotionAndDropOrder) {
  TieredPrefixCache c(EvictionPolicy::lru, 2, 2);
  for (std::uint64_t id = 1; id <= 4; ++id) c.touch(Ids{id}, static_cast<double>(id));
  EXPECT_TRUE(c.hbm().contains(3) && c.hbm().contains(4));
  EXPECT_TRUE(c.in_host(1) && c.in_host(2));
  EXPECT_EQ(c.stats().demoted, 2);
  c.touch(Ids{5}, 5);
  EXPECT_TRUE(c.in_host(3) && c.in_host(2));
  EXPECT_FALSE(c.in_host(1)) << "the host's least recent block is the one dropped";
  EXPECT_EQ(c.stats().dropped, 1);
  EXPECT_EQ(c.lookup(Ids{1}), 0);
}

// A host hit is promoted: it leaves the host tier and becomes HBM's most recent, and HBM's least
// recent is demoted in exchange.
TEST(TieredCache, PromotionSwapsWithHbmsLeastRecent) {
  TieredPrefixCache c(EvictionPolicy::lru, 2, 2);
  for (std::uint64_t id = 1; id <= 3; ++id) c.touch(Ids{id}, static_cast<double>(id));
  ASSERT_TRUE(c.in_host(1));
  EXPECT_EQ(tiers_of(c, Ids{1}), std::vector<CacheTier>{CacheTier::host});
  c.touch(Ids{1}, 4);
  EXPECT_TRUE(c.hbm().contains(1));
  EXPECT_FALSE(c.in_host(1));
  EXPECT_TRUE(c.in_host(2)) << "HBM's least recent (2) goes to the host tier";
  EXPECT_EQ(c.stats().promoted, 1);
  EXPECT_EQ(c.stats().demoted, 2);
  EXPECT_EQ(c.stats().dropped, 0);
}

// A prefix whose first blocks are in HBM and the next ones in the host tier: the run spans both,
// and cache-sim splits its tokens by tier (the last block partial).
TEST(TieredCache, PrefixSplitAcrossTiers) {
  // Block tokens 10. Request A: blocks 1 2 3 (30 tokens). Then B: 7 8 (pushes A's tail blocks to
  // the host: HBM holds 3 blocks, touched tail first so A's leading blocks are its most recent).
  // Then C: 1 2 3 9, 35 tokens: 1 in HBM, 2 and 3 in the host tier, 9 missing.
  const Trace t =
      make_trace(10, {req(0, 30, {1, 2, 3}), req(1, 20, {7, 8}), req(2, 35, {1, 2, 3, 9})});
  TieredPrefixCache c(EvictionPolicy::lru, 3, 10);
  c.touch(t.requests[0].hash_ids, 0);
  c.touch(t.requests[1].hash_ids, 1);
  EXPECT_EQ(tiers_of(c, t.requests[2].hash_ids),
            (std::vector<CacheTier>{CacheTier::hbm, CacheTier::host, CacheTier::host}));

  const CacheSimResult r = simulate_cache(t, tiered(30, 100), tiny(), DType::f16);
  EXPECT_EQ(r.hit_tokens, 30);             // C's three leading blocks, whole
  EXPECT_EQ(r.tiers.hit_tokens_hbm, 10);   // block 1
  EXPECT_EQ(r.tiers.hit_tokens_host, 20);  // blocks 2 and 3
  EXPECT_EQ(r.tiers.blocks.promoted, 2);   // 2 and 3 came back over the link
  EXPECT_DOUBLE_EQ(r.tiers.hit_rate_host, 20.0 / 85);
  // Link bytes: blocks x block tokens x K and V bytes of a token over all layers (f16: 2 layers x
  // 2 heads x 64 x 2 x 2 B = 1024 B).
  EXPECT_DOUBLE_EQ(r.tiers.link_bytes_to_hbm, 2 * 10 * 1024.0);
  EXPECT_DOUBLE_EQ(r.tiers.link_bytes_to_host, r.tiers.blocks.demoted * 10 * 1024.0);
  // The partial last block: a hit on C's 4 blocks would count 10 + 10 + 10 + 5.
  const Trace again = make_trace(10, {req(0, 35, {1, 2, 3, 9}), req(1, 35, {1, 2, 3, 9})});
  EXPECT_EQ(simulate_cache(again, tiered(20, 100), tiny(), DType::f16).hit_tokens, 35);
}

// Under ttl an expired HBM block is demoted, not lost: the host tier has no ttl of its own.
TEST(TieredCache, TtlExpiredBlocksAreDemoted) {
  TieredPrefixCache c(EvictionPolicy::ttl, 10, 10, /*ttl_s=*/5);
  c.touch(Ids{1, 2}, 0);
  c.expire(100);
  EXPECT_FALSE(c.hbm().contains(1));
  EXPECT_TRUE(c.in_host(1) && c.in_host(2));
  EXPECT_EQ(c.hbm().stats().expired, 2);
  EXPECT_EQ(c.stats().demoted, 2);
  EXPECT_EQ(c.lookup(Ids{1, 2}), 2);
}

// lfu picks HBM's victim by use count; the victim is demoted all the same.
TEST(TieredCache, LfuVictimIsDemoted) {
  TieredPrefixCache c(EvictionPolicy::lfu, 2, 4);
  c.touch(Ids{1}, 0);
  c.touch(Ids{1}, 1);  // 1 used twice
  c.touch(Ids{2}, 2);
  c.touch(Ids{3}, 3);  // evicts 2 (one use), not 1 (older but used twice)
  EXPECT_TRUE(c.hbm().contains(1));
  EXPECT_TRUE(c.in_host(2));
}

// The property: tiers are one LRU split in two, so total hits equal a single LRU of the summed
// capacity, whatever the split, on random traces with shared prefixes.
TEST(TieredCache, TotalHitsEqualOneLruOfTheSummedCapacity) {
  std::mt19937 rng(7);
  std::vector<TraceRequest> requests;
  for (int i = 0; i < 3000; ++i) {
    const int prefix = static_cast<int>(rng() % 40);  // one of 40 shared prefixes
    const int blocks = 1 + static_cast<int>(rng() % 6);
    Ids ids;
    for (int b = 0; b < blocks; ++b)
      ids.push_back(b < 3 ? 1000 * prefix + b
                          : 1'000'000 + static_cast<std::uint64_t>(rng() % 500));
    requests.push_back(req(i, blocks * 16 - static_cast<int>(rng() % 8), ids));
  }
  const Trace t = make_trace(16, requests);
  for (int total : {20, 60, 150}) {
    const CacheSimResult one =
        simulate_cache(t, tiered(total * 16, 0), tiny(), DType::f16);  // no host tier: one LRU
    for (int hbm : {6, total / 2, total - 6}) {
      SCOPED_TRACE("total " + std::to_string(total) + " blocks, HBM " + std::to_string(hbm));
      const CacheSimResult two =
          simulate_cache(t, tiered(hbm * 16, (total - hbm) * 16), tiny(), DType::f16);
      EXPECT_EQ(two.hit_tokens, one.hit_tokens);
      EXPECT_EQ(two.tiers.hit_tokens_hbm + two.tiers.hit_tokens_host, two.hit_tokens);
      EXPECT_GT(two.tiers.hit_tokens_host, 0);
    }
  }
}

// The same property on the committed conversation slice, at its own block size.
TEST(TieredCache, ConversationSliceMatchesOneLru) {
  const std::filesystem::path slice = configs_dir() / "traces" / "mooncake-conversation-2k.jsonl";
  const Trace t = load_trace(slice.string(), "auto", 512, 0);
  // HBM holds the slice's longest request (241 blocks), as the property needs.
  const CacheSimResult one = simulate_cache(t, tiered(512 * 1000, 0), tiny(), DType::bf16);
  const CacheSimResult two = simulate_cache(t, tiered(512 * 300, 512 * 700), tiny(), DType::bf16);
  EXPECT_EQ(two.hit_tokens, one.hit_tokens);
  EXPECT_GT(two.tiers.hit_tokens_host, 0);
  EXPECT_LT(two.tiers.hit_tokens_hbm, one.hit_tokens);
}

TEST(TieredCache, BadHostCapacitiesAreNamed) {
  const Trace t = make_trace(10, {req(0, 10, {1})});
  EXPECT_THROW(simulate_cache(t, tiered(100, -1), tiny(), DType::f16), InputError);
  EXPECT_THROW(simulate_cache(t, tiered(kUnboundedTokens, 100), tiny(), DType::f16), InputError);
  try {
    simulate_cache(t, tiered(kUnboundedTokens, 100), tiny(), DType::f16);
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("finite HBM capacity"), std::string::npos) << e.what();
  }
  EXPECT_THROW(TieredPrefixCache(EvictionPolicy::lru, 1, -5), InputError);
}

}  // namespace
}  // namespace decodebench
