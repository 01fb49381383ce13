// A prefix cache of KV blocks keyed by the trace's hash ids, with an eviction policy: the one
// model that `cache-sim` (the cache alone) and `replay` (one pool shared with the running
// sequences) both use (docs/design.md "Trace replay", definitions there).
//
// Definitions (fixed, so results compare with the literature):
//  - A block is one hash id; capacity counts blocks (tokens = blocks x block tokens).
//  - touch(ids, now): the ids are visited from the LAST to the first; each present one is
//    refreshed (recency = now, use count + 1), each absent one inserted, evicting as needed.
//    Visiting the tail first leaves a chain's leading blocks the most recent, so eviction cuts
//    chains from their tails and a surviving block is always a usable prefix (paged engines free
//    a finished sequence's blocks tail first for the same reason). The blocks the touch found
//    present are held while it inserts the rest (an engine references its hit blocks before it
//    allocates), so they are never its own victims; an absent block for which no victim is left
//    (all pinned, private or held) is not cached.
//  - Victims, among unpinned blocks only:
//      lru: least recently used (the oldest recency; ties: the one touched earlier);
//      lfu: fewest uses, ties broken as lru;
//      ttl: as lru; in addition expire(now) drops every unpinned block whose recency is older
//           than now - ttl_s (counted as expired, not evicted).
//  - Pinned blocks (replay: held by a running sequence) are never victims. pin/unpin count, so
//    two sequences may pin the same block.
//  - Private blocks (replay: a running sequence's generated tokens) take capacity but are not
//    cached: reserve_private() evicts cached blocks to make room for them.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string_view>

namespace decodebench {

enum class EvictionPolicy { lru, lfu, ttl };
std::string_view policy_name(EvictionPolicy p);
// "lru", "lfu", "ttl"; else InputError listing them.
EvictionPolicy parse_policy(std::string_view name);

inline constexpr std::int64_t kUnboundedBlocks = std::numeric_limits<std::int64_t>::max();

struct PrefixCacheStats {
  std::int64_t inserted = 0;     // blocks inserted (absent when touched)
  std::int64_t evicted = 0;      // blocks removed to make room
  std::int64_t expired = 0;      // blocks removed by expire() (ttl)
  std::int64_t peak_blocks = 0;  // most cached + private blocks held at once
};

class PrefixCache {
 public:
  // capacity_blocks >= 0 or kUnboundedBlocks; ttl_s > 0 (used by ttl only; lru and lfu ignore
  // it). Throws InputError otherwise.
  PrefixCache(EvictionPolicy policy, std::int64_t capacity_blocks, double ttl_s = 0);
  ~PrefixCache();
  PrefixCache(PrefixCache&&) noexcept;
  PrefixCache& operator=(PrefixCache&&) noexcept;

  // ttl: drops the unpinned blocks with recency < now - ttl_s. lru, lfu: nothing.
  void expire(double now);
  // The longest leading run of `ids` present (no side effect).
  int leading_run(std::span<const std::uint64_t> ids) const;
  // How many of `ids` are absent (what touch() would insert).
  std::int64_t absent(std::span<const std::uint64_t> ids) const;
  // Whether touch(ids) plus reserve_private(extra_private) could succeed now: the absent ids and
  // the private blocks fit in capacity once every unpinned block not in `ids` is evicted.
  bool can_fit(std::span<const std::uint64_t> ids, std::int64_t extra_private) const;
  // See the definitions above. With pin, every id of `ids` is pinned once (after the touch).
  // Returns false, changing nothing, when pin is set and the absent ids cannot be made to fit
  // (too many pinned blocks). Without pin it always succeeds: a request longer than the capacity
  // leaves its leading capacity_blocks() blocks cached (its tail was visited first, so its tail
  // blocks are the ones evicted).
  bool touch(std::span<const std::uint64_t> ids, double now, bool pin = false);
  void unpin(std::span<const std::uint64_t> ids);
  // Private blocks: reserve evicts cached blocks to make room and returns false, changing
  // nothing, when n do not fit; release returns them.
  bool reserve_private(std::int64_t n);
  void release_private(std::int64_t n);

  // Called with every block that leaves the cache by eviction (expired = false) or by expire()
  // (true), after it has left: how a tiered cache (tiered_cache.h) demotes HBM's victims.
  using RemovalListener = std::function<void(std::uint64_t id, bool expired)>;
  void set_removal_listener(RemovalListener listener);

  std::int64_t capacity_blocks() const;
  std::int64_t cached_blocks() const;  // blocks in the cache (pinned or not)
  std::int64_t private_blocks() const;
  std::int64_t pinned_blocks() const;  // distinct cached blocks with a pin
  bool contains(std::uint64_t id) const;
  const PrefixCacheStats& stats() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace decodebench
