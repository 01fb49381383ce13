#include "trace/hybrid_cache.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "device/paged_kv.h"  // window_first_block: the byte model's first block read

namespace decodebench {
namespace {

std::int64_t hit_tokens_of(const TraceRequest& q, std::int64_t run, int block_tokens) {
  // The last block may be partial: a whole run is worth at most the prompt.
  return std::min<std::int64_t>(run * block_tokens, q.input_tokens);
}

}  // namespace

WindowSpan window_span(std::int64_t hit_tokens, int window, int block_tokens) {
  if (hit_tokens <= 0) return {};
  // Hit tokens never exceed a prompt's, an int.
  const int n = static_cast<int>(hit_tokens);
  return {window_first_block(n, window, block_tokens), (hit_tokens - 1) / block_tokens};
}

WindowKeepPlan plan_window_keep(const Trace& trace, EvictionPolicy policy,
                                std::int64_t capacity_blocks, double ttl_s, int window) {
  WindowKeepPlan plan;
  plan.window = window;
  PrefixCache cache(policy, capacity_blocks, ttl_s);
  std::unordered_map<std::uint64_t, std::size_t> open;  // a cached block's stay
  cache.set_removal_listener([&open](std::uint64_t id, bool) { open.erase(id); });
  const int bt = trace.block_tokens;
  for (std::size_t k = 0; k < trace.requests.size(); ++k) {
    const TraceRequest& q = trace.requests[k];
    cache.expire(q.arrival_s);
    const WindowSpan span =
        window_span(hit_tokens_of(q, cache.leading_run(q.hash_ids), bt), window, bt);
    // The span lies inside the run: every block of it is cached and has its stay.
    for (std::int64_t j = span.first; j <= span.last; ++j) {
      plan.stays[open.at(q.hash_ids[static_cast<std::size_t>(j)])].last_need =
          static_cast<std::int64_t>(k);
    }
    cache.touch(q.hash_ids, q.arrival_s);
    // A block inserted and evicted within one touch (a request longer than the capacity) never
    // stays.
    for (std::uint64_t id : q.hash_ids) {
      if (!cache.contains(id) || open.contains(id)) continue;
      open.emplace(id, plan.stays.size());
      plan.stays.push_back({id, static_cast<std::int64_t>(k), -1});
    }
  }
  return plan;
}

HybridReplay replay_hybrid(const Trace& trace, EvictionPolicy policy, std::int64_t capacity_blocks,
                           double ttl_s, int window, const WindowKeepPlan& plan) {
  const std::int64_t requests = static_cast<std::int64_t>(trace.requests.size());
  // The stays each request's lookup was the last need of: freed right after it.
  std::vector<std::vector<std::size_t>> frees(trace.requests.size());
  for (std::size_t s = 0; s < plan.stays.size(); ++s) {
    const BlockStay& st = plan.stays[s];
    if (st.last_need > st.inserted_by && st.last_need < requests) {
      frees[static_cast<std::size_t>(st.last_need)].push_back(s);
    }
  }
  PrefixCache cache(policy, capacity_blocks, ttl_s);
  std::unordered_map<std::uint64_t, std::size_t> open;      // a cached block's stay
  std::unordered_map<std::uint64_t, std::size_t> windowed;  // stays the windowed layers hold
  // A block leaving the full layers leaves every layer: no hit reaches past it any more.
  cache.set_removal_listener([&](std::uint64_t id, bool) {
    open.erase(id);
    windowed.erase(id);
  });
  const int bt = trace.block_tokens;
  const auto held = [&](const TraceRequest& q, std::int64_t run) {
    const WindowSpan span = window_span(hit_tokens_of(q, run, bt), window, bt);
    for (std::int64_t j = span.first; j <= span.last; ++j) {
      if (!windowed.contains(q.hash_ids[static_cast<std::size_t>(j)])) return false;
    }
    return true;
  };
  HybridReplay r;
  std::size_t next = 0;
  for (std::size_t k = 0; k < trace.requests.size(); ++k) {
    const TraceRequest& q = trace.requests[k];
    cache.expire(q.arrival_s);
    const std::int64_t full_run = cache.leading_run(q.hash_ids);
    std::int64_t run = full_run;
    while (run > 0 && !held(q, run)) --run;
    r.full_hit_tokens += hit_tokens_of(q, full_run, bt);
    r.hit_tokens += hit_tokens_of(q, run, bt);
    r.input_tokens += q.input_tokens;
    for (std::size_t s : frees[k]) {
      const auto it = windowed.find(plan.stays[s].id);
      if (it != windowed.end() && it->second == s) windowed.erase(it);
    }
    cache.touch(q.hash_ids, q.arrival_s);
    for (std::uint64_t id : q.hash_ids) {
      if (!cache.contains(id) || open.contains(id)) continue;
      if (next >= plan.stays.size() || plan.stays[next].id != id) {
        throw std::logic_error(fmt::format(
            "replay_hybrid: request {} inserts block {}, the plan's stay {} is {}", k, id, next,
            next < plan.stays.size() ? fmt::format("block {}", plan.stays[next].id)
                                     : "past its end"));
      }
      open.emplace(id, next);
      if (plan.stays[next].last_need > static_cast<std::int64_t>(k)) {
        windowed.emplace(id, next);
        ++r.windowed_kept;
      }
      ++next;
    }
    r.windowed_peak = std::max(r.windowed_peak, static_cast<std::int64_t>(windowed.size()));
    ++r.requests;
  }
  r.blocks = cache.stats();
  return r;
}

}  // namespace decodebench
