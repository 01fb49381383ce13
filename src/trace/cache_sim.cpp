#include "trace/cache_sim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "common/errors.h"
#include "trace/hybrid_cache.h"
#include "workload/layer_model.h"  // params_from_shape

namespace decodebench {
namespace {

struct Replay {
  std::int64_t requests = 0;
  std::int64_t input_tokens = 0;
  std::int64_t hit_tokens = 0;
  PrefixCacheStats blocks;
  double elapsed_s = 0;
  // Tiered only.
  std::int64_t hit_tokens_host = 0;
  TierStats tiers;
  std::int64_t reloads = 0, reloaded_blocks = 0, reloaded_tokens = 0, recomputed_tokens = 0;
  double busy_to_hbm_s = 0, busy_to_host_s = 0;
  // Windowed layers modeled (hybrid_cache.h) only.
  bool windowed = false;
  std::int64_t windowed_peak = 0, windowed_kept = 0;
};

// What the tiered replay needs to price a host hit (cache_sim.h ReloadPolicy).
struct TradeContext {
  bool priced = false;  // a link was given: times are computed
  ReloadPolicy reload = ReloadPolicy::always;
  double block_bytes = 0;  // one block's KV over every layer
  double to_device = 0, to_host = 0, overhead_s = 0;
  double flops_per_token = 0;  // 2 x parameters
  double prefill_flops = 0;
};

// cache_sim.h's tiered definition: the run found in either tier, its tokens by block and tier;
// each request's host blocks of the run reloaded or recomputed as the policy says.
Replay replay_tiered(const Trace& trace, EvictionPolicy policy, std::int64_t hbm_blocks,
                     std::int64_t host_blocks, double ttl_s, const TradeContext& trade) {
  const auto t0 = std::chrono::steady_clock::now();
  TieredPrefixCache cache(policy, hbm_blocks, host_blocks, ttl_s);
  Replay r;
  std::vector<CacheTier> tiers;
  const std::int64_t bt = trace.block_tokens;
  for (const TraceRequest& q : trace.requests) {
    // Blocks demoted at this arrival (ttl's expiries, then the touch's victims): one transfer.
    const std::int64_t demoted_before = cache.stats().demoted;
    cache.expire(q.arrival_s);
    const int run = cache.lookup(q.hash_ids, &tiers);
    std::int64_t host_tokens = 0, host_run_blocks = 0;
    for (int k = 0; k < run; ++k) {
      const std::int64_t tokens = std::clamp<std::int64_t>(q.input_tokens - k * bt, 0, bt);
      r.hit_tokens += tokens;
      if (tiers[k] == CacheTier::host) {
        host_tokens += tokens;
        ++host_run_blocks;
      }
    }
    r.hit_tokens_host += host_tokens;
    if (host_run_blocks > 0) {
      const double load = trade.priced ? static_cast<double>(host_run_blocks) * trade.block_bytes /
                                                 trade.to_device +
                                             trade.overhead_s
                                       : 0;
      const double recompute =
          trade.prefill_flops > 0
              ? trade.flops_per_token * static_cast<double>(host_tokens) / trade.prefill_flops
              : 0;
      const bool reload = trade.reload == ReloadPolicy::always ||
                          (trade.reload == ReloadPolicy::cheaper && load <= recompute);
      if (reload) {
        ++r.reloads;
        r.reloaded_blocks += host_run_blocks;
        r.reloaded_tokens += host_tokens;
        r.busy_to_hbm_s += load;
      } else {
        r.recomputed_tokens += host_tokens;
      }
    }
    r.input_tokens += q.input_tokens;
    cache.touch(q.hash_ids, q.arrival_s);
    const std::int64_t demoted = cache.stats().demoted - demoted_before;
    if (trade.priced && demoted > 0) {
      r.busy_to_host_s +=
          static_cast<double>(demoted) * trade.block_bytes / trade.to_host + trade.overhead_s;
    }
    ++r.requests;
  }
  r.blocks = cache.hbm().stats();
  r.tiers = cache.stats();
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// cache_sim.h's definition: per request, in arrival order, expire, count the leading run, touch.
Replay replay(const Trace& trace, EvictionPolicy policy, std::int64_t capacity_blocks,
              double ttl_s) {
  const auto t0 = std::chrono::steady_clock::now();
  PrefixCache cache(policy, capacity_blocks, ttl_s);
  Replay r;
  for (const TraceRequest& q : trace.requests) {
    cache.expire(q.arrival_s);
    const std::int64_t run = cache.leading_run(q.hash_ids);
    // The last block may be partial: a whole run is worth at most the prompt.
    r.hit_tokens += std::min<std::int64_t>(run * trace.block_tokens, q.input_tokens);
    r.input_tokens += q.input_tokens;
    cache.touch(q.hash_ids, q.arrival_s);
    ++r.requests;
  }
  r.blocks = cache.stats();
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// hybrid_cache.h's replay for a model with windowed layers: the full layers' replay finds each
// block stay's last need, the hybrid replay keeps the windowed layers' KV by it. Its hits are the
// full layers' (the model without windows): anything else is a bug in the plan.
Replay replay_windowed(const Trace& trace, EvictionPolicy policy, std::int64_t capacity_blocks,
                       double ttl_s, int window) {
  const auto t0 = std::chrono::steady_clock::now();
  const WindowKeepPlan plan = plan_window_keep(trace, policy, capacity_blocks, ttl_s, window);
  const HybridReplay h = replay_hybrid(trace, policy, capacity_blocks, ttl_s, window, plan);
  if (h.hit_tokens != h.full_hit_tokens) {
    throw std::logic_error(fmt::format(
        "cache-sim: the windowed layers lost {} hit tokens of {} (window {}): the keep plan freed "
        "a block a hit reads",
        h.full_hit_tokens - h.hit_tokens, h.full_hit_tokens, window));
  }
  Replay r;
  r.requests = h.requests;
  r.input_tokens = h.input_tokens;
  r.hit_tokens = h.hit_tokens;
  r.blocks = h.blocks;
  r.windowed = true;
  r.windowed_peak = h.windowed_peak;
  r.windowed_kept = h.windowed_kept;
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

double ratio(std::int64_t num, std::int64_t den) {
  return den > 0 ? static_cast<double>(num) / static_cast<double>(den) : 0.0;
}

std::int64_t model_params(const ModelShape& m) {
  return m.num_params > 0 ? m.num_params : params_from_shape(m);
}

// Throws InputError naming the setting; returns its capacity in blocks.
std::int64_t check_setting(const CacheSimSetting& s, int block_tokens) {
  const std::string name =
      s.policy == EvictionPolicy::ttl
          ? fmt::format("{} capacity {} tokens ttl {} s", policy_name(s.policy), s.capacity_tokens,
                        s.ttl_s)
          : fmt::format("{} capacity {} tokens", policy_name(s.policy), s.capacity_tokens);
  if (std::isnan(s.capacity_tokens) || s.capacity_tokens <= 0) {
    throw InputError(fmt::format(
        "cache-sim setting '{}': capacity must be a number of tokens > 0 or inf", name));
  }
  if (s.policy == EvictionPolicy::ttl && !(s.ttl_s > 0 && std::isfinite(s.ttl_s))) {
    throw InputError(fmt::format(
        "cache-sim setting '{}': the ttl policy needs a finite ttl_s > 0 seconds (of trace time)",
        name));
  }
  if (block_tokens < 1) {
    throw InputError(
        fmt::format("cache-sim: the trace's block_tokens is {}; valid: >= 1", block_tokens));
  }
  if (!(s.host_capacity_tokens >= 0) || !(s.host_capacity_tokens <= kMaxHostCapacityTokens)) {
    throw InputError(
        fmt::format("cache-sim setting '{}': host capacity {} tokens; valid: a number >= 0 and <= "
                    "{:g} (0: none)",
                    name, s.host_capacity_tokens, kMaxHostCapacityTokens));
  }
  if (s.host_capacity_tokens > 0 && std::isinf(s.capacity_tokens)) {
    throw InputError(fmt::format(
        "cache-sim setting '{}': a host tier needs a finite HBM capacity (an unbounded one never "
        "demotes a block)",
        name));
  }
  const double blocks = std::floor(s.capacity_tokens / block_tokens);
  // Beyond what int64 counts, a capacity is as good as unbounded.
  if (std::isinf(blocks) || blocks >= static_cast<double>(kUnboundedBlocks)) {
    return kUnboundedBlocks;
  }
  return static_cast<std::int64_t>(blocks);
}

CacheSimResult result_of(const Trace& trace, const CacheSimSetting& setting,
                         std::int64_t capacity_blocks, const Replay& r, double ceiling,
                         const ModelShape& model, DType kv_dtype) {
  CacheSimResult out;
  out.setting = setting;
  out.capacity_blocks = capacity_blocks;
  out.requests = r.requests;
  out.input_tokens = r.input_tokens;
  out.hit_tokens = r.hit_tokens;
  out.hit_rate = ratio(r.hit_tokens, r.input_tokens);
  out.hit_rate_ceiling = ceiling;
  out.blocks = r.blocks;
  out.prefill_tokens_computed = r.input_tokens - r.hit_tokens;
  out.prefill_tokens_saved = r.hit_tokens;
  out.prefill_flops_saved =
      2.0 * static_cast<double>(model_params(model)) * static_cast<double>(r.hit_tokens);
  const double held_blocks = capacity_blocks == kUnboundedBlocks
                                 ? static_cast<double>(r.blocks.peak_blocks)
                                 : static_cast<double>(capacity_blocks);
  out.cache_bytes =
      held_blocks * trace.block_tokens * kv_bytes_per_token_all_layers(model, kv_dtype);
  if (r.windowed) {
    // The full layers hold what the capacity holds; the windowed layers' pool is sized to the
    // most they held.
    const KvBytesByLayer per_token = kv_bytes_per_token_by_layer(model, kv_dtype);
    CacheSimWindowed& w = out.windowed;
    w.modeled = true;
    w.peak_blocks = r.windowed_peak;
    w.kept_blocks = r.windowed_kept;
    w.all_layers_bytes = out.cache_bytes;
    w.full_layers_bytes = held_blocks * trace.block_tokens * per_token.full;
    w.windowed_layers_bytes =
        static_cast<double>(r.windowed_peak) * trace.block_tokens * per_token.windowed;
    out.cache_bytes = w.full_layers_bytes + w.windowed_layers_bytes;
  }
  out.elapsed_s = r.elapsed_s;
  if (setting.host_capacity_tokens > 0) {
    CacheSimTiers& t = out.tiers;
    const double block_bytes = trace.block_tokens * kv_bytes_per_token_all_layers(model, kv_dtype);
    t.host_capacity_blocks =
        static_cast<std::int64_t>(std::floor(setting.host_capacity_tokens / trace.block_tokens));
    t.hit_tokens_host = r.hit_tokens_host;
    t.hit_tokens_hbm = r.hit_tokens - r.hit_tokens_host;
    t.hit_rate_hbm = ratio(t.hit_tokens_hbm, r.input_tokens);
    t.hit_rate_host = ratio(t.hit_tokens_host, r.input_tokens);
    t.blocks = r.tiers;
    t.link_bytes_to_hbm = static_cast<double>(r.reloaded_blocks) * block_bytes;
    t.link_bytes_to_host = static_cast<double>(r.tiers.demoted) * block_bytes;
    t.host_bytes = static_cast<double>(t.host_capacity_blocks) * block_bytes;
    t.reloads = r.reloads;
    t.reloaded_tokens = r.reloaded_tokens;
    t.recomputed_tokens = r.recomputed_tokens;
    // A recomputed host hit saves no prefill.
    out.prefill_tokens_saved = r.hit_tokens - r.recomputed_tokens;
    out.prefill_tokens_computed = r.input_tokens - out.prefill_tokens_saved;
    out.prefill_flops_saved = 2.0 * static_cast<double>(model_params(model)) *
                              static_cast<double>(out.prefill_tokens_saved);
    if (!setting.link.empty()) {
      double span = 0;
      for (const TraceRequest& q : trace.requests) span = std::max(span, q.arrival_s);
      t.link_busy_s_to_hbm = r.busy_to_hbm_s;
      t.link_busy_s_to_host = r.busy_to_host_s;
      t.link_busy_fraction_to_hbm = span > 0 ? r.busy_to_hbm_s / span : 0;
      t.link_busy_fraction_to_host = span > 0 ? r.busy_to_host_s / span : 0;
      t.trade = reload_trade(model, kv_dtype, setting.link_to_device, setting.link_overhead_s,
                             setting.prefill_flops);
    }
  }
  return out;
}

double ceiling_of(const Trace& trace) {
  const Replay r = replay(trace, EvictionPolicy::lru, kUnboundedBlocks, 0);
  return ratio(r.hit_tokens, r.input_tokens);
}

constexpr int kBytesBlockSize = 16;  // the kernels' default P: int4 keys keep a scale per block

}  // namespace

double kv_bytes_per_token_all_layers(const ModelShape& model, DType kv_dtype) {
  return kv_bytes_per_token(model, kv_dtype, kBytesBlockSize) * model.num_layers;
}

KvBytesByLayer kv_bytes_per_token_by_layer(const ModelShape& model, DType kv_dtype) {
  const double layer = kv_bytes_per_token(model, kv_dtype, kBytesBlockSize);
  const int windowed = model.windowed_layers();
  return {layer * (model.num_layers - windowed), layer * windowed};
}

std::string_view reload_policy_name(ReloadPolicy p) {
  switch (p) {
    case ReloadPolicy::always: return "always";
    case ReloadPolicy::never: return "never";
    case ReloadPolicy::cheaper: return "cheaper";
  }
  return "?";
}

ReloadPolicy parse_reload_policy(std::string_view name) {
  for (ReloadPolicy p : {ReloadPolicy::always, ReloadPolicy::never, ReloadPolicy::cheaper}) {
    if (name == reload_policy_name(p)) return p;
  }
  throw InputError(fmt::format("unknown reload policy '{}'; valid: always, never, cheaper", name));
}

ReloadTrade reload_trade(const ModelShape& model, DType kv_dtype, double to_device,
                         double overhead_s, double prefill_flops) {
  ReloadTrade t;
  t.load_per_token_s = to_device > 0 ? kv_bytes_per_token_all_layers(model, kv_dtype) / to_device
                                     : std::numeric_limits<double>::infinity();
  t.recompute_per_token_s = prefill_flops > 0
                                ? 2.0 * static_cast<double>(model_params(model)) / prefill_flops
                                : std::numeric_limits<double>::infinity();
  t.overhead_s = overhead_s;
  // n x load + overhead <= n x recompute from n = overhead / (recompute - load) on.
  t.break_even_tokens = t.recompute_per_token_s > t.load_per_token_s
                            ? overhead_s / (t.recompute_per_token_s - t.load_per_token_s)
                            : std::numeric_limits<double>::infinity();
  return t;
}

CacheSimResult simulate_cache(const Trace& trace, const CacheSimSetting& setting,
                              const ModelShape& model, DType kv_dtype) {
  return simulate_cache(trace, std::vector<CacheSimSetting>{setting}, model, kv_dtype).front();
}

std::vector<CacheSimResult> simulate_cache(const Trace& trace,
                                           const std::vector<CacheSimSetting>& settings,
                                           const ModelShape& model, DType kv_dtype) {
  // Every setting is checked before anything runs, so a bad one costs no replay.
  std::vector<std::int64_t> blocks;
  for (const CacheSimSetting& s : settings) blocks.push_back(check_setting(s, trace.block_tokens));
  const double ceiling = ceiling_of(trace);
  std::vector<CacheSimResult> out;
  for (std::size_t i = 0; i < settings.size(); ++i) {
    const CacheSimSetting& st = settings[i];
    TradeContext trade;
    trade.priced = !st.link.empty();
    trade.reload = st.reload;
    trade.block_bytes = trace.block_tokens * kv_bytes_per_token_all_layers(model, kv_dtype);
    trade.to_device = st.link_to_device;
    trade.to_host = st.link_to_host;
    trade.overhead_s = st.link_overhead_s;
    trade.flops_per_token = 2.0 * static_cast<double>(model_params(model));
    trade.prefill_flops = st.prefill_flops;
    const std::int64_t host_blocks =
        static_cast<std::int64_t>(std::floor(st.host_capacity_tokens / trace.block_tokens));
    // With a host tier every layer is counted (cache_sim.h).
    Replay r;
    if (st.host_capacity_tokens > 0) {
      r = replay_tiered(trace, st.policy, blocks[i], host_blocks, st.ttl_s, trade);
    } else if (model.windowed_layers() > 0) {
      r = replay_windowed(trace, st.policy, blocks[i], st.ttl_s, model.sliding_window);
    } else {
      r = replay(trace, st.policy, blocks[i], st.ttl_s);
    }
    out.push_back(result_of(trace, settings[i], blocks[i], r, ceiling, model, kv_dtype));
  }
  return out;
}

}  // namespace decodebench
