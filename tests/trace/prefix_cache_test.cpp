// The prefix cache's definitions on hand-made block chains: visiting order (tails before heads),
// each policy's first victim, ttl expiry at its boundary, counted pins, private blocks, requests
// longer than the capacity, and the block counters.
#include "trace/prefix_cache.h"

#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "common/errors.h"

namespace decodebench {
namespace {

using Ids = std::vector<std::uint64_t>;

// Which of `ids` are cached, in order.
Ids cached_of(const PrefixCache& c, const Ids& ids) {
  Ids out;
  for (auto id : ids) {
    if (c.contains(id)) out.push_back(id);
  }
  return out;
}

TEST(PrefixCache, PolicyNames) {
  for (auto p : {EvictionPolicy::lru, EvictionPolicy::lfu, EvictionPolicy::ttl}) {
    EXPECT_EQ(parse_policy(policy_name(p)), p);
  }
  try {
    parse_policy("fifo");
    FAIL() << "fifo accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'fifo'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lru, lfu, ttl"), std::string::npos) << e.what();
  }
}

TEST(PrefixCache, RejectsBadSettings) {
  EXPECT_THROW(PrefixCache(EvictionPolicy::lru, -1), InputError);
  EXPECT_THROW(PrefixCache(EvictionPolicy::ttl, 10, 0), InputError);
  EXPECT_THROW(PrefixCache(EvictionPolicy::ttl, 10, -5), InputError);
  EXPECT_THROW(PrefixCache(EvictionPolicy::ttl, 10, std::nan("")), InputError);
  EXPECT_NO_THROW(PrefixCache(EvictionPolicy::lru, 0));
  EXPECT_NO_THROW(PrefixCache(EvictionPolicy::lfu, kUnboundedBlocks));
  EXPECT_NO_THROW(PrefixCache(EvictionPolicy::ttl, 10, 1e-3));
}

TEST(PrefixCache, LeadingRunAndAbsent) {
  PrefixCache c(EvictionPolicy::lru, 100);
  EXPECT_EQ(c.leading_run(Ids{1, 2, 3}), 0);
  EXPECT_EQ(c.absent(Ids{1, 2, 3}), 3);
  ASSERT_TRUE(c.touch(Ids{1, 2, 3}, 0));
  EXPECT_EQ(c.leading_run(Ids{1, 2, 3, 4}), 3);
  EXPECT_EQ(c.leading_run(Ids{1, 9, 3}), 1);  // a run stops at the first miss
  EXPECT_EQ(c.leading_run(Ids{9, 2, 3}), 0);
  EXPECT_EQ(c.absent(Ids{1, 9, 3, 8}), 2);
  EXPECT_EQ(c.absent(Ids{9, 9}), 1);  // what touch would insert: once
  EXPECT_EQ(c.cached_blocks(), 3);
  EXPECT_EQ(c.stats().inserted, 3);
  ASSERT_TRUE(c.touch(Ids{1, 2, 3, 4}, 1));  // refreshes three, inserts one
  EXPECT_EQ(c.stats().inserted, 4);
  EXPECT_EQ(c.stats().peak_blocks, 4);
  EXPECT_EQ(c.stats().evicted, 0);
}

// A chain's tail is visited first, so it is its least recent block and goes first.
TEST(PrefixCache, TailsGoBeforeHeads) {
  for (auto p : {EvictionPolicy::lru, EvictionPolicy::lfu, EvictionPolicy::ttl}) {
    PrefixCache c(p, 3, 1e9);
    ASSERT_TRUE(c.touch(Ids{1, 2, 3}, 0));
    ASSERT_TRUE(c.touch(Ids{9}, 1));
    EXPECT_EQ(cached_of(c, Ids{1, 2, 3}), (Ids{1, 2})) << policy_name(p);
    ASSERT_TRUE(c.touch(Ids{8}, 2));
    EXPECT_EQ(cached_of(c, Ids{1, 2, 3}), (Ids{1})) << policy_name(p);
    EXPECT_EQ(c.leading_run(Ids{1, 2, 3}), 1) << policy_name(p);
    EXPECT_EQ(c.stats().evicted, 2) << policy_name(p);
  }
}

TEST(PrefixCache, LruEvictsLeastRecent) {
  PrefixCache c(EvictionPolicy::lru, 3);
  ASSERT_TRUE(c.touch(Ids{1}, 0));
  ASSERT_TRUE(c.touch(Ids{2}, 1));
  ASSERT_TRUE(c.touch(Ids{3}, 2));
  ASSERT_TRUE(c.touch(Ids{1}, 3));  // 1 is now the most recent, 2 the least
  ASSERT_TRUE(c.touch(Ids{4}, 4));
  EXPECT_FALSE(c.contains(2));
  EXPECT_TRUE(c.contains(1));
  EXPECT_TRUE(c.contains(3));
  ASSERT_TRUE(c.touch(Ids{5}, 5));
  EXPECT_FALSE(c.contains(3));
  // Same recency (one touch, one "now"): the one touched earlier goes first.
  PrefixCache t(EvictionPolicy::lru, 2);
  ASSERT_TRUE(t.touch(Ids{1}, 7));
  ASSERT_TRUE(t.touch(Ids{2}, 7));
  ASSERT_TRUE(t.touch(Ids{3}, 7));
  EXPECT_FALSE(t.contains(1));
  EXPECT_TRUE(t.contains(2));
}

TEST(PrefixCache, LfuEvictsFewestUsesThenLeastRecent) {
  PrefixCache c(EvictionPolicy::lfu, 3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.touch(Ids{1}, i));  // 1: three uses, oldest
  ASSERT_TRUE(c.touch(Ids{2}, 10));                             // 2: one use
  ASSERT_TRUE(c.touch(Ids{3}, 11));                             // 3: one use, newest
  ASSERT_TRUE(c.touch(Ids{4}, 12));
  EXPECT_TRUE(c.contains(1));   // lru would have taken it
  EXPECT_FALSE(c.contains(2));  // fewest uses, the older of the tie
  EXPECT_TRUE(c.contains(3));
  ASSERT_TRUE(c.touch(Ids{3}, 13));  // 3: two uses; 4 has one
  ASSERT_TRUE(c.touch(Ids{5}, 14));
  EXPECT_FALSE(c.contains(4));
  EXPECT_TRUE(c.contains(3));
  // The same sequence under lru loses block 1 first.
  PrefixCache l(EvictionPolicy::lru, 3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(l.touch(Ids{1}, i));
  ASSERT_TRUE(l.touch(Ids{2}, 10));
  ASSERT_TRUE(l.touch(Ids{3}, 11));
  ASSERT_TRUE(l.touch(Ids{4}, 12));
  EXPECT_FALSE(l.contains(1));
}

TEST(PrefixCache, TtlExpiresIdleBlocks) {
  PrefixCache c(EvictionPolicy::ttl, 100, 10);
  ASSERT_TRUE(c.touch(Ids{1, 2}, 0));
  ASSERT_TRUE(c.touch(Ids{3}, 5));
  ASSERT_TRUE(c.touch(Ids{1}, 6));  // touched in time: survives
  c.expire(10);                     // cutoff 0: recency 0 is not older than it
  EXPECT_EQ(c.cached_blocks(), 3);
  c.expire(12);  // cutoff 2: block 2 (recency 0) goes
  EXPECT_EQ(cached_of(c, Ids{1, 2, 3}), (Ids{1, 3}));
  EXPECT_EQ(c.stats().expired, 1);
  EXPECT_EQ(c.stats().evicted, 0);
  c.expire(16);  // cutoff 6: 3 (recency 5) goes, 1 (recency 6) stays
  EXPECT_EQ(cached_of(c, Ids{1, 2, 3}), (Ids{1}));
  c.expire(100);
  EXPECT_EQ(c.cached_blocks(), 0);
  EXPECT_EQ(c.stats().expired, 3);
  // lru and lfu never expire.
  for (auto p : {EvictionPolicy::lru, EvictionPolicy::lfu}) {
    PrefixCache n(p, 100, 10);
    ASSERT_TRUE(n.touch(Ids{1}, 0));
    n.expire(1e9);
    EXPECT_TRUE(n.contains(1)) << policy_name(p);
  }
}

TEST(PrefixCache, TtlEvictsAsLruWhenFull) {
  PrefixCache c(EvictionPolicy::ttl, 2, 1000);
  ASSERT_TRUE(c.touch(Ids{1}, 0));
  ASSERT_TRUE(c.touch(Ids{1}, 1));
  ASSERT_TRUE(c.touch(Ids{1}, 2));
  ASSERT_TRUE(c.touch(Ids{2}, 3));
  ASSERT_TRUE(c.touch(Ids{3}, 4));
  EXPECT_FALSE(c.contains(1));  // the least recent, whatever its uses
  EXPECT_EQ(c.stats().evicted, 1);
}

TEST(PrefixCache, PinnedBlocksAreNeverVictims) {
  PrefixCache c(EvictionPolicy::ttl, 2, 5);
  ASSERT_TRUE(c.touch(Ids{1, 2}, 0, /*pin=*/true));
  EXPECT_EQ(c.pinned_blocks(), 2);
  c.expire(100);  // idle far past ttl, but pinned
  EXPECT_EQ(c.cached_blocks(), 2);
  EXPECT_FALSE(c.can_fit(Ids{3}, 0));
  EXPECT_TRUE(c.can_fit(Ids{1, 2}, 0));
  // Without pin the touch succeeds but nothing can be placed.
  ASSERT_TRUE(c.touch(Ids{3}, 100));
  EXPECT_FALSE(c.contains(3));
  // With pin it fails, changing nothing.
  const PrefixCacheStats before = c.stats();
  EXPECT_FALSE(c.touch(Ids{1, 3}, 100, /*pin=*/true));
  EXPECT_FALSE(c.contains(3));
  EXPECT_EQ(c.stats().inserted, before.inserted);
  EXPECT_EQ(c.stats().evicted, before.evicted);
  EXPECT_EQ(c.pinned_blocks(), 2);
  // Pins count: pinned twice, unpinned once, still pinned.
  ASSERT_TRUE(c.touch(Ids{1}, 100, /*pin=*/true));
  c.unpin(Ids{1, 2});
  EXPECT_EQ(c.pinned_blocks(), 1);
  EXPECT_TRUE(c.can_fit(Ids{3}, 0));
  EXPECT_FALSE(c.can_fit(Ids{3, 4}, 0));
  ASSERT_TRUE(c.touch(Ids{3}, 101, /*pin=*/true));
  EXPECT_FALSE(c.contains(2));  // the only unpinned block
  EXPECT_TRUE(c.contains(1));
  c.unpin(Ids{1});
  EXPECT_EQ(c.pinned_blocks(), 1);
  c.expire(200);  // 1 is unpinned again and idle: expired; 3 stays pinned
  EXPECT_FALSE(c.contains(1));
  EXPECT_TRUE(c.contains(3));
  EXPECT_THROW(c.unpin(Ids{1}), std::logic_error);
}

TEST(PrefixCache, PinnedTouchEvictsOnlyOutsideTheRequest) {
  PrefixCache c(EvictionPolicy::lru, 4);
  ASSERT_TRUE(c.touch(Ids{1, 2}, 0));  // the request's prefix, the oldest blocks
  ASSERT_TRUE(c.touch(Ids{7, 8}, 1));
  ASSERT_TRUE(c.touch(Ids{1, 2, 3, 4}, 2, /*pin=*/true));
  EXPECT_EQ(cached_of(c, Ids{1, 2, 3, 4, 7, 8}), (Ids{1, 2, 3, 4}));
  EXPECT_EQ(c.pinned_blocks(), 4);
  EXPECT_EQ(c.stats().inserted, 6);
  EXPECT_EQ(c.stats().evicted, 2);
}

// The blocks a request found are not its own victims, pinned or not.
TEST(PrefixCache, HitBlocksAreNotTheirRequestsVictims) {
  PrefixCache c(EvictionPolicy::lru, 4);
  ASSERT_TRUE(c.touch(Ids{1, 2}, 0));
  ASSERT_TRUE(c.touch(Ids{7, 8}, 1));
  ASSERT_TRUE(c.touch(Ids{1, 2, 3, 4}, 2));
  EXPECT_EQ(cached_of(c, Ids{1, 2, 3, 4, 7, 8}), (Ids{1, 2, 3, 4}));
  EXPECT_EQ(c.stats().inserted, 6);
  EXPECT_EQ(c.stats().evicted, 2);
  EXPECT_EQ(c.pinned_blocks(), 0);
}

TEST(PrefixCache, RequestLongerThanCapacityKeepsItsHead) {
  PrefixCache c(EvictionPolicy::lru, 3);
  ASSERT_TRUE(c.touch(Ids{1, 2, 3, 4, 5}, 0));
  EXPECT_EQ(cached_of(c, Ids{1, 2, 3, 4, 5}), (Ids{1, 2, 3}));
  EXPECT_EQ(c.leading_run(Ids{1, 2, 3, 4, 5}), 3);
  EXPECT_EQ(c.stats().inserted, 5);
  EXPECT_EQ(c.stats().evicted, 2);
  EXPECT_EQ(c.stats().peak_blocks, 3);
  // Its continuation finds the head and keeps it.
  ASSERT_TRUE(c.touch(Ids{1, 2, 3, 4, 5, 6}, 1));
  EXPECT_EQ(cached_of(c, Ids{1, 2, 3, 4, 5, 6}), (Ids{1, 2, 3}));
  // It cannot be pinned whole.
  EXPECT_FALSE(c.touch(Ids{1, 2, 3, 4}, 2, /*pin=*/true));
  EXPECT_EQ(c.pinned_blocks(), 0);
}

TEST(PrefixCache, ZeroCapacityCachesNothing) {
  PrefixCache c(EvictionPolicy::lfu, 0);
  ASSERT_TRUE(c.touch(Ids{1, 2}, 0));
  EXPECT_EQ(c.cached_blocks(), 0);
  EXPECT_EQ(c.stats().inserted, 0);
  EXPECT_FALSE(c.touch(Ids{1}, 0, /*pin=*/true));
  EXPECT_TRUE(c.touch(Ids{}, 0, /*pin=*/true));
  EXPECT_FALSE(c.reserve_private(1));
  EXPECT_TRUE(c.reserve_private(0));
}

TEST(PrefixCache, PrivateBlocksTakeCapacity) {
  PrefixCache c(EvictionPolicy::lru, 4);
  ASSERT_TRUE(c.touch(Ids{1, 2, 3}, 0));
  ASSERT_TRUE(c.reserve_private(2));  // one free slot, then the tail (3) goes
  EXPECT_EQ(c.private_blocks(), 2);
  EXPECT_EQ(cached_of(c, Ids{1, 2, 3}), (Ids{1, 2}));
  EXPECT_EQ(c.stats().evicted, 1);
  EXPECT_EQ(c.stats().peak_blocks, 4);
  ASSERT_TRUE(c.touch(Ids{1, 2}, 1, /*pin=*/true));
  EXPECT_FALSE(c.reserve_private(1));  // 2 pinned + 2 private fill it
  EXPECT_EQ(c.private_blocks(), 2);
  EXPECT_FALSE(c.can_fit(Ids{}, 1));
  EXPECT_TRUE(c.can_fit(Ids{1, 2}, 0));
  c.release_private(1);
  EXPECT_TRUE(c.can_fit(Ids{}, 1));
  EXPECT_FALSE(c.can_fit(Ids{9}, 1));
  ASSERT_TRUE(c.touch(Ids{9}, 2));  // fits in the released slot
  EXPECT_TRUE(c.contains(9));
  EXPECT_TRUE(c.reserve_private(1));  // evicts 9, the only unpinned block
  EXPECT_FALSE(c.contains(9));
  EXPECT_EQ(c.private_blocks(), 2);
  EXPECT_THROW(c.release_private(3), std::logic_error);
  c.release_private(2);
  EXPECT_EQ(c.private_blocks(), 0);
}

TEST(PrefixCache, UnboundedNeverEvicts) {
  PrefixCache c(EvictionPolicy::lru, kUnboundedBlocks);
  for (std::uint64_t i = 0; i < 1000; ++i) ASSERT_TRUE(c.touch(Ids{i, i + 5000}, double(i)));
  EXPECT_EQ(c.cached_blocks(), 2000);
  EXPECT_EQ(c.stats().evicted, 0);
  EXPECT_TRUE(c.reserve_private(1'000'000));
  EXPECT_TRUE(c.can_fit(Ids{99999}, 1));
}

// inserted - evicted - expired == cached, and the capacity holds, on a pseudo-random mix of
// chains sharing prefixes, pins, private blocks and expiry.
TEST(PrefixCache, CountersBalance) {
  for (auto p : {EvictionPolicy::lru, EvictionPolicy::lfu, EvictionPolicy::ttl}) {
    PrefixCache c(p, 37, 2);
    std::mt19937_64 rng(7);
    std::vector<Ids> pinned;
    for (int r = 0; r < 3000; ++r) {
      const double now = r * 0.1;
      c.expire(now);
      Ids ids;
      const std::uint64_t root = rng() % 40;
      const int len = 1 + static_cast<int>(rng() % 9);
      for (int j = 0; j < len; ++j) ids.push_back(root * 100 + j);  // chains share heads
      const bool pin = rng() % 4 == 0;
      if (c.touch(ids, now, pin) && pin) pinned.push_back(ids);
      if (pinned.size() > 3) {
        c.unpin(pinned.front());
        pinned.erase(pinned.begin());
      }
      if (rng() % 5 == 0 && c.reserve_private(1)) c.release_private(1);
      const auto& s = c.stats();
      ASSERT_EQ(s.inserted - s.evicted - s.expired, c.cached_blocks()) << policy_name(p);
      ASSERT_LE(c.cached_blocks() + c.private_blocks(), 37) << policy_name(p);
      ASSERT_LE(s.peak_blocks, 37);
    }
    EXPECT_GT(c.stats().evicted, 0) << policy_name(p);
    if (p == EvictionPolicy::ttl) {
      EXPECT_GT(c.stats().expired, 0);
    }
  }
}

TEST(PrefixCache, Moves) {
  PrefixCache a(EvictionPolicy::lru, 3);
  ASSERT_TRUE(a.touch(Ids{1}, 0));
  PrefixCache b = std::move(a);
  EXPECT_TRUE(b.contains(1));
  PrefixCache c(EvictionPolicy::lfu, 1);
  c = std::move(b);
  EXPECT_EQ(c.capacity_blocks(), 3);
}

}  // namespace
}  // namespace decodebench
