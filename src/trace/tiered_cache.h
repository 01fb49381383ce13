// A prefix cache on two tiers: HBM (a PrefixCache with its eviction policy) and a host-memory
// tier behind it, for `cache-sim --host-capacity` (docs/design.md "Trace replay", "Tiers").
//
// Definitions (fixed, so results compare):
//  - The tiers are exclusive: a block is in HBM, in the host tier, or in neither.
//  - lookup(ids): the longest leading run of ids present in either tier, and the tier each of
//    its blocks was found in.
//  - touch(ids, now): every block of the request ends in HBM as most recent (PrefixCache::touch,
//    tail first): a block found in the host tier is promoted (it leaves the host tier, counted,
//    and crosses the link host -> HBM), a block found nowhere is inserted. Every block HBM's
//    policy evicts to make room is demoted: it enters the host tier as its most recent (crossing
//    the link HBM -> host). The host tier is an LRU: when it overflows its least recent block is
//    dropped.
//  - HBM's policy picks the victims: lru, lfu (a promoted block starts its use count anew), ttl.
//    Under ttl a block that expires in HBM is demoted like a victim (the host tier keeps idle
//    blocks until its own capacity pushes them out; it has no ttl of its own).
//  - Without private or pinned blocks, total hits equal a single LRU of the summed capacity
//    (tests/trace: the order of the two tiers together is that LRU's order), as long as HBM holds
//    at least a request's blocks.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "trace/prefix_cache.h"

namespace decodebench {

enum class CacheTier : std::uint8_t { hbm, host };

struct TierStats {
  std::int64_t promoted = 0;  // host -> HBM (host hits)
  std::int64_t demoted = 0;   // HBM -> host (HBM's victims and, under ttl, expired blocks)
  std::int64_t dropped = 0;   // out of the host tier (its least recent, on overflow)
  std::int64_t host_peak = 0;
};

class TieredPrefixCache {
 public:
  // hbm_blocks >= 0 or kUnboundedBlocks, host_blocks >= 0 (0: demoted blocks are dropped at
  // once); ttl_s as PrefixCache. Throws InputError otherwise.
  TieredPrefixCache(EvictionPolicy policy, std::int64_t hbm_blocks, std::int64_t host_blocks,
                    double ttl_s = 0);
  TieredPrefixCache(const TieredPrefixCache&) = delete;
  TieredPrefixCache& operator=(const TieredPrefixCache&) = delete;

  void expire(double now);  // HBM's ttl (its expired blocks are demoted)
  // The leading run of `ids` present in either tier; `tiers` (if given) gets each run block's.
  int lookup(std::span<const std::uint64_t> ids, std::vector<CacheTier>* tiers = nullptr) const;
  // With pin (replay: a running sequence holds its prompt's blocks), every id is pinned in HBM
  // after the touch, and false is returned, changing nothing in either tier, when the absent ids
  // cannot be made to fit (PrefixCache::touch); without pin it always succeeds.
  bool touch(std::span<const std::uint64_t> ids, double now, bool pin = false);
  // HBM's pool as PrefixCache has it: a block it evicts for these is demoted like any victim.
  bool can_fit(std::span<const std::uint64_t> ids, std::int64_t extra_private) const {
    return hbm_.can_fit(ids, extra_private);
  }
  void unpin(std::span<const std::uint64_t> ids) { hbm_.unpin(ids); }
  bool reserve_private(std::int64_t n) { return hbm_.reserve_private(n); }
  void release_private(std::int64_t n) { hbm_.release_private(n); }
  std::int64_t host_capacity_blocks() const { return host_capacity_; }

  const PrefixCache& hbm() const { return hbm_; }
  std::int64_t host_blocks() const { return static_cast<std::int64_t>(host_index_.size()); }
  bool in_host(std::uint64_t id) const { return host_index_.contains(id); }
  const TierStats& stats() const { return stats_; }

 private:
  void demote(std::uint64_t id);

  PrefixCache hbm_;
  std::int64_t host_capacity_;
  std::list<std::uint64_t> host_order_;  // front: most recent
  std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> host_index_;
  TierStats stats_;
};

}  // namespace decodebench
