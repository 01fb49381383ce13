// The schedule half of `decodebench replay`: a trace's requests served by time-driven continuous
// batching on one modeled device, recording the decode steps that traffic produces (batch, each
// sequence's context, which blocks the batch shares). Pure host code, no kernels; the CLI then
// measures a sample of the steps on a backend (docs/design.md "Trace replay").
//
// The model (every choice named in the report):
//  - Clock: seconds of simulated time. Request i arrives at trace arrival_s / rate_scale.
//  - One KV pool of pool_blocks blocks of the trace's block_tokens tokens, shared by the cached
//    prefix blocks (a PrefixCache with the chosen policy) and the running sequences: a running
//    sequence pins its prompt's hash-id blocks and holds ceil(g / block_tokens) private blocks for
//    its g generated tokens. A trace without prefix information gives every prompt
//    ceil(input / block_tokens) private blocks instead.
//  - Admission, first come first served (head of line blocks), at every step boundary while
//    the batch is under max_batch: expire(now); hit = the cache's leading run (cache-sim's
//    definition); the request is admitted when its absent blocks and one private block fit
//    (PrefixCache::can_fit); its uncached tokens are prefilled at prefill_tokens_per_s
//    (modeled; the clock advances, decode waits: no chunked prefill) and its first output token
//    comes with the prefill (generated = 1).
//  - A decode step: every running sequence with generated g < output_tokens reads context
//    input + g tokens and generates one; when it reaches output_tokens it finishes, unpinning its
//    prompt blocks (they stay cached, evictable) and releasing its private ones. Requests with
//    output 1 finish at prefill. The step's modeled time is (weights bytes per step + the step's
//    unique KV bytes over all layers) / decode_read_bytes_per_s.
//  - When a running sequence's next private block does not fit, the most recently admitted
//    running sequence is preempted (recompute, as vLLM does): its blocks are released, it goes
//    back to the head of the queue, and at readmission its prompt's uncached tokens and its g
//    generated tokens are prefilled again (counted as recomputed tokens).
//  - A request that cannot fit even in an empty pool is rejected (counted, never admitted).
//  - A host tier (host_capacity_tokens > 0, tiered_cache.h): the pool's cached blocks are HBM;
//    every block the pool evicts (for a prompt, a private block, or ttl) is demoted to the host
//    tier, an exclusive LRU that drops its least recent block on overflow. At admission the hit
//    is the leading run in either tier (cache-sim's definition, split by tier); the host part is
//    reloaded or recomputed (reload_policy, cache-sim's rule: load = bytes / to_device +
//    overhead against recompute = tokens / prefill rate). A reload is one transfer on the link's
//    host -> HBM direction, which serves transfers one at a time in admission order; the
//    sequence holds its blocks but waits (no decode, no prefill) until its transfer ends, while
//    the running sequences keep decoding. Its uncached tokens are then prefilled as above. The
//    demotions of an admission or a step are one transfer on the HBM -> host direction, timed and
//    counted; nothing waits for it (an engine copies victims out before it reuses their pages;
//    the busy fraction says whether the link keeps up).
//  - Disaggregated prefill (prefill_link_to_device > 0): a prefill node computes every token
//    this node would prefill, one request at a time at prefill_tokens_per_s, and sends its KV
//    over the prefill link (one transfer per request, in order); the sequence waits for it as for
//    a reload, and this node's clock spends nothing on prefill. HBM hits are not sent.
//  - Sharing at a step, at the kernels' page granularity page_tokens (which divides
//    block_tokens): a page is shared when it is a whole page of prompt content inside a hash-id
//    block that two or more of the step's sequences hold. shared_tokens = sum over hash ids held
//    by k >= 2 sequences of (k - 1) x the whole-page tokens of that block: what a prefix-aware
//    kernel reading each shared page once would not read (cascade's saving on this traffic).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "trace/cache_sim.h"  // ReloadPolicy
#include "trace/prefix_cache.h"
#include "trace/trace.h"
#include "workload/workload.h"  // ModelShape, PagedLayout

namespace decodebench {

struct ScheduleConfig {
  ModelShape model;
  DType kv_dtype = DType::bf16;
  DType weights_dtype = DType::bf16;
  int page_tokens = 16;            // the kernels' block size P; divides the trace's block_tokens
  double rate_scale = 1;           // > 0; 2 = arrivals twice as fast
  std::int64_t kv_pool_bytes = 0;  // > 0, over all layers
  int max_batch = 256;             // >= 1
  EvictionPolicy policy = EvictionPolicy::lru;
  double ttl_s = 0;                    // ttl only, > 0, seconds of simulated time
  double prefill_tokens_per_s = 0;     // > 0, modeled
  double decode_read_bytes_per_s = 0;  // > 0, the modeled step's read rate
  std::int64_t max_steps = 0;          // > 0: stop recording (and simulating) after this many steps
  // A host tier behind the pool, tokens >= 0 (0: none), and the link its blocks cross: B/s each
  // way (0 with a host tier: transfers take no time, only bytes are counted).
  double host_capacity_tokens = 0;
  double link_to_device = 0;
  double link_to_host = 0;
  double link_overhead_s = 0;  // per transfer, every link
  ReloadPolicy reload = ReloadPolicy::always;
  double prefill_link_to_device = 0;  // > 0: disaggregated prefill over a link of this B/s
};
// Throws InputError naming the field and its valid range.
void validate(const ScheduleConfig& c, const Trace& trace);

struct StepSequence {
  std::int32_t request = 0;  // index into trace.requests
  std::int32_t context = 0;  // tokens this step reads (prompt + generated so far)
};

struct DecodeStep {
  double start_s = 0;
  double modeled_s = 0;    // this step's modeled time
  std::int64_t first = 0;  // its sequences: ReplaySchedule::sequences[first, first + batch)
  std::int32_t batch = 0;
  std::int64_t kv_tokens = 0;      // sum of contexts: what a prefix-unaware kernel reads
  std::int64_t shared_tokens = 0;  // of those, what reading each shared page once would not read
  // The KV bytes of every layer the step reads: a full layer the unique pages (kv_tokens -
  // shared_tokens), a windowed layer each sequence's pages from the one holding L - W. The
  // modeled time reads these and the weights.
  double read_bytes = 0;
};

struct RequestOutcome {
  double arrival_s = 0;    // scaled
  double admitted_s = -1;  // first admission; -1: never (rejected, or the run was cut)
  double finished_s = -1;
  std::int64_t hit_tokens = 0;         // at its first admission
  std::int64_t recomputed_tokens = 0;  // prefilled again after preemption
  int preemptions = 0;
  double decode_kv_tokens = 0;  // sum over its decode steps of its context
  double first_token_s = -1;    // its first output token (after its first prefill)
  double link_wait_s = 0;       // at admissions, waiting for its KV to arrive over a link
  bool rejected = false;
};

// What a host tier and the links add (all zero without them).
struct ReplayTiers {
  std::int64_t host_capacity_blocks = 0;
  std::int64_t hit_tokens_hbm = 0;  // at first admissions, by the tier the block was found in
  std::int64_t hit_tokens_host = 0;
  TierStats blocks;                    // promoted, demoted, dropped, host peak
  std::int64_t reloads = 0;            // admissions that reloaded host blocks
  std::int64_t reloaded_tokens = 0;    // host hit tokens reloaded
  std::int64_t recomputed_tokens = 0;  // host hit tokens recomputed instead (reload_policy)
  double link_bytes_to_hbm = 0;        // reloaded blocks x block bytes
  double link_bytes_to_host = 0;       // demoted blocks x block bytes
  double link_busy_s_to_hbm = 0;       // sum of the transfers' times
  double link_busy_s_to_host = 0;
  double prefill_link_bytes = 0;  // disaggregated: the prompts' KV sent by the prefill node
  double prefill_link_busy_s = 0;
  double prefill_node_busy_s = 0;    // the prefill node's compute
  double decode_idle_waiting_s = 0;  // clock time with sequences waiting for KV and none decoding
};

struct ReplaySchedule {
  std::vector<DecodeStep> steps;
  std::vector<StepSequence> sequences;
  std::vector<RequestOutcome> requests;  // [trace.requests.size()]
  std::int64_t pool_blocks = 0;
  std::int64_t input_tokens = 0;    // of admitted requests
  std::int64_t hit_tokens = 0;      // at first admissions
  double hit_rate = 0;              // hit_tokens / input_tokens
  PrefixCacheStats cache;           // inserted, evicted, expired, peak
  std::int64_t prefill_tokens = 0;  // computed, recomputation included
  std::int64_t recomputed_tokens = 0;
  std::int64_t preemptions = 0;
  std::int64_t rejected = 0;
  std::int64_t decode_tokens = 0;      // sum of step batches
  double prefill_s = 0, decode_s = 0;  // modeled busy time
  double end_s = 0;                    // clock when the last request finished (or the cut)
  bool cut = false;                    // stopped at max_steps
  double weights_bytes_per_step = 0;   // the modeled step's weight bytes
  double kv_bytes_per_token = 0;       // all layers
  ReplayTiers tiers;
};

ReplaySchedule simulate_schedule(const Trace& trace, const ScheduleConfig& config);

// n distinct step indices (all steps when there are fewer) at evenly spaced quantiles of
// kv_tokens, the smallest and the largest included, in ascending kv_tokens (ties by index).
std::vector<std::int64_t> sample_steps(const ReplaySchedule& s, int n);

// The decode time of every step estimated from the measured ones: measured_s[i] is the time of
// step sampled[i]; each step's time is linear in kv_tokens between the two sampled steps around
// it (constant beyond the smallest and the largest). Returns the sum over all steps.
// kInterpolationMethod names the method in the report.
inline constexpr const char* kInterpolationMethod =
    "piecewise linear in step KV tokens between the sampled steps (constant beyond the ends)";
double interpolate_decode_time(const ReplaySchedule& s, std::span<const std::int64_t> sampled,
                               std::span<const double> measured_s);

// Step `step` as a real paged layout at page_tokens P: row b is the step's b-th sequence with its
// context; a whole page of prompt content in hash-id block j of the request maps to one physical
// page per (hash id, page within the block), shared by every row holding that id; every other
// page (generated tokens, a prompt's partial last page, a trace without prefix information) is
// private. group_of is all 0, shared_blocks_of_group {0}; hit_rate_actual = shared tokens /
// total tokens, where a shared token is one read through a page that two or more rows read.
// The layout's unique_tokens equals the step's kv_tokens - shared_tokens.
PagedLayout step_layout(const Trace& trace, const ReplaySchedule& s, std::int64_t step,
                        int page_tokens);

}  // namespace decodebench
