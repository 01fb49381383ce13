// `decodebench cache-sim`: a trace's requests replayed, in arrival order and without any
// concurrency, through a PrefixCache of a given capacity and policy (docs/design.md "Trace
// replay"). Per request at its arrival (trace time): expire(now); hit = the cache's leading run
// of its hash ids; hit tokens = min(run x block tokens, input tokens); then touch(all its ids).
// hit rate = sum of hit tokens / sum of input tokens. With a host tier (tiered_cache.h) the run
// is found in either tier and its tokens are split by tier: block k holds min(block tokens,
// input - k x block tokens) tokens. The capacity counts blocks the full-attention layers hold
// (every layer, for a model without windows); a model's windowed layers hold only the blocks a
// later hit's window reads (hybrid_cache.h), so at one capacity its hits are those of the same
// model without windows and its bytes fewer. With a host tier every layer is still counted.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/dtype.h"
#include "trace/prefix_cache.h"
#include "trace/tiered_cache.h"
#include "trace/trace.h"
#include "workload/workload.h"  // ModelShape

namespace decodebench {

inline constexpr double kUnboundedTokens = std::numeric_limits<double>::infinity();
// The largest finite host-tier capacity in tokens (2^53, about 9e15): every count up to it is
// exact in a double, and floor(tokens / block tokens) fits the int64 block counts (1e30 once
// became -2^63 blocks).
inline constexpr double kMaxHostCapacityTokens = 9007199254740992.0;

// What a request does with the blocks of its hit found in the host tier: always reload them over
// the link, never (recompute those tokens, as if they were a miss), or the cheaper of the two
// for that request: load = bytes / to_device + overhead (the request's host blocks in one
// transfer), recompute = 2 x parameters x tokens / prefill_flops.
enum class ReloadPolicy { always, never, cheaper };
std::string_view reload_policy_name(ReloadPolicy p);
ReloadPolicy parse_reload_policy(std::string_view name);  // InputError listing them

struct CacheSimSetting {
  EvictionPolicy policy = EvictionPolicy::lru;
  double capacity_tokens = kUnboundedTokens;  // > 0 or infinity; blocks = floor(tokens / block)
  double ttl_s = 0;                           // ttl only, > 0 (seconds of trace time)
  // A host-memory tier behind the cache (tiered_cache.h), tokens >= 0 (0: none); the cache above
  // is then HBM and must be finite.
  double host_capacity_tokens = 0;
  // With a host tier: the link its blocks cross and what a host hit does (ReloadTrade below).
  // No link (empty key): host hits are reloaded and only bytes are counted.
  std::string link{};          // configs/devices.json "links" key, as resolved by the caller
  double link_to_device = 0;   // B/s host -> HBM
  double link_to_host = 0;     // B/s HBM -> host
  double link_overhead_s = 0;  // per transfer (one per request and direction)
  double prefill_flops = 0;    // FLOP/s recomputation runs at (the device's tensor-core peak)
  ReloadPolicy reload = ReloadPolicy::always;
};

// The per-token trade behind `cheaper`, for a model, KV dtype, link and device: reloading a
// prefix of n tokens costs n x load_per_token + overhead, recomputing it n x recompute_per_token;
// reload pays from break_even_tokens on (infinity when recompute is cheaper per token: never).
struct ReloadTrade {
  double load_per_token_s = 0;
  double recompute_per_token_s = 0;
  double overhead_s = 0;
  double break_even_tokens = 0;
};
ReloadTrade reload_trade(const ModelShape& model, DType kv_dtype, double to_device,
                         double overhead_s, double prefill_flops);

// What a host tier adds to a setting (all zero without one).
struct CacheSimTiers {
  std::int64_t host_capacity_blocks = 0;
  std::int64_t hit_tokens_hbm = 0;   // hit tokens whose block was found in HBM
  std::int64_t hit_tokens_host = 0;  // ... in the host tier (promoted: they cross the link)
  double hit_rate_hbm = 0;           // hit_tokens_hbm / input_tokens
  double hit_rate_host = 0;
  TierStats blocks;               // promoted, demoted, dropped, host peak
  double link_bytes_to_hbm = 0;   // promoted blocks x block tokens x kv bytes per token
  double link_bytes_to_host = 0;  // demoted blocks x the same
  double host_bytes = 0;          // the host tier's KV bytes (capacity)
  // With a link: the host hits' fate and the link's time (requests serialized, each direction
  // on its own; busy fractions over the trace's span).
  std::int64_t reloads = 0;              // requests whose host blocks were reloaded
  std::int64_t reloaded_tokens = 0;      // host hit tokens reloaded (counted as saved)
  std::int64_t recomputed_tokens = 0;    // host hit tokens recomputed (counted as computed)
  double link_busy_s_to_hbm = 0;         // sum of the reload transfers' times
  double link_busy_s_to_host = 0;        // sum of the demotions' transfers' times
  double link_busy_fraction_to_hbm = 0;  // / span
  double link_busy_fraction_to_host = 0;
  ReloadTrade trade;
};

// What a model's windowed layers hold (hybrid_cache.h), for a model with windowed layers and a
// setting without a host tier (`modeled`); zero otherwise. cache_bytes is then full_layers_bytes
// + windowed_layers_bytes.
struct CacheSimWindowed {
  bool modeled = false;
  std::int64_t peak_blocks = 0;  // most blocks whose windowed-layer KV was held between requests
  std::int64_t kept_blocks = 0;  // block stays kept past their own request for a later hit
  double full_layers_bytes = 0;  // the held blocks (as cache_bytes counts them) x B x full bytes
  double windowed_layers_bytes = 0;  // peak_blocks x B x the windowed layers' bytes per token
  double all_layers_bytes = 0;       // every layer holding every block: the bound from above
};

struct CacheSimResult {
  CacheSimSetting setting;
  std::int64_t capacity_blocks = 0;  // kUnboundedBlocks for infinity
  std::int64_t requests = 0;
  std::int64_t input_tokens = 0;
  std::int64_t hit_tokens = 0;
  double hit_rate = 0;                       // hit_tokens / input_tokens
  double hit_rate_ceiling = 0;               // the same trace at infinite capacity (lru, no ttl)
  PrefixCacheStats blocks;                   // inserted, evicted, expired, peak
  std::int64_t prefill_tokens_computed = 0;  // input_tokens - hit_tokens
  std::int64_t prefill_tokens_saved = 0;     // hit_tokens
  double prefill_flops_saved = 0;            // 2 x model parameters x prefill_tokens_saved
  // The cache's KV bytes over all layers for the model and KV dtype: capacity blocks x block
  // tokens x kv bytes per token (kv_bytes_per_token_all_layers); at infinite capacity the
  // peak held instead. With windowed layers modeled (windowed.modeled): the full layers' share
  // of that plus the windowed layers' peak (CacheSimWindowed).
  double cache_bytes = 0;
  double elapsed_s = 0;       // wall time of this setting's replay
  CacheSimTiers tiers;        // with a host tier (setting.host_capacity_tokens > 0)
  CacheSimWindowed windowed;  // with windowed layers and no host tier
};

// The model needs num_params for the FLOPs (else params_from_shape; 0 FLOPs without a layer
// shape). Throws InputError for a setting out of range (naming it and what is valid).
CacheSimResult simulate_cache(const Trace& trace, const CacheSimSetting& setting,
                              const ModelShape& model, DType kv_dtype);
// Every setting, with the ceiling computed once.
std::vector<CacheSimResult> simulate_cache(const Trace& trace,
                                           const std::vector<CacheSimSetting>& settings,
                                           const ModelShape& model, DType kv_dtype);

// KV bytes of one token over every layer: kv_bytes_per_token (at P = 16) x num_layers (2 x Hkv x
// d x sizeof(kv) x num_layers for a float format, MLA's one latent row per layer), windowed layers
// counted like full ones: what a cached block costs when every layer holds it.
double kv_bytes_per_token_all_layers(const ModelShape& model, DType kv_dtype);
// The same split by kind of layer (full: num_layers - windowed_layers(), windowed: the rest);
// full + windowed == kv_bytes_per_token_all_layers.
struct KvBytesByLayer {
  double full = 0;
  double windowed = 0;
};
KvBytesByLayer kv_bytes_per_token_by_layer(const ModelShape& model, DType kv_dtype);

// The `cache_sim` JSON section (docs/report-schema.md "cache_sim"): {trace, model, kv_dtype,
// definitions, settings: [...]}, capacities of infinity written as the string "inf".
nlohmann::json cache_sim_json(const Trace& trace, const ModelShape& model, DType kv_dtype,
                              const std::vector<CacheSimResult>& results);
nlohmann::json to_json(const CacheSimResult& r);
// The trace's identity in reports: {source, format, block_tokens, requests, span_s,
// input_tokens, output_tokens, has_prefix_info}.
nlohmann::json trace_summary_json(const Trace& trace);

}  // namespace decodebench
