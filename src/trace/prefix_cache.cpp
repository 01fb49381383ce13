#include "trace/prefix_cache.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/errors.h"

namespace decodebench {

std::string_view policy_name(EvictionPolicy p) {
  switch (p) {
    case EvictionPolicy::lru: return "lru";
    case EvictionPolicy::lfu: return "lfu";
    case EvictionPolicy::ttl: return "ttl";
  }
  return "?";
}

EvictionPolicy parse_policy(std::string_view name) {
  for (EvictionPolicy p : {EvictionPolicy::lru, EvictionPolicy::lfu, EvictionPolicy::ttl}) {
    if (name == policy_name(p)) return p;
  }
  throw InputError(fmt::format("unknown eviction policy '{}'; valid: lru, lfu, ttl", name));
}

namespace {

// Victim order: the smallest key goes first. `uses` is 0 except under lfu, so one ordered set
// serves all three policies; `seq` (a counter bumped on every visit) is unique, breaking the ties
// of equal recency within one touch (a request's blocks all share its arrival time).
struct Key {
  std::int64_t uses = 0;
  double recency = 0;
  std::uint64_t seq = 0;
  std::uint64_t id = 0;  // rides along: the set's element names its block
  bool operator<(const Key& o) const {
    if (uses != o.uses) return uses < o.uses;
    if (recency != o.recency) return recency < o.recency;
    return seq < o.seq;
  }
};

struct Entry {
  Key key;
  std::int64_t uses = 0;
  std::int64_t pins = 0;          // pinned, or held by the touch in progress
  std::uint64_t inserted_in = 0;  // the touch call that inserted it
};

}  // namespace

struct PrefixCache::State {
  EvictionPolicy policy;
  std::int64_t capacity;
  double ttl_s;
  std::unordered_map<std::uint64_t, Entry> blocks;
  std::set<Key> evictable;  // exactly the blocks with pins == 0
  std::int64_t private_blocks = 0;
  std::int64_t pinned = 0;  // blocks with pins > 0
  std::uint64_t seq = 0;
  std::uint64_t call = 0;
  PrefixCacheStats stats;
  PrefixCache::RemovalListener on_remove;  // told of every evicted or expired block

  std::int64_t held() const { return static_cast<std::int64_t>(blocks.size()) + private_blocks; }
  // Room for one more block without evicting. Written as a subtraction: capacity may be
  // kUnboundedBlocks.
  bool has_room(std::int64_t n = 1) const { return capacity - held() >= n; }
  void note_peak() { stats.peak_blocks = std::max(stats.peak_blocks, held()); }

  void set_key(Entry& e, double now) {
    Key k{policy == EvictionPolicy::lfu ? e.uses : 0, now, ++seq, e.key.id};
    if (e.pins == 0) {
      auto node = evictable.extract(e.key);
      node.value() = k;
      evictable.insert(std::move(node));
    }
    e.key = k;
  }
  void add_pin(Entry& e) {
    if (e.pins++ == 0) {
      evictable.erase(e.key);
      ++pinned;
    }
  }
  void drop_pin(Entry& e) {
    if (--e.pins == 0) {
      evictable.insert(e.key);
      --pinned;
    }
  }
  // Removes the first victim; false when every cached block is pinned (or held).
  bool evict_one() {
    if (evictable.empty()) return false;
    const std::uint64_t id = evictable.begin()->id;
    blocks.erase(id);
    evictable.erase(evictable.begin());
    ++stats.evicted;
    if (on_remove) on_remove(id, /*expired=*/false);
    return true;
  }
  // The distinct ids of `ids` that are absent (absent == true) or present and unpinned.
  std::int64_t count_distinct(std::span<const std::uint64_t> ids, bool absent) const {
    std::vector<std::uint64_t> v;
    for (std::uint64_t id : ids) {
      auto it = blocks.find(id);
      if (absent ? it == blocks.end() : (it != blocks.end() && it->second.pins == 0)) {
        v.push_back(id);
      }
    }
    std::sort(v.begin(), v.end());
    return std::unique(v.begin(), v.end()) - v.begin();
  }
};

PrefixCache::PrefixCache(EvictionPolicy policy, std::int64_t capacity_blocks, double ttl_s)
    : s_(std::make_unique<State>()) {
  if (capacity_blocks < 0) {
    throw InputError(fmt::format("prefix cache capacity {} blocks is negative; valid: >= 0 blocks",
                                 capacity_blocks));
  }
  if (policy == EvictionPolicy::ttl && !(ttl_s > 0)) {
    throw InputError(fmt::format(
        "the ttl policy needs a ttl > 0 seconds, got {}; valid: a positive number of seconds",
        ttl_s));
  }
  s_->policy = policy;
  s_->capacity = capacity_blocks;
  s_->ttl_s = ttl_s;
}

PrefixCache::~PrefixCache() = default;
PrefixCache::PrefixCache(PrefixCache&&) noexcept = default;
PrefixCache& PrefixCache::operator=(PrefixCache&&) noexcept = default;

void PrefixCache::expire(double now) {
  State& s = *s_;
  if (s.policy != EvictionPolicy::ttl) return;
  const double cutoff = now - s.ttl_s;
  // Under ttl the keys order by recency alone, so the expired blocks lead the set.
  while (!s.evictable.empty() && s.evictable.begin()->recency < cutoff) {
    const std::uint64_t id = s.evictable.begin()->id;
    s.blocks.erase(id);
    s.evictable.erase(s.evictable.begin());
    ++s.stats.expired;
    if (s.on_remove) s.on_remove(id, /*expired=*/true);
  }
}

int PrefixCache::leading_run(std::span<const std::uint64_t> ids) const {
  int run = 0;
  for (std::uint64_t id : ids) {
    if (!s_->blocks.contains(id)) break;
    ++run;
  }
  return run;
}

std::int64_t PrefixCache::absent(std::span<const std::uint64_t> ids) const {
  return s_->count_distinct(ids, /*absent=*/true);
}

bool PrefixCache::can_fit(std::span<const std::uint64_t> ids, std::int64_t extra_private) const {
  const State& s = *s_;
  // What must stay once every unpinned block outside `ids` is gone: the pinned blocks, the
  // unpinned present ids, the absent ids and every private block.
  const std::int64_t need = s.pinned + s.count_distinct(ids, /*absent=*/false) +
                            s.count_distinct(ids, /*absent=*/true) + s.private_blocks;
  return extra_private >= 0 && need <= s.capacity && s.capacity - need >= extra_private;
}

bool PrefixCache::touch(std::span<const std::uint64_t> ids, double now, bool pin) {
  State& s = *s_;
  if (pin && !can_fit(ids, 0)) return false;
  const std::uint64_t call = ++s.call;
  // The request holds the blocks it found while it inserts the rest (an engine references its
  // hit blocks before allocating new ones): they are never this touch's victims. With pin the
  // hold becomes the pin; without, it is dropped at the end.
  std::vector<Entry*> held;
  for (std::uint64_t id : ids) {
    auto it = s.blocks.find(id);
    if (it == s.blocks.end()) continue;
    s.add_pin(it->second);
    held.push_back(&it->second);
  }
  for (auto id = ids.rbegin(); id != ids.rend(); ++id) {
    auto it = s.blocks.find(*id);
    if (it != s.blocks.end()) {
      Entry& e = it->second;
      ++e.uses;
      s.set_key(e, now);
      // A repeated id inserted earlier in this touch: pinned once per occurrence.
      if (pin && e.inserted_in == call) s.add_pin(e);
      continue;
    }
    // No victim (the rest is pinned, private or held): the block is not cached. Only without
    // pin, where it cuts the request's tail: once a block cannot be placed, none further up can
    // either, as nothing becomes evictable.
    if (!s.has_room() && !s.evict_one()) continue;
    Entry& e = s.blocks[*id];
    e.uses = 1;
    e.inserted_in = call;
    e.key = Key{s.policy == EvictionPolicy::lfu ? 1 : 0, now, ++s.seq, *id};
    if (pin) {
      e.pins = 1;
      ++s.pinned;
    } else {
      s.evictable.insert(e.key);
    }
    ++s.stats.inserted;
    s.note_peak();
  }
  if (!pin) {
    for (Entry* e : held) s.drop_pin(*e);
  }
  return true;
}

void PrefixCache::unpin(std::span<const std::uint64_t> ids) {
  State& s = *s_;
  for (std::uint64_t id : ids) {
    auto it = s.blocks.find(id);
    if (it == s.blocks.end() || it->second.pins == 0) {
      throw std::logic_error(fmt::format("PrefixCache::unpin: block {} is not pinned", id));
    }
    s.drop_pin(it->second);
  }
}

bool PrefixCache::reserve_private(std::int64_t n) {
  State& s = *s_;
  if (n < 0) throw std::logic_error("PrefixCache::reserve_private: negative count");
  // Everything unpinned can go; the pinned and private blocks stay.
  if (s.pinned + s.private_blocks > s.capacity || s.capacity - s.pinned - s.private_blocks < n) {
    return false;
  }
  while (!s.has_room(n)) s.evict_one();
  s.private_blocks += n;
  s.note_peak();
  return true;
}

void PrefixCache::release_private(std::int64_t n) {
  State& s = *s_;
  if (n < 0 || n > s.private_blocks) {
    throw std::logic_error(fmt::format("PrefixCache::release_private: {} blocks released, {} held",
                                       n, s.private_blocks));
  }
  s.private_blocks -= n;
}

void PrefixCache::set_removal_listener(RemovalListener listener) {
  s_->on_remove = std::move(listener);
}

std::int64_t PrefixCache::capacity_blocks() const { return s_->capacity; }
std::int64_t PrefixCache::cached_blocks() const {
  return static_cast<std::int64_t>(s_->blocks.size());
}
std::int64_t PrefixCache::private_blocks() const { return s_->private_blocks; }
std::int64_t PrefixCache::pinned_blocks() const { return s_->pinned; }
bool PrefixCache::contains(std::uint64_t id) const { return s_->blocks.contains(id); }
const PrefixCacheStats& PrefixCache::stats() const { return s_->stats; }

}  // namespace decodebench
