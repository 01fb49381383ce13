// The replay's schedule (replay_schedule.h names every rule it follows). Long on purpose: the
// Scheduler is one state machine (admission, prefill, decode steps, eviction and the links'
// queues share its clock and pool), kept whole so its invariants are read in one place; the
// checks of its inputs and the sampled steps' layouts sit around it.
#include "trace/replay_schedule.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "common/errors.h"
#include "device/paged_kv.h"
#include "trace/tiered_cache.h"
#include "workload/layer_model.h"

namespace decodebench {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// K and V of one token over every layer (cache-sim's definition, at the kernels' block size).
double kv_bytes_per_token_all_layers(const ModelShape& m, DType kv, int page_tokens) {
  return kv_bytes_per_token(m, kv, page_tokens) * m.num_layers;
}

bool is_power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }

// page_tokens is the sweep's --block-size: the kernels' page, inside the trace's hash blocks.
void check_page_tokens(int page_tokens, int block_tokens) {
  if (!is_power_of_two(page_tokens) || block_tokens % page_tokens != 0) {
    throw InputError(fmt::format(
        "--block-size {} must be a power of two dividing the trace's block of {} tokens "
        "(--trace-block-tokens)",
        page_tokens, block_tokens));
  }
}

bool finite_positive(double x) { return std::isfinite(x) && x > 0; }

// Whether the prompt's blocks are hash-id blocks (pinned in the prefix cache) or private.
bool uses_hash_ids(const Trace& trace) { return trace.has_prefix_info; }

// Tokens of whole pages of prompt content in hash block j of a prompt of `input` tokens.
int whole_page_tokens(int input, int j, int block_tokens, int page_tokens) {
  const int in_block = std::min(block_tokens, input - j * block_tokens);
  return in_block / page_tokens * page_tokens;
}

std::int64_t pool_blocks_of(const ScheduleConfig& c, int block_tokens) {
  const double block_bytes = static_cast<double>(block_tokens) *
                             kv_bytes_per_token_all_layers(c.model, c.kv_dtype, c.page_tokens);
  return static_cast<std::int64_t>(std::floor(static_cast<double>(c.kv_pool_bytes) / block_bytes));
}

// The weights a decode step reads once, whatever the batch: every layer's four GEMMs and the LM
// head. Only weight_bytes is used, so the activation dtype passed does not matter.
double weights_bytes_per_step(const ModelShape& m, DType weights) {
  if (!m.has_layer_shape()) return 0;
  double layer = 0;
  for (LayerStage s : kLayerGemms) {
    layer += static_cast<double>(gemm_model(gemm_shape(m, s, 1), weights, weights).weight_bytes);
  }
  const double head = static_cast<double>(
      gemm_model(gemm_shape(m, LayerStage::lm_head, 1), weights, weights).weight_bytes);
  return m.num_layers * layer + head;
}

// The trace's promises that the schedule relies on (the readers keep them; a hand-built trace
// may not): arrivals in order, lengths >= 1 and, with prefix information, one id per block,
// distinct within a request (an id names a block given its whole prefix), and one length per id
// (equal ids are equal content), so a shared id covers the same pages in every row.
void validate_trace(const Trace& t) {
  std::unordered_map<std::uint64_t, int> tokens_of_id;
  std::unordered_set<std::uint64_t> in_request;
  double last_arrival = 0;
  for (std::size_t i = 0; i < t.requests.size(); ++i) {
    const TraceRequest& r = t.requests[i];
    if (!std::isfinite(r.arrival_s) || r.arrival_s < 0 || (i > 0 && r.arrival_s < last_arrival)) {
      throw InputError(
          fmt::format("{}: request {} arrives at {} s; arrivals must be finite, >= 0 and in order",
                      t.source, i, r.arrival_s));
    }
    last_arrival = r.arrival_s;
    if (r.input_tokens < 1 || r.output_tokens < 1) {
      throw InputError(
          fmt::format("{}: request {} has {} input and {} output tokens; both must be "
                      ">= 1",
                      t.source, i, r.input_tokens, r.output_tokens));
    }
    if (!uses_hash_ids(t)) continue;
    const std::int64_t blocks = ceil_div(r.input_tokens, t.block_tokens);
    if (static_cast<std::int64_t>(r.hash_ids.size()) != blocks) {
      throw InputError(fmt::format(
          "{}: request {} has {} hash ids, its {} input tokens need {} blocks of {} tokens",
          t.source, i, r.hash_ids.size(), r.input_tokens, blocks, t.block_tokens));
    }
    in_request.clear();
    for (std::size_t j = 0; j < r.hash_ids.size(); ++j) {
      const std::uint64_t id = r.hash_ids[j];
      if (!in_request.insert(id).second) {
        throw InputError(fmt::format(
            "{}: request {} holds hash id {} twice; an id names a block with its whole prefix",
            t.source, i, id));
      }
      const int tokens =
          std::min(t.block_tokens, r.input_tokens - static_cast<int>(j) * t.block_tokens);
      const auto [it, inserted] = tokens_of_id.emplace(id, tokens);
      if (!inserted && it->second != tokens) {
        throw InputError(fmt::format(
            "{}: hash id {} covers {} tokens in request {} but {} in an earlier one; equal ids "
            "must be equal content",
            t.source, id, tokens, i, it->second));
      }
    }
  }
}

}  // namespace

void validate(const ScheduleConfig& c, const Trace& trace) {
  if (c.model.num_layers < 1 || c.model.num_kv_heads < 1 || c.model.head_dim < 1) {
    throw InputError(fmt::format(
        "--model {}: {} layers, {} KV heads, head dim {}; the replay needs all three >= 1",
        c.model.name, c.model.num_layers, c.model.num_kv_heads, c.model.head_dim));
  }
  if (trace.block_tokens < 1) {
    throw InputError(fmt::format("{}: block of {} tokens; --trace-block-tokens must be >= 1",
                                 trace.source, trace.block_tokens));
  }
  check_page_tokens(c.page_tokens, trace.block_tokens);
  if (!finite_positive(c.rate_scale)) {
    throw InputError(fmt::format("--rate-scale {} must be finite and > 0", c.rate_scale));
  }
  if (c.kv_pool_bytes <= 0) {
    throw InputError(fmt::format("--kv-pool {} bytes must be > 0", c.kv_pool_bytes));
  }
  if (pool_blocks_of(c, trace.block_tokens) < 1) {
    throw InputError(fmt::format(
        "--kv-pool {} bytes holds no block: one block of {} tokens of {} in {} takes {} bytes",
        c.kv_pool_bytes, trace.block_tokens, c.model.name, dtype_name(c.kv_dtype),
        trace.block_tokens * kv_bytes_per_token_all_layers(c.model, c.kv_dtype, c.page_tokens)));
  }
  if (c.max_batch < 1) {
    throw InputError(fmt::format("--max-batch {} must be >= 1", c.max_batch));
  }
  if (c.policy == EvictionPolicy::ttl && !finite_positive(c.ttl_s)) {
    throw InputError(fmt::format("--ttl {} s must be finite and > 0 with --policy ttl", c.ttl_s));
  }
  if (!finite_positive(c.prefill_tokens_per_s)) {
    throw InputError(
        fmt::format("--prefill-rate {} tokens/s must be finite and > 0", c.prefill_tokens_per_s));
  }
  if (!finite_positive(c.decode_read_bytes_per_s)) {
    throw InputError(fmt::format("--decode-read-rate {} bytes/s must be finite and > 0",
                                 c.decode_read_bytes_per_s));
  }
  if (!(c.host_capacity_tokens >= 0) || !(c.host_capacity_tokens <= kMaxHostCapacityTokens)) {
    throw InputError(fmt::format(
        "--host-capacity {} tokens; valid: a number of tokens >= 0 and <= {:g} (0: no host tier)",
        c.host_capacity_tokens, kMaxHostCapacityTokens));
  }
  for (const auto& [value, flag] : {std::pair{c.link_to_device, "--link (to the device)"},
                                    std::pair{c.link_to_host, "--link (to the host)"},
                                    std::pair{c.link_overhead_s, "--link-overhead"},
                                    std::pair{c.prefill_link_to_device, "--prefill-link"}}) {
    if (!(value >= 0) || !std::isfinite(value)) {
      throw InputError(fmt::format("{} {}; valid: a finite number >= 0", flag, value));
    }
  }
  if (c.max_steps < 0) {
    throw InputError(fmt::format("--max-steps {} must be >= 0 (0: no limit)", c.max_steps));
  }
  validate_trace(trace);
}

namespace {

// One request being served: its blocks and progress. The prompt's hash-id blocks are pinned in
// the cache (or, without prefix information, counted in prompt_private).
struct Running {
  std::int32_t request = 0;
  std::int32_t generated = 0;  // g
  std::int64_t prompt_private = 0;
  std::int64_t generated_private = 0;  // ceil(g / block_tokens)
  // Admitted but waiting for its KV over a link until ready_s; then its `prefill` tokens are
  // prefilled here and it decodes (started).
  bool started = false;
  double ready_s = 0;
  std::int64_t prefill = 0;
};

// One link direction serving transfers one at a time: a transfer asked for at `from` starts when
// the direction is free and takes bytes / rate + overhead (no time without a rate).
struct LinkQueue {
  double rate = 0;
  double overhead_s = 0;
  double free_at = 0;
  double busy_s = 0;
  double send(double from, double bytes) {
    const double dt = rate > 0 ? bytes / rate + overhead_s : 0.0;
    free_at = std::max(from, free_at) + dt;
    busy_s += dt;
    return free_at;
  }
};

class Scheduler {
 public:
  Scheduler(const Trace& trace, const ScheduleConfig& c)
      : t_(trace),
        c_(c),
        hashed_(uses_hash_ids(trace)),
        cache_(c.policy, pool_blocks_of(c, trace.block_tokens),
               static_cast<std::int64_t>(std::floor(c.host_capacity_tokens / trace.block_tokens)),
               c.policy == EvictionPolicy::ttl ? c.ttl_s : 0),
        tiered_(cache_.host_capacity_blocks() > 0),
        generated_(trace.requests.size(), 0) {
    s_.pool_blocks = cache_.hbm().capacity_blocks();
    s_.tiers.host_capacity_blocks = cache_.host_capacity_blocks();
    to_hbm_ = {c.link_to_device, c.link_overhead_s};
    to_host_ = {c.link_to_host, c.link_overhead_s};
    prefill_link_ = {c.prefill_link_to_device, c.link_overhead_s};
    s_.kv_bytes_per_token = kv_bytes_per_token_all_layers(c.model, c.kv_dtype, c.page_tokens);
    layer_bytes_per_token_ = kv_bytes_per_token(c.model, c.kv_dtype, c.page_tokens);
    for (const ModelShape::LayerClass& k : c.model.layer_classes()) {
      if (k.window > 0)
        windowed_.push_back(k);
      else
        full_layers_ += k.layers;
    }
    s_.weights_bytes_per_step = weights_bytes_per_step(c.model, c.weights_dtype);
    s_.requests.resize(trace.requests.size());
    for (std::size_t i = 0; i < trace.requests.size(); ++i) {
      s_.requests[i].arrival_s = trace.requests[i].arrival_s / c.rate_scale;
    }
  }

  ReplaySchedule run() {
    while (true) {
      admit();
      start_ready();
      if (running_.empty()) {
        // With nothing running every queued request fits (fits_alone), so admit() takes at
        // least the head; the queue can be non-empty here only when start_ready() just finished
        // the last sequence (output 1) or enqueued arrivals.
        if (!queue_.empty()) {
          const std::size_t queued = queue_.size();
          admit();
          if (running_.empty() && queue_.size() == queued)
            throw std::logic_error("replay: a request fits no empty pool");
          continue;
        }
        if (next_arrival_ == t_.requests.size()) break;
        now_ = std::max(now_, s_.requests[next_arrival_].arrival_s);
        continue;
      }
      if (!any_started()) {
        // Every admitted sequence waits for a link: the clock goes to the first transfer's end
        // or the next arrival, whichever comes first.
        double next = std::numeric_limits<double>::infinity();
        for (const Running& run : running_) next = std::min(next, run.ready_s);
        if (next_arrival_ < t_.requests.size())
          next = std::min(next, s_.requests[next_arrival_].arrival_s);
        s_.tiers.decode_idle_waiting_s += std::max(0.0, next - now_);
        now_ = std::max(now_, next);
        continue;
      }
      decode_step();
      if (c_.max_steps > 0 && static_cast<std::int64_t>(s_.steps.size()) >= c_.max_steps) {
        s_.cut = !running_.empty() || !queue_.empty() || next_arrival_ < t_.requests.size();
        break;
      }
    }
    s_.end_s = now_;
    s_.cache = cache_.hbm().stats();
    if (tiered_) s_.tiers.blocks = cache_.stats();
    s_.tiers.link_busy_s_to_hbm = to_hbm_.busy_s;
    s_.tiers.link_busy_s_to_host = to_host_.busy_s;
    s_.tiers.prefill_link_busy_s = prefill_link_.busy_s;
    s_.hit_rate = s_.input_tokens
                      ? static_cast<double>(s_.hit_tokens) / static_cast<double>(s_.input_tokens)
                      : 0.0;
    return std::move(s_);
  }

 private:
  std::span<const std::uint64_t> ids_of(std::int32_t r) const {
    if (!hashed_) return {};
    return t_.requests[static_cast<std::size_t>(r)].hash_ids;
  }
  std::int64_t prompt_private_of(std::int32_t r) const {
    return hashed_
               ? 0
               : ceil_div(t_.requests[static_cast<std::size_t>(r)].input_tokens, t_.block_tokens);
  }

  void enqueue_arrivals() {
    while (next_arrival_ < t_.requests.size() && s_.requests[next_arrival_].arrival_s <= now_) {
      queue_.push_back(static_cast<std::int32_t>(next_arrival_++));
    }
  }

  // At its largest a request holds its prompt blocks and ceil(output / block) private blocks
  // (reserved before the step that generates its last token); one that cannot hold them in an
  // empty pool would preempt itself forever.
  bool fits_alone(std::int32_t r) const {
    const TraceRequest& q = t_.requests[static_cast<std::size_t>(r)];
    const std::int64_t prompt =
        hashed_ ? static_cast<std::int64_t>(q.hash_ids.size()) : prompt_private_of(r);
    return prompt + ceil_div(q.output_tokens, t_.block_tokens) <= s_.pool_blocks;
  }

  // First come, first served while the batch has room: the head of the queue blocks the rest.
  void admit() {
    enqueue_arrivals();
    while (static_cast<int>(running_.size()) < c_.max_batch && !queue_.empty()) {
      const std::int32_t r = queue_.front();
      RequestOutcome& out = s_.requests[static_cast<std::size_t>(r)];
      const TraceRequest& q = t_.requests[static_cast<std::size_t>(r)];
      if (!fits_alone(r)) {
        out.rejected = true;
        ++s_.rejected;
        queue_.pop_front();
        continue;
      }
      cache_.expire(now_);
      const auto ids = ids_of(r);
      const std::int32_t g = std::max(generated_[static_cast<std::size_t>(r)], 1);
      Running run{r, g, prompt_private_of(r), ceil_div(g, t_.block_tokens)};
      // Room for its first decode step too: a readmission at g = k x block would otherwise take
      // the pool's last block, need another at once and preempt itself every step. For a first
      // admission (g = 1) this is the one private block whenever block_tokens >= 2.
      const std::int64_t first_step =
          g < q.output_tokens ? ceil_div(g + 1, t_.block_tokens) : run.generated_private;
      if (!cache_.can_fit(ids, run.prompt_private + first_step)) break;
      queue_.pop_front();

      // The hit in either tier, its tokens split by the tier each block was found in.
      const int found = cache_.lookup(ids, &found_in_);
      const std::int64_t hit = std::min<std::int64_t>(
          static_cast<std::int64_t>(found) * t_.block_tokens, q.input_tokens);
      std::int64_t host_tokens = 0;
      std::int64_t host_blocks = 0;
      for (int k = 0; k < found; ++k) {
        if (found_in_[static_cast<std::size_t>(k)] != CacheTier::host) continue;
        ++host_blocks;
        host_tokens += std::min(t_.block_tokens, q.input_tokens - k * t_.block_tokens);
      }
      const double block_bytes = static_cast<double>(t_.block_tokens) * s_.kv_bytes_per_token;
      const double host_bytes = static_cast<double>(host_blocks) * block_bytes;
      bool reload = true;
      if (host_tokens > 0 && c_.reload != ReloadPolicy::always) {
        const double load =
            c_.link_to_device > 0 ? host_bytes / c_.link_to_device + c_.link_overhead_s : 0.0;
        const double recompute = static_cast<double>(host_tokens) / c_.prefill_tokens_per_s;
        reload = c_.reload == ReloadPolicy::cheaper && load <= recompute;
      }
      if (!ids.empty() && !cache_.touch(ids, now_, /*pin=*/true)) {
        throw std::logic_error("replay: touch failed after can_fit");
      }
      if (!cache_.reserve_private(run.prompt_private + run.generated_private)) {
        throw std::logic_error("replay: reserve_private failed after can_fit");
      }
      std::int64_t prefill = q.input_tokens - hit + (reload ? 0 : host_tokens);
      if (out.admitted_s < 0) {
        out.admitted_s = now_;
        out.hit_tokens = hit;
        s_.input_tokens += q.input_tokens;
        s_.hit_tokens += hit;
        s_.tiers.hit_tokens_hbm += hit - host_tokens;
        s_.tiers.hit_tokens_host += host_tokens;
        if (!reload) s_.tiers.recomputed_tokens += host_tokens;
      } else {
        prefill += g;  // the generated tokens' KV went with the preemption
        out.recomputed_tokens += prefill;
        s_.recomputed_tokens += prefill;
      }
      s_.prefill_tokens += prefill;
      generated_[static_cast<std::size_t>(r)] = g;

      // What must arrive over a link before the sequence can go on.
      double ready = now_;
      if (host_tokens > 0 && reload) {
        ++s_.tiers.reloads;
        s_.tiers.reloaded_tokens += host_tokens;
        s_.tiers.link_bytes_to_hbm += host_bytes;
        ready = to_hbm_.send(now_, host_bytes);
      }
      if (c_.prefill_link_to_device > 0 && prefill > 0) {
        const double compute = static_cast<double>(prefill) / c_.prefill_tokens_per_s;
        prefill_node_free_ = std::max(prefill_node_free_, now_) + compute;
        s_.tiers.prefill_node_busy_s += compute;
        const double bytes = static_cast<double>(prefill) * s_.kv_bytes_per_token;
        s_.tiers.prefill_link_bytes += bytes;
        ready = std::max(ready, prefill_link_.send(prefill_node_free_, bytes));
        prefill = 0;  // computed on the prefill node
      }
      flush_demotions();
      out.link_wait_s += ready - now_;
      run.ready_s = ready;
      run.prefill = prefill;
      if (ready > now_ || start(run)) running_.push_back(run);
      enqueue_arrivals();  // the prefill took time
    }
  }

  // A sequence whose KV is here: its prefill (the clock waits, decode too) and its first token.
  // Returns whether it decodes on (false: that token was its last, its blocks are released).
  bool start(Running& run) {
    RequestOutcome& out = s_.requests[static_cast<std::size_t>(run.request)];
    const double dt = static_cast<double>(run.prefill) / c_.prefill_tokens_per_s;
    now_ += dt;
    s_.prefill_s += dt;
    if (out.first_token_s < 0) out.first_token_s = now_;
    run.started = true;
    if (run.generated >= t_.requests[static_cast<std::size_t>(run.request)].output_tokens) {
      release(run);  // output 1: the prefill's token is the whole answer
      out.finished_s = now_;
      return false;
    }
    hold(run);
    return true;
  }

  // The waiting sequences whose transfers have ended, in admission order.
  void start_ready() {
    for (std::size_t i = 0; i < running_.size();) {
      Running& run = running_[i];
      if (run.started || run.ready_s > now_ || start(run)) {
        ++i;
      } else {
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    enqueue_arrivals();
  }

  bool any_started() const {
    return std::any_of(running_.begin(), running_.end(),
                       [](const Running& r) { return r.started; });
  }

  // The blocks demoted since the last call cross the link HBM -> host as one transfer.
  void flush_demotions() {
    if (!tiered_) return;
    const std::int64_t demoted = cache_.stats().demoted;
    if (demoted == demoted_sent_) return;
    const double bytes = static_cast<double>(demoted - demoted_sent_) *
                         static_cast<double>(t_.block_tokens) * s_.kv_bytes_per_token;
    demoted_sent_ = demoted;
    s_.tiers.link_bytes_to_host += bytes;
    to_host_.send(now_, bytes);
  }

  // The sharing counts of the running set, kept as sequences come and go.
  void hold(const Running& run) {
    const auto ids = ids_of(run.request);
    const int input = t_.requests[static_cast<std::size_t>(run.request)].input_tokens;
    for (std::size_t j = 0; j < ids.size(); ++j) {
      if (holders_[ids[j]]++ > 0) {
        shared_tokens_ +=
            whole_page_tokens(input, static_cast<int>(j), t_.block_tokens, c_.page_tokens);
      }
    }
  }
  void unhold(const Running& run) {
    const auto ids = ids_of(run.request);
    const int input = t_.requests[static_cast<std::size_t>(run.request)].input_tokens;
    for (std::size_t j = 0; j < ids.size(); ++j) {
      const auto it = holders_.find(ids[j]);
      if (--it->second > 0) {
        shared_tokens_ -=
            whole_page_tokens(input, static_cast<int>(j), t_.block_tokens, c_.page_tokens);
      } else {
        holders_.erase(it);
      }
    }
  }
  // Its prompt blocks stay cached, evictable; its private blocks go back to the pool.
  void release(const Running& run) {
    const auto ids = ids_of(run.request);
    if (!ids.empty()) cache_.unpin(ids);
    cache_.release_private(run.prompt_private + run.generated_private);
  }

  void preempt_last() {
    const Running run = running_.back();
    running_.pop_back();
    if (run.started) unhold(run);  // a waiting one was never counted as shared
    release(run);
    queue_.push_front(run.request);
    ++s_.requests[static_cast<std::size_t>(run.request)].preemptions;
    ++s_.preemptions;
  }

  void decode_step() {
    // Each sequence about to write into a new block reserves it, oldest first; when the pool is
    // full the most recently admitted sequence is preempted (possibly the one asking).
    for (std::size_t i = 0; i < running_.size(); ++i) {
      if (!running_[i].started) continue;  // waiting for a link: it does not decode yet
      const std::int64_t need = ceil_div(running_[i].generated + 1, t_.block_tokens);
      if (need == running_[i].generated_private) continue;
      bool self_preempted = false;
      while (!cache_.reserve_private(1)) {
        self_preempted = running_.size() - 1 == i;
        preempt_last();
        if (self_preempted) break;
      }
      if (self_preempted) break;
      running_[i].generated_private = need;
    }
    flush_demotions();  // the blocks reserved above may have pushed cached ones out
    // The oldest sequence always fits (fits_alone), so the step keeps at least it, unless the
    // pool is held by sequences waiting for a link: then there is no step, and the clock waits.
    if (running_.empty()) throw std::logic_error("replay: every sequence preempted");
    if (!any_started()) return;

    DecodeStep step;
    step.start_s = now_;
    step.first = static_cast<std::int64_t>(s_.sequences.size());
    step.batch = 0;
    // Tokens each windowed layer class reads: from the page holding L - W on (as the kernels
    // walk, window_first_block), each sequence's own.
    std::vector<std::int64_t> windowed_tokens(windowed_.size(), 0);
    for (const Running& run : running_) {
      if (!run.started) continue;
      const TraceRequest& q = t_.requests[static_cast<std::size_t>(run.request)];
      const std::int32_t context = q.input_tokens + run.generated;
      s_.sequences.push_back({run.request, context});
      ++step.batch;
      step.kv_tokens += context;
      s_.requests[static_cast<std::size_t>(run.request)].decode_kv_tokens += context;
      for (std::size_t k = 0; k < windowed_.size(); ++k) {
        windowed_tokens[k] += context - std::int64_t{window_first_block(
                                            context, windowed_[k].window, c_.page_tokens)} *
                                            c_.page_tokens;
      }
    }
    step.shared_tokens = shared_tokens_;
    // Full layers read each shared page once; a windowed layer's window is counted per sequence
    // (a shared prefix inside several windows is counted in each: an upper bound there only).
    double layer_tokens = static_cast<double>(full_layers_) *
                          static_cast<double>(step.kv_tokens - step.shared_tokens);
    for (std::size_t k = 0; k < windowed_.size(); ++k)
      layer_tokens +=
          static_cast<double>(windowed_[k].layers) * static_cast<double>(windowed_tokens[k]);
    step.read_bytes = layer_tokens * layer_bytes_per_token_;
    step.modeled_s = (s_.weights_bytes_per_step + step.read_bytes) / c_.decode_read_bytes_per_s;
    now_ += step.modeled_s;
    s_.decode_s += step.modeled_s;
    s_.decode_tokens += step.batch;
    s_.steps.push_back(step);

    std::size_t kept = 0;
    for (Running& run : running_) {
      if (!run.started) {
        running_[kept++] = run;
        continue;
      }
      ++run.generated;
      generated_[static_cast<std::size_t>(run.request)] = run.generated;
      if (run.generated >= t_.requests[static_cast<std::size_t>(run.request)].output_tokens) {
        unhold(run);
        release(run);
        s_.requests[static_cast<std::size_t>(run.request)].finished_s = now_;
      } else {
        running_[kept++] = run;
      }
    }
    running_.resize(kept);
  }

  const Trace& t_;
  const ScheduleConfig& c_;
  double layer_bytes_per_token_ = 0;              // one layer's K and V of a token
  int full_layers_ = 0;                           // layers attending over the whole context
  std::vector<ModelShape::LayerClass> windowed_;  // the windowed layer classes
  const bool hashed_;
  TieredPrefixCache cache_;
  const bool tiered_;  // a host tier behind the pool
  ReplaySchedule s_;
  double now_ = 0;
  std::size_t next_arrival_ = 0;
  std::deque<std::int32_t> queue_;
  std::vector<Running> running_;         // in admission order: the last is preempted first
  std::vector<std::int32_t> generated_;  // g of every request, kept across preemption
  std::unordered_map<std::uint64_t, std::int32_t> holders_;  // hash id -> running sequences
  std::int64_t shared_tokens_ = 0;
  std::vector<CacheTier> found_in_;  // scratch: the tier of each block of a hit
  LinkQueue to_hbm_, to_host_, prefill_link_;
  double prefill_node_free_ = 0;   // disaggregated: when the prefill node is free
  std::int64_t demoted_sent_ = 0;  // demoted blocks already sent over the link
};

}  // namespace

ReplaySchedule simulate_schedule(const Trace& trace, const ScheduleConfig& config) {
  validate(config, trace);
  return Scheduler(trace, config).run();
}

std::vector<std::int64_t> sample_steps(const ReplaySchedule& s, int n) {
  const auto m = static_cast<std::int64_t>(s.steps.size());
  std::vector<std::int64_t> order(static_cast<std::size_t>(m));
  for (std::int64_t i = 0; i < m; ++i) order[static_cast<std::size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    const auto ka = s.steps[static_cast<std::size_t>(a)].kv_tokens;
    const auto kb = s.steps[static_cast<std::size_t>(b)].kv_tokens;
    return ka != kb ? ka < kb : a < b;
  });
  if (n <= 0) return {};
  if (n >= m) return order;
  if (n == 1) return {order[static_cast<std::size_t>((m - 1) / 2)]};  // the median
  // Rank round(i (m - 1) / (n - 1)): the spacing exceeds 1, so the ranks are distinct.
  std::vector<std::int64_t> picked;
  picked.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t rank = (2 * i * (m - 1) + (n - 1)) / (2 * (n - 1));
    picked.push_back(order[static_cast<std::size_t>(rank)]);
  }
  return picked;
}

double interpolate_decode_time(const ReplaySchedule& s, std::span<const std::int64_t> sampled,
                               std::span<const double> measured_s) {
  if (sampled.size() != measured_s.size()) {
    throw std::invalid_argument(fmt::format("interpolate_decode_time: {} steps but {} times",
                                            sampled.size(), measured_s.size()));
  }
  if (s.steps.empty()) return 0;
  if (sampled.empty()) {
    throw std::invalid_argument("interpolate_decode_time: no measured step");
  }
  // The knots: one per distinct kv_tokens, the mean of the samples there; a sampled step itself
  // keeps its own time.
  std::unordered_map<std::int64_t, double> own;
  std::vector<std::pair<std::int64_t, double>> samples;
  for (std::size_t i = 0; i < sampled.size(); ++i) {
    if (sampled[i] < 0 || sampled[i] >= static_cast<std::int64_t>(s.steps.size())) {
      throw std::invalid_argument(
          fmt::format("interpolate_decode_time: step {} of {}", sampled[i], s.steps.size()));
    }
    own[sampled[i]] = measured_s[i];
    samples.emplace_back(s.steps[static_cast<std::size_t>(sampled[i])].kv_tokens, measured_s[i]);
  }
  std::sort(samples.begin(), samples.end());
  std::vector<std::int64_t> kx;
  std::vector<double> ky;
  for (std::size_t i = 0; i < samples.size();) {
    std::size_t j = i;
    double sum = 0;
    for (; j < samples.size() && samples[j].first == samples[i].first; ++j)
      sum += samples[j].second;
    kx.push_back(samples[i].first);
    ky.push_back(sum / static_cast<double>(j - i));
    i = j;
  }

  double total = 0;
  for (std::size_t i = 0; i < s.steps.size(); ++i) {
    if (const auto it = own.find(static_cast<std::int64_t>(i)); it != own.end()) {
      total += it->second;
      continue;
    }
    const std::int64_t x = s.steps[i].kv_tokens;
    const auto hi = std::lower_bound(kx.begin(), kx.end(), x);
    if (hi == kx.end()) {
      total += ky.back();
    } else if (*hi == x || hi == kx.begin()) {
      total += ky[static_cast<std::size_t>(hi - kx.begin())];
    } else {
      const auto b = static_cast<std::size_t>(hi - kx.begin());
      const double f = static_cast<double>(x - kx[b - 1]) / static_cast<double>(kx[b] - kx[b - 1]);
      total += ky[b - 1] + f * (ky[b] - ky[b - 1]);
    }
  }
  return total;
}

PagedLayout step_layout(const Trace& trace, const ReplaySchedule& s, std::int64_t step,
                        int page_tokens) {
  check_page_tokens(page_tokens, trace.block_tokens);
  if (step < 0 || step >= static_cast<std::int64_t>(s.steps.size())) {
    throw std::invalid_argument(
        fmt::format("step_layout: step {} of a schedule of {}", step, s.steps.size()));
  }
  const DecodeStep& st = s.steps[static_cast<std::size_t>(step)];
  const std::span<const StepSequence> rows(s.sequences.data() + st.first,
                                           static_cast<std::size_t>(st.batch));
  const int pages_per_block = trace.block_tokens / page_tokens;
  const bool hashed = uses_hash_ids(trace);

  PagedLayout layout;
  layout.context_lens.reserve(rows.size());
  for (const StepSequence& q : rows) {
    layout.context_lens.push_back(q.context);
    layout.max_blocks_per_seq =
        std::max(layout.max_blocks_per_seq, static_cast<int>(ceil_div(q.context, page_tokens)));
  }
  layout.block_tables.assign(rows.size() * static_cast<std::size_t>(layout.max_blocks_per_seq), -1);
  // Physical ids in order of first appearance, row-major, so the layout is deterministic.
  std::unordered_map<std::uint64_t, std::int32_t> first_page_of_id;  // id -> its page 0's id
  std::int32_t next = 0;
  for (std::size_t b = 0; b < rows.size(); ++b) {
    const TraceRequest& q = trace.requests[static_cast<std::size_t>(rows[b].request)];
    std::int32_t* row = layout.block_tables.data() + b * layout.max_blocks_per_seq;
    const int pages = static_cast<int>(ceil_div(rows[b].context, page_tokens));
    // Whole pages of prompt content: [0, input / P); the rest is private.
    const int prompt_pages = hashed ? q.input_tokens / page_tokens : 0;
    for (int p = 0; p < pages; ++p) {
      if (p >= prompt_pages) {
        row[p] = next++;
        continue;
      }
      // The first row holding an id numbers all its whole pages at once, so they are
      // consecutive; a later row's whole pages of the id are a prefix of them (equal ids cover
      // equal tokens, validate()).
      const int j = p / pages_per_block;
      const int in_block = p % pages_per_block;
      const std::uint64_t id = q.hash_ids[static_cast<std::size_t>(j)];
      auto [it, inserted] = first_page_of_id.emplace(id, next);
      if (inserted) {
        next += whole_page_tokens(q.input_tokens, j, trace.block_tokens, page_tokens) / page_tokens;
      }
      row[p] = it->second + in_block;
    }
  }
  layout.num_blocks = next;
  layout.group_of.assign(rows.size(), 0);
  layout.shared_blocks_of_group = {0};
  fill_read_stats(layout, page_tokens);

  // Tokens read through a page that two or more rows read.
  std::vector<int> readers(static_cast<std::size_t>(layout.num_blocks), 0);
  for (std::int32_t id : layout.block_tables) {
    if (id >= 0) ++readers[static_cast<std::size_t>(id)];
  }
  std::int64_t shared = 0;
  for (std::size_t b = 0; b < rows.size(); ++b) {
    const int len = layout.context_lens[b];
    for (int p = 0; p < ceil_div(len, page_tokens); ++p) {
      if (readers[static_cast<std::size_t>(
              layout.block_tables[b * layout.max_blocks_per_seq + p])] > 1) {
        shared += std::min(page_tokens, len - p * page_tokens);
      }
    }
  }
  layout.hit_rate_actual =
      layout.total_tokens ? static_cast<double>(shared) / static_cast<double>(layout.total_tokens)
                          : 0.0;
  return layout;
}

}  // namespace decodebench
