#include "trace/tiered_cache.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "common/errors.h"

namespace decodebench {

TieredPrefixCache::TieredPrefixCache(EvictionPolicy policy, std::int64_t hbm_blocks,
                                     std::int64_t host_blocks, double ttl_s)
    : hbm_(policy, hbm_blocks, ttl_s), host_capacity_(host_blocks) {
  if (host_blocks < 0) {
    throw InputError(
        fmt::format("host tier capacity {} blocks is negative; valid: >= 0 blocks", host_blocks));
  }
  // HBM's victims (and ttl's expired blocks) go to the host tier.
  hbm_.set_removal_listener([this](std::uint64_t id, bool /*expired*/) { demote(id); });
}

void TieredPrefixCache::demote(std::uint64_t id) {
  ++stats_.demoted;
  host_order_.push_front(id);
  host_index_[id] = host_order_.begin();
  if (static_cast<std::int64_t>(host_order_.size()) > host_capacity_) {
    host_index_.erase(host_order_.back());
    host_order_.pop_back();
    ++stats_.dropped;
  }
  stats_.host_peak = std::max(stats_.host_peak, host_blocks());
}

void TieredPrefixCache::expire(double now) { hbm_.expire(now); }

int TieredPrefixCache::lookup(std::span<const std::uint64_t> ids,
                              std::vector<CacheTier>* tiers) const {
  if (tiers) tiers->clear();
  int run = 0;
  for (std::uint64_t id : ids) {
    CacheTier tier;
    if (hbm_.contains(id)) {
      tier = CacheTier::hbm;
    } else if (host_index_.contains(id)) {
      tier = CacheTier::host;
    } else {
      break;
    }
    if (tiers) tiers->push_back(tier);
    ++run;
  }
  return run;
}

bool TieredPrefixCache::touch(std::span<const std::uint64_t> ids, double now, bool pin) {
  // A pinned touch that HBM would refuse must not promote anything first.
  if (pin && !hbm_.can_fit(ids, 0)) return false;
  // Host hits leave the host tier first; HBM's touch then inserts them with the misses, and its
  // victims come back to the host tier through demote().
  for (std::uint64_t id : ids) {
    auto it = host_index_.find(id);
    if (it == host_index_.end()) continue;
    host_order_.erase(it->second);
    host_index_.erase(it);
    ++stats_.promoted;
  }
  if (!hbm_.touch(ids, now, pin))
    throw std::logic_error("tiered cache: touch failed after can_fit");
  return true;
}

}  // namespace decodebench
