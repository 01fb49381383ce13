// What a model with windowed layers keeps of a prefix cache, for `cache-sim` (docs/design.md
// "Trace replay", windowed models): a hybrid KV-cache manager (vLLM's hybrid allocator, SGLang's
// SWA radix cache) keeps every cached block in the full-attention layers but frees a windowed
// layer's KV that no hit's window reaches.
//
// Definitions (cache_sim.h's replay: a block is one hash id of B tokens, a hit the leading run):
//  - A hit of n tokens resumes a sequence of n cached tokens. A windowed layer of window W reads
//    it from the block holding token n - W on, as the byte model counts (f = floor(max(0, n - W)
//    / B), window_first_block) and kv_held holds, so the hit needs that layer's KV of the
//    request's blocks f .. ceil(n / B) - 1 (window_span): at most ceil(W / B) + 1 blocks, the
//    one more when the window starts inside a block.
//  - A stay is one block's time in the full layers' cache: from the touch that inserted it to
//    its eviction or expiry (a block inserted again starts a new stay, with KV computed anew).
//  - The windowed layers keep a stay's KV from its insertion until the last request whose hit's
//    window span covers it (its last need), and free it after that request's lookup; a stay that
//    no later hit needs is freed when its own request is done. That is the least they can keep
//    without losing a hit. It takes the trace's future (each stay's last need), so it bounds the
//    windowed layers' bytes from below, as every layer holding every block bounds them from
//    above; an engine, which does not know the future, keeps more or loses hits.
//  - The full layers' cache is PrefixCache, unchanged: at one capacity in blocks a windowed model
//    has the hits of the same model without windows (replay_hybrid checks it hit by hit).
#pragma once

#include <cstdint>
#include <vector>

#include "trace/prefix_cache.h"
#include "trace/trace.h"

namespace decodebench {

// Blocks [first, last] of a request's hash ids; empty when first > last.
struct WindowSpan {
  std::int64_t first = 0;
  std::int64_t last = -1;
  bool empty() const { return first > last; }
  std::int64_t blocks() const { return empty() ? 0 : last - first + 1; }
};
// The blocks a windowed layer of `window` tokens (> 0) reads to resume a hit of hit_tokens.
WindowSpan window_span(std::int64_t hit_tokens, int window, int block_tokens);

struct BlockStay {
  std::uint64_t id = 0;
  std::int64_t inserted_by = 0;  // the request (index in the trace) whose touch inserted it
  std::int64_t last_need = -1;   // the last request whose hit's window span covers it; -1: none
};

// Every stay of the full layers' replay, in the order the replay inserts them.
struct WindowKeepPlan {
  int window = 0;  // the window the needs were found for
  std::vector<BlockStay> stays;
};

// Replays the trace through the full layers' cache (cache_sim.h's definition) and records each
// stay and its last need for a window of `window` tokens (> 0).
WindowKeepPlan plan_window_keep(const Trace& trace, EvictionPolicy policy,
                                std::int64_t capacity_blocks, double ttl_s, int window);

struct HybridReplay {
  std::int64_t requests = 0;
  std::int64_t input_tokens = 0;
  std::int64_t hit_tokens = 0;       // what both kinds of layers serve (below)
  std::int64_t full_hit_tokens = 0;  // what the full layers alone serve: the model without windows
  PrefixCacheStats blocks;           // the full layers' cache
  std::int64_t windowed_peak = 0;    // most stays whose windowed KV was held between two requests
  std::int64_t windowed_kept = 0;    // stays whose windowed KV was kept past their own request
};

// The replay with both kinds of layers: the full layers' cache as above, and the windowed
// layers' KV kept as `plan` says. A request's hit is the longest leading run r of its ids in the
// full layers such that the windowed layers hold every block of window_span(min(r x B, input))
// (vLLM's hybrid manager takes the longest prefix every kind of layer can serve). With the plan
// for this replay and window, hit_tokens == full_hit_tokens; a plan that frees a needed block
// loses a hit here. Throws std::logic_error for a plan of another replay (its stays' ids differ).
HybridReplay replay_hybrid(const Trace& trace, EvictionPolicy policy, std::int64_t capacity_blocks,
                           double ttl_s, int window, const WindowKeepPlan& plan);

}  // namespace decodebench
